"""Per-submission results: Gradescope's results.json and a feedback file a student reads."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from autograder.files import write_atomic
from autograder.judge import CheckResult
from autograder.sandbox import level_of
from autograder.status import FAILED, PARTIAL, PASSED, PENDING, UNGRADED, UNSCORED


@dataclass
class SubmissionResult:
    """One submission's result, as DIR/<id>/grading.json holds it: every check (error rows too: then with placeholder
    checks, see reports/class_statistics.py), what the student is told beyond them, and how its worker was confined.
    Every other file of the folder is derived from it (`derived_files`)."""

    submission: str  # id: the file name, made safe for a folder name
    file: str  # the notebook's path as given
    checks: list[CheckResult]
    notes: list[str] = field(default_factory=list)  # what the student should know beyond the checks
    error: str = ""  # set when the notebook could not be graded at all
    execution_time: float = 0.0
    confinement: str = ""  # how its worker was confined (the worker's status line)
    memory: str = ""  # what held its worker's memory: a memory cgroup of its own, or the monitor and RLIMIT_AS

    @property
    def score(self) -> float:
        """The points of the decided checks (pending and ungraded ones are not in it), rounded to 6 places."""
        return round(sum(c.score for c in self.checks if c.status not in UNSCORED), 6)

    @property
    def max_score(self) -> float:
        """The assignment's total: every check's points, pending ones too, rounded to 6 places."""
        return round(sum(c.max_score for c in self.checks), 6)

    @property
    def pending(self) -> list[CheckResult]:
        """Checks decided later (graded by hand, the accuracy rubric): no score yet, never 0."""
        return [c for c in self.checks if c.status == PENDING]

    @property
    def ungraded(self) -> list[CheckResult]:
        """Checks the grader could not decide in its environment (Judge.confirm): this grade is not final."""
        return [c for c in self.checks if c.status == UNGRADED]

    @property
    def pending_points(self) -> float:
        """The points of the pending checks (graded by hand, or measured on a GPU): what `pending` means wherever a
        number of pending things is shown (grades.csv's column, feedback, the progress line, verify)."""
        return round(sum(c.max_score for c in self.pending), 6)

    def not_final_note(self) -> str:
        """Why this grade is not final, in words a student reads; empty when every check was decided."""
        if not self.ungraded:
            return ""
        return (f"This grade is NOT FINAL: {len(self.ungraded)} check(s) worth {sum(c.max_score for c in self.ungraded):g} "
                f"points could not be graded because of a problem of the grader's setup (not of this notebook): "
                f"{self.ungraded[0].grader_problem}. The instructor will grade them again.")

    def to_dict(self) -> dict:
        """The result as grading.json holds it (its score and total computed, for readers of the file)."""
        return {"submission": self.submission, "file": self.file, "score": self.score, "max_score": self.max_score,
                "error": self.error, "notes": self.notes, "execution_time": self.execution_time,
                "confinement": self.confinement, "memory": self.memory, "checks": [c.to_dict() for c in self.checks]}

    @classmethod
    def from_dict(cls, data: dict) -> "SubmissionResult":
        """A result read back from grading.json (`score` and `max_score` are computed from its checks, not read)."""
        checks = [CheckResult(**c) for c in data["checks"]]
        return cls(data["submission"], data["file"], checks, data.get("notes", []), data.get("error", ""),
                   data.get("execution_time", 0.0), data.get("confinement", ""), data.get("memory", ""))


def gradescope_json(result: SubmissionResult) -> dict:
    """Gradescope's autograder results format (score, execution_time, output, tests[]).

    Outputs are Markdown (`output_format` and `test_output_format` "md": messages name code in backticks), with
    whatever came from a submission made inert by `plain`. The output's score is what Gradescope shows: the
    autograder's points, of the autograded total (the assignment's total less the pending points, which the
    instructor sets as Gradescope's Autograder points, autograder/export/gradescope.py); what is pending is named."""
    tests = []
    for number, c in enumerate(result.checks, start=1):
        test = {"name": c.name, "number": str(number), "max_score": c.max_score, "visibility": c.visibility,
                "output": _markdown(c.message), "extra_data": {"part": c.part, "status": c.status}}
        if c.status == PENDING:
            # no score yet: neither failed nor 0 (said once, whatever the message starts with)
            said = c.message if c.message.lower().startswith("pending") else f"Pending: {c.message}"
            test["output"] = _markdown(said)
        elif c.status == UNGRADED:
            test["output"] = _markdown("NOT GRADED: " + c.message)  # the grader's problem: no score, never 0
        else:
            test["score"] = c.score
            test["status"] = "passed" if c.status == PASSED else "failed"  # Gradescope's two values
        if c.part:
            test["tags"] = [c.part]
        tests.append(test)
    summary = [result.not_final_note()] if result.ungraded else []
    summary += score_lines(result)
    if result.error:
        summary.append(result.error)
    summary += result.notes
    return {"score": result.score, "execution_time": round(result.execution_time, 3),
            "output": "\n\n".join(_markdown(line) for line in summary), "output_format": "md",
            "test_output_format": "md", "visibility": "visible", "stdout_visibility": "hidden", "tests": tests,
            "extra_data": {"submission": result.submission, "pending_points": result.pending_points,
                           "final": not result.ungraded, "confinement": result.confinement,
                           "confinement_level": level_of(result.confinement) if result.confinement else "",
                           "memory": result.memory,
                           "grader_problems": sorted({c.grader_problem for c in result.ungraded})}}


def score_lines(result: SubmissionResult) -> list[str]:
    """The score as Gradescope shows it (the autograded points, pending ones left out) and, when some are
    pending, which checks they are and that they are not lost."""
    if not result.pending:
        return [f"Score: {result.score:g} / {result.max_score:g}"]
    autograded = round(result.max_score - result.pending_points, 6)
    hidden = sum(c.max_score for c in result.pending if c.visibility == "hidden")  # counted, never named
    named = ", ".join([f"{c.name} ({c.max_score:g})" for c in result.pending if c.visibility != "hidden"]
                      + ([f"hidden checks ({hidden:g})"] if hidden else []))
    return [f"Score: {result.score:g} / {autograded:g} (the autograded points; the assignment's total is "
            f"{result.max_score:g})",
            f"Pending: {pending_points_text(result)} ({len(result.pending)} check(s): {named}) are not graded yet; "
            "they will be added to this score later and are not lost."]


def _markdown(text: str) -> str:
    """Text as Gradescope's Markdown shows it: inert (`plain`), each line break kept (a hard break)."""
    return plain(text).replace("\n", "  \n")


def pending_points_text(result: SubmissionResult) -> str:
    """`5 points pending`'s first words: the pending points, as every count of pending things says them."""
    points = result.pending_points
    return f"{points:g} point{'' if points == 1 else 's'}"


def by_part(checks: list[CheckResult]) -> dict[str, list[CheckResult]]:
    """Checks grouped by part, parts in the notebook's order: by the number a part's name starts with ("2. MHA",
    "Part 3", "Question 4"), then as they first appear. (Checks list the notebook's test cells before the hidden
    test files', so a part graded only by test files would otherwise come last.)"""
    parts: dict[str, list[CheckResult]] = {}
    for c in checks:
        parts.setdefault(c.part or "Checks", []).append(c)

    def number(item: tuple[int, str]) -> tuple[float, int]:
        found = re.match(r"\D{0,12}?(\d+)", item[1])
        return (int(found.group(1)) if found else float("inf"), item[0])

    return {name: parts[name] for _, name in sorted(enumerate(parts), key=number)}


_BLOCK_START = re.compile(r"^(\s*)([#>+\-*=|~`]|\d+[.)])")
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")  # where markdown would read HTML or an autolink: `<module>`, `<img`
_ENTITY = re.compile(r"&(?=#?\w+;)")  # where it would read a character reference: `&lt;`, `&#60;`


def plain(text: str) -> str:
    """Text from a submission (a message, a file name) as markdown that shows it as written and makes nothing of
    it: no heading, quote, list or code fence a line could start, no HTML, no link or image. Escapes are markdown's
    backslashes, only where markdown would read something (`\\<module>`, `\\[x]`), never HTML's entities: a
    renderer shows the text as written, and the file read as text is the text (`a < b`, `&` as they are)."""
    text = text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]").replace("*", "\\*")
    text = _ENTITY.sub(r"\\&", _TAG_START.sub(r"\\<", text))
    return "\n".join(_BLOCK_START.sub(lambda m: m.group(1) + "\\" + m.group(2), line) for line in text.split("\n"))


