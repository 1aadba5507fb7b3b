"""Recording the reference (what `autograder build` and `autograder record` do after a build): the reference
graded against itself with a RecordingWorker, saved next to the release (autograder/recording.py says what a
recording holds and when a grading run may use it).

Also the two places where a build is followed by a recording: `build_and_record` and `resolve_release` (a
release rebuilt because its source changed is recorded again).
"""
from __future__ import annotations

import time
from pathlib import Path

from autograder import build as build_module
from autograder.build import Paths
from autograder.grading.grader import Grader, missing_module
from autograder.grading.options import GradeOptions
from autograder.grading.preflight import ConfinementUnavailable, preflight
from autograder.grading.replay import RecordingWorker
from autograder.recording import Recording, run_fingerprint
from autograder.release import Release, load_release
from autograder.status import PASSED, PENDING


def record(release, confinement_status: str, cuda: bool | None = None) -> Recording:
    """Grade the reference against itself with a live, recording reference worker; return the Recording."""
    start = time.monotonic()
    grader = Grader(release, GradeOptions(release.dir / ".recording-out", quiet=True, cuda=cuda),
                    confinement_status, self_grade=False, recording=None)
    recording = Recording(run_fingerprint(release.manifest_digest, confinement_status, grader.cuda), {}, "")
    worker = RecordingWorker(grader.reference.worker.spec, recording)
    grader.reference.worker = worker
    worker.explain_name = grader.reference.explain_unbound
    try:
        grader.warm_up()
        program = grader.reference_as_submission()
        results = grader.judge.grade(program, confirm=False)
        recording.verdicts = {r.name: r.to_dict() for r in results}
        recording.modules = sorted(set(grader.worker_modules(program)) | set(grader.worker_modules(grader.reference)))
        report = grader.reference.start()
        recording.defined, recording.status = dict(report.defined), report.status
        recording.errors = {str(i): why for i, why in sorted(report.errors.items())}
    finally:
        grader.close()
    recording.seconds = time.monotonic() - start
    return recording


def record_release(release_dir: Path, cuda: bool | None = None) -> tuple[Recording | None, str]:
    """Record the release's reference and save it next to it: (the recording or None, a line saying what
    happened). Nothing is recorded where student code cannot be confined (the preflight fails)."""
    release = load_release(release_dir)
    try:
        status = preflight(release, GradeOptions(release_dir, cuda=cuda))
    except ConfinementUnavailable as exc:
        return None, f"reference not recorded ({exc}); grading runs will use a live reference"
    recording = record(release, status, cuda)
    recording.save(release_dir)
    failed = [name for name, v in recording.verdicts.items() if v["status"] not in (PASSED, PENDING)]
    line = (f"reference recorded: {len(recording.replies)} replies, {len(recording.modules)} modules, "
            f"{len(recording.verdicts)} verdicts in {recording.seconds:.1f} s")
    if failed:
        line += f"; WARNING: the reference does not pass {', '.join(failed)} here (autograder verify says why)"
    return recording, line


def build_and_record(source: Path, log=None, **roots) -> Paths:
    """`autograder build`: build `source` (autograder/build.py), then record its reference here; `log(line)`
    hears how the recording went. `roots`: build's assignments_root / release_root. The statements of the answer
    key that fail to load here are `paths.problems` (reference_load_problems)."""
    paths = build_module.build(Path(source), **roots)
    recording, line = record_release(paths.release)
    if recording is not None:
        paths.problems = reference_load_problems(load_release(paths.release), recording)
    if log is not None:
        log(line)
    return paths


def reference_load_problems(release: Release, recording: Recording) -> list[str]:
    """`notebook: cell N, line L (names): ...` for each statement of the answer key that failed when its worker
    loaded it in this environment (the recording's errors), numbered as in the source notebook: every submission
    meets the same error (grading tells students it is the grading machine's, grader.load_notes)."""
    from autograder.notebook.load import NotebookError, read_notebook
    from autograder.student import CHECK_TAG, INSTALL_TAG, SETUP_TAG

    try:
        key, _ = read_notebook(release.dir / "answer_key.ipynb")
        added = [bool({CHECK_TAG, INSTALL_TAG, SETUP_TAG} & set(c.get("metadata", {}).get("tags", [])))
                 for c in key.cells]
    except NotebookError:
        added = []
    problems = []
    for index, why in sorted((int(i), why) for i, why in recording.errors.items()):
        if not 0 <= index < len(release.reference.units):
            continue
        unit = release.reference.units[index]
        cell = unit.cell - sum(added[:unit.cell - 1])  # the build's own cells are not in the source notebook
        module = missing_module(why)
        if module:
            why = (f"{why.split(' (cell ')[0]}: {module} is not installed where grading runs: install it in the "
                   "grading image, or keep it out of graded code (import it in a cell tagged skip-grading, or inside "
                   "the function that uses it)")
        problems.append(f"{release.config.notebook}: cell {cell}, line {unit.line} ({', '.join(unit.names) or 'statement'}): "
                        f"the answer key's statement fails when the grader loads it here: {why}; every submission meets "
                        "the same error (grading tells students it is the grading machine's, not their notebook's)")
    return problems


def resolve_release(name_or_path: str, root: Path | None = None, rebuild: bool = True) -> Release:
    """build.release_for (the release, rebuilt when stale), recording the reference of a release it rebuilds."""
    return build_module.release_for(name_or_path, root, rebuild, after_build=record_release)
