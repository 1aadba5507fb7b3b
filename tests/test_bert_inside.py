"""The BERT-from-the-inside assignment (solutions/bert_inside): its hidden checks against correct and wrong
submissions, its reference against the library, and its notebook end to end.

- The answer key and the corpus (solutions/bert_inside/corpus/: correct variants, wrong submissions, one part left
  as the stub) are graded in one batch, as `autograder verify` grades them: the key and every variant get every
  point, each bug loses points on the checks it names with a message that names the mistake, and only in its part.
- The reference (the answer key's definitions) computes what the library's BertModel computes, and the notebook's
  split is the one the accuracy rubric measures on.
- The answer key runs top to bottom in a fresh kernel on a tiny encoder and IMDB file built here, gets every point,
  and `autograder rubric --device cpu` measures the validation accuracy the notebook printed for its checkpoint.

No GPU, no hub, no ../shared.
"""
from __future__ import annotations

import json
import random
import re
import shutil
import statistics
import time
from pathlib import Path

import pytest
import torch

from autograder import corpus as corpus_module
from tests.goldens import compare_or_update, grades, messages_showing
from autograder.grading import build_and_record
from autograder.grading import GradeOptions, grade
from autograder.release import load_release
from autograder.deferred.accuracy.check import rubric_configs
from autograder.verify import corpus_notebooks, grade_batch, verify
from tests.notebook_kernel import execute_in_folder

transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.slow

SOURCE = Path(__file__).resolve().parent.parent / "solutions" / "bert_inside"
CORPUS = corpus_module.load_corpus(SOURCE)
VARIANTS, BUGS = CORPUS.variants, CORPUS.bugs
PARTS = {str(p): f"part{p}_public" for p in range(1, 8)}
HIDDEN_POINTS_PER_PART = 7  # 8 per part, 1 of them in the notebook's public test cell
JOBS = 2


def _part_of(check) -> str:
    match = re.match(r"(\d+)\.", check.part or "") or re.match(r"part(\d+)_", check.name)
    return match.group(1) if match else ""


def _rubric_names(release) -> set[str]:
    return {config.name for config in rubric_configs(release.checks)}


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    copy = root / "solutions" / "bert_inside"
    shutil.copytree(SOURCE, copy)
    return copy


@pytest.fixture(scope="module")
def release(source):
    return load_release(build_and_record(source).release)


@pytest.fixture(scope="module")
def graded(release, source, tmp_path_factory):
    """Answer key and corpus graded in one batch: {id: SubmissionResult}, and the batch's wall time."""
    folder = tmp_path_factory.mktemp("submissions")
    student = source.parent.parent / "assignments" / "bert_inside" / release.config.notebook
    subs = {"answer_key": release.dir / "answer_key.ipynb", **corpus_notebooks(release, CORPUS, folder, student)}
    start = time.monotonic()
    results = grade_batch(release, subs, tmp_path_factory.mktemp("out"), jobs=JOBS)
    return results, time.monotonic() - start


# -- the assignment's shape --------------------------------------------------------------------------------------

def test_every_part_has_seven_hidden_points_and_one_public_point(release):
    by_part: dict[str, float] = {}
    for c in release.checks:
        if c.name in _rubric_names(release) or getattr(c.fn, "_ag_manual", None) is not None:
            continue  # the accuracy rubric, and the written answers graded by hand
        part = _part_of(c)
        assert part in PARTS, f"check {c.name!r} belongs to no autograded part"
        if not c.public:
            by_part[part] = by_part.get(part, 0) + c.points
    assert by_part == {p: HIDDEN_POINTS_PER_PART for p in PARTS}
    assert {c.name: c.points for c in release.checks if c.public} == {name: 1 for name in PARTS.values()}
    hidden = [c for c in release.checks if not c.public and c.name not in _rubric_names(release)
              and getattr(c.fn, "_ag_manual", None) is None]
    assert len(hidden) >= 35 and all(c.points <= 2 for c in hidden), "points are split over several named checks"


def test_part8_declares_the_fine_tuned_classifier_rubric(release):
    (config,) = rubric_configs(release.checks)
    assert (config.points, _part_of(config), config.kind, config.checkpoint) == (8.0, "8", "sequence_classifier",
                                                                                 "bert_sentiment.pt")
    assert (config.floor, config.full, config.num_labels, config.max_len) == (0.8, 0.9, 2, 256)


