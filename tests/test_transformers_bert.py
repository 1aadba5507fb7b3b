"""The Transformers & BERT assignment's hidden checks against correct and wrong submissions.

The assignment is built from a copy of solutions/transformers_bert. The answer key and its corpus
(solutions/transformers_bert/corpus/: correct variants and wrong submissions) become notebooks and are
graded in one batch, as `autograder verify` grades them: the key and every variant get every point, each
bug loses points on the checks it names, with a message that names the mistake. `verify` runs on the same
copy.
"""
from __future__ import annotations

import json
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

pytest.importorskip("transformers")

pytestmark = pytest.mark.slow

SOURCE = Path(__file__).resolve().parent.parent / "solutions" / "transformers_bert"
CORPUS = corpus_module.load_corpus(SOURCE)
VARIANTS, BUGS = CORPUS.variants, CORPUS.bugs
HIDDEN_POINTS_PER_PART = 7  # 8 per part, 1 of them in the notebook's public test cell
PARTS = {"1": "part1_public", "2": "part2_public", "3": "part3_public", "5": "part5_public", "6": "part6_public",
         "7": "part7_public"}
JOBS = 2


def _part_of(check) -> str:
    """'1'..'7' from a hidden check's part ("1. Scaled dot-product attention") or a public cell's name."""
    match = re.match(r"(\d+)\.", check.part or "") or re.match(r"part(\d+)_", check.name)
    return match.group(1) if match else ""


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    copy = root / "solutions" / "transformers_bert"
    shutil.copytree(SOURCE, copy)
    return copy


@pytest.fixture(scope="module")
def release(source):
    return load_release(build_and_record(source).release)


@pytest.fixture(scope="module")
def submissions(release, source, tmp_path_factory):
    folder = tmp_path_factory.mktemp("submissions")
    student = source.parent.parent / "assignments" / "transformers_bert" / release.config.notebook
    return {"answer_key": release.dir / "answer_key.ipynb", **corpus_notebooks(release, CORPUS, folder, student)}


@pytest.fixture(scope="module")
def graded(release, submissions, tmp_path_factory):
    """Answer key and corpus graded in one batch: {id: SubmissionResult}, the batch's wall time, and the
    results folder. The reference is the recorded one (autograder/recording.py)."""
    out = tmp_path_factory.mktemp("out")
    start = time.monotonic()
    results = grade_batch(release, submissions, out, jobs=JOBS)
    return results, time.monotonic() - start, out


_lost = corpus_module.lost_points


def _rubric_names(release) -> set[str]:
    return {config.name for config in rubric_configs(release.checks)}


def test_every_part_has_seven_hidden_points_and_one_public_point(release):
    """Seven points per part in the hidden test files, one in the part's notebook test cell (public code that
    students run; some of these cells also have a hidden section)."""
    by_part: dict[str, float] = {}
    for c in release.checks:
        if c.gpu or c.name in release.config.gpu_checks or c.name in _rubric_names(release):
            continue  # the accuracy rubric (part 7) is its own stage
        if getattr(c.fn, "_ag_manual", None) is not None:
            continue  # the written answers, graded by hand
        part = _part_of(c)
        assert part in PARTS, f"check {c.name!r} belongs to no autograded part"
        if not c.source:
            by_part[part] = by_part.get(part, 0) + c.points
    assert by_part == {p: HIDDEN_POINTS_PER_PART for p in PARTS}
    cells = {c.name: c.points for c in release.checks if c.source}
    assert cells == {name: 1 for name in PARTS.values()}
    assert {c.name for c in release.checks if c.public} <= set(PARTS.values())
    hidden = [c for c in release.checks if not c.source and not c.gpu and c.name not in _rubric_names(release)
              and getattr(c.fn, "_ag_manual", None) is None]
    assert len(hidden) >= 30 and all(c.points <= 3 for c in hidden), "points are split over several named checks"


def test_part7_declares_the_accuracy_rubric(release):
    """The spec's rubric: 8 points in part 7, on top of the correctness checks."""
    configs = rubric_configs(release.checks)
    assert [(c.points, _part_of(c)) for c in configs] == [(8.0, "7")]
    assert (configs[0].floor, configs[0].full, configs[0].checkpoint) == (0.5, 0.9, "bert_gru_sentiment.pt")


def test_answer_key_gets_every_point(graded):
    results = graded[0]
    result = results["answer_key"]
    assert not result.error
    assert _lost(result) == {}


