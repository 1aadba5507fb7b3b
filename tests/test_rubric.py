"""The accuracy rubric (autograder.rubric): formula, pending without CUDA, the hidden-state cache
against the full forward, refusals, merging into earlier results, the split shared with the notebook.

Everything runs on the CPU with a tiny encoder built here (a 1-layer BertModel and a WordPiece
vocabulary written by the test) and a tiny IMDB-like parquet file: no hub, no ../shared.
"""
from __future__ import annotations

import csv
import io
import json
import random
import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest
import torch

from autograder.judge import CheckResult
from autograder.reports.results import SubmissionResult, gradescope_json, write_submission
from autograder.reports.table import write_grades
from autograder.rubric import RubricConfig, RubricOptions, rubric_check, rubric_points
from autograder.rubric.data import eval_batches, train_valid_split
from autograder.grading.merge import merge_check
from tests.transformers_bert.tiny_world import NEUTRAL, build_world

transformers = pytest.importorskip("transformers")
pytest.importorskip("pyarrow")

NOTEBOOK = Path(__file__).resolve().parents[1] / "solutions" / "transformers_bert" / "transformers_bert.ipynb"
CONFIG = RubricConfig(max_len=16, batch_size=8, bucket_batches=2)

IMPORTS = "import torch\nimport torch.nn as nn\n"
CONSTANTS = "HIDDEN_DIM = 12\nOUTPUT_DIM = 1\nN_LAYERS = 2\nBIDIRECTIONAL = True\nDROPOUT = 0.25\nCHECKPOINT = 'bert_gru_sentiment.pt'\n"
MODEL = '''
class BERTGRUSentiment(nn.Module):
    def __init__(self, bert, hidden_dim, output_dim, n_layers, bidirectional, dropout):
        super().__init__()
        self.bert = bert
        for p in self.bert.parameters():
            p.requires_grad = False
        self.rnn = nn.GRU(bert.config.hidden_size, hidden_dim, num_layers=n_layers, bidirectional=bidirectional,
                          batch_first=True, dropout=0.0 if n_layers < 2 else dropout)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden_dim * 2 if bidirectional else hidden_dim, output_dim)

    def forward(self, token_ids):
        with torch.no_grad():
            embedded = self.bert(token_ids)[0]
        _, hidden = self.rnn(embedded)
        if self.rnn.bidirectional:
            hidden = torch.cat((hidden[-2], hidden[-1]), dim=-1)
        else:
            hidden = hidden[-1]
        return self.out(self.dropout(hidden))
'''
# a model that reads the encoder with an attention mask: the cache cannot answer it, the full forward can
MASKED_MODEL = MODEL.replace("embedded = self.bert(token_ids)[0]",
                             "embedded = self.bert(token_ids, attention_mask=(token_ids != 0).long())[0]")
# a model that ignores the encoder: its own embedding table
NO_ENCODER_MODEL = MODEL.replace(
    "        self.dropout = nn.Dropout(dropout)",
    "        self.embedding = nn.Embedding(64, bert.config.hidden_size)\n        self.dropout = nn.Dropout(dropout)",
).replace("embedded = self.bert(token_ids)[0]", "embedded = self.embedding(token_ids)")


# -- fixtures: a tiny encoder, tiny data, trained students --------------------------------------------

