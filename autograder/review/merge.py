"""Hand grades from the review (review.sqlite) into the results folder: for each submission with a question graded,
DIR/<submission>/hand.json (the hand kind's record: autograder.deferred.hand, so any later `autograder grade`
keeps it), then grading.json, results.json and feedback.md rewritten with the grades and comments, grades.csv and the
summary rewritten once, and the HTML reports where `autograder report` made them. A question not graded stays
pending; a submission stays pending until every deferred check of it is decided.
"""
from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

from autograder.deferred import put_check
from autograder.deferred.hand import HAND_FILE
from autograder.files import write_atomic
from autograder.grading import refresh_summary
from autograder.judge import CheckResult
from autograder.reports.results import SubmissionResult, write_submission
from autograder.reports.table import write_grades
from autograder.review.store import Grade, Store
from autograder.status import MANUAL, status_of


def comment_text(store: Store, grade: Grade, points: float) -> str:
    """What the student reads: the score, each applied item with its comment, the grader's own comment."""
    lines = [f"{MANUAL}: {grade.score:g} / {points:g}"]
    items = {i.id: i for i in store.items(grade.question)}
    for item_id in grade.applied:
        item = items[item_id]
        lines.append(f"- {item.title} ({item.points:+g})" + (f": {item.comment}" if item.comment else ""))
    if grade.override is not None:
        lines.append(f"- score set by the grader: {grade.override:g}")
    if grade.comment:
        lines.append(grade.comment)
    return "\n".join(lines)


def hand_checks(store: Store, grades: list[Grade], old: dict[str, CheckResult]) -> list[CheckResult]:
    """The checks of one submission's graded answers (`grades`: its grades, every question's)."""
    checks = []
    points = {q.name: q for q in store.questions()}
    for grade in grades:
        q = points[grade.question]
        if not grade.graded:
            continue
        before = old.get(q.name)
        checks.append(CheckResult(q.name, before.part if before else q.part, q.points, grade.score,
                                  status_of(grade.score, q.points), comment_text(store, grade, q.points),
                                  before.visibility if before else "visible"))
    return checks


def _table_names(out_dir: Path, results: list[SubmissionResult]) -> list[str]:
    path = out_dir / "grades.csv"
    if path.is_file():
        header = next(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))), [])
        if "total" in header:
            return header[1:header.index("total")]
    return [c.name for c in results[0].checks] if results else []


def merge_hand_grades(store: Store, out_dir: Path, title: str) -> int:
    """Write every graded answer into the results folder; returns how many submissions changed. Every result of
    the folder stays in grades.csv, graded by hand or not."""
    from autograder.reports.html import load_results

    out_dir = Path(out_dir)
    known = {sub["id"]: sub for sub in store.submissions()}
    by_submission: dict[str, list[Grade]] = {}
    for grade in store.grades():
        by_submission.setdefault(grade.submission, []).append(grade)
    results = load_results(out_dir)
    changed, merged = 0, []
    for result in results:
        sub = known.get(result.submission)
        checks = hand_checks(store, by_submission.get(sub["id"], []), {c.name: c for c in result.checks}) \
            if sub else []
        if not checks:
            continue
        record = {"notebook_sha256": sub["notebook_sha256"], "checks": [c.to_dict() for c in checks]}
        write_atomic(out_dir / result.submission / HAND_FILE, json.dumps(record, indent=1, sort_keys=True))
        for check in checks:
            put_check(result.checks, check)
        write_submission(out_dir, result, title)
        merged.append((result, checks))
        changed += 1
    if merged:
        _into_gradebooks(store, merged)
    if results:
        write_grades(out_dir, results, _table_names(out_dir, results))
        refresh_summary(out_dir, title)
        _refresh_html(out_dir, title, results)
    return changed


def _into_gradebooks(store: Store, merged: list[tuple[SubmissionResult, list[CheckResult]]]) -> None:
    """Notebooks from an nbgrader course's submitted/ tree (submitted/<student>/<assignment>/<notebook>): their hand
    grades go into the course's gradebook too, as formgrader's manual scores."""
    from autograder.export.gradebook import course_of, scores_into_gradebook

    courses: dict[tuple[Path, str], dict[str, list[CheckResult]]] = {}
    for result, checks in merged:
        course = course_of([result.file])
        if course is not None:
            notebook = Path(result.file)
            courses.setdefault((course, notebook.name), {})[notebook.parent.parent.name] = checks
    for (course, notebook), by_student in courses.items():
        for line in scores_into_gradebook(course, store.meta("assignment"), notebook, by_student, by_hand=True):
            print(f"gradebook of {course}: {line}", file=sys.stderr)


def _refresh_html(out_dir: Path, title: str, results: list[SubmissionResult]) -> None:
    if (out_dir / "class-report.html").is_file():
        from autograder.reports.html import write_reports

        write_reports(out_dir, title, results)
