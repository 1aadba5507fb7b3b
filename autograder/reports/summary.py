"""The class at a glance, for the instructor: for each check, how many submissions lost points on it
and the messages they got most often. A check that almost everybody fails, or that fails with one
odd message, is usually a broken test or an unclear instruction: it shows up here at once.

Writes DIR/summary.md (to read) and DIR/summary.csv (one row per check, to sort or plot). Every
figure comes from reports/class_statistics.py (which submissions count is defined there), so the
HTML class report shows the same ones. A submission whose grade is not final (checks the grader could
not decide) is in no class figure; the summary says how many were left out, and why.
"""
from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from autograder.files import write_atomic
from autograder.reports.class_statistics import (
    TOP_MESSAGES,
    class_statistics,
    error_results,
    format_mean,
    format_score,
    message_key,
    most_common,
)
from autograder.reports.results import SubmissionResult, plain


def summary_markdown(results: list[SubmissionResult], title: str = "", extra: Sequence[str] = ()) -> str:
    """summary.md: the class's counts and score figures, why some grades are not final, a row per check and the most
    common messages of those who lost points, then the submissions that could not be graded. `extra` lines go before
    the checks."""
    stats = class_statistics(results)
    lines = [f"# Class summary{': ' + title if title else ''}", "", stats.counts_sentence()]
    if stats.graded:
        lines.append(f"Score: mean {format_mean(stats.mean)}, median {format_score(stats.median)}, "
                     f"min {format_score(stats.minimum)}, max {format_score(stats.maximum)}, "
                     f"full marks {stats.full_marks}, zero {stats.zero} (out of {format_score(stats.max_score)}).")
    lines += _not_final_markdown(results)
    confinements = Counter(r.confinement for r in results if r.confinement)
    if len(confinements) > 1:
        lines += ["", "Confinement of the submissions' workers:", ""]
        lines += [f"- {n} x {text}" for text, n in sorted(confinements.items())]
    lines += [*extra, "", "## Checks", "",
              "| check | part | points | mean | passed | partial | failed | stub | pending | ungraded | note |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for s in stats.checks:
        lines.append(f"| {_cell(s.name)} | {_cell(s.part)} | {format_score(s.points)} | {format_mean(s.mean)} | "
                     f"{s.passed} | {s.partial} | {s.failed} | {s.stub} | {s.pending} | {s.ungraded} | {s.flag} |")
    lines += ["", "## Most common messages of submissions that lost points", ""]
    for s in stats.checks:
        if not s.messages:
            continue
        lines.append(f"### {s.name} ({s.lost} submission(s) lost points)")
        lines.append("")
        for text, n in s.messages:
            lines.append(f"- {n} x `{text.replace('`', chr(39))}`")
        lines.append("")
    lines += _errors_markdown(error_results(results))
    return "\n".join(lines)


def _not_final_markdown(results: list[SubmissionResult]) -> list[str]:
    """Why some grades are not final, and that their totals are in no class figure."""
    causes = sorted({c.grader_problem for r in results for c in r.ungraded})
    if not causes:
        return []
    affected = sum(1 for r in results if r.ungraded)
    return ["", f"**Grades not final**: {affected} submission(s) have checks the grader could not decide here "
            "(shown as ungraded, never as 0). Their total in grades.csv is empty and they are left out of the "
            "class figures above. Causes:", "", *(f"- {_cell(p)}" for p in causes)]


def _errors_markdown(errors: list[SubmissionResult]) -> list[str]:
    if not errors:
        return []
    lines = ["## Could not be graded", ""]
    for text, n in most_common(Counter(message_key(r.error) for r in errors)):
        lines.append(f"- {n} x {plain(text)}")
    return [*lines, "", "Submissions: " + ", ".join(r.submission for r in errors), ""]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def summary_csv(results: list[SubmissionResult]) -> str:
    """summary.csv: one row per check with its counts, mean (4 decimals) and its TOP_MESSAGES most common messages."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    header = ["check", "part", "points", "scored", "mean", "passed", "partial", "failed", "stub", "pending",
              "ungraded", "flag"]
    for i in range(1, TOP_MESSAGES + 1):
        header += [f"message_{i}", f"count_{i}"]
    writer.writerow(header)
    for s in class_statistics(results).checks:
        mean = "" if s.mean is None else f"{s.mean:.4f}"  # more digits than summary.md: for sorting and plots
        row = [s.name, s.part, format_score(s.points), s.scored, mean, s.passed, s.partial, s.failed, s.stub,
               s.pending, s.ungraded, s.flag]
        for i in range(TOP_MESSAGES):
            row += list(s.messages[i]) if i < len(s.messages) else ["", ""]
        writer.writerow(row)
    return buf.getvalue()


def write_summary(out_dir: Path, results: list[SubmissionResult], title: str = "",
                  extra: Sequence[str] = ()) -> Path:
    """Write DIR/summary.md and DIR/summary.csv atomically; returns summary.md's path."""
    path = out_dir / "summary.md"
    write_atomic(path, summary_markdown(results, title, extra))
    write_atomic(out_dir / "summary.csv", summary_csv(results))
    return path
