"""The judge: runs an assignment's checks against one submission and decides the scores.

The judge process never imports student code. It holds two programs, the submission and the
reference, each running in its own worker, and talks to them through proxies (autograder/program.py). Every
verdict, every comparison and every score is computed here, with the judge's own, unpatched libraries.
"""
from __future__ import annotations

import contextlib
import io
import re
import time
import types
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import AbstractSet, Callable

import torch

from autograder.config import Limits
from autograder.sandbox import (
    MissingName, NotebookFolder, StudentError, SystemFault, TrippedCall, WorkerError, WorkerTimeout, environment_set,
    undone_after,
)
from autograder.kernel import KernelNamespace, assertion_text, hidden_failure, run_test_cell
from autograder.cell_names import earlier_cells as shared_cells
from autograder.program import JudgeImports, Program, ProgramProxy
from autograder.seeding import seed_torch
from autograder.status import FAILED, PARTIAL, PASSED, PENDING, UNGRADED, points_of, status_of
from autograder.testing import CheckSpec, Fail, Pending, nonfinite_hint, take_notes

# what a student reads (never a command: the instructor's is in `autograder grade`'s output, commands/grade.py)
PENDING_GPU = ("needs a GPU, which this grader does not have: pending, not failed. It is graded again on a machine "
               "with a GPU after the submissions are collected, and its points are added to this grade then; your "
               "other points stand.")


UNGRADED_MESSAGE = ("not graded: the grader cannot run this check correctly here ({why}). This is a problem of the "
            "grading setup, not of your notebook: your instructor has been told and will grade it again.")


FAULT_ROUNDS = 2  # a check whose worker met a system fault is run once more, on a fresh worker, then not graded


def timeout_message(timeout: float, what: str, reference_seconds: float | None = None) -> str:
    """The message of a check or load that ran out of time after `timeout` s; where the reference's time on the same
    check is known, it says it, for the student to compare."""
    why = "" if reference_seconds is None else (f"; the reference solution takes {reference_seconds:.2g} s on this "
                                               "check on the same machine")
    return f"timed out after {timeout:.0f} s: {what} (an endless loop, or far too slow?{why})"


@dataclass
class CheckResult:
    """One check's result for one submission: the row the result files, the exports and the summary are made from."""
    name: str
    part: str
    max_score: float
    score: float
    status: str  # passed | partial | failed | pending | ungraded (see UNSCORED)
    message: str
    visibility: str = "visible"
    stub_hit: bool = False  # student code raised NotImplementedError during this check
    seconds: float = 0.0
    grader_problem: str = ""  # ungraded: why the grader cannot decide this check in this environment

    def to_dict(self) -> dict:
        """Its fields as a dict (a new one; the result file's row)."""
        return dict(self.__dict__)


def _run_cell_check(spec: CheckSpec, sub: ProgramProxy, ref: ProgramProxy, imports: JudgeImports,
                    earlier: Sequence[tuple[str, str]] = ()):
    """A notebook test cell, with the meaning it has in the student's kernel (autograder/kernel.py), after the
    earlier cells of its part `earlier` ((name, source)) when it reads their variables."""
    namespace = KernelNamespace(sub, imports, {"reference": ref, "__name__": "__test_cell__"}, interface=ref)
    # what the cell prints is for a notebook's reader: never the grading command's output
    with contextlib.redirect_stdout(_Discarded()), contextlib.redirect_stderr(_Discarded()):
        run_test_cell(spec.source, f"<test cell {spec.name}>", namespace, list(earlier))


class _Discarded(io.TextIOBase):
    def write(self, text: str) -> int:
        return len(text)


def earlier_cells(checks: Sequence[CheckSpec]) -> dict[str, list[tuple[str, str]]]:
    """For each notebook test cell, the earlier test cells it may share variables with (cell_names.earlier_cells)."""
    return shared_cells([(spec.name, spec.part, spec.source) for spec in checks if spec.fn is None and spec.part])


def _fraction(value) -> float:
    """A check's return value as a fraction of its points, clamped to [0, 1]."""
    if value is None or value is True:
        return 1.0
    if value is False:
        return 0.0
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, (int, float)) and value == value:  # not NaN
        return min(1.0, max(0.0, float(value)))
    raise TypeError(f"a check returned {type(value).__name__}; it must return None, a bool or a number")


