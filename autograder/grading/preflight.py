"""The preflight: the workers' confinement chosen once, with no student code, before anything is graded.

It climbs down the confinement ladder (sandbox/ladder.py) and stops at the first level this machine builds;
the status line it returns names the level, and every worker of the run is confined at that level
(grading/options.py `confinement_for`). Where no allowed level can be built nothing is graded.
"""
from __future__ import annotations

import sys

import torch

from autograder.grading.options import GradeOptions, confinement_for
from autograder.release import Release
from autograder.sandbox import ConfinementUnavailable, choose, describe_choice

__all__ = ["ConfinementUnavailable", "preflight"]
_said: set[str] = set()


def preflight(release: Release, options: GradeOptions) -> str:
    """The status line of the strongest confinement the run may use here; raises ConfinementUnavailable (its
    message: what failed and the platform's remedy) when there is none."""
    cuda = torch.cuda.is_available() if options.cuda is None else options.cuda
    choice = choose(confinement_for(release, options, cuda), options.trusted)
    line = describe_choice(choice)
    if choice.weaker and not options.quiet and line not in _said:
        _said.add(line)  # a rebuild's recording and the grading after it: said once
        print(line, file=sys.stderr, flush=True)
    return choice.status
