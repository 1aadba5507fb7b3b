"""The accuracy rubric: grade a student's saved classifier by the validation accuracy the grader
measures itself (Transformers & BERT, part 7; BERT from the inside, part 8). See docs/rubric.md.

    points = points x clamp((accuracy - floor) / (full - floor), 0, 1)

What the saved checkpoint is (the student's class around a frozen encoder, or a fine-tuned library classifier)
is the assignment's `kind` (autograder.deferred.accuracy.checkpoints).

- `rubric_points`: the formula.
- `rubric_check`: the check an assignment's hidden tests declare; `autograder grade` reports it pending. It and the
  assignment's settings (`RubricConfig`) are the deferred kind `rubric` (autograder.deferred.accuracy), in the
  checks layer; this package measures (a service) and hands them on for test files.
- `RubricOptions`: how one run measures (options.py).
- `RubricRun`: the stage (encoder, validation data, hidden-state cache; one worker per submission).
- `merge_check`: puts the rubric's result into an earlier run's results and grades.csv (autograder.grading.merge).
- `autograder rubric`: all of it for a batch of submissions (autograder.rubric.command).
"""
from autograder.deferred.accuracy.check import rubric_check
from autograder.deferred.accuracy.config import RubricConfig
from autograder.rubric.options import RubricOptions
from autograder.rubric.formula import rubric_points

__all__ = ["rubric_points", "rubric_check", "RubricConfig", "RubricOptions", "RubricRun", "merge_check"]


def __getattr__(name):  # the stage and the merge import the sandbox and reports: only when used
    if name == "RubricRun":
        from autograder.rubric.stage import RubricRun

        return RubricRun
    if name == "merge_check":
        from autograder.grading import merge_check

        return merge_check
    raise AttributeError(name)
