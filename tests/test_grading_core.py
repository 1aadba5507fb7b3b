"""Grading end to end with real submission notebooks: attacks, crashes, hangs, warnings.

Each submission is the example's answer key with a bug or an attack written into it, graded in
one batch as a course would.
"""
import csv
import json

import nbformat
import pytest

from autograder.grading import GradeOptions, grade

BUGGY_NORMALIZE = {"return v / v.norm(dim=-1, keepdim=True)": "return v / v.sum(dim=-1, keepdim=True)"}

# Patch torch inside the worker at import time (a decorator runs when the definition is loaded).
MONKEYPATCH = '''
import builtins
def _patch():
    torch.allclose = lambda *a, **k: True
    torch.isfinite = lambda t: torch.ones_like(t, dtype=torch.bool)
    torch.Tensor.__eq__ = lambda a, b: True
    builtins.isinstance = lambda *a: True
    return lambda f: f

@_patch()
def helper():
    return 0
'''

# Try to read the grader's private files and use the reference's code if it can be found.
READ_REFERENCE = '''
import glob, os
def _steal():
    found = []
    for pattern in ["/tmp/**/reference.py", "/tmp/**/manifest.json", "/tmp/**/test_hidden.py"]:
        try:
            found += glob.glob(pattern, recursive=True)
        except Exception:
            pass
    for path in found:
        try:
            text = open(path).read()
        except OSError:
            continue
        if "def normalize" in text and path.endswith("reference.py"):
            scope = {}
            exec(text, scope)
            return scope["normalize"]
    return None

def normalize(v):
    stolen = _steal()
    if stolen is not None:
        return stolen(v)
    return v
'''


@pytest.fixture(scope="module")
def graded(tmp_path_factory, example_build, example_release):
    from tests.conftest import make_submission

    folder = tmp_path_factory.mktemp("submissions")
    key = example_build.release / "answer_key.ipynb"

    def sub(name, replace=None, append=()):
        return make_submission(folder / f"{name}.ipynb", key, replace, append)

    subs = {
        "correct": sub("correct"),
        "buggy": sub("buggy", BUGGY_NORMALIZE),
        "monkeypatch": sub("monkeypatch", BUGGY_NORMALIZE, [MONKEYPATCH]),
        "reads_files": sub("reads_files", append=[READ_REFERENCE]),
        "os_exit": sub("os_exit", {"shifted = x - x.max(dim=dim, keepdim=True).values":
                                   "import os; os._exit(3)"}),
        "endless": sub("endless", {"return v / v.norm(dim=-1, keepdim=True)": "while True:\n        pass"}),
        "raises": sub("raises", {"return torch.relu(self.linear(x))": "raise ValueError('shapes do not match')"}),
        "exit_at_import": sub("exit_at_import", append=["import os\n@(lambda f: os._exit(1))\ndef bye():\n    pass"]),
        "warns": sub("warns", {"return v / v.norm(dim=-1, keepdim=True)":
                               "warnings.warn('just a warning', UserWarning)\n"
                               "    import sys; print('noise', file=sys.stderr)\n"
                               "    return v / v.norm(dim=-1, keepdim=True)"}),
    }
    moved = nbformat.read(key, as_version=4)  # cells of the student's own above the written answer
    moved.cells[1:1] = [nbformat.v4.new_markdown_cell("my notes"), nbformat.v4.new_code_cell("x = 1")]
    nbformat.write(moved, folder / "moved.ipynb")
    bare = nbformat.read(key, as_version=4)  # saved by a tool that drops cell metadata
    for cell in bare.cells:
        cell.metadata = {}
    nbformat.write(bare, folder / "bare.ipynb")
    unanswered = nbformat.read(key, as_version=4)  # the written answer left as handed out (an editor's line ends)
    for cell in unanswered.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "q_softmax":
            cell.source = "YOUR ANSWER HERE  \r\n\n"
    nbformat.write(unanswered, folder / "unanswered.ipynb")
    subs.update(moved=folder / "moved.ipynb", bare=folder / "bare.ipynb", unanswered=folder / "unanswered.ipynb")
    out = tmp_path_factory.mktemp("out")
    results = grade(example_release, list(subs.values()), GradeOptions(out, quiet=True))
    by_name = {r.submission: r for r in results}
    return by_name, out


