"""The Grader: one judge and the reference, grading one submission at a time in a grading process.

Each submission gets its own confined worker (started, for the next submission, while the results of this one
are written). The reference is the release's recording replayed when it was made in this very environment
(autograder/recording.py, grading/replay.py), else a live reference worker. Scores and messages do not depend
on the order or the batch: every check starts from the same seeds in fresh state.
"""
from __future__ import annotations

import random
import re
import time
from pathlib import Path

import torch

from autograder.grading.options import GradeOptions, confinement_for
from autograder.grading.replay import ReplayingWorker
from autograder.grading.staging import is_staged
from autograder.judge import UNGRADED_MESSAGE, CheckResult, Judge
from autograder.program import Program, judge_imports
from autograder.notebook.extract import extract
from autograder.notebook.load import NotebookError, NotebookUnreadable, NotebookVanished, read_notebook
from autograder.notebook.markers import cite_own_cell, locked_code, restore_locked, unanswered
from autograder.notebook.seedvar import cell_seeding, for_grading
from autograder.recording import Recording, run_fingerprint
from autograder.release import Release
from autograder.reports.results import SubmissionResult
from autograder.sandbox import Handle, Remote, StudentError, WorkerError, WorkerProcess, WorkerSpec, preload_modules
from autograder.status import FAILED, MANUAL, PASSED, PENDING, UNGRADED
from autograder.deferred import graded_by_hand

# What one result may hold, whatever the student's worker sent (its own caps run in code the student controls):
# a message of a check, and the notes of a submission.
MAX_MESSAGE_CHARS = 8000
MAX_NOTES, MAX_NOTE_CHARS = 50, 1000
INTERNAL_ERROR = "internal grader error"
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,16}\b")
_SCRATCH = re.compile(r"/tmp/ag-worker-[A-Za-z0-9_]+")


def error_result(release: Release, path: Path, sub_id: str, why: str, seconds: float = 0.0) -> SubmissionResult:
    """The row of a submission that could not be graded at all: every check 0, `why` as the error."""
    checks = [CheckResult(c.name, c.part, c.points, 0.0, FAILED, why, c.visibility)
              for c in release.checks]
    return SubmissionResult(sub_id, str(path), checks, [], why, seconds)


def ungraded_result(release: Release, path: Path, sub_id: str, why: str, seconds: float = 0.0) -> SubmissionResult:
    """The row of a submission the grader could not grade for a cause of its own (its grading process died, an
    internal error): every check NOT GRADED, never 0, `why` as the grader's problem."""
    checks = [CheckResult(c.name, c.part, c.points, 0.0, UNGRADED, UNGRADED_MESSAGE.format(why=why), c.visibility,
                          grader_problem=why) for c in release.checks]
    return SubmissionResult(sub_id, str(path), checks, [], f"not graded: {why}", seconds)


def imported_modules(units) -> list[str]:
    """Module names the import statements among `units` import."""
    import ast

    names = []
    for unit in units:
        if unit.kind != "import":
            continue
        try:
            tree = ast.parse(unit.source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.append(node.module)
                names += [f"{node.module}.{a.name}" for a in node.names if a.name != "*"]
    return list(dict.fromkeys(names))


def bounded(text: str, limit: int) -> str:
    """`text`, cut to `limit` characters with a note saying so."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n... ({len(text) - limit} more characters not shown)"


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # every control character but tab and newline


def scrub(text: str) -> str:
    """What differs between two runs of the same code but means nothing: memory addresses and the
    judge's scratch folder names. Control characters (a terminal's escape sequences, carriage returns that
    overwrite a line when a TA reads the file in a terminal) are written out as `\\x1b`: shown, never acted on."""
    text = _SCRATCH.sub("/tmp/work", _ADDRESS.sub("0x...", text))
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text.replace("\r\n", "\n"))


class _SeededJudge(Judge):
    """Also seeds Python's and NumPy's generators in the judge before each check (torch's is seeded
    by Judge itself), so a check that draws its inputs from them draws the same ones every time."""

    def run_check_once(self, spec, submission, budget_end):
        random.seed(0)
        try:
            import numpy

            numpy.random.seed(0)
        except ImportError:
            pass
        return super().run_check_once(spec, submission, budget_end)


def recorded_modules(release: Release) -> list[str]:
    """The modules of the release's recording, whatever environment it was made in (a good guess of what the
    workers will import; recording.py)."""
    recording = release.recording()
    return list(recording.modules) if recording is not None else []


def load_recording(release: Release, confinement_status: str, cuda: bool) -> Recording | None:
    """The release's recording of the reference, if it was made in this very environment (recording.py)."""
    recording = release.recording()
    if not confinement_status or recording is None:
        return None
    return recording if recording.fingerprint == run_fingerprint(release.manifest_digest, confinement_status, cuda) else None


