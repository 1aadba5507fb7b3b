"""The preflight: the workers' confinement built once, with no student code, before anything is graded."""
from __future__ import annotations

import torch

from autograder.grading.options import GradeOptions, confinement_for
from autograder.release import Release
from autograder.sandbox.isolation import probe


class ConfinementUnavailable(RuntimeError):
    """Student code cannot be confined here (and the submissions are not declared trusted)."""


def preflight(release: Release, options: GradeOptions) -> str:
    """Build the workers' confinement once, with no student code, before anything is graded: returns the
    status line; raises ConfinementUnavailable when it cannot be had."""
    cuda = torch.cuda.is_available() if options.cuda is None else options.cuda
    ok, status = probe(confinement_for(release, options, cuda))
    if not ok:
        raise ConfinementUnavailable(f"cannot confine student code: {status}")
    return status
