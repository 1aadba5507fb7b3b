"""How one `autograder rubric` run measures the accuracy rubric: where the encoder and data come from, the device,
the speed-ups (the assignment's own settings are `autograder.deferred.accuracy.config.RubricConfig`); and what the
command grades and where it writes (`RubricCommandOptions`, built from the command line by
autograder/commands/rubric.py: no argparse namespace goes below the command layer)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class RubricOptions:
    """How one run grades: where the encoder and data come from, the device, the speed-ups."""

    encoder: str | None = None  # hub id or local folder; None: $BERT_ENCODER or bert-base-uncased
    imdb: str | None = None  # parquet file; None: $IMDB_PATH or datasets.load_dataset("imdb")
    device: str = "auto"  # auto: CUDA or pending; "cuda"; "cpu" grades on the CPU (tests, small runs)
    precision: str = "auto"  # auto: mixed on CUDA, fp32 on CPU; or "fp32" / "mixed"
    cache: bool = True  # reuse the encoder's hidden states across submissions
    cache_dir: Path | None = None  # default: <results folder>/.rubric-cache
    valid_limit: int | None = None  # grade on the first N validation reviews only (benchmarks, smoke runs)
    sample_batches: int = 4  # batches on which the cached path is compared with the full forward
    transport: str = "auto"  # auto: the worker reads the cache files when it can; "pipe": always send
    timeout: float = 1800.0  # seconds for one submission's rubric
    threads: int | None = None  # CPU threads of the encoder and the student's worker (default: all)
    memory_mb: int = 16384  # address-space limit of the student's worker on CPU (none with CUDA)
    trusted: bool = False  # allow the confinement ladder's last level: resource limits only (sandbox/ladder.py)


@dataclass
class RubricCommandOptions:
    """One `autograder rubric` command: the assignment, the submissions, the results folder to merge into, and how
    each submission is measured (`measure`). Strings are kept as typed: the command to run again is echoed back."""

    assignment: str  # assignment name (solutions/<name>) or a release/solutions folder
    submissions: list[str]  # what `autograder grade` accepts; each checkpoint lies beside its notebook
    out: str  # the results folder of `autograder grade`
    measure: RubricOptions = field(default_factory=RubricOptions)
    checkpoint_dir: Path | None = None  # checkpoints as DIR/<submission id>/<checkpoint file> instead
    cluster: str | None = None  # a Ray address: one actor per GPU; None grades on this machine
    course: Path | None = None  # an nbgrader course for the gradebook; None: the one the submissions come from
    quiet: bool = False  # no progress lines
