"""The rubric's place in an assignment's hidden tests.

In solutions/<name>/tests/test_*.py:

    from autograder.rubric import rubric_check
    validation_accuracy = rubric_check(points=8, part="7. Sentiment classifier")

`autograder grade` then lists the check and reports it as pending, with a message saying what the
instructor runs and where; it never fails it and never counts it as 0. `autograder rubric` measures
it (on a GPU) and merges the points into the results. Do not also list it under [gpu] checks:
the message would then be the generic one.

`autograder rubric` records its result in DIR/<submission>/rubric.json with digests of the notebook and
the checkpoint it measured; `autograder grade` carries that result into the results it writes while the
digests still match (`recorded_rubric`, through the kind's `read_back`: autograder.deferred.accuracy).
"""
from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import torch

from autograder.deferred.accuracy.config import RubricConfig, pending_message
from autograder.deferred.recorded import check_result, decided_from, file_digest, read_json
from autograder.judge import CheckResult
from autograder.status import PENDING
from autograder.testing import CheckSpec, Pending


def rubric_check(name: str | None = None, points: float | None = None, part: str | None = None,
                 visibility: str = "visible", **settings):
    """A check that stands for the accuracy rubric in `autograder grade`. `settings`: RubricConfig fields
    (kind, assignment, checkpoint, model_class, num_labels, max_len, floor, full, ...); the defaults are the
    Transformers & BERT notebook's, `assignment` defaults to the name of the folder holding the calling test
    file's tests/ folder. `kind` says what the checkpoint is and how it is loaded (autograder.deferred.accuracy.checkpoints)."""
    if "assignment" not in settings:  # the test file lives in solutions/<name>/tests/ or release/<name>/tests/
        caller = sys._getframe(1).f_globals.get("__file__")
        if caller and Path(caller).parent.name == "tests":
            settings["assignment"] = Path(caller).parent.parent.name
    config = RubricConfig(visibility=visibility, **settings)
    config.checkpoint_kind  # noqa: B018 - an unknown kind fails when the test file loads, not at grading
    config = replace(config, **{k: v for k, v in (("name", name), ("points", points), ("part", part)) if v is not None})

    def accuracy_rubric(sub, ref):
        raise Pending(pending_message(config, cuda=torch.cuda.is_available()))

    accuracy_rubric._ag_check = CheckSpec(config.name, float(config.points), config.part, config.visibility,
                                          accuracy_rubric, pending_only=True)
    accuracy_rubric._ag_rubric = config
    return accuracy_rubric


def rubric_configs(checks: list[CheckSpec]) -> list[RubricConfig]:
    """The rubric settings of an assignment's checks (from its release)."""
    out = []
    for spec in checks:
        config = getattr(spec.fn, "_ag_rubric", None)
        if isinstance(config, RubricConfig):
            out.append(replace(config, name=spec.name, points=spec.points, part=spec.part or config.part))
    return out


RUBRIC_FILE = "rubric.json"  # in DIR/<submission>/: the rubric's result and details (autograder rubric)
OTHER_FILES = ("the earlier rubric result ({file}) was measured from other files (the notebook or the checkpoint "
               "changed since): the rubric stays pending until `autograder rubric` runs again")


def measured_from(notebook: Path, checkpoint: Path) -> dict:
    """What a rubric result records of the files it measured (compared by `recorded_rubric`)."""
    return {"notebook_sha256": file_digest(notebook), "checkpoint_sha256": file_digest(checkpoint)}


def recorded_rubric(folder: Path, notebook: Path) -> tuple[CheckResult | None, str | None]:
    """The rubric result recorded in `folder` (DIR/<submission>) for `notebook`: (check, None) when it was
    measured from these files; (None, note for the student) when it was measured from others; (None, None)
    when there is none, or none that names its check (the rubric then stays as grading left it)."""
    recorded = read_json(Path(folder) / RUBRIC_FILE)
    check = check_result(recorded.get("check")) if recorded else None
    if recorded is None or check is None or check.status == PENDING:  # nothing measured: grading's check stands
        return None, None
    if not decided_from(recorded, Path(notebook), also=("checkpoint",)):
        return None, OTHER_FILES.format(file=RUBRIC_FILE)
    return check, None
