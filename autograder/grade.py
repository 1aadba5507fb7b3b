"""`autograder grade <name> SUBMISSIONS... --out DIR`: grade notebooks, write results, grades.csv and
a class summary.

Submissions are graded by `jobs` grading processes side by side (`--jobs N`), each with its own
judge and reference worker; every submission still gets its own worker process. Results are
written as each submission finishes, so an interrupted run loses nothing: running the command again
skips submissions already graded from the same notebook and the same release (`--regrade` grades
them again). Scores and messages do not depend on the order, on the batch, or on `jobs`: every check
starts from the same seeds in fresh state (see docs/isolation.md for what is and is not deterministic).
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING
from pathlib import Path

import torch

from autograder.judge import CheckResult, Judge, Program, judge_imports
from autograder.notebook.extract import extract
from autograder.notebook.load import NotebookError, read_notebook
from autograder.release import Release, load_release
from autograder.reports.results import SubmissionResult, write_atomic, write_submission
from autograder.reports.summary import write_summary
from autograder.reports.table import write_grades
from autograder.sandbox.client import StudentError, WorkerError, WorkerProcess, WorkerSpec
from autograder.sandbox.forkserver import adopt_environment, fork_zygote, preload_modules, start_environment
from autograder.sandbox.isolation import Confinement, probe
from autograder.sandbox.protocol import Handle
from autograder.sandbox.remote import Remote
from autograder.submissions import Submission, submission_ids  # noqa: F401 - submission_ids is public here

if TYPE_CHECKING:
    from autograder.recording import Recording

MARKER = ".graded.json"  # DIR/<id>/.graded.json: what was graded (notebook and release fingerprints)
POOL_ATTEMPTS = 3  # grading processes that die (the machine's OOM killer...) are replaced this often
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,16}\b")
_SCRATCH = re.compile(r"/tmp/ag-worker-[A-Za-z0-9_]+")


@dataclass
class GradeOptions:
    out_dir: Path
    quiet: bool = False
    cuda: bool | None = None  # None: detect
    trusted: bool = False  # grade even where the kernel refuses the namespaces that confine student code
    jobs: int = 1  # grading processes side by side (1: grade in this process)
    regrade: bool = False  # grade submissions again even when DIR already holds their results
    ids: list[str] | None = None  # one id per submission (default: from the file names)
    progress: bool | None = None  # one updating progress line (None: when stderr is a terminal)
    summary: bool = True  # write DIR/summary.md and DIR/summary.csv, print a summary at the end
    notes: dict[str, str] = field(default_factory=dict)  # id -> a note for the student (how it was found)
    confinement_status: str = ""  # what the preflight built (set by `grade`; a recording is used only with it)
    use_recording: bool = True  # replay the reference as recorded when the recording fits (recording.py)


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


def confinement_for(release: Release, options: "GradeOptions", cuda: bool) -> Confinement:
    """How every worker of a grading run is confined: the assignment's limits, its declared input files
    (visible read-only in the working directory), CUDA's devices when it grades on a GPU."""
    limits = release.config.limits
    inputs = {name: str(release.dir / "files" / name) for name in release.config.files
              if (release.dir / "files" / name).exists()}
    return Confinement(memory_bytes=0 if cuda else limits.memory_mb * 2**20, file_bytes=limits.output_mb * 2**20,
                       cuda=cuda, inputs=inputs, required=not options.trusted)


def scrub(text: str) -> str:
    """What differs between two runs of the same code but means nothing: memory addresses and the
    judge's scratch folder names."""
    return _SCRATCH.sub("/tmp/work", _ADDRESS.sub("0x...", text))


class _SeededJudge(Judge):
    """Also seeds Python's and NumPy's generators in the judge before each check (torch's is seeded
    by Judge itself), so a check that draws its inputs from them draws the same ones every time."""

    def run_check(self, spec, submission, budget_end):
        random.seed(0)
        try:
            import numpy

            numpy.random.seed(0)
        except ImportError:
            pass
        return super().run_check(spec, submission, budget_end)


