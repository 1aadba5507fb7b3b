"""How one `autograder rubric` run measures the accuracy rubric: where the encoder and data come from, the device,
the speed-ups (the assignment's own settings are `autograder.deferred.accuracy.config.RubricConfig`)."""
from __future__ import annotations

from dataclasses import dataclass
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