@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A tiny BERT encoder folder (weights + WordPiece vocab), another one, and a tiny IMDB parquet file."""
    return build_world(tmp_path_factory.mktemp("rubric"))


def _train(world, model_source: str, encoder_dir: Path, steps: int = 60, hidden: int = 12, seed: int = 0):
    """Train a student model (judge-side test code) on the tiny training split; returns its state_dict."""
    namespace: dict = {}
    exec(IMPORTS + model_source, namespace)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: one thread is fastest, and fair to a busy machine
    try:
        return _train_loop(world, namespace, encoder_dir, steps, hidden, seed)
    finally:
        torch.set_num_threads(threads)


def _train_loop(world, namespace, encoder_dir, steps, hidden, seed):
    from autograder.rubric.data import encode_reviews, load_imdb, pad_batch

    torch.manual_seed(seed)
    bert = transformers.BertModel.from_pretrained(encoder_dir).eval()
    model = namespace["BERTGRUSentiment"](bert, hidden, 1, 2, True, 0.25)
    texts, labels = load_imdb(world["imdb"], splits=("train",))["train"]
    train_idx, _ = train_valid_split(texts, labels)
    encoded = encode_reviews(world["tokenizer"], [texts[i] for i in train_idx], CONFIG.max_len)
    y = torch.tensor([labels[i] for i in train_idx], dtype=torch.float)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        model.train()
        idx = torch.randperm(len(encoded), generator=g)[:16].tolist()
        logits = model(pad_batch([encoded[i] for i in idx], 0)).squeeze(1)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.state_dict()


def _submission(folder: Path, model_source: str = MODEL, state: dict | None = None, constants: str = CONSTANTS,
                raw_checkpoint=None) -> Path:
    """A submission folder: the notebook (imports, settings, the class) and the saved checkpoint."""
    folder.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(IMPORTS), nbformat.v4.new_code_cell(constants),
                nbformat.v4.new_code_cell(model_source),
                nbformat.v4.new_code_cell("model = BERTGRUSentiment(None, 1, 1, 1, True, 0.0)  # a call: dropped")]
    nbformat.write(nb, folder / "transformers_bert.ipynb")
    if state is not None:
        torch.save(state, folder / CONFIG.checkpoint)
    elif raw_checkpoint is not None:
        torch.save(raw_checkpoint, folder / CONFIG.checkpoint)
    return folder / "transformers_bert.ipynb"


@pytest.fixture(scope="module")
def trained(world):
    return _train(world, MODEL, world["encoder"], steps=120)


def _run(world, **options):
    from autograder.rubric.stage import RubricRun

    opts = dict(encoder=str(world["encoder"]), imdb=str(world["imdb"]), device="cpu", threads=1,
                cache_dir=world["root"] / "cache", timeout=300)
    opts.update(options)
    return RubricRun(CONFIG, RubricOptions(**opts), cuda=False)


@pytest.fixture(scope="module")
def run_cached(world):
    return _run(world)


# -- the formula ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("accuracy, points", [(0.45, 0.0), (0.5, 0.0), (0.7, 4.0), (0.9, 8.0), (0.95, 8.0)])
def test_formula(accuracy, points):
    assert rubric_points(accuracy) == pytest.approx(points, abs=1e-9)
    assert rubric_points(accuracy, points=8, floor=0.5, full=0.9) == pytest.approx(points, abs=1e-9)


def test_formula_edges():
    assert rubric_points(float("nan")) == 0.0
    assert rubric_points(0.8) == pytest.approx(6.0)
    with pytest.raises(ValueError):
        rubric_points(0.7, floor=0.9, full=0.5)


# -- the validation split: one procedure for the notebook and the grader -------------------------------

def _notebook_namespace() -> dict:
    if not NOTEBOOK.is_file():
        pytest.skip("the Transformers & BERT notebook is not in this checkout")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    wanted = ("def train_valid_split", "def clean_review", "class BucketBatchSampler")
    sources = [c.source for c in nb.cells if c.cell_type == "code" and any(w in c.source for w in wanted)]
    if not sources:
        pytest.skip("the notebook defines none of the split helpers")
    namespace: dict = {}
    exec("import math, functools\nimport torch\n" + "\n".join(sources), namespace)
    return namespace


def test_split_and_batches_match_the_notebook():
    ns = _notebook_namespace()
    rng = random.Random(3)
    texts = [" ".join(rng.choice(NEUTRAL) for _ in range(rng.randint(1, 6))) for _ in range(2000)]
    labels = [rng.randint(0, 1) for _ in texts]
    assert ns["train_valid_split"](texts, labels, 0.3, 1234) == train_valid_split(texts, labels, 0.3, 1234)
    assert ns["clean_review"]("a<br />b") == "a b"
    lengths = [rng.randint(3, 300) for _ in range(750)]
    sampler = ns["BucketBatchSampler"](lengths, 32, shuffle=False)
    assert list(sampler) == eval_batches(lengths, 32, 100)


def test_split_sizes_and_order_independence():
    rng = random.Random(5)
    texts = [f"review {i} " + rng.choice(NEUTRAL) for i in range(25000)]
    labels = [i % 2 for i in range(25000)]
    train, valid = train_valid_split(texts, labels)
    assert len(valid) == 7500 and len(train) == 17500 and not set(train) & set(valid)
    order = list(range(25000))
    rng.shuffle(order)  # the same reviews delivered in another order give the same validation reviews
    _, valid2 = train_valid_split([texts[i] for i in order], [labels[i] for i in order])
    assert sorted(texts[i] for i in valid) == sorted(texts[order[i]] for i in valid2)


# -- pending without CUDA ------------------------------------------------------------------------------

def test_pending_without_cuda(world, tmp_path):
    from autograder.rubric.stage import RubricRun

    run = RubricRun(CONFIG, RubricOptions(encoder=str(world["encoder"]), imdb=str(world["imdb"])), cuda=False)
    assert run.pending
    nb = _submission(tmp_path / "alice", state={"x": torch.zeros(1)})
    outcome = run.grade(nb, nb.parent / CONFIG.checkpoint)
    c = outcome.check
    assert c.status == "pending" and c.score == 0.0
    # what the student reads: the file measured and that the points stand, no instructor's command, no "pending"
    # twice once Gradescope's output puts "Pending:" in front
    assert "bert_gru_sentiment.pt" in c.message and "GPU" in c.message and "other points stand" in c.message
    assert "autograder" not in c.message and not c.message.lower().startswith("pending")
    assert run.encoder is None  # nothing was loaded for a pending rubric
    # in results.json a pending test carries no score at all
    result = SubmissionResult("alice", str(nb), [CheckResult("1. other", "1", 4, 4, "passed", ""), c])
    tests = gradescope_json(result)["tests"]
    assert "score" not in tests[1] and tests[1]["output"].startswith("Pending: these 8 points")
    assert result.score == 4 and gradescope_json(result)["score"] == 4


def test_rubric_check_is_pending_in_grade(tmp_path):
    """The check an assignment declares: `autograder grade`'s judge reports it pending, not failed."""
    from autograder.config import Limits
    from autograder.judge import Judge
    from autograder.program import Program
    from autograder.notebook.extract import Extraction
    from autograder.sandbox.client import WorkerSpec

    fn = rubric_check(points=8, part="7. Sentiment classifier")
    spec = fn._ag_check
    assert spec.points == 8 and fn._ag_rubric.checkpoint == "bert_gru_sentiment.pt"
    programs = [Program(Extraction([], []), WorkerSpec([])) for _ in range(2)]
    try:
        judge = Judge([spec], programs[0], Limits(), {}, cuda=False)
        (result,) = judge.grade(programs[1])
    finally:
        for p in programs:
            p.close()
    assert result.status == "pending" and result.score == 0
    assert "bert_gru_sentiment.pt" in result.message and "autograder rubric" not in result.message


