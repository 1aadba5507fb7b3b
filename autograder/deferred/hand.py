"""Checks graded by hand as a kind of deferred check: a written answer, a plot, a code cell a teaching assistant
reads (`testing.manual` in a test file; a notebook's nbgrader cell graded by hand).

Hand grades recorded for a submission live in DIR/<submission>/hand.json:

    {"notebook_sha256": "<the graded notebook's sha256>",
     "checks": [{"name": ..., "part": ..., "max_score": ..., "score": ..., "status": "passed|partial|failed",
                 "message": "the grader's comment", "visibility": ...}, ...]}

`autograder grade` merges them into every result it writes while the notebook is the one they were given for;
a student who submits other bytes gets the check pending again, with a note.
"""
from __future__ import annotations

from pathlib import Path

from autograder.deferred.protocol import AdviceContext, DeferredKind, ReadBack
from autograder.deferred.recorded import check_result, decided_from, read_json
from autograder.status import PENDING
from autograder.testing import CheckSpec

HAND_FILE = "hand.json"
OTHER_NOTEBOOK = ("hand grades recorded earlier ({file}) were given for another version of this notebook: those "
                  "checks are pending until they are graded again")


def graded_by_hand(spec: CheckSpec) -> bool:
    """Whether `spec` is a check a person grades (`testing.manual`, a notebook's hand-graded cell)."""
    return getattr(spec.fn, "_ag_manual", None) is not None


class HandGraded(DeferredKind):
    """The kind of a check a person grades: its results are DIR/<submission>/hand.json (written by `autograder review
    --merge`), shown in nbgrader's formgrader as manually graded cells. Its methods implement DeferredKind's
    (protocol.py)."""

    key = "hand"
    results_file = HAND_FILE
    nbgrader_hand_graded = True

    def owns(self, spec: CheckSpec) -> bool:
        return graded_by_hand(spec)

    def why_pending(self, spec: CheckSpec) -> str:
        return f"graded by hand ({getattr(spec.fn, '_ag_manual', '')})"

    def read_back(self, folder: Path, notebook: Path) -> ReadBack:
        recorded = read_json(Path(folder) / HAND_FILE)
        if recorded is None or not isinstance(recorded.get("checks"), list):
            return ReadBack()
        checks = [c for c in map(check_result, recorded["checks"]) if c is not None and c.status != PENDING]
        if checks and not decided_from(recorded, Path(notebook)):
            return ReadBack([], [OTHER_NOTEBOOK.format(file=HAND_FILE)])
        return ReadBack(checks)

    def advice(self, specs: list[CheckSpec], pending: set[str], where: AdviceContext) -> list[str]:
        names = [s.name for s in specs if s.name in pending]
        return [f"pending: {len(names)} check(s) graded by hand: {', '.join(names)}"] if names else []
