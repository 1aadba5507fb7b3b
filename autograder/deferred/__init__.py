"""Deferred checks: checks `autograder grade` reports pending and something else decides later. The protocol
(protocol.py: `DeferredKind`), the one merge of recorded results (recorded.py), and the registered kinds:

| kind | its checks | decided by | recorded in DIR/<submission>/ |
|---|---|---|---|
| `rubric` (accuracy/) | `rubric_check(...)` in a test file | `autograder rubric`, on a GPU | rubric.json |
| `hand` (hand.py) | `manual(...)`, a notebook's hand-graded cell | a person | hand.json |

Everything above the checks layer goes through the functions below and never names a kind. Add a kind: a module
or package here with a `DeferredKind` subclass, one entry in KINDS, and the command that records its results.
"""
from __future__ import annotations

from pathlib import Path

from autograder.deferred.accuracy import AccuracyRubric
from autograder.deferred.hand import HandGraded, graded_by_hand
from autograder.deferred.protocol import AdviceContext, DeferredKind, ReadBack
from autograder.deferred.recorded import put_check
from autograder.judge import CheckResult
from autograder.testing import CheckSpec

__all__ = ["KINDS", "AdviceContext", "DeferredKind", "ReadBack", "advice", "graded_by_hand", "kind_of", "merge_into", "put_check",
           "read_back", "results_files", "student_notes", "why_pending"]

KINDS: tuple[DeferredKind, ...] = (AccuracyRubric(), HandGraded())


def kind_of(spec: CheckSpec) -> DeferredKind | None:
    """The kind that decides `spec` later; None for a check `autograder grade` decides."""
    return next((kind for kind in KINDS if kind.owns(spec)), None)


def why_pending(spec: CheckSpec) -> str | None:
    """Why no platform's autograder scores `spec` (None: one does)."""
    kind = kind_of(spec)
    return kind.why_pending(spec) if kind else None


def results_files() -> tuple[str, ...]:
    """The files the kinds record in a result's folder."""
    return tuple(kind.results_file for kind in KINDS if kind.results_file)


def read_back(folder: Path, notebook: Path, names: set[str] | None = None) -> ReadBack:
    """Every kind's recorded results for the submission in `folder` that are final (a check still pending there
    stays as grading leaves it), only checks in `names` when given."""
    merged = ReadBack()
    for kind in KINDS:
        found = kind.read_back(Path(folder), Path(notebook))
        merged.checks += [c for c in found.checks if kind.is_final(c) and (names is None or c.name in names)]
        merged.notes += [n for n in found.notes if n not in merged.notes]
    return merged


def merge_into(checks: list[CheckResult], found: ReadBack) -> None:
    """Put every result of `found` in place of the pending check of the same name."""
    for check in found.checks:
        put_check(checks, check)


def advice(specs: list[CheckSpec], pending: set[str], where: AdviceContext) -> tuple[list[str], set[str]]:
    """(lines for the instructor about the kinds' pending checks, the pending names no kind owns)."""
    lines: list[str] = []
    left = set(pending)
    for kind in KINDS:
        own = [s for s in specs if kind.owns(s)]
        lines += kind.advice(own, pending, where)
        left -= {s.name for s in own}
    return lines, left


def student_notes(specs: list[CheckSpec], notebook: Path) -> dict[str, str]:
    """What students are told when they submit, by check name, from every kind."""
    notes: dict[str, str] = {}
    for kind in KINDS:
        notes.update(kind.student_notes([s for s in specs if kind.owns(s)], Path(notebook)))
    return notes