# -- grading: the cache against the full forward -------------------------------------------------------

@pytest.fixture(scope="module")
def full_forward(world, trained, tmp_path_factory):
    """The trained student graded without the cache: every batch through its own full forward."""
    nb = _submission(tmp_path_factory.mktemp("full") / "bob", state=trained)
    return _run(world, cache=False).grade(nb, nb.parent / CONFIG.checkpoint)


def test_cache_gives_the_same_accuracy_as_the_full_forward(world, trained, tmp_path, run_cached, full_forward):
    nb = _submission(tmp_path / "bob", state=trained)
    cached = run_cached.grade(nb, nb.parent / CONFIG.checkpoint)
    full = full_forward
    for outcome in (cached, full):
        assert outcome.check.status in ("passed", "partial"), outcome.check.message
    assert cached.details["method"].startswith("cached encoder states")
    assert full.details["method"] == "full forward"
    assert cached.details["accuracy"] == full.details["accuracy"]
    assert cached.details["correct"] == full.details["correct"]
    assert cached.details["sample_max_difference"] < 1e-4
    assert cached.details["n"] == 48  # round(0.3 * 160) validation reviews
    assert cached.details["accuracy"] > 0.75  # the tiny task is learnable through the frozen encoder
    assert cached.check.score == pytest.approx(rubric_points(cached.details["accuracy"]))
    assert f"{cached.details['accuracy']:.2%}" in cached.check.message