class CheckBroken(Exception):
    """The check's own code failed, not the student's: the check is not graded (never charged to the student).
    `where`: the file (or test cell) and line; the message adds the error."""

    def __init__(self, where: str, error: BaseException):
        if isinstance(error, OSError):  # the judge's own file access: the machine's or the assignment's, never the notebook's
            why = ("a file the check reads in the grader is missing or unreadable there, not a mistake of the notebook: "
                   "ship it with the assignment (`files` of assignment.toml: checks and test cells run in a folder "
                   "that holds them) or let the check read it by a path that exists when grading")
        else:
            why = "a mistake of the check, not of the notebook: fix the check"
        super().__init__(f"the check's own code fails at {where}: {type(error).__name__}: {error} ({why})")
        self.where = where


def _check_frame(spec: CheckSpec, exc: BaseException):
    """The innermost frame of the check's own code in the traceback (a test file, its helper modules, a test
    cell), or None when the error did not pass through it."""
    import traceback
    from pathlib import Path

    folder = Path(spec.fn.__code__.co_filename).parent if spec.fn is not None else None
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename.startswith("<test") or folder is not None and Path(frame.filename).parent == folder:
            return frame
    return None


COMPLEX_CAST = "Casting complex values to real discards the imaginary part"
COMPLEX_RETURNED = ("your code returned complex numbers where real ones are expected: the grader would have to drop "
                    "their imaginary part (return a real tensor)")


@contextlib.contextmanager
def complex_casts_raise():
    """Check code that makes a real tensor of a complex one from student code (`.double()`, `.float()`) would drop
    its imaginary part without a word (torch warns once per process, not once per check): here it raises, and the
    student is told. Other warnings of the checks' code are not the teaching assistant's to read."""
    always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            warnings.filterwarnings("error", message=COMPLEX_CAST, category=UserWarning)
            yield
    finally:
        torch.set_warn_always(always)


def _noted(message: str, note: str) -> str:
    return f"{message}\n{note}" if message else note


def instructors_mistake(exc: BaseException) -> bool:
    """A name the check's code does not have, a module without the attribute it asks for, an import or a syntax
    error: mistakes of the code that raised them, never of what student code returned (student values are
    plain data or proxies, never the judge's modules; a name the notebook lacks is MissingName)."""
    if isinstance(exc, (NameError, ImportError, SyntaxError)):
        return True
    if isinstance(exc, OSError) and not isinstance(exc, StudentError):
        return True  # the judge's own file or system call (a student's OSError arrives as a StudentError)
    return isinstance(exc, AttributeError) and isinstance(getattr(exc, "obj", None), types.ModuleType)


def check_error(spec: CheckSpec, exc: BaseException) -> CheckBroken | None:
    """The check's own mistake as a CheckBroken naming where it is (file and line), or None."""
    if isinstance(exc, SyntaxError) and str(exc.filename or "").startswith("<test"):  # a test cell that is not Python
        return CheckBroken(f"{exc.filename}, line {exc.lineno}", exc)
    frame = _check_frame(spec, exc) if instructors_mistake(exc) else None
    if frame is None:
        return None
    from pathlib import Path

    where = frame.filename if frame.filename.startswith("<") else f"tests/{Path(frame.filename).name}"
    return CheckBroken(f"{where}, line {frame.lineno}", exc)


def _assertion_message(spec: CheckSpec, exc: AssertionError) -> str:
    """What the student reads of a check's failed assertion (kernel.assertion_text for a test cell: the public
    cell's line that failed, never a hidden line's message)."""
    text = assertion_text(exc, f"<test cell {spec.name}>", spec.source, spec.public) if spec.fn is None else str(exc)
    return text or ("an assertion in this public check failed" if spec.public else "a hidden check failed")


def _of_the_reference(message: str) -> str:
    """A verdict's message written to the student ("your normalize raised ...") said of the reference solution, whose
    verdict it is ("the reference's normalize raised ..."): quoted in a NOT GRADED message, it never reads as the
    student's fault."""
    message = re.sub(r"\bYour\b", "The reference's", message)
    return re.sub(r"\byours\b|\byour\b", "the reference's", message)


