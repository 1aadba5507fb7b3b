"""The status of a check in a result, the only spelling of each: results.json, grading.json, grades tables,
feedback and the class statistics all use these values.

- PASSED / PARTIAL / FAILED: scored (full points, some, none or some).
- PENDING: decided later, elsewhere (by hand: its message starts with MANUAL; or measured on a GPU, the accuracy
  rubric): no score yet, neither failed nor 0.
- UNGRADED: the grader could not decide the check in its environment (the reference does not pass it here):
  no score, never 0; the grade is not final until it is graded again.
"""
from __future__ import annotations

PASSED = "passed"
PARTIAL = "partial"
FAILED = "failed"
PENDING = "pending"
UNGRADED = "ungraded"
UNSCORED = (PENDING, UNGRADED)  # statuses without a score: neither failed nor 0
STATUSES = (PASSED, PARTIAL, FAILED, PENDING, UNGRADED)
MANUAL = "graded by hand"  # how the message of a check graded by hand starts (testing.manual)


def by_hand(status: str, message: str) -> bool:
    """Whether a check's result is pending because a person grades it."""
    return status == PENDING and message.startswith(MANUAL)


def status_of(score: float, points: float) -> str:
    """The status of a scored check: PASSED with every point, PARTIAL with some, FAILED with none. Within a
    billionth of a point is the same (a fraction computed as 1 - 1/3 - 2/3 is 1e-16, no partial credit)."""
    slack = 1e-9 * max(1.0, abs(points))
    return PASSED if score >= points - slack else PARTIAL if score > slack else FAILED


def points_of(fraction: float, points: float) -> float:
    """The score of a fraction of a check's points: all of them exactly (never 0.666667 for a check worth
    0.6666666666666666, which totals above the maximum), none, or the part rounded to 6 places, never above them."""
    if status_of(fraction * points, points) == PASSED:
        return points
    return min(points, max(0.0, round(fraction * points, 6)))