def test_the_run_has_its_fork_server_import_the_workers_libraries_once(world):
    """Preparing a run asks the fork server to import the encoder's modeling code (and the reference's imports),
    so that no student's worker imports them itself: asked again, the server has nothing left to import."""
    from autograder.rubric.stage import worker_libraries
    from autograder.sandbox.forkserver import ForkServer, preload_modules, shutdown_fork_server

    shutdown_fork_server()  # a server of its own, whatever earlier tests imported into theirs
    try:
        run = _run(world, cache=False)
        run.prepare()
        wanted = worker_libraries(run.encoder.config.model_type)
        assert "transformers.models.bert.modeling_bert" in wanted
        if ForkServer.get() is None:
            pytest.skip("no fork server on this machine: every worker imports for itself")
        assert preload_modules(wanted) == []  # each one already imported by the server
        assert preload_modules(["wave"]) == ["wave"]  # control: a module it did not have yet
    finally:
        shutdown_fork_server()


def test_mixed_precision_cache_and_file_transport(world, trained, tmp_path, full_forward):
    """float16 storage / bfloat16 compute: same accuracy (boundary cases re-checked); the worker reads the
    cache files itself when it can (outside /tmp, which is private to the worker)."""
    shared = Path(tempfile.mkdtemp(prefix="ag-rubric-test-", dir="/var/tmp"))
    try:
        shared.chmod(0o755)
        nb = _submission(tmp_path / "carol", state=trained)
        mixed = _run(world, precision="mixed", cache_dir=shared).grade(nb, nb.parent / CONFIG.checkpoint)
        full = full_forward
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    assert mixed.details["method"].startswith("cached encoder states (mixed)"), mixed.details
    assert mixed.details["accuracy"] == full.details["accuracy"]  # every review near the boundary re-checked
    assert mixed.details["transport"] == "files"


def test_model_the_cache_cannot_serve_falls_back_to_the_full_forward(world, tmp_path, run_cached):
    state = _train(world, MASKED_MODEL, world["encoder"], steps=20)
    nb = _submission(tmp_path / "dave", model_source=MASKED_MODEL, state=state)
    cached = run_cached.grade(nb, nb.parent / CONFIG.checkpoint)
    assert "attention mask" in cached.details["fallback"]
    assert cached.details["method"].startswith("full forward")
    assert "accuracy" in cached.details, cached.check.message


def test_constructor_arguments_from_the_checkpoint_shapes(world, tmp_path, run_cached):
    state = _train(world, MODEL, world["encoder"], steps=5, hidden=6)
    nb = _submission(tmp_path / "erin", state=state)  # its constants say HIDDEN_DIM = 12
    outcome = run_cached.grade(nb, nb.parent / CONFIG.checkpoint)
    assert "accuracy" in outcome.details, outcome.check.message
    assert outcome.details["constructor"]["hidden_dim"] == 6
    assert "do not fit your checkpoint" in outcome.check.message
    no_constants = _submission(tmp_path / "erin2", state=state, constants="")
    outcome = run_cached.grade(no_constants, no_constants.parent / CONFIG.checkpoint)
    assert outcome.details["constructor"] == {"hidden_dim": 6, "output_dim": 1, "n_layers": 2,
                                              "bidirectional": True, "dropout": 0.0}


# -- refusals ------------------------------------------------------------------------------------------

def test_refuses_a_checkpoint_that_does_not_fit_the_class(world, trained, tmp_path, run_cached):
    state = dict(trained)
    state["rnn.extra_weight"] = torch.zeros(3)
    del state["out.bias"]
    nb = _submission(tmp_path / "frank", state=state)
    c = run_cached.grade(nb, nb.parent / CONFIG.checkpoint).check
    assert c.status == "failed" and c.score == 0
    assert "does not fit your BERTGRUSentiment" in c.message
    assert "missing from the checkpoint: out.bias" in c.message and "rnn.extra_weight" in c.message