def test_checks_that_build_on_other_parts_declare_them(release):
    """Checks whose code under test calls another part's classes say so (depends_on); the grader's stand-ins
    answer those calls here, so the declaration is a record for the framework."""
    declared = {c.name: c.depends_on for c in release.checks if c.depends_on}
    assert {n for n, deps in declared.items() if tuple(deps) == ("Embeddings", "Encoder")} == {
        "Bert: embeddings -> encoder with the attention mask -> pooled tanh(pooler(sequence_output[:, 0]))",
        "Bert: gradients reach the embeddings, every encoder layer and the pooler"}
    # loading calls ours_name too (graded by its own check): a wrong rule costs that check only
    assert {n for n, deps in declared.items() if tuple(deps) == ("Embeddings", "Encoder", "ours_name")} == {
        "load_bert_weights: every tensor copied to its place; a state_dict that does not fit is refused",
        "Bert with the library's weights: sequence_output and pooled_output equal BertModel's to 1e-5"}
    assert sum(1 for deps in declared.values() if tuple(deps) == ("Bert",)) == 4


def test_corpus_size_and_coverage():
    stubs = [b for b in BUGS if b.stub and not b.definitions]  # one per part: the part left as it was handed out
    assert len(BUGS) - len(stubs) >= 30 and len(VARIANTS) >= 5
    assert sorted(b.confined_to for b in stubs) == [f"{p}." for p in PARTS]
    assert all(b.confined_to for b in BUGS)
    for p in PARTS:  # every part has several real mistakes
        assert sum(1 for b in BUGS if b.confined_to == f"{p}." and not b.stub) >= 4, p


# -- grading the corpus ------------------------------------------------------------------------------------------

def test_answer_key_gets_every_point(graded):
    result = graded[0]["answer_key"]
    assert not result.error
    assert corpus_module.lost_points(result) == {}


def test_rubric_is_pending_not_failed_without_cuda(graded, release):
    if torch.cuda.is_available():
        pytest.skip("with CUDA the rubric is graded, not pending")
    (name,) = _rubric_names(release)
    for sub_id, result in graded[0].items():
        (rubric,) = [c for c in result.checks if c.name == name]
        assert (rubric.status, rubric.score) == ("pending", 0.0), sub_id
        assert "bert_sentiment.pt" in rubric.message and "autograder" not in rubric.message, sub_id


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_correct_variant_gets_every_point(graded, release, variant):
    result = graded[0][f"variant-{variant.name}"]
    assert corpus_module.problems(variant, result, {c.name for c in release.checks}) == []


@pytest.mark.parametrize("bug", BUGS, ids=[b.name for b in BUGS])
def test_bug_loses_points_in_its_part_only_with_a_message_naming_it(graded, release, bug):
    result = graded[0][f"bug-{bug.name}"]
    assert corpus_module.problems(bug, result, {c.name for c in release.checks}) == []


def test_messages_show_no_tensors(graded):
    """Feedback names the mistake; it never prints tensors (hidden inputs or expected values)."""
    assert messages_showing(graded[0], "tensor(") == []


def test_messages_never_name_the_workers_module(graded):
    """A definition deleted or renamed (bug-encoder_layer_renamed) is named as the notebook's missing definition, never as
    Python's AttributeError on the module the grader loads the notebook into, whatever a check wraps it in."""
    assert messages_showing(graded[0], "module 'submission'") == []
    renamed = graded[0]["bug-encoder_layer_renamed"]
    assert any("does not define" in c.message for c in renamed.checks)


def test_grading_one_submission_takes_well_under_a_minute(graded):
    results, wall = graded
    times = [r.execution_time for r in results.values()]
    print(f"\n{len(times)} submissions in {wall:.0f} s with {JOBS} jobs; per submission: median "
          f"{statistics.median(times):.1f} s, max {max(times):.1f} s")
    assert statistics.median(times) < 60


