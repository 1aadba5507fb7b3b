"""The rubric's checkpoint kinds (autograder.deferred.accuracy.checkpoints): a fine-tuned `sequence_classifier`.

The checkpoint holds a whole fine-tuned AutoModelForSequenceClassification; the grader builds the library's
class from its encoder configuration, loads the checkpoint in a confined worker, and runs every validation
batch with its attention mask. CPU only, no hub, no ../shared: the tiny encoder and IMDB-like data of
tests/transformers_bert/tiny_world.py, students fine-tuned here in a few seconds. (The default kind,
`frozen_encoder_class`, is tested in tests/test_rubric.py.)
"""
from __future__ import annotations

import nbformat
import pytest
import torch

from autograder.rubric import RubricConfig, RubricOptions, rubric_check, rubric_points
from autograder.rubric.data import encode_reviews, load_imdb, pad_batch, real_token_mask, train_valid_split
from autograder.deferred.accuracy.checkpoints import KINDS
from tests.transformers_bert.tiny_world import build_world

transformers = pytest.importorskip("transformers")
pytest.importorskip("pyarrow")

CONFIG = RubricConfig(kind="sequence_classifier", checkpoint="bert_sentiment.pt", max_len=16, batch_size=8,
                      bucket_batches=2, floor=0.8, full=0.9, assignment="bert_inside", name="8. accuracy (rubric)")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_world(tmp_path_factory.mktemp("kinds"))


def _fine_tune(world, encoder_dir, steps=40, num_labels=2, seed=0) -> dict:
    """A sequence classifier fine-tuned from the tiny encoder (encoder weights change too): its state_dict."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(seed)
        model = transformers.AutoModelForSequenceClassification.from_pretrained(encoder_dir, num_labels=num_labels)
        texts, labels = load_imdb(world["imdb"], splits=("train",))["train"]
        train_idx, _ = train_valid_split(texts, labels)
        encoded = encode_reviews(world["tokenizer"], [texts[i] for i in train_idx], CONFIG.max_len)
        y = torch.tensor([labels[i] for i in train_idx])
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
        g = torch.Generator().manual_seed(seed)
        model.train()
        for _ in range(steps):
            idx = torch.randperm(len(encoded), generator=g)[:16].tolist()
            batch = [encoded[i] for i in idx]
            ids = pad_batch(batch, 0)
            out = model(input_ids=ids, attention_mask=real_token_mask([len(b) for b in batch], ids.shape[1]),
                        labels=y[idx] % num_labels)
            optimizer.zero_grad()
            out.loss.backward()
            optimizer.step()
        return {k: v.detach().clone() for k, v in model.state_dict().items()}
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tuned(world):
    return _fine_tune(world, world["encoder"])


def _submission(folder, state=None, raw=None):
    folder.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import torch\nraise SystemExit('the rubric never runs student code here')")]
    nbformat.write(nb, folder / "bert_inside.ipynb")
    if state is not None or raw is not None:
        torch.save(state if state is not None else raw, folder / CONFIG.checkpoint)
    return folder / "bert_inside.ipynb"


@pytest.fixture(scope="module")
def run(world):
    from autograder.rubric.stage import RubricRun

    return RubricRun(CONFIG, RubricOptions(encoder=str(world["encoder"]), imdb=str(world["imdb"]), device="cpu",
                                           threads=1, cache_dir=world["root"] / "cache-kinds", timeout=300), cuda=False)


def _own_accuracy(world, state, run) -> float:
    """The accuracy the test computes itself, on the rubric's validation batches with their masks."""
    model = transformers.AutoModelForSequenceClassification.from_pretrained(world["encoder"], num_labels=2)
    model.load_state_dict(state)
    model.eval()
    run.prepare()
    correct = 0
    with torch.no_grad():
        for ids, mask, labels in zip(run.vset.token_batches, run.vset.mask_batches, run.vset.label_batches):
            logits = model(input_ids=ids, attention_mask=mask).logits
            correct += int(((logits[:, 1] > logits[:, 0]).long() == labels).sum())
    return correct / run.vset.n


def test_kinds_are_declared_and_validated():
    assert set(KINDS) == {"frozen_encoder_class", "sequence_classifier"}
    assert RubricConfig().checkpoint_kind.frozen_encoder  # the first assignment's default is unchanged
    fn = rubric_check(kind="sequence_classifier", checkpoint="bert_sentiment.pt", points=8, floor=0.8, full=0.9)
    assert fn._ag_rubric.checkpoint_kind.attention_mask and not fn._ag_rubric.checkpoint_kind.student_code
    with pytest.raises(ValueError, match="unknown rubric kind"):
        rubric_check(kind="frozen_gru")