def test_refuses_changed_encoder_weights(world, trained, tmp_path, run_cached):
    state = {k: v.clone() for k, v in trained.items()}
    state["bert.encoder.layer.0.output.dense.weight"] += 0.05 * torch.randn_like(
        state["bert.encoder.layer.0.output.dense.weight"])
    nb = _submission(tmp_path / "grace", state=state)
    c = run_cached.grade(nb, nb.parent / CONFIG.checkpoint).check
    assert c.status == "failed" and "encoder weights in your `bert_gru_sentiment.pt` differ from the pretrained" in c.message
    assert "encoder.layer.0.output.dense.weight" in c.message
    # a checkpoint without the encoder's weights is graded with the grader's encoder
    head = {k: v for k, v in trained.items() if not k.startswith("bert.")}
    nb = _submission(tmp_path / "grace3", state=head)
    assert run_cached.grade(nb, nb.parent / CONFIG.checkpoint).check.status != "failed"


def test_encoder_comparison_tolerates_half_precision_copies(trained):
    from autograder.rubric.encoder import compare_encoder
    from autograder.rubric.worker_side import tensor_fingerprint

    encoder = {k[5:]: v for k, v in trained.items() if k.startswith("bert.")}
    reference = {k: [list(v.shape), tensor_fingerprint(v)] for k, v in encoder.items()}
    for dtype in (torch.float16, torch.bfloat16):  # an encoder loaded in half precision, then saved
        copy = {k: [list(v.shape), tensor_fingerprint(v.to(dtype).float() if v.is_floating_point() else v)]
                for k, v in encoder.items()}
        assert compare_encoder(copy, reference) == []
    tuned = dict(encoder)
    name = "encoder.layer.0.attention.self.query.weight"
    tuned[name] = tuned[name] + 1e-3 * torch.randn_like(tuned[name])  # a few fine-tuning steps' worth
    changed = {k: [list(v.shape), tensor_fingerprint(v)] for k, v in tuned.items()}
    assert compare_encoder(changed, reference) == [name]


def test_refuses_a_checkpoint_trained_on_another_encoder(world, tmp_path, run_cached):
    state = _train(world, MODEL, world["other"], steps=2)
    nb = _submission(tmp_path / "heidi", state=state)
    c = run_cached.grade(nb, nb.parent / CONFIG.checkpoint).check
    assert c.status == "failed" and "holds a different encoder than the pretrained" in c.message
    assert "hidden size is 16" in c.message


def test_refuses_a_model_that_does_not_use_the_encoder(world, tmp_path, run_cached):
    state = _train(world, NO_ENCODER_MODEL, world["encoder"], steps=5)
    nb = _submission(tmp_path / "ivan", model_source=NO_ENCODER_MODEL, state=state)
    c = run_cached.grade(nb, nb.parent / CONFIG.checkpoint).check
    assert c.status == "failed" and "does not depend on the frozen encoder" in c.message


def test_missing_unreadable_and_pickled_checkpoints(world, trained, tmp_path, run_cached):
    nb = _submission(tmp_path / "judy")
    c = run_cached.grade(nb, nb.parent / CONFIG.checkpoint).check
    assert c.status == "failed" and "no saved model" in c.message
    (nb.parent / CONFIG.checkpoint).write_bytes(b"not a checkpoint")
    c = run_cached.grade(nb, nb.parent / CONFIG.checkpoint).check
    assert c.status == "failed" and "not a file written by torch.save (16 bytes)" in c.message
    assert "weights_only" not in c.message
    nb = _submission(tmp_path / "judy2", raw_checkpoint={"epoch": 3, "note": "no tensors"})
    c = run_cached.grade(nb, nb.parent / CONFIG.checkpoint).check
    assert c.status == "failed" and "not a state_dict" in c.message
    # a link to a file outside the student's folder (the grader's files, another student's model) is never read
    secret = tmp_path / "elsewhere" / "model.pt"
    secret.parent.mkdir()
    secret.write_bytes(b"x")
    linked = _submission(tmp_path / "judy3")
    (linked.parent / CONFIG.checkpoint).symlink_to(secret)
    c = run_cached.grade(linked, linked.parent / CONFIG.checkpoint).check
    assert c.status == "failed" and "is a link to a file outside the folder it was handed in" in c.message


def test_a_checkpoint_larger_than_any_model_is_not_read(tmp_path, monkeypatch):
    from autograder.rubric import stage

    (tmp_path / "model.pt").write_bytes(bytes(100))
    assert stage.checkpoint_problem(tmp_path / "model.pt") == ""
    monkeypatch.setattr(stage, "MAX_CHECKPOINT_BYTES", 99)
    assert "larger than the" in stage.checkpoint_problem(tmp_path / "model.pt")