def scores(result):
    return {c.name: c.score for c in result.checks}


def test_correct_submission_gets_full_marks(graded):
    results, _ = graded
    assert (results["correct"].score, results["correct"].max_score) == (11, 13)  # the written answer's 2: pending
    assert [(c.name, c.status, c.message) for c in results["correct"].pending] == [
        ("q_softmax", "pending", "graded by hand: written answer, notebook cell 13")]


def test_a_written_answer_is_cited_by_its_cell_in_the_students_own_notebook(graded):
    """The number of the student's cell holding the answer (found by its nbgrader grade_id), as every message citing
    a cell; where no cell has the grade_id, the heading above the answer, never another notebook's number."""
    results, _ = graded
    assert [c.message for c in results["moved"].pending] == ["graded by hand: written answer, notebook cell 15"]
    assert [c.message for c in results["bare"].pending] == [
        "graded by hand: written answer, the cell under the heading \u201c4. Question\u201d"]


def test_a_written_answer_left_as_handed_out_gets_0_at_once_as_nbgrader_gives_it(graded):
    """An unanswered hand-graded cell (its text as handed out, whatever the line ends) is 0, not pending: nbgrader's
    autograde gives it 0 and no one has to read it. An answered one stays pending."""
    results, _ = graded
    check = next(c for c in results["unanswered"].checks if c.name == "q_softmax")
    assert (check.status, check.score) == ("failed", 0)
    assert check.message.startswith("written answer, notebook cell 13: not answered")
    assert results["unanswered"].score == results["correct"].score and not results["unanswered"].pending


def test_monkeypatching_the_judges_libraries_does_not_raise_the_score(graded):
    results, _ = graded
    assert scores(results["monkeypatch"]) == scores(results["buggy"])
    assert results["monkeypatch"].score < results["correct"].score
    assert scores(results["buggy"])["normalize_test"] == 0


def test_a_submission_cannot_read_the_reference_or_hidden_tests(graded):
    results, _ = graded
    r = results["reads_files"]
    assert scores(r)["normalize_test"] == 0, "the submission found the reference's normalize"
    message = next(c for c in r.checks if c.name == "normalize_test").message
    assert "should be [[0.6, 0.8]]" in message  # it ran, found nothing, and returned its own wrong answer


def test_os_exit_costs_only_the_checks_that_call_it(graded):
    results, _ = graded
    r = scores(results["os_exit"])
    assert r["softmax_public"] == 0 and r["softmax: rows sum to 1"] == 0
    assert r["normalize_test"] == 2 and r["tiny layer: forward with given weights"] == 2
    msg = next(c for c in results["os_exit"].checks if c.name == "softmax_public").message
    assert "ended (exit code 3)" in msg


def test_endless_loop_times_out_only_its_checks(graded):
    results, _ = graded
    r = results["endless"]
    assert scores(r)["normalize_test"] == 0 and r.score == 11 - 2
    assert "timed out after 10 s" in next(c for c in r.checks if c.name == "normalize_test").message


def test_exception_costs_only_the_checks_that_call_it_with_the_students_traceback(graded):
    results, _ = graded
    r = results["raises"]
    layer = next(c for c in r.checks if c.name == "tiny layer: forward with given weights")
    assert layer.score == 0 and r.score == 9
    assert "raised ValueError: shapes do not match" in layer.message
    assert "line" in layer.message and "raise ValueError" in layer.message  # where, in their own cell


def test_exit_at_import_excludes_that_statement_and_grades_the_rest(graded):
    results, _ = graded
    r = results["exit_at_import"]
    assert r.score == 11
    assert any("bye" in note for note in r.notes)


def test_warnings_and_stderr_cost_nothing(graded):
    results, _ = graded
    assert results["warns"].score == 11