def test_formula_from_80_to_90_percent():
    assert [rubric_points(a, 8, 0.8, 0.9) for a in (0.75, 0.8, 0.85, 0.9, 0.95)] == [0, 0, 4, 8, 8]


def test_fine_tuned_classifier_is_measured_with_attention_masks(world, tuned, tmp_path, run):
    nb = _submission(tmp_path / "alice", state=tuned)
    outcome = run.grade(nb, nb.parent / CONFIG.checkpoint)
    assert outcome.check.status in ("passed", "partial", "failed") and "accuracy" in outcome.details, \
        outcome.check.message
    assert outcome.details["method"] == "full forward with attention masks"
    assert outcome.details["n"] == 48
    assert outcome.details["accuracy"] == pytest.approx(_own_accuracy(world, tuned, run), abs=1e-12)
    assert outcome.details["accuracy"] > 0.75  # the tiny task is learnable
    assert outcome.check.score == pytest.approx(rubric_points(outcome.details["accuracy"], 8, 0.8, 0.9))
    assert "fine-tuned" in outcome.check.message and "bert_sentiment.pt" in outcome.check.message
    assert run.encoder.model is None  # only the configuration and tokenizer were loaded: no cache either
    assert not (world["root"] / "cache-kinds").exists()


def test_padding_does_not_change_the_measurement(world, tuned, tmp_path):
    """With attention masks the logits do not depend on how reviews are batched: another batch size gives
    the same accuracy."""
    from autograder.rubric.stage import RubricRun

    nb = _submission(tmp_path / "bob", state=tuned)
    results = []
    for batch_size in (8, 3):
        config = RubricConfig(**{**CONFIG.__dict__, "batch_size": batch_size})
        other = RubricRun(config, RubricOptions(encoder=str(world["encoder"]), imdb=str(world["imdb"]), device="cpu",
                                                threads=1, timeout=300), cuda=False)
        results.append(other.grade(nb, nb.parent / CONFIG.checkpoint).details["correct"])
    assert results[0] == results[1]


def test_a_checkpoint_with_a_module_prefix_and_position_buffers_is_accepted(tuned, tmp_path, run):
    state = {f"module.{k}": v for k, v in tuned.items()}
    state["module.bert.embeddings.position_ids"] = torch.arange(64)[None]  # persistent in older library versions
    nb = _submission(tmp_path / "carol", state=state)
    outcome = run.grade(nb, nb.parent / CONFIG.checkpoint)
    assert "accuracy" in outcome.details, outcome.check.message
    assert "removed a 'module.' or '_orig_mod.' prefix" in outcome.check.message


def test_refuses_another_encoder_size(world, tmp_path, run):
    state = _fine_tune(world, world["other"], steps=1)  # hidden size 24, the grader's encoder has 16
    nb = _submission(tmp_path / "dave", state=state)
    c = run.grade(nb, nb.parent / CONFIG.checkpoint).check
    assert c.status == "failed" and c.score == 0
    assert "another size than the encoder" in c.message and "hidden size 24 instead of 16" in c.message


def test_refuses_another_number_of_classes_and_missing_weights(world, tuned, tmp_path, run):
    state = _fine_tune(world, world["encoder"], steps=1, num_labels=3)
    nb = _submission(tmp_path / "erin", state=state)
    c = run.grade(nb, nb.parent / CONFIG.checkpoint).check
    assert c.status == "failed" and "num_labels=2" in c.message and "classifier.weight (checkpoint 3x16" in c.message
    head_only = {k: v for k, v in tuned.items() if k.startswith("classifier.")}
    nb = _submission(tmp_path / "frank", state=head_only)
    c = run.grade(nb, nb.parent / CONFIG.checkpoint).check
    assert c.status == "failed" and "missing from the checkpoint: bert." in c.message


def test_missing_and_unreadable_checkpoints(tmp_path, run):
    nb = _submission(tmp_path / "grace")
    assert "no saved model" in run.grade(nb, nb.parent / CONFIG.checkpoint).check.message
    nb = _submission(tmp_path / "heidi", raw={"epoch": 2})
    assert "not a state_dict" in run.grade(nb, nb.parent / CONFIG.checkpoint).check.message


def test_pending_without_cuda(world, tuned, tmp_path):
    from autograder.rubric.stage import RubricRun

    pending = RubricRun(CONFIG, RubricOptions(encoder=str(world["encoder"]), imdb=str(world["imdb"])), cuda=False)
    nb = _submission(tmp_path / "ivan", state=tuned)
    c = pending.grade(nb, nb.parent / CONFIG.checkpoint).check
    assert c.status == "pending" and "bert_sentiment.pt" in c.message and "autograder" not in c.message
    assert pending.encoder is None