def test_rubric_is_pending_not_failed_without_cuda(graded, release):
    """A CPU grader reports the rubric pending, naming the saved model it measures, for every submission."""
    if torch.cuda.is_available():
        pytest.skip("with CUDA the rubric is graded, not pending")
    (name,) = _rubric_names(release)
    for sub_id, result in graded[0].items():
        (rubric,) = [c for c in result.checks if c.name == name]
        assert (rubric.status, rubric.score) == ("pending", 0.0), sub_id
        assert "bert_gru_sentiment.pt" in rubric.message and "autograder" not in rubric.message, sub_id


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_correct_variant_gets_every_point(graded, release, variant):
    result = graded[0][f"variant-{variant.name}"]
    assert corpus_module.problems(variant, result, {c.name for c in release.checks}) == []


@pytest.mark.parametrize("bug", BUGS, ids=[b.name for b in BUGS])
def test_bug_loses_points_on_its_checks_with_a_message_naming_it(graded, release, bug):
    result = graded[0][f"bug-{bug.name}"]
    assert corpus_module.problems(bug, result, {c.name for c in release.checks}) == []


def test_messages_show_no_tensors(graded):
    """Feedback names the mistake; it never prints tensors (hidden inputs or expected values)."""
    assert messages_showing(graded[0], "tensor(") == []


def test_messages_never_name_the_workers_module(graded):
    """A definition deleted or renamed (bug-sdp_renamed) is named as the notebook's missing definition, never as
    Python's AttributeError on the module the grader loads the notebook into, whatever a check wraps it in."""
    assert messages_showing(graded[0], "module 'submission'") == []
    renamed = graded[0]["bug-sdp_renamed"]
    assert any("does not define" in c.message for c in renamed.checks)


@pytest.mark.parametrize("sub_id", ["answer_key", "bug-residual_adds_embed_dim", "bug-accuracy_threshold_at_half"])
def test_graded_alone_as_in_the_batch(graded, release, tmp_path, sub_id):
    """A run that grades a single submission (Gradescope's case) warms up less; the result is the same."""
    batch = graded[0][sub_id]
    (alone,) = grade(release, [Path(batch.file)], GradeOptions(tmp_path, quiet=True, summary=False, ids=[sub_id]))
    assert [(c.name, c.status, c.score, c.message) for c in alone.checks] == \
        [(c.name, c.status, c.score, c.message) for c in batch.checks]
    assert alone.notes == batch.notes


def test_grading_one_submission_takes_well_under_a_minute(graded):
    results, wall, _ = graded
    times = [r.execution_time for r in results.values()]
    median = statistics.median(times)
    print(f"\n{len(times)} submissions in {wall:.0f} s with {JOBS} jobs; per submission: median {median:.1f} s, "
          f"max {max(times):.1f} s")
    assert median < 60


def test_verify_passes(source):
    """Reference: every point gradable here; untouched student notebook: 0; nothing leaks. (The corpus is
    graded above, as verify grades it.)"""
    report = verify(source, with_corpus=False)
    assert report.ok, report.problems
    summary = next(line for line in report.lines if line.startswith("reference:"))
    match = re.search(r"reference: ([\d.]+)/([\d.]+) \(([\d.]+) points pending\); untouched student notebook: ([\d.]+)/", summary)
    assert match, summary
    assert float(match.group(4)) == 0, summary
    assert float(match.group(3)) == 8 + 15, summary  # the accuracy rubric and the three written answers, nothing else
    assert float(match.group(1)) == float(match.group(2)) - 8 - 15, summary


def test_the_recorded_reference_grades_every_submission_as_the_live_one(release, submissions, graded, tmp_path):
    """The corpus graded with a live reference worker (no recording) gets byte-identical results.json (less
    the execution time) and grading.json (less the timings) as with the recorded reference."""
    assert release.recording() is not None, "the build did not record the reference"
    replayed_out = graded[2]
    live = grade_batch(release, submissions, tmp_path / "live", jobs=JOBS, use_recording=False)
    assert set(live) == set(graded[0])

    def without_timings(path, keys):
        data = json.loads(path.read_text())
        for key in keys:
            data.pop(key, None)
        for check in data.get("checks", []):
            check.pop("seconds", None)
        return json.dumps(data, sort_keys=True)

    for sub_id in submissions:
        for name, keys in (("results.json", ["execution_time"]), ("grading.json", ["execution_time"])):
            assert without_timings(replayed_out / sub_id / name, keys) == without_timings(tmp_path / "live" / sub_id / name,
                                                                                          keys), (sub_id, name)


def test_grades_match_the_golden_file(graded, update_goldens):
    """Every corpus submission's checks (status, score, message) as committed in tests/goldens/."""
    compare_or_update("transformers_bert_corpus", grades(graded[0]), update_goldens)
