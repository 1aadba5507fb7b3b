"""The validation data the rubric measures on: IMDB, the assignment's seeded split, its tokenisation
and its evaluation batches.

Student and grader must measure on the same reviews, so `train_valid_split`, `clean_review` and the
batching below are the notebook's own code, copied verbatim (tests/test_rubric.py checks that the
notebook's functions give the same indices and batches).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch

IMDB_ENV = "IMDB_PATH"  # the same variable the notebook reads


def clean_review(text):
    """IMDB reviews contain HTML line breaks; replace them by spaces."""
    return text.replace("<br />", " ")


def train_valid_split(texts, labels, valid_fraction=0.3, seed=1234):
    """Seeded split of the training reviews: returns (train_indices, valid_indices), lists of ints.

    The reviews are first sorted by (label, text), so the split does not depend on the order in which
    the source delivers them; then torch.randperm with torch.Generator().manual_seed(seed) picks
    round(valid_fraction * n) reviews for validation (7,500 of 25,000) and leaves the rest for training.
    """
    order = sorted(range(len(texts)), key=lambda i: (labels[i], texts[i]))
    perm = torch.randperm(len(order), generator=torch.Generator().manual_seed(seed)).tolist()
    n_valid = round(valid_fraction * len(order))
    valid = [order[p] for p in perm[:n_valid]]
    train = [order[p] for p in perm[n_valid:]]
    return train, valid


def load_imdb(path: str | os.PathLike | None = None, splits=("train", "test")) -> dict:
    """{"train": (texts, labels), "test": (texts, labels)}; labels are ints, 1 = positive.

    `path` None (and $IMDB_PATH unset): `datasets.load_dataset("imdb")` from the Hugging Face Hub.
    Otherwise a parquet file with the columns orig_split ("train" / "test"), label and review, such as
    ../shared/data/imdb/aclimdb_50k.parquet. Only the `splits` asked for are read.
    """
    path = path if path is not None else os.environ.get(IMDB_ENV) or None
    if path is None:
        import datasets

        out = {}
        for split in splits:
            ds = datasets.load_dataset("imdb", split=split)
            out[split] = (list(ds["text"]), [int(y) for y in ds["label"]])
        return out
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=["orig_split", "label", "review"])
    out = {}
    for split in splits:
        part = table.filter(pc.equal(table["orig_split"], split))
        out[split] = (part["review"].to_pylist(), [int(y) for y in part["label"].to_pylist()])
    return out


def encode_reviews(tokenizer, texts, max_len):
    """Tokenise (after clean_review) to lists of ids: [CLS] ... [SEP], at most max_len tokens."""
    return tokenizer([clean_review(t) for t in texts], truncation=True, max_length=max_len)["input_ids"]


def eval_batches(lengths, batch_size=32, bucket_batches=100) -> list[list[int]]:
    """The notebook's evaluation batches (BucketBatchSampler with shuffle=False): indices in their
    order, cut into chunks of bucket_batches * batch_size, each chunk sorted by length, cut into batches.

    The classifier reads padding (the encoder is called without an attention mask, the GRU runs over
    every position), so its outputs depend on how reviews are batched: the grader batches exactly as
    the notebook's validation loader does, and the hidden-state cache stores these very batches."""
    lengths = list(lengths)
    n, chunk = len(lengths), batch_size * bucket_batches
    idx = list(range(n))
    batches = []
    for start in range(0, n, chunk):
        part = sorted(idx[start:start + chunk], key=lambda i: lengths[i])
        batches += [part[j:j + batch_size] for j in range(0, len(part), batch_size)]
    return batches


def pad_batch(encoded: list[list[int]], pad_id: int) -> torch.Tensor:
    """(B, T_max) long tensor, padded with pad_id on the right (the notebook's collate_reviews)."""
    t_max = max(len(ids) for ids in encoded)
    token_ids = torch.full((len(encoded), t_max), pad_id, dtype=torch.long)
    for row, ids in enumerate(encoded):
        token_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return token_ids


def real_token_mask(lengths: list[int], t_max: int) -> torch.Tensor:
    """(B, T_max) long attention mask of right-padded sequences: 1 for the first lengths[b] positions, 0 after.
    Built from the lengths, not from the padding id (which the text itself could contain)."""
    return (torch.arange(t_max)[None, :] < torch.tensor(lengths)[:, None]).long()


@dataclass
class ValidationSet:
    """The reviews the rubric grades on, tokenised and batched; labels stay with the grader."""

    token_batches: list[torch.Tensor]  # (B, T) long, in evaluation order
    label_batches: list[torch.Tensor]  # (B,) long
    source: str  # where the reviews came from (for reports)
    n_total: int  # size of the full validation split (7,500 for IMDB)
    mask_batches: list[torch.Tensor] = field(default_factory=list)  # (B, T) long, 1 = real token, 0 = padding

    @property
    def n(self) -> int:
        """The number of reviews, all batches together."""
        return sum(len(b) for b in self.label_batches)

    @property
    def labels(self) -> torch.Tensor:
        """All labels in evaluation order, as one long tensor (empty where there are none)."""
        return torch.cat(self.label_batches) if self.label_batches else torch.zeros(0, dtype=torch.long)


def validation_set(tokenizer, imdb_path=None, max_len=256, batch_size=32, bucket_batches=100, seed=1234,
                   valid_fraction=0.3, limit: int | None = None) -> ValidationSet:
    """The seeded validation split of IMDB's training reviews, tokenised and batched as the notebook does.
    `limit` keeps the first `limit` validation reviews (the notebook's TRAIN_SUBSET runs do the same)."""
    data = load_imdb(imdb_path, splits=("train",))
    texts, labels = data["train"]
    _, valid_idx = train_valid_split(texts, labels, valid_fraction, seed)
    n_total = len(valid_idx)
    if limit:
        valid_idx = valid_idx[:limit]
    encoded = encode_reviews(tokenizer, [texts[i] for i in valid_idx], max_len)
    y = [labels[i] for i in valid_idx]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    token_batches, label_batches, mask_batches = [], [], []
    for batch in eval_batches([len(e) for e in encoded], batch_size, bucket_batches):
        token_batches.append(pad_batch([encoded[i] for i in batch], pad_id))
        label_batches.append(torch.tensor([y[i] for i in batch], dtype=torch.long))
        mask_batches.append(real_token_mask([len(encoded[i]) for i in batch], token_batches[-1].shape[1]))
    source = str(imdb_path or os.environ.get(IMDB_ENV) or "datasets.load_dataset('imdb')")
    return ValidationSet(token_batches, label_batches, source, n_total, mask_batches)
