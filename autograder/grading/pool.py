"""Grading with `jobs` grading processes side by side (`--jobs N`).

Each grading process (`python -m autograder.entrypoints pool`) holds one Grader: its own judge, reference and
fork server. It takes one submission at a time over a pipe (JSON lines) and answers with its result. Guarantees:

- A grading process that dies, however (a crash, a SIGKILL from outside such as the OOM killer's, before or after
  it said it was ready), costs only the submission it held: that submission is tried again in a new process, and
  gets an error row after POOL_ATTEMPTS deaths. Submissions still queued are graded by new processes.
- The run gives up on what is queued only when grading processes cannot start: POOL_ATTEMPTS in a row exit on
  their own before they are ready. The rows then quote the error the last one reported, or say that it reported
  none.
- A grading process whose run is gone (its channel's reader died) stops with one line on stderr, no traceback.

Plain subprocesses rather than multiprocessing: nothing of the caller's __main__ is imported again, nothing is
pickled.
"""
from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, cast

import torch

from autograder.grading.grader import Grader, ungraded_result
from autograder.grading.options import GradeOptions
from autograder.recording import modules_hint
from autograder.release import Release, load_release
from autograder.reports.results import SubmissionResult
from autograder.sandbox import (
    adopt_environment, current_run_group, fork_zygote, joined_run_group, preload_modules, python_command,
    start_environment, use_run_group,
)

POOL_ATTEMPTS = 3  # grading processes that die (the machine's OOM killer...) are replaced this often
GRADING_PROCESS_DIED = "the grading process died while grading this submission"
COULD_NOT_START = "the grading process could not start"
ERROR_TAIL_LINES = 5  # lines of its traceback a grading process that cannot start reports
LANE_VARIABLE = "AUTOGRADER_LANE_CPUS"  # the CPUs a grading process, its fork server and its workers run on
Task = tuple[int, Path, str]  # (index in the run, notebook, submission id)


def serve() -> None:
    """A grading process: first line {"release", "out_dir", "cuda", "trusted", "confinement", "use_recording",
    "env", "handshake"}; with "handshake", answers {"ready": true} once it can grade (or {"error": its
    traceback's tail} and exits 1); then one {"result", "status"} line per {"path", "id", "more"} line. Without
    it (the cluster's actors, which read answers one by one) only result lines are written."""
    import signal

    # the run stops us (it kills us, or closes our input); a terminal's Ctrl-C, `timeout`'s or systemd's SIGTERM to
    # the whole group, a closed terminal's SIGHUP are its business: it writes its tables whole first
    for stop in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(stop, signal.SIG_IGN)
    _enter_lane()
    fork_zygote()  # first: its fork server, forked before this process reads anything (its environment included)
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # whatever checks print goes to stderr, never into the channel
    torch.set_num_threads(1)
    line = sys.stdin.readline()
    if not line:  # the run ended before it sent the setup
        return
    setup = json.loads(line)
    # its fork server imports what the workers will need while this process loads the release: the release's
    # recording names them, whether or not it was made in this environment
    preload_modules(modules_hint(setup["release"]), wait=False)
    handshake = bool(setup.get("handshake"))
    try:
        grader = _start(setup)
    except Exception:
        if handshake:
            _say(channel, {"error": _traceback_tail()})
        raise
    try:
        if not handshake or _say(channel, {"ready": True}):
            _grade_lines(grader, channel)
    finally:
        grader.close()


def cpu_lanes(jobs: int) -> list[set[int]] | None:
    """The machine's CPUs (those this process may use) split into `jobs` lanes, one per grading process; None when
    there are fewer CPUs than jobs, or one job. A judge and its worker take turns (request, reply, 445 times a
    submission): kept on the same CPUs, each turn is a switch on one core, not a wake-up sent to another core,
    which costs some 80 microseconds on a virtual machine instead of 5."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    if jobs < 2 or len(cpus) < jobs:
        return None
    return [set(cpus[i::jobs]) for i in range(jobs)]


def _enter_lane() -> None:
    """Before the fork server is forked: run on the lane's CPUs (cpu_lanes), with every process forked from here."""
    spec = os.environ.pop(LANE_VARIABLE, "")
    try:
        cpus = {int(c) for c in spec.split(",") if c}
        if cpus:
            os.sched_setaffinity(0, cpus)
    except (AttributeError, OSError, ValueError):
        pass  # CPUs taken away meanwhile (a container resized): any CPU will do


def _start(setup: dict) -> Grader:
    adopt_environment(setup["env"])
    use_run_group(joined_run_group(setup.get("memory_cgroup")))  # its workers' memory groups go under the run's
    options = GradeOptions(Path(setup["out_dir"]), quiet=True, cuda=setup["cuda"], trusted=setup["trusted"],
                           use_recording=setup["use_recording"])
    return Grader(load_release(Path(setup["release"])), options, setup["confinement"])