GRADING_TOOLS = frozenset({"otter", "nbgrader"})  # imported by notebooks those tools handed out; not needed here


_NO_MODULE = re.compile(r"No module named '([^']+)'")
SAME_AS_REFERENCE = "(the reference solution meets the same error): not a problem of your notebook"


def missing_module(why: str) -> str | None:
    """The module a load error says is not installed (`raised ModuleNotFoundError: No module named 'x'`), or None."""
    found = _NO_MODULE.search(why)
    return found.group(1) if found and why.startswith(("raised ModuleNotFoundError", "raised ImportError")) else None


def error_type(why: str) -> str:
    """`ModuleNotFoundError` of `raised ModuleNotFoundError: ...`; the whole text for a load error of another form."""
    found = re.match(r"raised ([\w.]+):", why)
    return found.group(1) if found else why


def shared_with_reference(unit, why: str, reference) -> str | None:
    """What the grading machine fails at, when the reference's own load errors (`reference`: (unit, why) pairs, the
    reference loaded in this environment) include this one: the same exception type and missing module, or the
    same statement; else None (the error is the notebook's)."""
    module = missing_module(why)
    for ref_unit, ref_why in reference:
        if module and missing_module(ref_why) == module and error_type(ref_why) == error_type(why):
            return f"the grading machine cannot import {module}"
        if ref_unit.source.strip() == unit.source.strip():
            return f"{why}, on the grading machine"
    return None


def load_notes(report, extraction, reference=()) -> list[str]:
    """A note for each statement of the notebook that failed to run, but for assignments (a check that needs one
    says so itself) and imports of the grading tool a notebook was handed out with (`import otter`). An error the
    reference meets too when loaded here (`reference`: its (unit, why) load errors; `shared_with_reference`) is
    the grading machine's, and said so, once for all the statements it stops: checks decide the points, and one
    that needs the statement is NOT GRADED for every submission (the reference fails it too)."""
    notes: list[str] = []
    machine: dict[str, int] = {}  # what the machine fails at -> its note's index in `notes`
    places: dict[str, list[str]] = {}
    for index, why in sorted(report.errors.items()) if report else ():
        unit = extraction.units[index]
        if unit.kind in ("constant", "assignment") or (unit.kind == "import" and set(unit.names or ["?"]) <= GRADING_TOOLS):
            continue
        place = f"cell {unit.cell}, line {unit.line} ({', '.join(unit.names) or 'statement'})"
        shared = shared_with_reference(unit, why, reference)
        if shared is None:
            notes.append(f"{place}: {why}")
            continue
        if shared not in machine:  # its note stands where its first statement does, written below
            machine[shared] = len(notes)
            notes.append("")
        places.setdefault(shared, []).append(place)
    for shared, at in machine.items():
        notes[at] = f"{' and '.join(places[shared])}: {shared} {SAME_AS_REFERENCE}"
    return notes


def handed_out_locked(release: Release) -> dict[str, str]:
    """The read-only code cells as handed out, by grade_id: from the manifest (a Gradescope bundle has no answer
    key), else from the release's answer key."""
    if release.locked is not None:
        return dict(release.locked)
    try:
        nb, _ = read_notebook(release.dir / "answer_key.ipynb")
    except NotebookError:
        return {}
    return locked_code(nb)