def test_notebook_without_the_class(world, trained, tmp_path, run_cached):
    nb = _submission(tmp_path / "ken", model_source="x = 1\n", state=trained)
    c = run_cached.grade(nb, nb.parent / CONFIG.checkpoint).check
    assert c.status == "failed" and "BERTGRUSentiment" in c.message


# -- merging into earlier results ----------------------------------------------------------------------

def _earlier_run(out: Path) -> list[SubmissionResult]:
    results = []
    for sub, scores in (("alice", (2.0, 0.0)), ("bob", (1.0, 3.0)), ("carol", (0.0, 3.0))):
        checks = [CheckResult("1. attention", "1. Attention", 2, scores[0], "passed" if scores[0] == 2 else "partial", "m1"),
                  CheckResult("2. mha", "2. MHA", 3, scores[1], "passed" if scores[1] == 3 else "failed", "m2\nline"),
                  CheckResult(CONFIG.name, CONFIG.part, 8, 0.0, "pending", "pending, not failed: ...")]
        results.append(SubmissionResult(sub, f"/subs/{sub}.ipynb", checks, ["a note"], "", 1.5))
        write_submission(out, results[-1], "Transformers")
    write_grades(out, results, [c.name for c in results[0].checks])
    return results


def test_merge_keeps_every_other_check(tmp_path):
    out = tmp_path / "out"
    before = _earlier_run(out)
    table_before = (out / "grades.csv").read_text()
    other_files = {p: p.read_bytes() for p in (out / "alice").iterdir()}
    rubric = CheckResult(CONFIG.name, CONFIG.part, 8, 6.0, "partial", "validation accuracy 80.00% ...")
    merged = merge_check(out, "bob", rubric)
    after = SubmissionResult.from_dict(json.loads((out / "bob" / "grading.json").read_text()))
    assert [c.to_dict() for c in after.checks[:2]] == [c.to_dict() for c in before[1].checks[:2]]
    assert after.checks[2].score == 6.0 and after.checks[2].status == "partial"
    assert after.notes == ["a note"] and after.execution_time == 1.5 and merged.score == 10.0
    results = json.loads((out / "bob" / "results.json").read_text())
    assert results["score"] == 10.0 and results["tests"][2]["score"] == 6.0 and "Pending" not in results["output"]
    assert "Transformers" in (out / "bob" / "feedback.md").read_text()
    # the other submissions' files and rows are untouched, byte for byte
    assert {p: p.read_bytes() for p in (out / "alice").iterdir()} == other_files
    old_rows, new_rows = (list(csv.reader(io.StringIO(t))) for t in (table_before, (out / "grades.csv").read_text()))
    assert new_rows[0] == old_rows[0]
    assert [r for r in new_rows if r[0] != "bob"] == [r for r in old_rows if r[0] != "bob"]
    bob = dict(zip(new_rows[0], next(r for r in new_rows if r[0] == "bob")))
    assert bob["1. attention"] == "1" and bob["2. mha"] == "3" and bob[CONFIG.name] == "6"
    assert bob["total"] == "10" and bob["pending"] == "0"
    from autograder.reports.summary import write_summary
    from autograder.grading.merge import refresh_summary

    write_summary(out, before, "Transformers", ["Isolation: test."])
    refresh_summary(out)
    summary = (out / "summary.md").read_text()
    assert summary.startswith("# Class summary: Transformers") and "Isolation: test." in summary
    rubric_row = next(line for line in summary.splitlines() if line.startswith(f"| {CONFIG.name} |"))
    cells = [x.strip() for x in rubric_row.split("|")]
    assert cells[4] == "6.00" and cells[9] == "2"  # the mean of the graded one; two still pending
    # merging a still-pending result (no CUDA) changes nothing that counts
    merge_check(out, "carol", CheckResult(CONFIG.name, CONFIG.part, 8, 0.0, "pending", "still pending"))
    carol = dict(zip(new_rows[0], next(r for r in csv.reader(io.StringIO((out / "grades.csv").read_text()))
                                        if r[0] == "carol")))
    assert carol[CONFIG.name] == "pending" and carol["total"] == "3" and carol["pending"] == "8"


