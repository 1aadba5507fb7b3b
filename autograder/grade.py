"""`autograder grade <name> SUBMISSION.ipynb... --out DIR`: grade notebooks, write results and grades.csv."""
from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from autograder.judge import CheckResult, Judge, Program, judge_imports
from autograder.notebook.extract import extract
from autograder.notebook.load import NotebookError, read_notebook
from autograder.release import Release
from autograder.reports.results import SubmissionResult, write_submission
from autograder.reports.table import write_grades
from autograder.sandbox.client import WorkerSpec
from autograder.sandbox.isolation import Confinement, hideable, python_paths


@dataclass
class GradeOptions:
    out_dir: Path
    quiet: bool = False
    cuda: bool | None = None  # None: detect
    extra_private: tuple[Path, ...] = ()  # more paths workers must not see


def submission_ids(paths: list[Path]) -> list[str]:
    """Folder-safe, unique ids from file names ("hw (1).ipynb" -> "hw_1")."""
    ids, seen = [], {}
    for p in paths:
        base = re.sub(r"[^A-Za-z0-9._-]+", "_", p.stem).strip("._") or "submission"
        n = seen.get(base, 0)
        seen[base] = n + 1
        ids.append(base if n == 0 else f"{base}-{n + 1}")
    return ids


class Grader:
    """Holds the reference worker and the judge for a grading run; grades one submission at a time."""

    def __init__(self, release: Release, options: GradeOptions, submissions: list[Path]):
        self.release = release
        self.options = options
        limits = release.config.limits
        cuda = torch.cuda.is_available() if options.cuda is None else options.cuda
        private = [str(release.dir), str(options.out_dir), *map(str, submissions), *map(str, options.extra_private)]
        source = release.dir.parent.parent / "solutions" / release.config.name
        if source.is_dir():
            private.append(str(source.parent.parent))  # the project holding the instructor's sources
        self.confinement = Confinement(
            hide=hideable(private, python_paths()),
            memory_bytes=0 if cuda else limits.memory_mb * 2**20,
            file_bytes=limits.output_mb * 2**20)
        reference_spec = WorkerSpec([u.to_wire() for u in release.reference.units], label="the reference",
                                    owner="the reference's", confinement=self.confinement,
                                    import_seconds=max(limits.import_seconds, 300))
        self.reference = Program(release.reference, reference_spec, release.helpers)
        self.judge = Judge(release.checks, self.reference, limits, judge_imports(release.reference),
                           set(release.config.gpu_checks), cuda)

    def close(self) -> None:
        self.reference.close()

    def grade_one(self, path: Path, sub_id: str) -> SubmissionResult:
        start = time.monotonic()
        try:
            nb, notes = read_notebook(path)
        except NotebookError as exc:
            return self._ungraded(path, sub_id, str(exc), start)
        extraction = extract(nb)
        notes += [f"cell {s.cell} was not graded: {s.reason}" for s in extraction.skipped if "tagged" not in s.reason]
        limits = self.release.config.limits
        spec = WorkerSpec([u.to_wire() for u in extraction.units], confinement=self.confinement,
                          import_seconds=limits.import_seconds)
        program = Program(extraction, spec, self.release.helpers)
        try:
            checks = self.judge.grade(program)
            report = program.worker.report
            if report:
                for index, why in sorted(report.errors.items()):
                    unit = extraction.units[index]
                    notes.append(f"cell {unit.cell}, line {unit.line} ({', '.join(unit.names) or 'statement'}): {why}")
        except Exception as exc:  # noqa: BLE001 - a grader bug must still leave a result row
            return self._ungraded(path, sub_id, f"internal grader error: {type(exc).__name__}: {exc}", start)
        finally:
            program.close()
        return SubmissionResult(sub_id, str(path), checks, notes, "", time.monotonic() - start)

    def _ungraded(self, path: Path, sub_id: str, why: str, start: float) -> SubmissionResult:
        checks = [CheckResult(c.name, c.part, c.points, 0.0, "failed", f"not graded: {why}", c.visibility)
                  for c in self.release.checks]
        return SubmissionResult(sub_id, str(path), checks, [], why, time.monotonic() - start)


def grade(release: Release, submissions: list[Path], options: GradeOptions) -> list[SubmissionResult]:
    options.out_dir.mkdir(parents=True, exist_ok=True)
    submissions = [Path(p) for p in submissions]
    grader = Grader(release, options, submissions)
    results = []
    names = [c.name for c in release.checks]
    try:
        for i, (path, sub_id) in enumerate(zip(submissions, submission_ids(submissions)), start=1):
            result = grader.grade_one(path, sub_id)
            write_submission(options.out_dir, result, release.config.title)
            results.append(result)
            write_grades(options.out_dir, results, names)
            if not options.quiet:
                pending = f", {len(result.pending)} pending" if result.pending else ""
                error = f"  [{result.error.splitlines()[0][:80]}]" if result.error else ""
                print(f"[{i}/{len(submissions)}] {path.name}: {result.score:g}/{result.max_score:g}{pending} "
                      f"({result.execution_time:.1f} s){error}", file=sys.stderr, flush=True)
    finally:
        grader.close()
    return results