class Grader:
    """Holds the reference worker and the judge for a grading run; grades one submission at a time."""

    def __init__(self, release: Release, options: GradeOptions, confinement_status: str = "",
                 self_grade: bool = True, recording: Recording | None | str = "auto"):
        """`confinement_status`: what the preflight built (grading/preflight.py); a recording is used only with
        it. `recording`: "auto" (the release's, when it fits), None (a live reference) or one to use."""
        self.release = release
        self.self_grade = self_grade  # warm up by grading the reference against itself (see warm_up)
        self.options = options
        limits = release.config.limits
        self.cuda = cuda = torch.cuda.is_available() if options.cuda is None else options.cuda
        self.confinement = confinement_for(release, options, cuda, confinement_status)
        self.reference = Program(release.reference, self.reference_spec(), release.helpers)
        if recording == "auto":
            recording = load_recording(release, confinement_status, cuda) if options.use_recording else None
        self.recording = recording
        if self.recording is not None:  # the reference as recorded: no reference worker unless a check needs it
            self.reference.worker = ReplayingWorker(self.reference.worker.spec, self.recording, release.helpers)
            self.reference.worker.explain_name = self.reference.explain_unbound
        self._reference_as_submission: Program | None = None
        self.names_checks_read = release.names_read_from_submissions()
        self.locked = handed_out_locked(release)
        self.manual = {c.name for c in release.checks if graded_by_hand(c)}
        self.judge = _SeededJudge(release.checks, self.reference, limits, judge_imports(release.reference),
                                  set(release.config.gpu_checks), cuda, self.reference_as_submission,
                                  inputs=self.confinement.inputs, environment=release.config.environment)
        if self.recording is not None:
            self.judge.reference_verdicts = {name: CheckResult(**v) for name, v in self.recording.verdicts.items()}
        self._warm = False
        self._next_worker: WorkerProcess | None = None  # prestarted for the next submission (see grade_one)

    def reference_spec(self) -> WorkerSpec:
        """A worker running the reference: confined as a student's, more time to import (it is trusted)."""
        return WorkerSpec([u.to_wire() for u in self.release.reference.units], label="the reference",
                          owner="the reference's", confinement=self.confinement,
                          import_seconds=max(self.release.config.limits.import_seconds, 300),
                          environment=dict(self.release.config.environment))

    def reference_as_submission(self) -> Program:
        """The reference solution as a submission: same confinement, limits and helpers as a student's."""
        if self._reference_as_submission is None:
            self._reference_as_submission = Program(self.release.reference, self.reference_spec(),
                                                    self.release.helpers)
        return self._reference_as_submission

    def close(self) -> None:
        """Kill every worker it holds: the judge's, the next submission's, the reference's."""
        self.judge.close()
        if self._next_worker is not None:
            self._next_worker.kill()
        self.reference.close()
        if self._reference_as_submission is not None:
            self._reference_as_submission.close()

    def worker_modules(self, program: Program) -> list[str]:
        """The modules loaded in one of the reference's workers (trusted code only ever runs there)."""
        worker = program.worker
        if worker.proc is None:
            return []
        worker.deadline = time.monotonic() + 30
        try:
            worker.request("helpers", "import sys as _ag_sys\n_ag_modules = sorted(_ag_sys.modules)\n",
                           what="listing the reference's modules")
            names = Remote(worker, Handle(1, "helpers"), "")._ag_modules
        except (WorkerError, StudentError):
            return []
        return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []

    def reference_load_errors(self) -> list:
        """(unit, why) for each statement of the reference that failed to load in this environment (its live worker's
        report, or the recording's): what a submission meeting the same error is not to blame for (load_notes)."""
        report = self.reference.worker.report
        units = self.release.reference.units
        return [(units[i], why) for i, why in sorted(report.errors.items()) if 0 <= i < len(units)] if report else []

    @property
    def isolation_status(self) -> str:
        """The confinement status line of the reference's worker ("" before it has loaded)."""
        report = self.reference.worker.report
        return report.status if report else ""

    def warm_up(self) -> None:
        """Before the first submission: grade the reference against itself, keeping what each check took (the
        checks' time limits follow from it, Judge.check_timeout) and, without a recording, its verdicts (what
        each check gives a correct notebook here, see Judge.confirm); then have the fork server import every
        library the reference worker used. Each fresh worker then starts with them loaded (seconds saved
        per submission with transformers), and every submission, the first included, meets a reference
        worker and libraries in the same state. A run that grades one submission only imports the
        reference's imports and asks for the reference's verdict on a check only when the submission
        loses points there (scores are the same either way: tests/test_parallel_determinism.py); its checks
        get `check_seconds` each."""
        if self._warm:
            return
        self._warm = True
        if self.recording is not None:  # its verdicts are the judge's already; its modules are all of them
            preload_modules(self.recording.modules, wait=False)
        else:
            preload_modules(imported_modules(self.release.reference.units))
        if not self.self_grade:
            return
        self._grade_reference()
        if self.recording is None:
            preload_modules(self.worker_modules(self.reference))

    def _grade_reference(self) -> None:
        """The reference graded as a submission: its verdicts (unless recorded) and, for each check it passes,
        the seconds it took."""
        program = self.reference_as_submission()
        try:
            for prog in (self.reference, program):  # started first: no check's time is a worker's start
                prog.start()
            verdicts = self.judge.grade(program, confirm=False)
        except Exception:  # noqa: BLE001 - a warm-up only; real submissions meet the problem again
            return
        finally:
            program.close()
            self._reference_as_submission = None
        if self.recording is None:
            self.judge.reference_verdicts.update({v.name: v for v in verdicts})
        self.judge.reference_seconds = {v.name: v.seconds for v in verdicts if v.status == PASSED}

    def grade_one(self, path: Path, sub_id: str, more: bool = False) -> SubmissionResult:
        """Grade one notebook. `more`: another submission follows; its worker is started (forked and confined,
        nothing of it loaded) as this one ends, while the caller writes the results."""
        self.warm_up()
        start = time.monotonic()
        try:
            result = self._grade_one(path, sub_id, start)
            if result.error.startswith(INTERNAL_ERROR):  # a grader bug, or a state it cannot handle: once more
                result = self._grade_one(path, sub_id, start)
            if result.error.startswith(INTERNAL_ERROR):
                result = ungraded_result(self.release, path, sub_id, result.error, time.monotonic() - start)
            return result
        finally:
            if more and self._next_worker is None:
                self._next_worker = WorkerProcess(self._worker_spec([]))
                self._next_worker.prestart()

    def _worker_spec(self, units: list[dict]) -> WorkerSpec:
        return WorkerSpec(units, confinement=self.confinement, import_seconds=self.release.config.limits.import_seconds,
                          environment=dict(self.release.config.environment))

    def _grade_one(self, path: Path, sub_id: str, start: float) -> SubmissionResult:
        try:
            nb, notes = read_notebook(path)
        except NotebookError as exc:
            if isinstance(exc, NotebookVanished) and is_staged(path):  # the run's own copy, removed by someone
                return ungraded_result(self.release, path, sub_id, f"{exc} (the run's copy of it was removed while "
                                       "it ran): grade it again", time.monotonic() - start)  # never a zero
            if isinstance(exc, NotebookUnreadable):  # graded again by the next run, once it can be read
                return ungraded_result(self.release, path, sub_id, f"{exc} (a problem of this machine's files, not "
                                       "the submission's)", time.monotonic() - start)
            return self._ungraded(path, sub_id, str(exc), start)
        notes += restore_locked(nb, self.locked)
        try:
            extraction = extract(for_grading(nb, self.release.config.seed), self.names_checks_read,
                                 each_cell=cell_seeding(self.release.config.seed))
        except Exception as exc:  # noqa: BLE001 - a notebook the grader cannot read through still gets its row
            return self._ungraded(path, sub_id, f"{INTERNAL_ERROR}: reading the notebook's code: "
                                                f"{type(exc).__name__}: {exc}", start)
        notes += [f"cell {s.cell} was not graded: {s.reason}" for s in extraction.skipped if "tagged" not in s.reason]
        worker, self._next_worker = self._next_worker, None
        program = Program(extraction, self._worker_spec([u.to_wire() for u in extraction.units]), self.release.helpers,
                          worker)
        try:
            # Start both workers before the first check, so that its time limit covers the check only
            # (not a fork server or a reference worker starting in a fresh grading process). A failure
            # here is met again, and reported, by the checks themselves.
            for prog in (self.reference, program):
                try:
                    prog.start()
                except WorkerError:
                    pass
            checks = self.judge.grade(program)
            report = program.worker.report
            notes += load_notes(report, extraction, self.reference_load_errors())
        except Exception as exc:  # noqa: BLE001 - a grader bug must still leave a result row
            return self._ungraded(path, sub_id, f"{INTERNAL_ERROR}: {type(exc).__name__}: {exc}", start)
        finally:
            program.close()
        for c in checks:
            if c.name in self.manual:
                _zero_if_unanswered(c, nb, self.release.handed_out.get(c.name))
                # its cell as numbered in the student's notebook
                c.message = cite_own_cell(c.message, c.name, nb, self.release.hand_graded.get(c.name))
            c.message = bounded(scrub(c.message), MAX_MESSAGE_CHARS)
            c.grader_problem = bounded(scrub(c.grader_problem), MAX_MESSAGE_CHARS)
        if len(notes) > MAX_NOTES:
            notes = notes[:MAX_NOTES] + [f"... and {len(notes) - MAX_NOTES} more notes"]
        notes = [bounded(scrub(n), MAX_NOTE_CHARS) for n in notes]
        return SubmissionResult(sub_id, str(path), checks, notes, "", time.monotonic() - start,
                                confinement=report.status if report else "", memory=report.memory if report else "")

    def _ungraded(self, path: Path, sub_id: str, why: str, start: float) -> SubmissionResult:
        return error_result(self.release, path, sub_id, why, time.monotonic() - start)


NOT_ANSWERED = ("not answered: the cell is as it was handed out, so it gets 0 (as nbgrader grades an unanswered cell); "
                "if you wrote the answer in another cell, ask for it to be graded by hand")


def _zero_if_unanswered(check: CheckResult, nb, handed_out: str | None) -> None:
    """A hand-graded answer cell submitted as it was handed out gets 0 at once, as nbgrader gives it, instead of
    waiting for a grader to read an empty answer; its message keeps naming the cell."""
    if check.status == PENDING and handed_out and unanswered(nb, check.name, handed_out):
        check.status, check.score = FAILED, 0.0
        check.message = f"{check.message.removeprefix(MANUAL + ': ')}: {NOT_ANSWERED}"
