"""What a grading run is asked to do (GradeOptions) and how its workers are confined (confinement_for)."""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from autograder.release import Release
from autograder.reports.results import SubmissionResult
from autograder.sandbox import Confinement, level_of


@dataclass
class GradeOptions:
    """How one grading run is done, as the grade command (or a caller of the library) sets it: where results go,
    output, CUDA, confinement, jobs, cluster."""
    out_dir: Path
    quiet: bool = False
    cuda: bool | None = None  # None: detect
    trusted: bool = False  # allow the ladder's last level: no confinement but resource limits (sandbox/ladder.py)
    jobs: int = 1  # grading processes side by side (1: grade in this process)
    regrade: bool = False  # grade submissions again even when DIR already holds their results
    ids: list[str] | None = None  # one id per submission (default: from the file names)
    progress: bool | None = None  # one updating progress line (None: when stderr is a terminal)
    summary: bool = True  # write DIR/summary.md and DIR/summary.csv, print a summary at the end
    notes: dict[str, str] = field(default_factory=dict)  # id -> a note for the student (how it was found)
    use_recording: bool = True  # replay the reference as recorded when the recording fits (recording.py)
    cluster: str | None = None  # a Ray cluster's address ("local": start one here): grading/cluster.py
    # called on each result as it finishes, before it is written or shown (its progress line): points decided
    # elsewhere, such as written answers graded by hand in nbgrader's formgrader (export/nbgrader.py)
    settle: Callable[[SubmissionResult], None] | None = None


def confinement_for(release: Release, options: "GradeOptions", cuda: bool, status: str = "") -> Confinement:
    """How every worker of a grading run is confined: at the level the preflight chose (`status`, its line;
    empty: full), with the assignment's limits, its declared input files (visible read-only in the working
    directory), CUDA's devices when it grades on a GPU."""
    limits = release.config.limits
    inputs = {name: os.path.abspath(release.dir / "files" / name) for name in release.config.files
              if (release.dir / "files" / name).exists()}
    return Confinement(memory_bytes=0 if cuda else limits.memory_mb * 2**20, file_bytes=limits.output_mb * 2**20,
                       cuda=cuda, inputs=inputs, level=level_of(status))
