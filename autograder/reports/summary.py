"""The class at a glance, for the instructor: for each check, how many submissions lost points on it
and the messages they got most often. A check that almost everybody fails, or that fails with one
odd message, is usually a broken test or an unclear instruction: it shows up here at once.

Writes DIR/summary.md (to read) and DIR/summary.csv (one row per check, to sort or plot).
"""
from __future__ import annotations

import csv
import io
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from autograder.files import write_atomic
from autograder.reports.results import SubmissionResult

TOP_MESSAGES = 3


@dataclass
class CheckSummary:
    name: str
    part: str
    points: float
    graded: int = 0  # submissions with a score on this check (pending and ungraded ones left out)
    full: int = 0
    partial: int = 0
    zero: int = 0
    pending: int = 0
    ungraded: int = 0  # the grader could not decide it (Judge.confirm)
    stub: int = 0  # lost points on a stub the student did not replace
    mean: float = 0.0
    messages: list[tuple[str, int]] = field(default_factory=list)  # most common messages of those who lost points

    @property
    def lost(self) -> int:
        return self.partial + self.zero

    @property
    def flag(self) -> str:
        """A hint that the check, not the students, may be at fault."""
        attempted = self.graded - self.stub
        if attempted >= 5 and self.full == 0:
            return "nobody got full points"
        if attempted >= 5 and self.lost - self.stub >= 0.8 * attempted:
            return f"{self.lost - self.stub} of {attempted} attempts lost points"
        return ""


def message_key(message: str) -> str:
    """Messages grouped by their first line; long ones cut."""
    first = (message.strip().splitlines() or [""])[0].strip()
    return first if len(first) <= 160 else first[:157] + "..."


def summarize(results: list[SubmissionResult]) -> list[CheckSummary]:
    order: dict[str, CheckSummary] = {}
    messages: dict[str, Counter] = {}
    for r in results:
        for c in r.checks:
            s = order.get(c.name)
            if s is None:
                s = order[c.name] = CheckSummary(c.name, c.part, c.max_score)
                messages[c.name] = Counter()
            if c.status == "pending":
                s.pending += 1
                continue
            if c.status == "ungraded":
                s.ungraded += 1
                continue
            if r.error:  # not graded at all: says nothing about the check
                continue
            s.graded += 1
            s.mean += c.score
            if c.status == "passed":
                s.full += 1
                continue
            if c.status == "partial":
                s.partial += 1
            else:
                s.zero += 1
            if c.stub_hit:
                s.stub += 1
            messages[c.name][message_key(c.message) or "(no message)"] += 1
    for name, s in order.items():
        s.mean = round(s.mean / s.graded, 4) if s.graded else 0.0
        s.messages = sorted(messages[name].items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_MESSAGES]
    return list(order.values())


def summary_markdown(results: list[SubmissionResult], title: str = "", extra: list[str] = ()) -> str:
    checks = summarize(results)
    graded = [r for r in results if not r.error]
    ungraded = sorted((r for r in results if r.error), key=lambda r: r.submission)
    max_score = max((r.max_score for r in results), default=0)
    lines = [f"# Class summary{': ' + title if title else ''}", ""]
    lines.append(f"{len(results)} submission(s): {len(graded)} graded, {len(ungraded)} could not be graded.")
    if graded:
        scores = sorted(r.score for r in graded)
        mid = len(scores) // 2
        median = scores[mid] if len(scores) % 2 else (scores[mid - 1] + scores[mid]) / 2
        lines.append(f"Score: mean {sum(scores) / len(scores):.2f}, median {median:g}, "
                     f"full marks {sum(1 for s in scores if s >= max_score)}, zero {sum(1 for s in scores if s == 0)} "
                     f"(out of {max_score:g}).")
    not_final = sorted({c.grader_problem for r in results for c in r.ungraded})
    if not_final:
        lines += ["", f"**Grades not final**: {sum(1 for r in results if r.ungraded)} submission(s) have checks the "
                  "grader could not decide here (shown as ungraded, never as 0). Causes:", ""]
        lines += [f"- {_cell(p)}" for p in not_final]
    confinements = Counter(r.confinement for r in results if r.confinement)
    if len(confinements) > 1:
        lines += ["", "Confinement of the submissions' workers:", ""]
        lines += [f"- {n} x {text}" for text, n in sorted(confinements.items())]
    lines += [*extra, "", "## Checks", "",
              "| check | part | points | mean | full | partial | zero | stub | pending | note |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for s in checks:
        lines.append(f"| {_cell(s.name)} | {_cell(s.part)} | {s.points:g} | {s.mean:.2f} | {s.full} | {s.partial} | "
                     f"{s.zero} | {s.stub} | {s.pending} | {s.flag} |")
    lines += ["", "## Most common messages of submissions that lost points", ""]
    for s in checks:
        if not s.messages:
            continue
        lines.append(f"### {s.name} ({s.lost} lost points)")
        lines.append("")
        for text, n in s.messages:
            lines.append(f"- {n} x `{text.replace('`', chr(39))}`")
        lines.append("")
    if ungraded:
        lines += ["## Could not be graded", ""]
        errors = Counter(message_key(r.error) for r in ungraded)
        for text, n in sorted(errors.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"- {n} x {text}")
        lines.append("")
        lines.append("Submissions: " + ", ".join(r.submission for r in ungraded))
        lines.append("")
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def summary_csv(results: list[SubmissionResult]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    header = ["check", "part", "points", "graded", "mean", "full", "partial", "zero", "stub", "pending", "flag"]
    for i in range(1, TOP_MESSAGES + 1):
        header += [f"message_{i}", f"count_{i}"]
    writer.writerow(header)
    for s in summarize(results):
        row = [s.name, s.part, f"{s.points:g}", s.graded, f"{s.mean:.4f}", s.full, s.partial, s.zero, s.stub,
               s.pending, s.flag]
        for i in range(TOP_MESSAGES):
            row += list(s.messages[i]) if i < len(s.messages) else ["", ""]
        writer.writerow(row)
    return buf.getvalue()


def write_summary(out_dir: Path, results: list[SubmissionResult], title: str = "",
                  extra: list[str] = ()) -> Path:
    path = out_dir / "summary.md"
    write_atomic(path, summary_markdown(results, title, extra))
    write_atomic(out_dir / "summary.csv", summary_csv(results))
    return path