def feedback_markdown(result: SubmissionResult, title: str) -> str:
    """What a student reads: score per part, each check with its message. Hidden checks are left out."""
    headline = f"**Score: {result.score:g} / {result.max_score:g}**"
    if result.pending:  # not lost: to be measured (the accuracy rubric on a GPU)
        headline += f" ({sum(c.max_score for c in result.pending):g} of the {result.max_score:g} points are pending, added later)"
    lines = [f"# {title}", "", headline, ""]
    if result.ungraded:
        lines += [f"> {plain(result.not_final_note())}", ""]
    if result.error:
        lines += ["> " + plain(result.error).replace("\n", "\n> "), ""]
    for note in result.notes:
        lines.append(f"- {plain(note)}")
    if result.notes:
        lines.append("")
    for part, checks in by_part(result.checks).items():
        shown = [c for c in checks if c.visibility != "hidden"]
        if not shown:
            continue
        lines += [f"## {part}: {part_score(checks)}", ""]
        for c in shown:
            mark = {PASSED: "PASS", PARTIAL: "PART", FAILED: "FAIL", PENDING: "PENDING",
                    UNGRADED: "NOT GRADED"}[c.status]
            score = c.status if c.status in UNSCORED else f"{c.score:g}/{c.max_score:g}"
            lines.append(f"- [{mark}] {c.name} ({score})")
            for msg_line in plain(c.message).splitlines():
                lines.append(f"    {msg_line}")
        lines.append("")
    return "\n".join(lines)


