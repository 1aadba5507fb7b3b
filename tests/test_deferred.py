"""Deferred checks as one protocol (autograder.deferred): grading, resuming, the grade command and the exports go
through the registered kinds and name none; a kind's recorded results survive a regrade while they were decided from
the bytes being graded."""
from __future__ import annotations

import ast
import csv
import json
from pathlib import Path

import pytest

import autograder.deferred as deferred
from autograder.deferred import AdviceContext, DeferredKind, ReadBack
from autograder.deferred.hand import HAND_FILE
from autograder.deferred.recorded import file_digest
from autograder.grading import GradeOptions, grade
from autograder.judge import CheckResult

PACKAGE = Path(deferred.__file__).resolve().parent.parent


def _modules_importing(prefix: str) -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "deferred" in path.relative_to(PACKAGE).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if any(n.startswith(prefix) for n in names):
                found.append(str(path.relative_to(PACKAGE)))
    return found


def test_only_a_kinds_own_command_imports_the_kind():
    """Grading, resume, the grade command, the exports and the build use the face (autograder.deferred) only; the
    rubric's measuring (rubric/) and the review page (review/) are the kinds' commands."""
    users = _modules_importing("autograder.deferred.accuracy") + _modules_importing("autograder.deferred.hand")
    assert users and all(m.startswith(("rubric/", "review/")) for m in users), users


def test_every_kind_records_in_a_file_that_marks_a_result_folder():
    from autograder.grading.resume import result_files

    assert {k.results_file for k in deferred.KINDS} <= set(result_files())
    assert len({k.key for k in deferred.KINDS}) == len(deferred.KINDS)


def _hand_grade(folder: Path, notebook: Path, score: float, comment: str) -> None:
    check = CheckResult("q_softmax", "", 2.0, score, "passed" if score == 2 else "partial", comment, "visible")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / HAND_FILE).write_text(json.dumps({"notebook_sha256": file_digest(notebook),
                                                "checks": [check.__dict__]}), encoding="utf-8")


def _row(out: Path, name: str) -> dict:
    with open(out / "grades.csv", encoding="utf-8") as f:
        return next(r for r in csv.DictReader(f) if r["submission"] == name)


def test_a_hand_grade_recorded_for_the_notebook_is_merged_and_survives_a_regrade(example_release, submission, tmp_path):
    sub = submission("alice.ipynb")
    out = tmp_path / "out"
    [first] = grade(example_release, [sub], GradeOptions(out, quiet=True))
    assert {c.name: c.status for c in first.checks}["q_softmax"] == "pending"
    _hand_grade(out / "alice", sub, 1.5, "right idea; the max subtraction is missing")
    [again] = grade(example_release, [sub], GradeOptions(out, quiet=True, regrade=True))
    q = {c.name: c for c in again.checks}["q_softmax"]
    assert (q.status, q.score, q.message) == ("partial", 1.5, "right idea; the max subtraction is missing")
    assert q.part == {c.name: c for c in first.checks}["q_softmax"].part  # merged in place, its part kept
    assert again.score == first.score + 1.5 and not again.pending
    assert float(_row(out, "alice")["q_softmax"]) == 1.5
    shown = json.loads((out / "alice" / "results.json").read_text(encoding="utf-8"))
    assert any(t["name"] == "q_softmax" and t["score"] == 1.5 for t in shown["tests"])


def test_a_hand_grade_for_other_bytes_leaves_the_check_pending_and_says_so(example_release, submission, tmp_path):
    sub = submission("bob.ipynb")
    out = tmp_path / "out"
    _hand_grade(out / "bob", tmp_path / "another.ipynb", 2.0, "fine")  # no such file: no digest matches
    (tmp_path / "another.ipynb").write_text("{}", encoding="utf-8")
    _hand_grade(out / "bob", tmp_path / "another.ipynb", 2.0, "fine")
    [result] = grade(example_release, [sub], GradeOptions(out, quiet=True))
    assert {c.name: c.status for c in result.checks}["q_softmax"] == "pending"
    assert any("another version of this notebook" in n for n in result.notes)


LATER = "tiny layer: forward with given weights"


class _Later(DeferredKind):
    """A third kind, registered by the test alone: a check decided on other hardware, recorded in later.json."""

    key = "later"
    results_file = "later.json"

    def owns(self, spec):
        return spec.name == LATER

    def why_pending(self, spec):
        return "measured later, elsewhere"

    def read_back(self, folder, notebook):
        data = json.loads((folder / self.results_file).read_text()) if (folder / self.results_file).exists() else {}
        return ReadBack([CheckResult(**c) for c in data.get("checks", [])], data.get("notes", []))

    def advice(self, specs, pending, where: AdviceContext):
        return [f"pending: {', '.join(s.name for s in specs if s.name in pending)} later, for {where.out}"]


@pytest.fixture
def third_kind(monkeypatch):
    kind = _Later()
    monkeypatch.setattr(deferred, "KINDS", (*deferred.KINDS, kind))
    return kind


def test_a_third_kind_needs_no_change_outside_its_module(third_kind, example_release, submission, tmp_path):
    from autograder.commands.grade import pending_advice
    from autograder.export.gradescope import pending_on_gradescope

    assert (LATER, 2.0, "measured later, elsewhere") in pending_on_gradescope(example_release)
    sub = submission("carol.ipynb")
    out = tmp_path / "out"
    (out / "carol").mkdir(parents=True)
    check = CheckResult(LATER, "", 2.0, 0.5, "partial", "measured: 25%", "visible")
    (out / "carol" / "later.json").write_text(json.dumps({"checks": [check.__dict__], "notes": ["measured on B"]}))
    [result] = grade(example_release, [sub], GradeOptions(out, quiet=True))
    got = {c.name: c for c in result.checks}[LATER]
    assert (got.score, got.message) == (0.5, "measured: 25%") and "measured on B" in result.notes
    pending = type("R", (), {"checks": [CheckResult(LATER, "", 2, 0, "pending", "", "visible")]})()
    assert f"pending: {LATER} later, for out" in pending_advice(example_release, [pending], ["subs"], "out")