def test_every_submission_has_results_and_a_grades_row(graded):
    results, out = graded
    rows = list(csv.DictReader((out / "grades.csv").open()))
    assert sorted(r["submission"] for r in rows) == sorted(results)
    for name in results:
        data = json.loads((out / name / "results.json").read_text())
        assert set(data) >= {"score", "execution_time", "output", "tests"}
        for test in data["tests"]:
            assert set(test) >= {"name", "max_score", "output", "visibility"}
            if test["name"] == "q_softmax" and name != "unanswered":  # a written answer: pending, so Gradescope
                # shows no score for it yet
                assert "score" not in test and test["output"].startswith("Pending: graded by hand")
            else:
                assert 0 <= test["score"] <= test["max_score"]
        assert (out / name / "feedback.md").is_file()
    correct = next(r for r in rows if r["submission"] == "correct")
    assert correct["total"] == "11" and correct["normalize_test"] == "2"


def test_feedback_never_shows_hidden_test_source(graded):
    _, out = graded
    from autograder.reports.results import plain

    text = (out / "buggy" / "feedback.md").read_text() + (out / "buggy" / "results.json").read_text()
    assert "reference.normalize" not in text and "manual_seed(1)" not in text
    outputs = [t["output"] for t in json.loads((out / "buggy" / "results.json").read_text())["tests"]]
    for markdown in ((out / "buggy" / "feedback.md").read_text(), "\n".join(outputs)):  # both Markdown, made inert
        assert plain("normalize([[3, 4]]) should be [[0.6, 0.8]]") in markdown  # the assertion's message, not its code


def test_partial_credit_is_clamped_and_proportional(submission, example_release, tmp_path):
    # softmax right along the last dim only: 1/3 of the 3 points of the per-dim check.
    sub = submission("lastdim.ipynb", {"shifted = x - x.max(dim=dim, keepdim=True).values":
                                       "dim = -1\n    shifted = x - x.max(dim=dim, keepdim=True).values"})
    (result,) = grade(example_release, [sub], GradeOptions(tmp_path / "out", quiet=True))
    check = next(c for c in result.checks if c.name == "softmax: values along every dim")
    assert check.score == pytest.approx(1.0) and check.status == "partial"
    assert "right along 1 of 3" in check.message


@pytest.mark.parametrize("words, preload", [
    (["grade", "vectors", "a.ipynb", "--out", "o", "--jobs", "2"], None),
    (["grade", "vectors", "-j3", "a.ipynb", "--out", "o"], None),
    (["grade", "vectors", "a.ipynb", "--out", "o", "--jobs=2"], None),
    (["grade", "vectors", "a.ipynb", "--out", "o", "--jobs", "1"], "vectors"),
    (["grade", "vectors", "a.ipynb", "--out", "o"], "vectors"), (["verify", "vectors", "--jobs", "2"], "vectors"),
    (["report", "results"], None),
])
def test_a_pool_of_grading_processes_does_not_preload_in_the_command(words, preload):
    """With --jobs N > 1 the command's own fork server grades nothing: it must not import the workers' modules
    (seconds of a core the grading processes need)."""
    from autograder.cli import parse

    command, args = parse(words)
    assert command.assignment_to_preload(args) == preload


def _ends_within(pid: int, seconds: float) -> bool:
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


def test_the_next_submissions_worker_is_started_early_and_nothing_outlives_the_run(submission, example_release,
                                                                                    tmp_path):
    """grade_one(more=True) forks and confines the next worker as it ends; the next submission loads into it and
    is graded as it would be in a worker of its own; a run that ends leaves no worker behind."""
    from autograder.grading import Grader, preflight

    buggy, good = submission("buggy.ipynb", BUGGY_NORMALIZE), submission("good.ipynb")
    options = GradeOptions(tmp_path / "out", quiet=True)
    status = preflight(example_release, options)
    grader = Grader(example_release, options, status)
    try:
        first = grader.grade_one(buggy, "buggy", more=True)
        early = grader._next_worker
        assert early is not None and early.pid is not None
        second = grader.grade_one(good, "good", more=True)
        assert early.report is not None and early.report.status.startswith("isolated")  # it graded `good`
        spare = grader._next_worker
        assert spare is not early and spare.pid is not None
        pid = spare.pid
    finally:
        grader.close()
    assert spare.proc is None and _ends_within(pid, 10)
    alone = Grader(example_release, options, status)
    try:
        assert [(c.score, c.message) for c in alone.grade_one(good, "good").checks] == \
            [(c.score, c.message) for c in second.checks]
    finally:
        alone.close()
    assert first.score < second.score == example_release.max_score - 2  # all but the written answer's (pending)