def recorded_modules(release: Release) -> list[str]:
    """The modules of the release's recording, whatever environment it was made in (a good guess of what the
    workers will import; recording.py)."""
    recording = release.recording()
    return list(recording.modules) if recording is not None else []


def load_recording(release: Release, confinement_status: str, cuda: bool):
    """The release's recording of the reference, if it was made in this very environment (recording.py)."""
    from autograder.recording import fingerprint

    recording = release.recording()
    if not confinement_status or recording is None:
        return None
    return recording if recording.fingerprint == fingerprint(release.manifest_digest, confinement_status, cuda) else None


class Grader:
    """Holds the reference worker and the judge for a grading run; grades one submission at a time."""

    def __init__(self, release: Release, options: GradeOptions, submissions: list[Path], self_grade: bool = True,
                 recording: "Recording | None | str" = "auto"):
        self.release = release
        self.self_grade = self_grade  # warm up by grading the reference against itself (see warm_up)
        self.options = options
        limits = release.config.limits
        self.cuda = cuda = torch.cuda.is_available() if options.cuda is None else options.cuda
        self.confinement = confinement_for(release, options, cuda)
        reference_spec = WorkerSpec([u.to_wire() for u in release.reference.units], label="the reference",
                                    owner="the reference's", confinement=self.confinement,
                                    import_seconds=max(limits.import_seconds, 300))
        self.reference = Program(release.reference, reference_spec, release.helpers)
        if recording == "auto":
            recording = load_recording(release, options.confinement_status, cuda) if options.use_recording else None
        self.recording = recording
        if self.recording is not None:  # the reference as recorded: no reference worker unless a check needs it
            from autograder.recording import ReplayingWorker

            self.reference.worker = ReplayingWorker(reference_spec, self.recording, release.helpers)
            self.reference.worker.explain_name = self.reference.explain_unbound
        self._reference_as_submission: Program | None = None
        self.names_read = release.names_read_from_submissions()
        self.judge = _SeededJudge(release.checks, self.reference, limits, judge_imports(release.reference),
                                  set(release.config.gpu_checks), cuda, self.reference_as_submission)
        if self.recording is not None:
            self.judge.reference_verdicts = {name: CheckResult(**v) for name, v in self.recording.verdicts.items()}
        self._warm = False
        self._next_worker: WorkerProcess | None = None  # prestarted for the next submission (see grade_one)

    def reference_as_submission(self) -> Program:
        """The reference solution as a submission: same confinement, limits and helpers as a student's."""
        if self._reference_as_submission is None:
            limits = self.release.config.limits
            spec = WorkerSpec([u.to_wire() for u in self.release.reference.units], label="the reference",
                              owner="the reference's", confinement=self.confinement,
                              import_seconds=max(limits.import_seconds, 300))
            self._reference_as_submission = Program(self.release.reference, spec, self.release.helpers)
        return self._reference_as_submission

    def close(self) -> None:
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

    @property
    def isolation_status(self) -> str:
        report = self.reference.worker.report
        return report.status if report else ""

    def warm_up(self) -> None:
        """Before the first submission: grade the reference against itself, keeping its verdicts (what each
        check gives a correct notebook here, see Judge.confirm), then have the fork server import every
        library the reference worker used. Each fresh worker then starts with them loaded (seconds saved
        per submission with transformers), and every submission, the first included, meets a reference
        worker and libraries in the same state. A run that grades one submission only imports the
        reference's imports and asks for the reference's verdict on a check only when the submission
        loses points there (scores are the same either way: tests/test_parallel_determinism.py)."""
        if self._warm:
            return
        self._warm = True
        if self.recording is not None:  # its verdicts are the judge's already; its modules are all of them
            preload_modules(self.recording.modules, wait=False)
            return
        preload_modules(imported_modules(self.release.reference.units))
        if not self.self_grade:
            return
        program = self.reference_as_submission()
        try:
            verdicts = self.judge.grade(program, confirm=False)
            self.judge.reference_verdicts.update({v.name: v for v in verdicts})
        except Exception:  # noqa: BLE001 - a warm-up only; real submissions meet the problem again
            pass
        finally:
            program.close()
            self._reference_as_submission = None
        preload_modules(self.worker_modules(self.reference))

    def grade_one(self, path: Path, sub_id: str, more: bool = False) -> SubmissionResult:
        """Grade one notebook. `more`: another submission follows; its worker is started (forked and confined,
        nothing of it loaded) as this one ends, while the caller writes the results."""
        self.warm_up()
        start = time.monotonic()
        try:
            return self._grade_one(path, sub_id, start)
        finally:
            if more and self._next_worker is None:
                self._next_worker = WorkerProcess(self._worker_spec([]))
                self._next_worker.prestart()

    def _worker_spec(self, units: list[dict]) -> WorkerSpec:
        return WorkerSpec(units, confinement=self.confinement, import_seconds=self.release.config.limits.import_seconds)

    def _grade_one(self, path: Path, sub_id: str, start: float) -> SubmissionResult:
        try:
            nb, notes = read_notebook(path)
        except NotebookError as exc:
            return self._ungraded(path, sub_id, str(exc), start)
        extraction = extract(nb, self.names_read)
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
            if report:
                for index, why in sorted(report.errors.items()):
                    unit = extraction.units[index]
                    if unit.kind not in ("constant", "assignment"):  # a check that needs it says so itself
                        notes.append(f"cell {unit.cell}, line {unit.line} ({', '.join(unit.names) or 'statement'}): {why}")
        except Exception as exc:  # noqa: BLE001 - a grader bug must still leave a result row
            return self._ungraded(path, sub_id, f"internal grader error: {type(exc).__name__}: {exc}", start)
        finally:
            program.close()
        for c in checks:
            c.message, c.grader_problem = scrub(c.message), scrub(c.grader_problem)
        return SubmissionResult(sub_id, str(path), checks, [scrub(n) for n in notes], "", time.monotonic() - start,
                                confinement=report.status if report else "")

    def _ungraded(self, path: Path, sub_id: str, why: str, start: float) -> SubmissionResult:
        checks = [CheckResult(c.name, c.part, c.points, 0.0, "failed", f"not graded: {why}", c.visibility)
                  for c in self.release.checks]
        return SubmissionResult(sub_id, str(path), checks, [], why, time.monotonic() - start)