def test_verify_passes(source):
    """Reference: every point gradable here; untouched student notebook: 0; nothing leaks. (The corpus is graded
    above, as verify grades it.)"""
    report = verify(source, with_corpus=False)
    assert report.ok, report.problems
    summary = next(line for line in report.lines if line.startswith("reference:"))
    match = re.search(r"reference: ([\d.]+)/([\d.]+) \(([\d.]+) points pending\); untouched student notebook: ([\d.]+)/", summary)
    assert match and float(match.group(4)) == 0 and float(match.group(3)) == 8 + 15, summary  # rubric, 3 answers
    assert float(match.group(1)) == float(match.group(2)) - 8 - 15, summary


# -- the reference against the library ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def reference(release):
    """The answer key's definitions, run here (instructor code)."""
    namespace: dict = {}
    exec(compile((release.dir / "reference.py").read_text(encoding="utf-8"), "reference.py", "exec"), namespace)
    return namespace


def _config(**overrides):
    settings = dict(vocab_size=60, hidden_size=24, num_hidden_layers=2, num_attention_heads=4, intermediate_size=52,
                    max_position_embeddings=20, type_vocab_size=3, pad_token_id=5, hidden_act="gelu")
    return transformers.BertConfig(**{**settings, **overrides})


def test_reference_bert_equals_the_library_module_by_module(reference):
    config = _config()
    torch.manual_seed(0)
    library = transformers.BertModel(config).eval()
    with torch.no_grad():
        for p in library.parameters():
            p.add_(0.05 * torch.randn(p.shape))
    ours = reference["Bert"](config).eval()
    reference["load_bert_weights"](ours, library.state_dict())
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(60, (3, 11), generator=g)
    types = torch.randint(3, (3, 11), generator=g)
    mask = torch.ones(3, 11, dtype=torch.long)
    mask[1, 7:] = 0
    with torch.no_grad():
        theirs = library(input_ids=ids, token_type_ids=types, attention_mask=mask)
        sequence, pooled = ours(ids, types, mask)
        embedded = ours.embeddings(ids, types)
        library_embedded = library.embeddings(input_ids=ids, token_type_ids=types)
    assert torch.allclose(embedded, library_embedded, atol=1e-6)
    assert torch.allclose(sequence, theirs.last_hidden_state, atol=1e-5)
    assert torch.allclose(pooled, theirs.pooler_output, atol=1e-5)
    names = [reference["ours_name"](n) for n in library.state_dict()]
    assert None not in names and len(set(names)) == len(names) == len(ours.state_dict())


def test_reference_masking_uses_the_tokenizers_ids(reference, tmp_path):
    vocab = ["good", "[SEP]", "film", "bad", "[CLS]", "plot", "[PAD]", "the", "[MASK]", "[UNK]", "it", "was"]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = transformers.BertTokenizerFast(str(tmp_path / "vocab.txt"))
    pairs = [("the film was good", "it was bad", 0), ("bad plot", "the film", 1)]
    batch = reference["encode_pairs"](pairs, tokenizer, 10)
    library = tokenizer([a for a, _, _ in pairs], [b for _, b, _ in pairs], truncation="longest_first", max_length=10,
                        padding="max_length", return_tensors="pt")
    for key in ("input_ids", "token_type_ids", "attention_mask"):
        assert torch.equal(batch[key], library[key]), key
    masked, labels = reference["mask_tokens"](batch["input_ids"].repeat(300, 1), batch["attention_mask"].repeat(300, 1),
                                              tokenizer, 0.5, torch.Generator().manual_seed(0))
    ids = batch["input_ids"].repeat(300, 1)
    special = (ids == tokenizer.cls_token_id) | (ids == tokenizer.sep_token_id) | (ids == tokenizer.pad_token_id)
    assert not (labels[special] != -100).any() and (labels[~special] != -100).float().mean() > 0.4
    assert torch.equal(masked[special], ids[special])


def test_notebook_split_is_the_rubrics(reference):
    from autograder.rubric.data import clean_review, eval_batches, train_valid_split

    rng = random.Random(3)
    texts = [" ".join(rng.choice(["a", "b", "c", "d"]) for _ in range(rng.randint(1, 6))) for _ in range(2000)]
    labels = [rng.randint(0, 1) for _ in texts]
    assert reference["train_valid_split"](texts, labels, 0.3, 1234) == train_valid_split(texts, labels, 0.3, 1234)
    assert reference["clean_review"]("a<br />b") == clean_review("a<br />b")
    lengths = [rng.randint(3, 300) for _ in range(750)]
    assert list(reference["BucketBatchSampler"](lengths, 32, shuffle=False)) == eval_batches(lengths, 32, 100)


