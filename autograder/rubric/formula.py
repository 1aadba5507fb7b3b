"""The accuracy rubric's scoring formula."""
from __future__ import annotations

import math

from autograder.status import points_of


def rubric_points(accuracy: float, points: float = 8.0, floor: float = 0.50, full: float = 0.90) -> float:
    """points x clamp((accuracy - floor) / (full - floor), 0, 1).

    With the defaults (the Transformers & BERT assignment, part 7): 0 points at or below 50% validation
    accuracy (a coin flip), full points from 90%, linear in between (70% gives half).
    """
    if not full > floor:
        raise ValueError("the full-points accuracy must be above the floor")
    if accuracy is None or not math.isfinite(accuracy):
        return 0.0
    fraction = min(1.0, max(0.0, (accuracy - floor) / (full - floor)))
    return points_of(fraction, points)
