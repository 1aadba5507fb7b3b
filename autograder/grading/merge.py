"""Merging a deferred check's result (the accuracy rubric's points, a hand grade) into the results of an earlier
`autograder grade` run: what a deferred kind's command does once it has decided a check (autograder.deferred).

Only that check changes: it replaces the check of the same name (pending until now) in
DIR/<submission>/grading.json, results.json and feedback.md are rewritten from it, and in
DIR/grades.csv only that submission's row is recomputed; every other row and every other check's
cell stay byte for byte as they were.
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from autograder.judge import CheckResult
from autograder.files import write_atomic
from autograder.reports.results import SubmissionResult, write_submission
from autograder.reports.table import grades_csv
from autograder.deferred.recorded import put_check

TABLE = "grades.csv"


def load_result(out_dir: Path, sub_id: str) -> SubmissionResult | None:
    """The result written for submission `sub_id` in `out_dir` (its grading.json); None where there is none."""
    path = out_dir / sub_id / "grading.json"
    if not path.is_file():
        return None
    return SubmissionResult.from_dict(json.loads(path.read_text(encoding="utf-8")))


def _title(folder: Path) -> str | None:
    try:
        first = (folder / "feedback.md").read_text(encoding="utf-8").splitlines()[0]
    except (OSError, IndexError):
        return None
    return first[2:].strip() if first.startswith("# ") else None


def merge_check(out_dir: Path, sub_id: str, check: CheckResult, title: str | None = None,
                file: str = "", by: str = "autograder rubric") -> SubmissionResult:
    """Put `check` into the submission's results (replacing the check of the same name) and its row of grades.csv."""
    out_dir = Path(out_dir)
    result = load_result(out_dir, sub_id)
    if result is None:
        result = SubmissionResult(sub_id, file, [], [f"graded by `{by}` only: no earlier results were found"])
    put_check(result.checks, check)
    title = title or _title(out_dir / sub_id) or "Grades"
    write_submission(out_dir, result, title)
    update_table(out_dir, result, check.name)
    return result


def update_table(out_dir: Path, result: SubmissionResult, check_name: str) -> Path:
    """Recompute one submission's row of grades.csv; add the check's column if the table lacks it."""
    path = Path(out_dir) / TABLE
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8")))) if path.is_file() else []
    if not rows:
        names = [c.name for c in result.checks]
        write_atomic(path, grades_csv([result], names))
        return path
    header = rows[0]
    total_at = header.index("total")
    names = header[1:total_at]
    if check_name not in names:  # a new column, empty in every other row
        names.append(check_name)
        header = header[:total_at] + [check_name] + header[total_at:]
        rows = [header] + [r[:total_at] + [""] + r[total_at:] for r in rows[1:]]
    new_row = next(csv.reader(io.StringIO(grades_csv([result], names).splitlines()[1])))
    for i, row in enumerate(rows[1:], start=1):
        if row and row[0] == result.submission:
            rows[i] = new_row
            break
    else:
        rows.append(new_row)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([header] + rows[1:])
    write_atomic(path, buf.getvalue())
    return path


def refresh_summary(out_dir: Path, title: str | None = None) -> Path | None:
    """Rewrite the class summary (summary.md, summary.csv) of an earlier run from the merged results,
    when there is one: it was written while the merged checks were still pending."""
    from autograder.reports.summary import write_summary

    out_dir = Path(out_dir)
    old = out_dir / "summary.md"
    table = out_dir / TABLE
    if not old.is_file() or not table.is_file():
        return None
    lines = old.read_text(encoding="utf-8").splitlines()
    extra = [line for line in lines if line.startswith("Isolation:")]
    if title is None and lines and lines[0].startswith("# Class summary: "):
        title = lines[0][len("# Class summary: "):]
    rows = list(csv.reader(io.StringIO(table.read_text(encoding="utf-8"))))[1:]
    results = [r for r in (load_result(out_dir, row[0]) for row in rows if row) if r is not None]
    return write_summary(out_dir, results, title or "", extra)