def _grade_lines(grader: Grader, channel) -> None:
    for line in sys.stdin:  # its end: the run has nothing more, or is gone
        task = json.loads(line)
        result = grader.grade_one(Path(task["path"]), task["id"], more=bool(task.get("more")))
        if not _say(channel, {"result": result.to_dict(), "status": grader.isolation_status}):
            return


def _say(channel, message: dict) -> bool:
    """Write one line to the run; False when the run is gone (its end of the pipe closed)."""
    try:
        channel.write(json.dumps(message) + "\n")
        channel.flush()
        return True
    except OSError:  # BrokenPipeError: nobody reads the other end
        # What is still buffered would fail again when the channel is closed at exit: it goes nowhere instead.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, channel.fileno())
        os.close(devnull)
        print(f"autograder: grading process {os.getpid()}: the run that started it is gone; stopping",
              file=sys.stderr, flush=True)
        return False


def _traceback_tail() -> str:
    import traceback

    lines = traceback.format_exc().strip().splitlines()
    return " | ".join(line.strip() for line in lines[-ERROR_TAIL_LINES:])


class GradingProcess:
    """One grading process, seen from the run: give it a task, read its answer lines."""

    def __init__(self, setup: dict, lane: int = 0, cpus: set[int] | None = None):
        # It starts with nothing of this process's environment (its fork server is forked from it first thing,
        # forkserver.fork_zygote), and gets it with its setup. The judges hash strings alike (set order in
        # checks); one torch thread, so that it has a single thread when it forks.
        env = {**start_environment(), "PYTHONHASHSEED": "0"}
        self.lane = lane
        if cpus:
            env[LANE_VARIABLE] = ",".join(map(str, sorted(cpus)))
        self.proc = subprocess.Popen(python_command("pool"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=env, text=True, encoding="utf-8")
        self.stdin, self.stdout = cast(IO[str], self.proc.stdin), cast(IO[str], self.proc.stdout)  # both piped
        self.task: Task | None = None
        self.ready = False  # it said it can grade
        self.error = ""  # what it reported when it could not start
        self.pending = b""  # the start of a line not yet complete
        self._send({**setup, "env": {**os.environ, "PYTHONHASHSEED": "0"}})

    def _send(self, message: dict) -> bool:
        try:
            self.stdin.write(json.dumps(message) + "\n")
            self.stdin.flush()
            return True
        except OSError:  # it is dead: its end of file tells the pool
            return False

    def give(self, task: Task, more: bool) -> bool:
        """Send it a submission to grade; `more`: another will probably follow (its worker is started early)."""
        self.task = task
        return self._send({"path": str(task[1]), "id": task[2], "more": more})

    def read_lines(self) -> list[str] | None:
        """The complete lines it has written since the last call; None at its end of file. Read from the file
        descriptor, not through a buffered reader: a buffer could hold a second line the selector never
        announces."""
        data = os.read(self.stdout.fileno(), 1 << 16)
        if not data:
            return None
        *lines, self.pending = (self.pending + data).split(b"\n")
        return [line.decode("utf-8", "replace") for line in lines]

    def exit_status(self) -> int:
        """Its exit status once its output ended (negative: the signal that killed it); killed if it lingers."""
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.returncode

    def could_not_start(self, status: int) -> bool:
        """It ended on its own before it was ready. A signal is not its doing (the OOM killer, a person's kill):
        that counts as a death, like one while grading."""
        return not self.ready and status >= 0

    def start_failure(self, status: int) -> str:
        """The message of every row given up on when grading processes cannot start: COULD_NOT_START and the error
        the process reported, else its exit status."""
        said = f": {self.error}" if self.error else \
            f" (it exited with status {status} before it was ready and reported no error; anything it printed is " \
            "on stderr)"
        return COULD_NOT_START + said

    def kill(self) -> None:
        """Kill the process and wait for it (its fork server and workers die with it)."""
        self.proc.kill()  # its fork server and workers follow (parent-death signals)
        self.proc.wait()

    def close_pipes(self) -> None:
        """Close our ends of its pipes, once it has ended; a pipe already broken is no error."""
        for pipe in (self.stdin, self.stdout):
            try:
                pipe.close()
            except OSError:
                pass

    def stop(self) -> None:
        """Retire the process once it has no more work: its stdin closed (its loop ends at end of file), up to 60 s
        to exit on its own, then killed."""
        try:
            self.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        self.kill()


def _run_group_wire() -> list[str] | None:
    run = current_run_group()
    return run.wire() if run is not None else None


class Pool:
    """Grades tasks with `jobs` grading processes; `finish(index, result)` as each one is done. `status` is the
    workers' confinement status line as the first answer reported it."""

    def __init__(self, release: Release, options: GradeOptions, confinement_status: str,
                 finish: Callable[[int, SubmissionResult], None]):
        self.release, self.jobs, self.finish = release, options.jobs, finish
        self.setup = {"release": str(release.dir), "out_dir": str(options.out_dir), "cuda": options.cuda,
                      "trusted": options.trusted, "confinement": confinement_status,
                      "use_recording": options.use_recording, "memory_cgroup": _run_group_wire(),
                      "handshake": True}  # it says when it is ready, or why it cannot start
        self.status = ""
        self.todo: list[Task] = []
        self.deaths: dict[int, int] = {}  # task index -> grading processes that died on it
        self.failed_starts = 0  # grading processes in a row that exited on their own before they were ready
        self.selector = selectors.DefaultSelector()
        self.procs: list[GradingProcess] = []
        self.lanes = cpu_lanes(self.jobs)

    def run(self, tasks: list[Task]) -> None:
        """Grade every task; returns when each has a result through `finish` (graded, or an error row after
        POOL_ATTEMPTS deaths or when processes cannot start). Every grading process is killed before it returns."""
        self.todo = list(tasks)
        try:
            for _ in range(min(self.jobs, len(self.todo))):
                self._start_one()
            while self.procs:
                for key, _ in self.selector.select():
                    self._read(key.data)
        finally:
            for gp in self.procs:
                gp.kill()

    def _start_one(self) -> None:
        taken = {gp.lane for gp in self.procs}
        lane = min(set(range(self.jobs)) - taken)  # a replacement takes the lane of the process it replaces
        gp = GradingProcess(self.setup, lane, self.lanes[lane] if self.lanes else None)
        self.procs.append(gp)
        self.selector.register(gp.stdout, selectors.EVENT_READ, gp)
        self._feed(gp)

    def _feed(self, gp: GradingProcess) -> None:
        gp.task = None
        if self.todo:  # if it is dead, its end of file puts the task back
            gp.give(self.todo.pop(0), more=len(self.todo) >= self.jobs)

    def _read(self, gp: GradingProcess) -> None:
        lines = gp.read_lines()
        if lines is None:
            self._died(gp)
            return
        for line in lines:
            if gp not in self.procs:  # retired after its last answer, or dead: nothing more to read
                return
            self._answer(gp, line)

    def _answer(self, gp: GradingProcess, line: str) -> None:
        try:
            reply = json.loads(line)
            if reply.get("ready"):
                gp.ready = True
                self.failed_starts = 0  # grading processes can start: the earlier failures were passing
                return
            if "error" in reply:
                gp.error = str(reply["error"])
                return
            result = SubmissionResult.from_dict(reply["result"])
        except (ValueError, KeyError, TypeError, AttributeError):  # not one of its lines: it is broken
            self._retire(gp)
            gp.kill()
            self._replace(gp)
            return
        self.status = self.status or reply.get("status", "")
        if gp.task is not None:  # an answer comes only to a task
            self.finish(gp.task[0], result)
        self._feed(gp)
        if gp.task is None:
            self._retire(gp)
            gp.stop()

    def _retire(self, gp: GradingProcess) -> None:
        self.selector.unregister(gp.stdout)
        self.procs.remove(gp)

    def _died(self, gp: GradingProcess) -> None:
        self._retire(gp)
        self._replace(gp)

    def _replace(self, gp: GradingProcess) -> None:
        """After `gp` ended: its submission back in the queue (or given up on), a new process for the queue."""
        status = gp.exit_status()
        gp.close_pipes()
        if gp.could_not_start(status):
            self.failed_starts += 1
            if gp.task is not None:
                self.todo.insert(0, gp.task)  # never graded: not the submission's death
        elif gp.task is not None:
            self._retry_or_give_up(gp.task)
        if self.failed_starts >= POOL_ATTEMPTS:  # it cannot start: no point in trying each submission
            while self.todo:
                self._give_up(self.todo.pop(0), gp.start_failure(status))
        if self.todo and len(self.procs) < self.jobs:
            self._start_one()

    def _retry_or_give_up(self, task: Task) -> None:
        self.deaths[task[0]] = self.deaths.get(task[0], 0) + 1
        if self.deaths[task[0]] >= POOL_ATTEMPTS:
            self._give_up(task, f"{GRADING_PROCESS_DIED} ({POOL_ATTEMPTS} times)")
        else:
            self.todo.insert(0, task)

    def _give_up(self, task: Task, why: str) -> None:
        i, path, sub_id = task
        self.finish(i, ungraded_result(self.release, path, sub_id, why))