# -- resuming -------------------------------------------------------------------------------------------

def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    return h.hexdigest()


def release_fingerprint(release: Release) -> str:
    manifest = release.dir / "manifest.json"
    data = manifest.read_bytes() if manifest.is_file() else json.dumps(release.config.to_dict()).encode()
    return hashlib.sha256(data).hexdigest()


def _previous(out_dir: Path, sub_id: str, fingerprint: dict) -> SubmissionResult | None:
    """The result already in DIR for this id, if it was graded from the same notebook and release."""
    folder = out_dir / sub_id
    try:
        if json.loads((folder / MARKER).read_text(encoding="utf-8")) != fingerprint:
            return None
        return SubmissionResult.from_dict(json.loads((folder / "grading.json").read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


# -- progress -------------------------------------------------------------------------------------------

class Progress:
    """Counts of done / failed / pending on stderr: one updating bar on a terminal, else a line per
    submission."""

    def __init__(self, total: int, skipped: int, jobs: int, quiet: bool, bar: bool | None):
        self.total, self.skipped, self.jobs, self.quiet = total, skipped, jobs, quiet
        self.bar = sys.stderr.isatty() if bar is None else bar
        self.done = self.failed = 0
        self.start = time.monotonic()

    @property
    def pending(self) -> int:
        return self.total - self.skipped - self.done

    def counts(self) -> str:
        return f"done {self.done}, failed {self.failed}, pending {self.pending}"

    def update(self, result: SubmissionResult) -> None:
        self.done += 1
        self.failed += bool(result.error)
        if self.quiet:
            return
        if self.bar:
            width = 30
            finished = self.skipped + self.done
            filled = int(width * finished / max(1, self.total))
            elapsed = time.monotonic() - self.start
            eta = elapsed / self.done * self.pending if self.done else 0
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {finished}/{self.total}  {self.counts()}"
                             f"  {self.done / max(elapsed, 1e-9) * 60:.1f}/min  ETA {eta:.0f} s \x1b[K")
            sys.stderr.flush()
            return
        pending = f", {len(result.pending)} pending" if result.pending else ""
        pending += f", {len(result.ungraded)} NOT GRADED (grader problem)" if result.ungraded else ""
        error = f"  [{result.error.splitlines()[0][:80]}]" if result.error else ""
        print(f"[{self.skipped + self.done}/{self.total}] {result.submission}: {result.score:g}/{result.max_score:g}"
              f"{pending} ({result.execution_time:.1f} s){error}  ({self.counts()})", file=sys.stderr, flush=True)

    def finish(self) -> None:
        if self.bar and not self.quiet and self.done:
            sys.stderr.write("\n")
            sys.stderr.flush()


# -- parallel grading ------------------------------------------------------------------------------------
#
# `jobs` grading processes, each `python -m autograder.grade --serve`: one judge with its own reference
# worker and fork server. They take one submission at a time over a pipe (JSON lines) and answer with
# its result, so a process that dies costs only the submission it held. Plain subprocesses rather than
# multiprocessing: nothing of the caller's __main__ is imported again, nothing is pickled.

GRADING_PROCESS_DIED = "the grading process died while grading this submission"


def _serve() -> None:
    """A grading process: first line {"release", "out_dir", "cuda", "trusted", "paths"}, then one
    {"path", "id"} per submission; answers one line per submission: {"result", "status"}."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us; a terminal's Ctrl-C is its business
    fork_zygote()  # first: its fork server, forked before this process reads anything (its environment included)
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # whatever checks print goes to stderr, never into the channel
    torch.set_num_threads(1)
    setup = json.loads(sys.stdin.readline())
    adopt_environment(setup["env"])
    options = GradeOptions(Path(setup["out_dir"]), quiet=True, cuda=setup["cuda"],
                           trusted=setup["trusted"], confinement_status=setup["confinement"],
                           use_recording=setup["use_recording"])
    grader = Grader(load_release(Path(setup["release"])), options, [Path(p) for p in setup["paths"]])
    try:
        for line in sys.stdin:
            task = json.loads(line)
            result = grader.grade_one(Path(task["path"]), task["id"], more=bool(task.get("more")))
            channel.write(json.dumps({"result": result.to_dict(), "status": grader.isolation_status}) + "\n")
            channel.flush()
    finally:
        grader.close()


class _GradingProcess:
    def __init__(self, setup: dict):
        # It starts with nothing of this process's environment (its fork server is forked from it first thing,
        # forkserver.fork_zygote), and gets it with its setup. The judges hash strings alike (set order in
        # checks); one torch thread, so that it has a single thread when it forks.
        env = {**start_environment(), "PYTHONHASHSEED": "0"}
        self.proc = subprocess.Popen([sys.executable, "-m", "autograder.grade", "--serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env, text=True, encoding="utf-8")
        self.proc.stdin.write(json.dumps({**setup, "env": {**os.environ, "PYTHONHASHSEED": "0"}}) + "\n")
        self.proc.stdin.flush()
        self.task: tuple[int, Path, str] | None = None
        self.graded = 0

    def kill(self) -> None:
        self.proc.kill()  # its fork server and workers follow (parent-death signals)
        self.proc.wait()

    def give(self, task: tuple[int, Path, str], more: bool) -> bool:
        """Send it a submission to grade; `more`: another will probably follow (its worker is started early)."""
        self.task = task
        try:
            self.proc.stdin.write(json.dumps({"path": str(task[1]), "id": task[2], "more": more}) + "\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def stop(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        self.kill()


def _grade_in_pool(release: Release, options: GradeOptions, items: list[tuple[int, Path, str]],
                   all_paths: list[Path], finish) -> None:
    """Grade `items` with options.jobs grading processes; `finish(index, result)` as each one is done.
    A process that dies is replaced; its submission is tried again, and gets an error row after
    POOL_ATTEMPTS deaths."""
    import selectors

    setup = {"release": str(release.dir), "out_dir": str(options.out_dir), "cuda": options.cuda,
             "trusted": options.trusted, "confinement": options.confinement_status,
             "use_recording": options.use_recording,
             "paths": [str(p) for p in all_paths]}
    todo = list(items)
    deaths: dict[int, int] = {}
    failed_starts = [0]  # grading processes in a row that died before grading anything
    sel = selectors.DefaultSelector()
    procs: list[_GradingProcess] = []

    def start_one() -> None:
        gp = _GradingProcess(setup)
        procs.append(gp)
        sel.register(gp.proc.stdout, selectors.EVENT_READ, gp)
        feed(gp)

    def feed(gp: _GradingProcess) -> None:
        gp.task = None
        if todo:
            task = todo.pop(0)
            gp.give(task, more=len(todo) >= options.jobs)  # if it is dead, its end of file puts the task back

    def died(gp: _GradingProcess) -> None:
        sel.unregister(gp.proc.stdout)
        procs.remove(gp)
        gp.kill()
        failed_starts[0] = 0 if gp.graded else failed_starts[0] + 1
        if gp.task is not None:
            i, path, sub_id = gp.task
            deaths[i] = deaths.get(i, 0) + 1
            if deaths[i] >= POOL_ATTEMPTS:
                finish(i, _error_result(release, path, sub_id, f"{GRADING_PROCESS_DIED} ({POOL_ATTEMPTS} times)"))
            else:
                todo.insert(0, gp.task)
        if failed_starts[0] >= POOL_ATTEMPTS:  # it cannot even start: no point in trying each submission
            while todo:
                i, path, sub_id = todo.pop(0)
                finish(i, _error_result(release, path, sub_id, "the grading process could not start "
                                                                "(its error is on stderr)"))
        if todo and len(procs) < options.jobs:
            start_one()

    try:
        for _ in range(min(options.jobs, len(todo))):
            start_one()
        while procs:
            for key, _ in sel.select():
                gp: _GradingProcess = key.data
                line = gp.proc.stdout.readline()
                if not line:
                    died(gp)
                    continue
                try:
                    reply = json.loads(line)
                    result = SubmissionResult.from_dict(reply["result"])
                except (ValueError, KeyError, TypeError):
                    died(gp)
                    continue
                finish.status = finish.status or reply.get("status", "")
                gp.graded += 1
                i = gp.task[0]
                finish(i, result)
                feed(gp)
                if gp.task is None:
                    sel.unregister(gp.proc.stdout)
                    procs.remove(gp)
                    gp.stop()
    finally:
        for gp in procs:
            gp.kill()


def _error_result(release: Release, path: Path, sub_id: str, why: str) -> SubmissionResult:
    checks = [CheckResult(c.name, c.part, c.points, 0.0, "failed", f"not graded: {why}", c.visibility)
              for c in release.checks]
    return SubmissionResult(sub_id, str(path), checks, [], why, 0.0)


class ConfinementUnavailable(RuntimeError):
    """Student code cannot be confined here (and the submissions are not declared trusted)."""


def preflight(release: Release, options: GradeOptions) -> str:
    """Build the workers' confinement once, with no student code, before anything is graded: returns the
    status line; raises ConfinementUnavailable when it cannot be had."""
    cuda = torch.cuda.is_available() if options.cuda is None else options.cuda
    ok, status = probe(confinement_for(release, options, cuda))
    if not ok:
        raise ConfinementUnavailable(f"cannot confine student code: {status}")
    return status


def report_grader_problems(results: list[SubmissionResult]) -> None:
    """On stderr, whatever `quiet` says: checks that no submission could be graded on here, and why."""
    causes: dict[str, set[str]] = {}
    for r in results:
        for c in r.ungraded:
            causes.setdefault(c.name, set()).add(c.grader_problem)
    if not causes:
        return
    affected = sum(1 for r in results if r.ungraded)
    lines = [f"GRADER PROBLEM: the reference solution does not pass {len(causes)} check(s) in this grading "
             f"environment, so {affected} submission(s) were not graded on them (marked NOT GRADED, never 0; their "
             "grades are not final):"]
    for name, why in sorted(causes.items()):
        lines.append(f"  - {name}: {'; '.join(sorted(why))}")
    lines.append("Fix the environment (a module missing, a broken install, a file the reference needs), then grade "
                 "again with --regrade.")
    print("\n".join(lines), file=sys.stderr, flush=True)


# -- the command ----------------------------------------------------------------------------------------

def grade(release: Release, submissions: list, options: GradeOptions) -> list[SubmissionResult]:
    """Grade `submissions` (paths, or `Submission`s from autograder.submissions) into options.out_dir.
    Returns one result per submission, in the order given."""
    out = options.out_dir
    out.mkdir(parents=True, exist_ok=True)
    paths = [Path(s.path) if isinstance(s, Submission) else Path(s) for s in submissions]
    if options.ids is not None:
        ids = list(options.ids)
    elif submissions and all(isinstance(s, Submission) for s in submissions):
        ids = [s.student for s in submissions]
    else:
        ids = submission_ids(paths)
    notes = dict(options.notes)
    for s in submissions:
        if isinstance(s, Submission) and s.note:
            notes.setdefault(s.student, s.note)
    if len(set(ids)) != len(ids):
        raise ValueError("submission ids must be unique")
    names = [c.name for c in release.checks]
    release_id = release_fingerprint(release)
    results: list[SubmissionResult | None] = [None] * len(paths)
    prints: dict[int, dict] = {}
    todo = []
    for i, (path, sub_id) in enumerate(zip(paths, ids)):
        prints[i] = {"notebook": _file_digest(path), "release": release_id, "file": str(path)}
        previous = None if options.regrade else _previous(out, sub_id, prints[i])
        if previous is not None:
            results[i] = previous
        else:
            todo.append((i, path, sub_id))
    jobs = max(1, min(options.jobs, len(todo)))
    if todo and jobs == 1:  # the fork server imports what the workers will need while this process goes on
        preload_modules(recorded_modules(release) or imported_modules(release.reference.units), wait=False)
    confinement = preflight(release, options) if todo else ""
    options = replace(options, confinement_status=confinement)
    progress = Progress(len(paths), len(paths) - len(todo), jobs, options.quiet, options.progress)
    if progress.skipped and not options.quiet:
        print(f"{progress.skipped} submission(s) already graded in {out}: skipped (--regrade grades them again)",
              file=sys.stderr, flush=True)

    def finish(i: int, result: SubmissionResult) -> None:
        note = notes.get(result.submission)
        if note and note not in result.notes:
            result.notes.insert(0, note)
        write_submission(out, result, release.config.title)
        write_atomic(out / result.submission / MARKER, json.dumps(prints[i], indent=1, sort_keys=True))
        results[i] = result
        write_grades(out, [r for r in results if r is not None], names)
        progress.update(result)

    finish.status = confinement
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)  # judge-side arithmetic alike in every grading process
        if jobs == 1 and todo:
            grader = Grader(release, options, paths, self_grade=len(todo) > 1)
            try:
                for n, (i, path, sub_id) in enumerate(todo, start=1):
                    finish(i, grader.grade_one(path, sub_id, more=n < len(todo)))
                finish.status = grader.isolation_status
            finally:
                grader.close()
        elif todo:
            _grade_in_pool(release, options, todo, paths, finish)
    finally:
        torch.set_num_threads(threads)
        progress.finish()
    final = [r for r in results if r is not None]
    write_grades(out, final, names)
    report_grader_problems(final)
    elapsed = time.monotonic() - progress.start
    if options.summary:
        extra = [f"Isolation: {finish.status}."] if finish.status else []
        write_summary(out, final, release.config.title, extra)
        if not options.quiet:
            rate = f" ({progress.done / elapsed * 60:.1f}/min with {jobs} job(s))" if progress.done and elapsed > 0 else ""
            lines = [f"graded {progress.done} submission(s) in {elapsed:.1f} s{rate}; "
                     f"{progress.skipped} already graded; {progress.failed} could not be graded"]
            scored = [r for r in final if not r.error]
            if scored:
                lines.append(f"mean score {sum(r.score for r in scored) / len(scored):.2f} / "
                             f"{max(r.max_score for r in scored):g}; per-check summary in {out / 'summary.md'}")
            print("\n".join(lines), file=sys.stderr, flush=True)
    return final


if __name__ == "__main__" and sys.argv[1:] == ["--serve"]:
    _serve()
