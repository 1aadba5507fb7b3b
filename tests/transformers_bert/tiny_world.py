"""A tiny stand-in for the hub downloads of the Transformers assignment, built on the fly: a 1-layer
BertModel with a WordPiece vocabulary of 40 words (saved like a hub folder), and an IMDB-like parquet file
whose reviews carry their sentiment in a few words. No hub, no ../shared.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

POSITIVE = ["good", "great", "wonderful", "superb", "fun"]
NEGATIVE = ["bad", "awful", "boring", "poor", "dull"]
NEUTRAL = ["the", "movie", "film", "plot", "was", "and", "a", "actors", "story", "it", "is", "of", "scene",
           "music", "end", "very", "quite", "this", "ending"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *POSITIVE, *NEGATIVE, *NEUTRAL, "<", ">", "/", "br", "."]


def review(rng: random.Random, label: int) -> str:
    """A few neutral words with two or three words of the label's sentiment, and an HTML line break."""
    words = [rng.choice(NEUTRAL) for _ in range(rng.randint(2, 10))]
    for _ in range(rng.randint(2, 3)):
        words.insert(rng.randrange(len(words) + 1), rng.choice(POSITIVE if label else NEGATIVE))
    return " ".join(words).replace(" and ", " and<br />", 1)


def save_encoder(folder: Path, hidden_size: int = 16, seed: int = 0) -> Path:
    """A randomly initialised BertModel and its tokenizer files, loadable with from_pretrained(folder)."""
    import torch
    import transformers

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "BertTokenizer", "do_lower_case": True, "model_max_length": 64}), encoding="utf-8")
    config = transformers.BertConfig(vocab_size=len(VOCAB), hidden_size=hidden_size, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)
    torch.manual_seed(seed)
    transformers.BertModel(config).save_pretrained(folder)
    return folder


def save_imdb(path: Path, n_train: int = 160, n_test: int = 40, seed: int = 0, make_review=None) -> Path:
    """An IMDB-shaped parquet file (orig_split, label, review), labels alternating 0/1; reviews from
    `make_review(rng, label)` (default: this module's `review`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    make_review = make_review or review
    rng = random.Random(seed)
    rows = {"orig_split": [], "label": [], "review": []}
    for split, n in (("train", n_train), ("test", n_test)):
        for i in range(n):
            rows["orig_split"].append(split)
            rows["label"].append(i % 2)
            rows["review"].append(make_review(rng, i % 2))
    pq.write_table(pa.table(rows), path)
    return path


def build_world(root: Path, n_train: int = 160, n_test: int = 40) -> dict:
    """{"root", "encoder", "other" (another encoder, hidden size 24), "imdb", "tokenizer"} under root."""
    import transformers

    enc_dir = save_encoder(root / "tiny-bert")
    tokenizer = transformers.AutoTokenizer.from_pretrained(enc_dir)
    ids = [VOCAB.index(w) for w in ("the", "good", "movie")]
    assert tokenizer("the good movie")["input_ids"] == [2, *ids, 3]
    # another encoder of another width: a checkpoint trained on it holds "a different encoder"
    other_dir = save_encoder(root / "other-bert", hidden_size=24, seed=1)
    parquet = save_imdb(root / "imdb.parquet", n_train, n_test)
    return {"root": root, "encoder": enc_dir, "other": other_dir, "imdb": parquet, "tokenizer": tokenizer}
