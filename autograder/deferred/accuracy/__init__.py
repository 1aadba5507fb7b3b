"""The accuracy rubric as a kind of deferred check: a saved model's validation accuracy, measured by
`autograder rubric` on a GPU (autograder.rubric), recorded in DIR/<submission>/rubric.json.

The assignment declares it in its hidden tests with `rubric_check` (check.py); what the checkpoint is and how it
is loaded is its `kind` (checkpoints.py); its settings are `RubricConfig` (config.py).
"""
from __future__ import annotations

import shlex
from pathlib import Path

from autograder.deferred.accuracy.check import RUBRIC_FILE, recorded_rubric, rubric_configs
from autograder.deferred.protocol import AdviceContext, DeferredKind, ReadBack
from autograder.testing import CheckSpec


class AccuracyRubric(DeferredKind):
    """The kind of a `rubric_check`: its result is DIR/<submission>/rubric.json, written by `autograder rubric` on a
    machine with CUDA. Its methods implement DeferredKind's (protocol.py)."""

    key = "rubric"
    results_file = RUBRIC_FILE
    command = "autograder rubric"

    def owns(self, spec: CheckSpec) -> bool:
        return getattr(spec.fn, "_ag_rubric", None) is not None

    def why_pending(self, spec: CheckSpec) -> str:
        return "the accuracy rubric: `autograder rubric` measures it on a GPU"

    def read_back(self, folder: Path, notebook: Path) -> ReadBack:
        check, note = recorded_rubric(folder, notebook)
        return ReadBack([check] if check else [], [note] if note else [])

    def advice(self, specs: list[CheckSpec], pending: set[str], where: AdviceContext) -> list[str]:
        lines = []
        for config in rubric_configs(specs):
            if config.name in pending:
                unzip, given = where.unzipped()  # the rubric reads checkpoints beside the notebooks: unpacked
                lines.append(f"pending: {config.points:g} points of the accuracy rubric ({config.name!r}); on a "
                             f"machine with CUDA, with the same submissions and this results folder: {unzip}"
                             f"{self.command} {shlex.quote(where.assignment)} {' '.join(map(shlex.quote, given))} "
                             f"--out {shlex.quote(where.out)}")
        return lines

    def student_notes(self, specs: list[CheckSpec], notebook: Path) -> dict[str, str]:
        """The saved models the rubric will measure that are not beside the submitted notebook: said now, while the
        student can still submit them."""
        out = {}
        for config in rubric_configs(specs):
            if not (notebook.parent / config.checkpoint).is_file():
                out[config.name] = (
                    f"Your submission has no `{config.checkpoint}` next to {notebook.name}: the {config.points:g} "
                    f"points of \"{config.name}\" are measured from that file (the model your notebook saves), "
                    f"so without it they will be 0. Submit again with {config.checkpoint} added, in the same "
                    f"folder as the notebook.")
        return out
