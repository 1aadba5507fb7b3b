"""What an assignment fixes of its accuracy rubric (RubricConfig), and what a student reads while it is pending.

How one `autograder rubric` run measures it (encoder, data, device) is `autograder.rubric.options.RubricOptions`.
"""
from __future__ import annotations

from dataclasses import dataclass

from autograder.deferred.accuracy.checkpoints import CheckpointKind, checkpoint_kind


@dataclass
class RubricConfig:
    """What the assignment fixes. The defaults are the Transformers & BERT notebook's (part 7)."""

    name: str = "7. validation accuracy (rubric)"  # the check's name: a column of grades.csv
    kind: str = "frozen_encoder_class"  # what the checkpoint is and how it is loaded (autograder.deferred.accuracy.checkpoints)
    points: float = 8.0
    part: str = "7. Sentiment classifier"
    visibility: str = "visible"
    assignment: str = "transformers_bert"  # how `autograder rubric` names it in messages
    floor: float = 0.50  # accuracy that earns 0 points
    full: float = 0.90  # accuracy that earns all points
    # kind "frozen_encoder_class": the student's class, its encoder attribute, and where its GRU and output layer are
    model_class: str = "BERTGRUSentiment"  # (bert, hidden_dim, output_dim, n_layers, bidirectional, dropout)
    encoder_attr: str = "bert"
    rnn_attr: str = "rnn"  # for reading the constructor arguments off the checkpoint's GRU shapes
    out_attr: str = "out"
    num_labels: int = 2  # kind "sequence_classifier": the classifier's number of classes (1 = positive)
    checkpoint: str = "bert_gru_sentiment.pt"  # the notebook's CHECKPOINT, beside the notebook
    # kind "frozen_encoder_class": notebook constants giving the constructor arguments after `bert`, in order
    constants: tuple = ("HIDDEN_DIM", "OUTPUT_DIM", "N_LAYERS", "BIDIRECTIONAL", "DROPOUT")
    max_len: int = 256  # the notebook's MAX_LEN default
    batch_size: int = 32  # the notebook's BATCH_SIZE default (padding per batch changes the logits)
    bucket_batches: int = 100
    split_seed: int = 1234  # SPLIT_SEED
    valid_fraction: float = 0.3  # VALID_FRACTION

    @property
    def checkpoint_kind(self) -> CheckpointKind:
        """The CheckpointKind of `kind`; ValueError when the assignment names an unknown one."""
        return checkpoint_kind(self.kind)


def pending_message(config: RubricConfig, cuda: bool) -> str:
    """What the student reads while the rubric waits: no instructor's command in it (`autograder grade` tells the
    instructor what to run), and no "pending" in front (Gradescope's output and the feedback pages add it)."""
    where = ("a GPU, which this grader does not have" if not cuda
             else "a GPU, in a separate grading step")
    return (f"these {config.points:g} points are the accuracy rubric: the grader measures the accuracy of your saved "
            f"model `{config.checkpoint}` itself, on the validation split, on {where}. They are not lost: they will "
            f"be added to this grade later. Your other points stand.")
