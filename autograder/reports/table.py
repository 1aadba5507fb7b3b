"""The instructor's grade table: one row per submission, one column per check, and the total.

The `total` column holds final grades only: a row with checks the grader could not decide (ungraded: a problem
of the grader, not of the notebook) has an empty total, and its `error` cell says why, so that uploading the
column never uploads a grade that is too low. Its per-check cells stay, the ungraded ones reading `ungraded`.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

from autograder.status import UNSCORED
from autograder.files import write_atomic
from autograder.reports.results import SubmissionResult


def grades_csv(results: list[SubmissionResult], check_names: list[str]) -> str:
    """grades.csv: a row per submission in id order, a column per check of `check_names` (empty when the submission
    has no such check), then total (empty when not final), max, pending points and error."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["submission", *check_names, "total", "max", "pending", "error"])
    for r in sorted(results, key=lambda r: r.submission):
        by_name = {c.name: c for c in r.checks}
        cells = []
        for name in check_names:
            c = by_name.get(name)
            cells.append("" if c is None else c.status if c.status in UNSCORED else f"{c.score:g}")
        error = r.error or (f"not final: {len(r.ungraded)} check(s) ungraded (grader problem)" if r.ungraded else "")
        total = "" if r.ungraded else f"{r.score:g}"
        writer.writerow([r.submission, *cells, total, f"{r.max_score:g}",
                         f"{sum(c.max_score for c in r.pending):g}", as_text(error)])
    return buf.getvalue()


def as_text(cell: str) -> str:
    """A cell a spreadsheet shows as the text it is: one beginning with =, +, -, @ (a file name in an error, say
    "=HYPERLINK(...).ipynb is not a notebook") would be read as a formula; a quote in front makes it text."""
    return "'" + cell if cell[:1] in ("=", "+", "-", "@", "\t", "\r") else cell


def write_grades(out_dir: Path, results: list[SubmissionResult], check_names: list[str]) -> Path:
    """Write DIR/grades.csv atomically; returns its path."""
    path = out_dir / "grades.csv"
    write_atomic(path, grades_csv(results, check_names))
    return path