# -- the notebook end to end ---------------------------------------------------------------------------------------

EPOCH_LINE = re.compile(r"epoch (\d+): .* valid acc ([\d.]+)%")


@pytest.fixture(scope="module")
def executed(release, tmp_path_factory):
    """The answer key run in a fresh kernel in a student's folder: (notebook path, its stdout, world)."""
    pytest.importorskip("pyarrow")
    pytest.importorskip("nbclient")
    from tests.bert_inside.tiny_world import build_world

    world = build_world(tmp_path_factory.mktemp("world"))
    folder = tmp_path_factory.mktemp("student")
    env = {"BERT_ENCODER": str(world["encoder"]), "IMDB_PATH": str(world["imdb"]), "TRAIN_SUBSET": "0",
           "EPOCHS": "3", "MAX_LEN": "64", "BATCH_SIZE": "16", "LEARNING_RATE": "3e-3", "TQDM_DISABLE": "1",
           "OMP_NUM_THREADS": "1"}
    path, stdout = execute_in_folder(release.dir / "answer_key.ipynb", folder, env, "bert_inside.ipynb")
    return path, stdout, world


def test_notebook_runs_top_to_bottom_and_saves_its_checkpoint(executed):
    path, stdout, _ = executed
    assert (path.parent / "bert_sentiment.pt").is_file()
    assert "train:    560 reviews" in stdout and "valid:    240 reviews" in stdout  # the 70/30 split
    assert re.search(r"max \|ours - library\| at real tokens \d\.\d\de-0[6-9]", stdout), stdout  # part 5's demo
    first = re.search(r"first loss ([\d.]+)   ln V \+ ln 2 = ([\d.]+)", stdout)  # part 6's demo
    assert first and abs(float(first.group(1)) - float(first.group(2))) < 0.3, stdout
    epochs = EPOCH_LINE.findall(stdout)
    assert [int(e) for e, _ in epochs] == [1, 2, 3]
    assert max(float(acc) for _, acc in epochs) > 75, stdout  # the tiny reviews are easy: it learns
    assert re.search(r"best checkpoint \(valid acc [\d.]+%\): test acc [\d.]+%", stdout)


def test_executed_notebook_gets_every_point_and_the_rubric_measures_its_checkpoint(release, executed, tmp_path):
    from autograder.entrypoints import command_line as main

    path, stdout, world = executed
    out = tmp_path / "out"
    (result,) = grade(release, [path], GradeOptions(out, quiet=True, summary=False, ids=["student"]))
    (rubric_name,) = _rubric_names(release)
    assert corpus_module.lost_points(result) == {}
    assert sorted(c.name for c in result.checks if c.status == "pending") == sorted([rubric_name, "q1", "q2", "q3"])
    code = main(["rubric", str(release.dir), str(path), "--out", str(out), "--quiet", "--device", "cpu",
                 "--encoder", str(world["encoder"]), "--imdb", str(world["imdb"])])
    assert code == 0
    details = json.loads((out / "student" / "rubric.json").read_text())
    best = max(float(acc) for _, acc in EPOCH_LINE.findall(stdout))  # the checkpoint is the best epoch's
    assert details["n"] == 240 and details["method"] == "full forward with attention masks"
    assert abs(100 * details["accuracy"] - best) < 0.01, (details, best)
    graded = json.loads((out / "student" / "grading.json").read_text())
    (rubric,) = [c for c in graded["checks"] if c["name"] == rubric_name]
    expected = 8 * min(max((details["accuracy"] - 0.8) / 0.1, 0.0), 1.0)
    assert rubric["status"] != "pending" and abs(rubric["score"] - expected) < 1e-6


def test_grades_match_the_golden_file(graded, update_goldens):
    """Every corpus submission's checks (status, score, message) as committed in tests/goldens/."""
    compare_or_update("bert_inside_corpus", grades(graded[0]), update_goldens)