def test_more_jobs_than_cpus_run_one_grading_process_per_cpu(capsys):
    import os

    from autograder.commands.grade import jobs_for_this_machine

    cpus = len(os.sched_getaffinity(0))
    assert jobs_for_this_machine(cpus, cluster=False) == cpus
    assert jobs_for_this_machine(cpus + 62, cluster=False) == cpus
    assert f"--jobs {cpus + 62} on {cpus} CPU(s)" in capsys.readouterr().err
    assert jobs_for_this_machine(cpus + 62, cluster=True) == cpus + 62  # a cluster's processes are elsewhere


def test_a_failed_import_of_the_grading_tool_a_notebook_came_with_is_no_note():
    from autograder.grading.grader import load_notes
    from autograder.notebook.extract import Extraction, Unit
    from autograder.sandbox.client import LoadReport

    units = [Unit(1, 2, "import otter", ["otter"], "import"), Unit(2, 1, "import missing_lib", ["missing_lib"], "import"),
             Unit(2, 3, "grader = otter.Notebook()", ["grader"], "assignment")]
    why = "raised ModuleNotFoundError"
    report = LoadReport({}, {0: why, 1: why, 2: "raised NameError"}, "")
    assert load_notes(report, Extraction(units, [])) == [f"cell 2, line 1 (missing_lib): {why}"]


def test_a_load_error_the_reference_meets_too_is_the_grading_machines_said_once():
    """A library missing where grading runs stops the reference's import as it stops the student's: the note says the
    machine cannot import it (one note for every statement it stops), not that the notebook raised. An error of the
    same statement (whatever it is) is the machine's too; the student's own errors stay theirs."""
    from autograder.grading.grader import load_notes
    from autograder.notebook.extract import Extraction, Unit
    from autograder.sandbox.client import LoadReport

    def missing(name, at):
        return f"raised ModuleNotFoundError: No module named '{name}' ({at}, in <module>: import {name})"

    units = [Unit(3, 4, "import matplotlib", ["matplotlib"], "import"),
             Unit(3, 6, "import matplotlib.pyplot as plt", ["plt"], "import"),
             Unit(3, 7, "import seaborn as sns", ["sns"], "import"),
             Unit(4, 1, "def f():\n    pass", ["f"], "def"),
             Unit(5, 1, "from data import load", ["load"], "import")]
    ref_units = [Unit(3, 4, "import matplotlib", ["matplotlib"], "import"),
                 Unit(3, 6, "from matplotlib import pyplot as plt", ["plt"], "import"),
                 Unit(5, 1, "from data import load", ["load"], "import")]
    report = LoadReport({}, {0: missing("matplotlib", "cell 3, line 4"), 1: missing("matplotlib", "cell 3, line 6"),
                             2: missing("seaborn", "cell 3, line 7"), 4: "raised OSError: no data here"}, "")
    reference = [(ref_units[0], missing("matplotlib", "cell 3, line 4")), (ref_units[1], missing("matplotlib", "x")),
                 (ref_units[2], "raised OSError: no data here")]
    notes = load_notes(report, Extraction(units, []), reference)
    assert notes == [
        "cell 3, line 4 (matplotlib) and cell 3, line 6 (plt): the grading machine cannot import matplotlib (the "
        "reference solution meets the same error): not a problem of your notebook",
        f"cell 3, line 7 (sns): {missing('seaborn', 'cell 3, line 7')}",  # the reference has no seaborn: the student's
        "cell 5, line 1 (load): raised OSError: no data here, on the grading machine (the reference "
        "solution meets the same error): not a problem of your notebook"], notes
    assert load_notes(report, Extraction(units, []))[0].startswith("cell 3, line 4 (matplotlib): raised")  # no reference