def test_merge_adds_a_column_when_the_table_lacks_the_check(tmp_path):
    out = tmp_path / "out"
    results = []
    for sub in ("a", "b"):
        results.append(SubmissionResult(sub, f"{sub}.ipynb", [CheckResult("1. x", "", 2, 2, "passed", "")]))
        write_submission(out, results[-1], "T")
    write_grades(out, results, ["1. x"])
    merge_check(out, "a", CheckResult("rubric", "", 8, 8, "passed", "ok"))
    rows = list(csv.reader(io.StringIO((out / "grades.csv").read_text())))
    assert rows[0] == ["submission", "1. x", "rubric", "total", "max", "pending", "error"]
    assert rows[1][:4] == ["a", "2", "8", "10"] and rows[2][:4] == ["b", "2", "", "2"]


def test_command_merges_into_an_earlier_run(world, trained, tmp_path, capsys, rubric_release):
    from autograder.entrypoints import command_line as main

    out = tmp_path / "out"
    nb = _submission(tmp_path / "subs" / "lena", state=trained)
    earlier = SubmissionResult("transformers_bert", str(nb), [
        CheckResult("1. attention", "1", 2, 2, "passed", ""),
        CheckResult(CONFIG.name, CONFIG.part, 8, 0, "pending", "pending")])
    write_submission(out, earlier, "Transformers")
    write_grades(out, [earlier], ["1. attention", CONFIG.name])
    # no CUDA and no --device cpu: stays pending, and says what to run where
    assert main(["rubric", str(rubric_release), str(nb), "--out", str(out), "--quiet",
                 "--encoder", str(world["encoder"]), "--imdb", str(world["imdb"])]) == 0
    assert "no CUDA on this machine" in capsys.readouterr().err
    assert json.loads((out / "transformers_bert" / "grading.json").read_text())["checks"][1]["status"] == "pending"
    code = main(["rubric", str(rubric_release), str(nb), "--out", str(out), "--quiet",
                 "--device", "cpu", "--encoder", str(world["encoder"]), "--imdb", str(world["imdb"])])
    assert code == 0
    graded = json.loads((out / "transformers_bert" / "grading.json").read_text())
    assert graded["checks"][0]["score"] == 2 and graded["checks"][1]["status"] in ("passed", "partial", "failed")
    details = json.loads((out / "transformers_bert" / "rubric.json").read_text())
    assert details["n"] == 48 and "accuracy" in details
    rows = list(csv.reader(io.StringIO((out / "grades.csv").read_text())))
    assert rows[1][2] != "pending"


def test_command_refuses_an_assignment_it_cannot_load_or_without_a_rubric(world, trained, tmp_path, capsys,
                                                                         example_build):
    """Without the assignment's own rubric settings nothing is graded: another assignment's settings (a checkpoint
    of another name, another formula) would merge a wrong grade into the results."""
    from autograder.entrypoints import command_line as main

    out = tmp_path / "out"
    nb = _submission(tmp_path / "subs" / "lena", state=trained)
    common = [str(nb), "--out", str(out), "--quiet", "--device", "cpu", "--encoder", str(world["encoder"]),
              "--imdb", str(world["imdb"])]
    assert main(["rubric", str(tmp_path / "no-such-assignment"), *common]) == 2
    err = capsys.readouterr().err
    assert "no-such-assignment" in err and "could not be loaded" in err and "nothing was graded" in err
    assert main(["rubric", str(example_build.release), *common]) == 2
    assert "declares no rubric check" in capsys.readouterr().err
    assert not (out / "transformers_bert").exists() and not (out / "grades.csv").exists()