def part_score(checks: list[CheckResult]) -> str:
    """A part's score as a student reads it: "3 / 5", "3 / 5 (2 pending)", or "2 points, pending" when none of its
    points is decided yet (never "0 / 2" for a written answer nobody has graded)."""
    total = sum(c.max_score for c in checks)
    pending = sum(c.max_score for c in checks if c.status == PENDING)
    if checks and all(c.status == PENDING for c in checks):
        return f"{total:g} point(s), pending"
    got = sum(c.score for c in checks if c.status not in UNSCORED)
    return f"{got:g} / {total:g}" + (f" ({pending:g} pending)" if pending else "")


RECORD = "grading.json"  # DIR/<id>/grading.json: the result itself; every other file of the folder is derived from it


def derived_files(result: SubmissionResult, title: str) -> dict[str, str]:
    """The files of a result's folder made from its record, by name (results.json last: it is what says the result
    is complete, grading/outdir.py results_in)."""
    return {"feedback.md": feedback_markdown(result, title),
            "results.json": json.dumps(gradescope_json(result), indent=1, sort_keys=True)}


def write_submission(out_dir: Path, result: SubmissionResult, title: str) -> Path:
    """Write a result's folder DIR/<id>/: feedback.md, grading.json, then results.json (last: it says the folder is
    complete), each atomically; returns the folder."""
    folder = out_dir / result.submission
    derived = derived_files(result, title)
    write_atomic(folder / "feedback.md", derived.pop("feedback.md"))
    write_atomic(folder / RECORD, json.dumps(result.to_dict(), indent=1, sort_keys=True))
    for name, text in derived.items():
        write_atomic(folder / name, text)
    return folder
