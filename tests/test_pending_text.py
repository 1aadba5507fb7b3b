"""Pending points: students read what happens to them and when, never a command; the instructor's command is in
`autograder grade`'s own output (commands/grade.py `pending_advice`)."""
from __future__ import annotations

from types import SimpleNamespace

from autograder.commands.grade import pending_advice
from autograder.judge import PENDING_GPU
from autograder.status import PENDING


def test_the_students_gpu_pending_text_says_what_and_when_without_a_command():
    assert "autograder" not in PENDING_GPU and "`" not in PENDING_GPU
    for words in ("pending, not failed", "after the submissions are collected", "added to this grade"):
        assert words in PENDING_GPU


def _release(gpu_checks=(), config_gpu=()):
    checks = [SimpleNamespace(name=n, gpu=n in gpu_checks, fn=None, points=1, part="") for n in ("on gpu", "by hand")]
    return SimpleNamespace(checks=checks, config=SimpleNamespace(name="vectors", gpu_checks=list(config_gpu)))


def test_the_instructor_gets_the_command_for_gpu_checks_and_the_names_of_hand_graded_ones():
    results = [SimpleNamespace(checks=[SimpleNamespace(name=n, status=PENDING) for n in ("on gpu", "by hand")])]
    for release in (_release(gpu_checks=("on gpu",)), _release(config_gpu=("on gpu",))):
        lines = pending_advice(release, results, ["subs dir"], "out")
        assert lines[0] == ("pending: 1 check(s) need a GPU (on gpu); on a machine with CUDA: autograder grade vectors "
                            "'subs dir' --out out --regrade")
        assert lines[1] == "pending: 1 other check(s) not graded here (graded by hand): by hand"


def test_the_rubric_command_offered_for_a_zip_export_unpacks_it_first():
    from autograder.deferred.accuracy.config import RubricConfig

    rubric = SimpleNamespace(fn=SimpleNamespace(_ag_rubric=RubricConfig()), name="acc", points=8, part="7", gpu=False)
    release = SimpleNamespace(checks=[rubric], config=SimpleNamespace(name="tb", gpu_checks=[]))
    results = [SimpleNamespace(checks=[SimpleNamespace(name="acc", status=PENDING)])]
    [line] = pending_advice(release, results, ["export.zip", "late"], "out")
    assert line.endswith("unzip -q export.zip -d export && autograder rubric tb export late --out out"), line


def test_a_part_nobody_has_graded_yet_reads_pending_not_zero():
    from autograder.judge import CheckResult
    from autograder.reports.results import part_score

    def result(status, score, points):
        return CheckResult("c", "p", points, score, status, "", "visible")

    assert part_score([result("pending", 0, 2)]) == "2 point(s), pending"
    assert part_score([result("passed", 3, 3), result("pending", 0, 2)]) == "3 / 5 (2 pending)"
    assert part_score([result("passed", 1, 3)]) == "1 / 3"


def test_every_count_of_pending_things_counts_points(capsys):
    """The progress line, verify's reference line, grades.csv and feedback all say pending POINTS: two pending
    checks worth 3 and 2 points read "5 points pending" everywhere, never "2 pending"."""
    from autograder.grading.progress import Progress
    from autograder.judge import CheckResult
    from autograder.reports.results import SubmissionResult, feedback_markdown, pending_points_text

    checks = [CheckResult("a", "1", 4, 4, "passed", "", "visible"), CheckResult("b", "2", 3, 0, "pending", "", "visible"),
              CheckResult("c", "2", 2, 0, "pending", "", "visible")]
    result = SubmissionResult("alice", "alice.ipynb", checks)
    assert pending_points_text(result) == "5 points"
    progress = Progress(total=1, skipped=0, jobs=1, quiet=False, bar=False)
    progress.update(result)
    line = capsys.readouterr().err
    assert "alice: 4/9, 5 points pending (" in line, line
    assert "5 of the 9 points are pending" in feedback_markdown(result, "T")
    one = SubmissionResult("bob", "bob.ipynb", checks[:2][:1] + [CheckResult("d", "2", 1, 0, "pending", "", "visible")])
    assert pending_points_text(one) == "1 point"
