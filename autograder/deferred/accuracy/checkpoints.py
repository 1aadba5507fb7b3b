"""What a rubric's checkpoint is and how the grader turns it into a model.

An assignment declares the kind with `rubric_check(kind=...)`; the stage (autograder.rubric.stage) asks
the kind's properties rather than the assignment's name:

| kind | the checkpoint | the model the grader builds | the encoder |
|---|---|---|---|
| `frozen_encoder_class` (default) | the state_dict of the student's own class (`model_class`) | the student's class from its notebook, built around the grader's pretrained encoder | frozen: must equal the pretrained one; its hidden states are computed once per run and shared |
| `sequence_classifier` | the state_dict of a fine-tuned `transformers` `AutoModelForSequenceClassification` | the library's class, built from the grader's encoder configuration with `num_labels`; no student code runs | fine-tuned: part of the checkpoint, so every submission gets its own full forward |

Both are evaluated in a confined worker (the checkpoint is read there with `weights_only=True`), on the
same seeded validation split, and scored with the same formula.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckpointKind:
    """A kind of checkpoint (the table of the module docstring): what it holds and what the grader builds from it."""

    name: str
    summary: str  # what the checkpoint holds, for messages and docs
    student_code: bool  # the model is the student's class: the notebook's definitions are loaded
    frozen_encoder: bool  # the encoder is the grader's pretrained one; its hidden states are cached
    attention_mask: bool  # the model is called with input_ids and an attention mask (1 = real token)


FROZEN_ENCODER_CLASS = CheckpointKind(
    "frozen_encoder_class",
    "the state_dict of your classifier class around the frozen pretrained encoder",
    student_code=True, frozen_encoder=True, attention_mask=False)

SEQUENCE_CLASSIFIER = CheckpointKind(
    "sequence_classifier",
    "the state_dict of your fine-tuned AutoModelForSequenceClassification",
    student_code=False, frozen_encoder=False, attention_mask=True)

KINDS = {kind.name: kind for kind in (FROZEN_ENCODER_CLASS, SEQUENCE_CLASSIFIER)}


def checkpoint_kind(name: str) -> CheckpointKind:
    """The CheckpointKind named `name`; ValueError, listing the known ones, for any other name."""
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"unknown rubric kind {name!r}; known: {sorted(KINDS)}") from None
