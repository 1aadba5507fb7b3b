"""Grading: submissions in, results out. The public API of this layer is what this module names.

Modules, each one concern (imports go down this list only):
    options.py    GradeOptions: what a run is asked to do; how its workers are confined
    resume.py     which results in --out are still valid (notebook and release fingerprints)
    progress.py   progress on stderr
    preflight.py  the workers' confinement built once before anything is graded
    replay.py     the reference's worker, recording or replaying (data: autograder/recording.py)
    grader.py     Grader: one judge and the reference, one submission at a time
    record.py     recording the reference after a build; build_and_record, resolve_release
    pool.py       grading processes side by side (--jobs N)
    run.py        grade(): a whole run into --out
"""
from autograder.grading.grader import Grader, scrub
from autograder.grading.options import GradeOptions
from autograder.grading.preflight import ConfinementUnavailable, preflight
from autograder.grading.progress import Progress
from autograder.grading.record import build_and_record, record_release, resolve_release
from autograder.grading.run import grade

__all__ = ["ConfinementUnavailable", "GradeOptions", "Grader", "Progress", "build_and_record", "grade", "preflight",
           "record_release", "resolve_release", "scrub"]
