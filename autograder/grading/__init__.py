"""Grading: submissions in, results out. The public API of this layer is what this module names.

Modules, each one concern (imports go down this list only):
    options.py    GradeOptions: what a run is asked to do; how its workers are confined
    resume.py     which results in --out are still valid (notebook and release fingerprints)
    progress.py   progress on stderr
    preflight.py  the workers' confinement built once before anything is graded
    replay.py     the reference's worker, recording or replaying (data: autograder/recording.py)
    grader.py     Grader: one judge and the reference, one submission at a time
    record_reference.py  recording the reference after a build; build_and_record, resolve_release (a release
                  rebuilt when stale, recorded again)
    pool.py       grading processes side by side (--jobs N)
    run.py        grade(): a whole run into --out
    merge.py      a check decided later (hand grades, the rubric) into an earlier run's results and tables
    outdir.py     claim(): one command at a time in a results folder

Everything outside grading/ imports it through this module (tests/test_layers.py checks), except the process
map (entrypoints.py starts a grading process in pool.serve) and rubric/cluster.py (the rubric's GPU work on
grading's Ray scheduling, grading/cluster.py).
"""
from autograder.grading.cluster import ClusterUnavailable
from autograder.grading.grader import Grader, scrub
from autograder.grading.merge import merge_check, refresh_summary
from autograder.grading.options import GradeOptions
from autograder.grading.outdir import claim
from autograder.grading.preflight import ConfinementUnavailable, preflight
from autograder.grading.progress import Progress
from autograder.grading.record_reference import build_and_record, record_release, resolve_release
from autograder.grading.run import grade

__all__ = ["ClusterUnavailable", "ConfinementUnavailable", "GradeOptions", "Grader", "Progress", "build_and_record",
           "claim", "grade", "merge_check", "preflight", "record_release", "refresh_summary", "resolve_release", "scrub"]