class Judge:
    """Runs checks for submissions against one reference program."""

    def __init__(self, checks: list[CheckSpec], reference: Program, limits: Limits, cell_globals: "JudgeImports",
                 gpu_checks: AbstractSet[str] = frozenset(), cuda: bool | None = None,
                 reference_as_submission: Callable[[], Program] | None = None, inputs: dict[str, str] | None = None,
                 environment: dict[str, str] | None = None):
        """`inputs`: the assignment's shipped files (name -> file, as the workers' Confinement.inputs): the checks
        run with them in their working directory, as a test cell does in the student's kernel (sandbox/workdir.py);
        `environment`: the assignment's variables ([environment]), set while a check runs, as in the workers."""
        self.environment = dict(environment or {})
        self.checks = checks
        self.folder = NotebookFolder(inputs)  # the submission's checks'
        self.reference_folder = NotebookFolder(inputs)  # the reference's verdicts' (confirm), never the same
        self.earlier = earlier_cells(checks)  # the test cells a notebook test cell shares its variables with
        self._stood_in: list[str] = []  # the names the worker replaced by stand-ins for the check's second run
        self.reference = reference
        self.limits = limits
        self.cell_globals = cell_globals
        self.gpu_checks = set(gpu_checks)
        self.cuda = torch.cuda.is_available() if cuda is None else cuda
        # The reference graded as a submission, in a worker confined like the students': what every check
        # gives a correct notebook in this environment. Asked only when a student loses points (cached).
        self.reference_as_submission = reference_as_submission
        self.reference_verdicts: dict[str, CheckResult] = {}
        self.reference_seconds: dict[str, float] = {}  # check -> what the reference took here (check_timeout)
        self.excused_seconds = 0.0  # time spent on checks run again after a system fault: not the submission's

    def grade(self, submission: Program, confirm: bool = True) -> list[CheckResult]:
        """Every check on `submission`. With `confirm`, a check it does not pass counts only if the reference
        passes it in this environment; otherwise it is `ungraded` (see confirm)."""
        results = []
        self.folder.fresh()  # what the last submission's checks wrote there is gone
        budget_end = time.monotonic() + self.limits.submission_seconds
        self.excused_seconds = 0.0
        for spec in self.checks:
            result = self.run_check(spec, submission, budget_end + self.excused_seconds)
            if confirm and result.status in (FAILED, PARTIAL):
                self.confirm(spec, result)
            results.append(result)
        return results

    def check_timeout(self, spec: CheckSpec) -> tuple[float, float | None]:
        """(seconds one run of the check may take, the reference's own time it was derived from or None). A check's
        own `timeout` stands as written. Otherwise `check_slowdown` times what the reference solution took on this
        check on this machine (measured as a submission, Grader.warm_up), at least `check_min_seconds`, at most
        `check_seconds`: an endless loop costs seconds, not a minute, and code far slower than the reference still
        has time. Without a measurement (one submission graded, the measure failed): `check_seconds`."""
        limits = self.limits
        reference = self.reference_seconds.get(spec.name)
        if spec.timeout:
            return spec.timeout, None
        if reference is None or limits.check_slowdown <= 0:
            return limits.check_seconds, None
        timeout = max(limits.check_min_seconds, limits.check_slowdown * reference)
        return (timeout, reference) if timeout < limits.check_seconds else (limits.check_seconds, None)

    def reference_verdict(self, spec: CheckSpec) -> CheckResult:
        """The reference solution's own result on `spec`, graded as a submission in its own folder, once per judge
        (cached by check name). Only confirm() calls it."""
        if spec.name not in self.reference_verdicts:
            assert self.reference_as_submission is not None  # confirm(), the only caller, returns first without it
            program = self.reference_as_submission()
            # in a folder of its own, as shipped: never what the submission's checks wrote in theirs
            folder, self.folder = self.folder, self.reference_folder
            try:
                self.folder.fresh()
                self.reference_verdicts[spec.name] = self.run_check(spec, program, float("inf"))
            finally:
                self.folder = folder
        return self.reference_verdicts[spec.name]

    def close(self) -> None:
        """Remove the checks' working folders (sandbox/workdir.py)."""
        self.folder.cleanup()
        self.reference_folder.cleanup()

    def confirm(self, spec: CheckSpec, result: CheckResult) -> None:
        """Never silently wrong: a lost point stands only if the reference gets every point of the check here.
        Where it does not (a module missing in the worker, a broken install, a check that cannot run), the
        student's result becomes `ungraded`, neither failed nor 0, naming the cause."""
        if self.reference_as_submission is None:
            return
        verdict = self.reference_verdict(spec)
        if verdict.status in (PASSED, PENDING):
            return
        first = _of_the_reference((verdict.message.strip().splitlines() or ["no message"])[0])
        result.grader_problem = (f"the reference solution gets {verdict.score:g}/{verdict.max_score:g} on this check "
                                 f"here: {first}")
        result.status, result.score = UNGRADED, 0.0
        result.message = UNGRADED_MESSAGE.format(why=result.grader_problem)

    def run_check(self, spec: CheckSpec, submission: Program, budget_end: float) -> CheckResult:
        """One check. A system fault of a worker during it (SystemFault: killed from outside, its fork server
        gone, not started) is never the submission's: the check runs again on a fresh worker, and if the fault
        comes again it is not graded (neither failed nor 0)."""
        faults: list[SystemFault] = []
        for _ in range(FAULT_ROUNDS):
            seen = len(submission.worker.faults), len(self.reference.worker.faults)
            start = time.monotonic()
            result = self.run_check_once(spec, submission, budget_end)
            faults = submission.worker.faults[seen[0]:] + self.reference.worker.faults[seen[1]:]
            if not faults:
                return result
            spent = time.monotonic() - start
            self.excused_seconds += spent
            budget_end += spent
            submission.worker.kill()
        if not all(f.certain for f in faults):
            return result  # a worker that may have killed itself, twice: counted as before
        why = f"{faults[-1].summary}, twice"
        result.status, result.score, result.stub_hit = UNGRADED, 0.0, False
        result.grader_problem = why
        result.message = UNGRADED_MESSAGE.format(why=why)
        return result

    def run_check_once(self, spec: CheckSpec, submission: Program, budget_end: float) -> CheckResult:
        """One try of a check on `submission`: pending without a GPU where it needs one, else run against the
        reference within `budget_end` (a time.monotonic() deadline). Faults are run_check's to judge."""
        result = CheckResult(spec.name, spec.part, spec.points, 0.0, FAILED, "", spec.visibility)
        if (spec.gpu or spec.name in self.gpu_checks) and not self.cuda:
            result.status, result.message = PENDING, PENDING_GPU
            return result
        if spec.pending_only:  # decided elsewhere, whatever time is left: it asks nothing of the workers
            try:
                if spec.fn is not None:
                    spec.fn(submission.proxy(), self.reference.proxy())
            except Pending as exc:
                result.status, result.message = PENDING, str(exc) or PENDING_GPU
                return result
            except Exception as exc:  # noqa: BLE001 - reported as the grader's problem below
                result.grader_problem = f"{type(exc).__name__}: {exc}"
            result.grader_problem = result.grader_problem or "a check that is decided later did not say pending"
            result.status, result.message = UNGRADED, UNGRADED_MESSAGE.format(why=result.grader_problem)
            return result
        if time.monotonic() >= budget_end:
            result.message = (f"not run: the submission used up its {self.limits.submission_seconds:.0f} s "
                              "time budget in earlier checks")
            return result
        start, hangs_before = time.monotonic(), len(submission.hangs)
        try:
            fraction, message, stub = self._attempt(spec, submission, budget_end)
            if fraction < 1 and spec.depends_on and time.monotonic() < budget_end and \
                    self.reference.binds_all(spec.depends_on):  # (`autograder check` has no reference)
                # the student's other parts may be what failed it: again, the reference answering for them
                self._stood_in = []
                again = self._attempt(spec, submission, budget_end, substitute=True)
                if again[0] > fraction or len(submission.hangs) == hangs_before:
                    fraction, message, stub = self._better(self._stood_in, (fraction, message, stub), again)
                # else: the first run hung (or was stopped) here, and the second only met that remembered hang
                # ("not run: ... an earlier check", naming this one): the first run's message is what happened
        except Pending as exc:
            result.status, result.message = PENDING, str(exc) or PENDING_GPU
            return result
        except CheckBroken as exc:
            result.status, result.grader_problem = UNGRADED, str(exc)
            result.message = UNGRADED_MESSAGE.format(why=f"an error in the check itself, at {exc.where}")
            return result
        finally:
            result.seconds = round(time.monotonic() - start, 3)
        result.score = points_of(fraction, spec.points)
        result.status = status_of(fraction, 1)
        result.message = message
        result.stub_hit = stub
        return result

    def _attempt(self, spec: CheckSpec, submission: Program, budget_end: float,
                 substitute: bool = False) -> tuple[float, str, bool]:
        """One run of the check: (fraction, message, whether student code hit a stub). With `substitute`, the
        names of spec.depends_on are stand-ins in the student's worker, answered by the reference."""
        timeout, reference = self.check_timeout(spec)
        deadline = min(time.monotonic() + timeout, budget_end)
        prepare = (lambda: self._substitute(spec, submission)) if substitute else None
        take_notes()  # a note left by an earlier check's code is not this check's
        try:
            fraction, message = self._execute(spec, submission, deadline, (timeout, reference), prepare)
            message = "\n".join(line for line in (message, *take_notes()) if line)
        finally:
            submission.worker.callbacks = None
            stub = self._after_check(submission)
            self._after_check(self.reference)
            for hang in submission.worker.take_hangs():
                submission.remember_hang(hang, spec.name, hang.why or f"timed out after {timeout:.0f} s there")
            self.reference.worker.take_hangs()  # the reference's own: nothing to remember
        return fraction, message, stub

    @staticmethod
    def _better(stood_in: list[str], own: tuple[float, str, bool],
                again: tuple[float, str, bool]) -> tuple[float, str, bool]:
        """The better of the run with the student's own parts and the run with the reference's in their place, with
        a message that says only what is true. Better with the reference's (full marks included): graded so, and
        only this part counts, which the message says.
        A tie: the second run's message (it is about this part, with the reference's parts), saying so and that
        the student's own parts gave the same score; it claims nothing about where the points were lost. A tie
        with the same message: the first run's, with no word of the second."""
        names = ", ".join(stood_in)
        if not stood_in:  # nothing could stand in (a class that is no nn.Module): the second run was the first
            return own
        if again[:2] == own[:2]:  # both runs say the same: the student's own parts are not what it is about
            return own
        if again[0] > own[0]:
            return again[0], _noted(again[1], f"(graded with the reference's {names} in place of yours, so that only "
                                              "this part counts here)"), again[2]
        if again[0] == own[0]:
            return again[0], _noted(again[1], f"(this is the run with the reference's {names} in place of yours; yours "
                                              "gave the same score)"), again[2]
        return own

    def _substitute(self, spec: CheckSpec, submission: Program) -> None:
        from autograder.substitution import ReferenceAnswers

        submission.worker.callbacks = ReferenceAnswers(self.reference, spec.depends_on, lambda: submission.worker.deadline)
        kinds = self.reference.definition_kinds()
        replaced = submission.worker.request("substitute", [[name, kinds.get(name, "")] for name in spec.depends_on],
                                             what="preparing the check")
        self._stood_in = [name for name in spec.depends_on if isinstance(replaced, list) and name in replaced]
        submission.stood_in = frozenset(self._stood_in)

    def _execute(self, spec: CheckSpec, submission: Program, deadline: float, limit: tuple[float, float | None],
                 prepare: Callable[[], None] | None = None) -> tuple[float, str]:
        """One run of the check's code; `limit`: its timeout and the reference's time it was derived from."""
        sub, ref = submission.proxy(), self.reference.proxy()
        timeout = limit[0]
        submission.stood_in = frozenset()  # (prepare, with depends_on, names what the reference answers for)
        try:
            for program in (submission, self.reference):
                program.worker.deadline = deadline if program is submission else time.monotonic() + max(timeout, 300)
                program.start()
                program.worker.start_check(0)
            if prepare is not None:
                prepare()
            seed_torch(0)
            # (the judge's objects as they were, whatever the check wrote; the notebook's folder as working directory)
            with complex_casts_raise(), undone_after(), self.folder.entered(), environment_set(self.environment):
                if spec.fn is not None:
                    value = spec.fn(sub, ref)
                else:
                    value = _run_cell_check(spec, sub, ref, self.cell_globals, self.earlier.get(spec.name, ()))
            fraction = _fraction(value)
            return fraction, spec.passed_message if fraction >= 1 else "partially correct" if fraction > 0 else "check failed"
        except Pending:
            raise
        except Fail as exc:
            message = str(exc)
            return min(1.0, max(0.0, exc.partial)), "\n".join(line for line in (message, nonfinite_hint(message)) if line)
        except (MissingName, TrippedCall) as exc:
            return 0.0, str(exc)
        except StudentError as exc:
            return 0.0, exc.describe()
        except WorkerTimeout as exc:
            return 0.0, timeout_message(timeout, str(exc), limit[1])
        except WorkerError as exc:
            return 0.0, str(exc)
        except AssertionError as exc:
            return 0.0, _assertion_message(spec, exc)
        except Exception as exc:  # the check's own mistake, or the check choking on what student code returned
            if isinstance(exc, UserWarning) and COMPLEX_CAST in str(exc):
                return 0.0, COMPLEX_RETURNED
            broken = check_error(spec, exc)
            if broken is not None:
                raise broken from exc
            hidden = hidden_failure(exc, f"<test cell {spec.name}>", spec.source) if spec.fn is None else None
            return 0.0, hidden or f"the grader could not use what your code returned ({type(exc).__name__}: {exc})"

    @staticmethod
    def _after_check(program: Program) -> bool:
        try:
            return program.worker.end_check(0)
        except (WorkerError, StudentError):
            return False