def test_grade_reports_the_declared_rubric_pending(tmp_path, rubric_release):
    """An assignment whose hidden tests declare the rubric: `autograder grade` lists it as pending (no score
    in results.json, `pending` in grades.csv), every other check is graded as usual."""
    from autograder.grading import GradeOptions, grade
    from autograder.release import load_release

    example = Path(__file__).parent / "example_course"
    release = load_release(rubric_release)
    (result,) = grade(release, [example / "submissions" / "student_sample.ipynb"],
                      GradeOptions(tmp_path / "out", quiet=True, cuda=False, summary=False))
    rubric = next(c for c in result.checks if c.name == CONFIG.name)
    assert rubric.status == "pending" and "bert_gru_sentiment.pt" in rubric.message
    others = [c for c in result.checks if c.name not in (CONFIG.name, "q_softmax")]  # q_softmax: graded by hand
    assert others and all(c.status != "pending" for c in others)
    tests = json.loads((tmp_path / "out" / "student_sample" / "results.json").read_text())["tests"]
    assert "score" not in next(t for t in tests if t["name"] == CONFIG.name)
    rows = list(csv.reader(io.StringIO((tmp_path / "out" / "grades.csv").read_text())))
    assert dict(zip(rows[0], rows[1]))[CONFIG.name] == "pending"
    feedback = (tmp_path / "out" / "student_sample" / "feedback.md").read_text()
    assert f"/ {result.max_score:g}** (10 of the {result.max_score:g} points are pending, added later)" in feedback  # the rubric and q_softmax
    assert "- [PENDING] 7. validation accuracy (rubric) (pending)" in feedback


class _Payload:
    def __reduce__(self):
        import os

        return (os.system, ("true",))


@pytest.mark.parametrize("blob, expected", [
    (None, "holds Python objects other than tensors (e.g. posix.system): it is refused, nothing in it was run"),
    (bytes(range(10)), "not a file written by torch.save (10 bytes)"),
    (b"", "not a file written by torch.save (0 bytes)"),
    (b"PK\x03\x04garbage", "not a file written by torch.save"),
])
def test_unreadable_checkpoint_messages(blob, expected):
    """One line for the student, never torch's advice to load with weights_only=False."""
    from autograder.rubric.worker_side import inspect_checkpoint

    if blob is None:
        buf = io.BytesIO()
        torch.save({"x": _Payload()}, buf)
        blob = buf.getvalue()
    error = inspect_checkpoint(torch.frombuffer(bytearray(blob), dtype=torch.uint8) if blob
                               else torch.zeros(0, dtype=torch.uint8))["error"]
    assert expected in error and "weights_only" not in error and "\n" not in error
    assert error.endswith("torch.save(model.state_dict(), path)")


def test_grade_keeps_the_rubric_measured_from_the_same_files(tmp_path, rubric_release):
    """`autograder grade` (again, or after `autograder rubric`) keeps the rubric recorded in rubric.json while
    the notebook and checkpoint are those it measured; otherwise it stays pending with a note."""
    from autograder.grading import GradeOptions, grade
    from autograder.release import load_release
    from autograder.deferred.accuracy.check import RUBRIC_FILE, measured_from

    nb = tmp_path / "subs" / "ann" / "transformers_bert.ipynb"
    nb.parent.mkdir(parents=True)
    shutil.copy(Path(__file__).parent / "example_course" / "submissions" / "student_sample.ipynb", nb)
    ckpt = nb.parent / CONFIG.checkpoint
    ckpt.write_bytes(b"weights")
    out, release = tmp_path / "out", load_release(rubric_release)
    options = GradeOptions(out, quiet=True, cuda=False, summary=False, regrade=True)
    measured = CheckResult(CONFIG.name, "", 8, 6, "partial", "validation accuracy 80%")
    (out / "transformers_bert").mkdir(parents=True)  # the id: the notebook's name
    (out / "transformers_bert" / RUBRIC_FILE).write_text(json.dumps({"notebook": str(nb), "checkpoint": str(ckpt),
                                                        "check": measured.to_dict(), **measured_from(nb, ckpt)}))
    for _ in range(2):  # rubric first, then grade; then grade again
        (result,) = grade(release, [nb], options)
        rubric = next(c for c in result.checks if c.name == CONFIG.name)
        assert rubric.status == "partial" and rubric.score == 6 and rubric.part == CONFIG.part
        rows = list(csv.reader(io.StringIO((out / "grades.csv").read_text())))
        assert dict(zip(rows[0], rows[1]))[CONFIG.name] == "6"
    ckpt.write_bytes(b"other weights")
    (result,) = grade(release, [nb], options)
    assert next(c for c in result.checks if c.name == CONFIG.name).status == "pending"
    assert any("earlier rubric result (rubric.json) was measured from other files" in n for n in result.notes)
