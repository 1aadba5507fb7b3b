"""Grading with `jobs` grading processes side by side (`--jobs N`).

Each grading process (`python -m autograder.entrypoints pool`) holds one Grader: its own judge, reference and
fork server. It takes one submission at a time over a pipe (JSON lines) and answers with its result, so a
process that dies costs only the submission it held: that submission is tried again in a new process, and gets
an error row after POOL_ATTEMPTS deaths. Plain subprocesses rather than multiprocessing: nothing of the
caller's __main__ is imported again, nothing is pickled.
"""
from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from autograder.grading.grader import Grader, ungraded_result
from autograder.grading.options import GradeOptions
from autograder.release import Release, load_release
from autograder.reports.results import SubmissionResult
from autograder.sandbox import cgroups
from autograder.sandbox.environment import adopt_environment, python_command, start_environment
from autograder.sandbox.forkserver import fork_zygote

POOL_ATTEMPTS = 3  # grading processes that die (the machine's OOM killer...) are replaced this often
GRADING_PROCESS_DIED = "the grading process died while grading this submission"
Task = tuple[int, Path, str]  # (index in the run, notebook, submission id)


def serve() -> None:
    """A grading process: first line {"release", "out_dir", "cuda", "trusted", "confinement", "use_recording",
    "env"}, then one {"path", "id", "more"} per submission; answers one line per submission:
    {"result", "status"}."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us; a terminal's Ctrl-C is its business
    fork_zygote()  # first: its fork server, forked before this process reads anything (its environment included)
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # whatever checks print goes to stderr, never into the channel
    torch.set_num_threads(1)
    setup = json.loads(sys.stdin.readline())
    adopt_environment(setup["env"])
    cgroups.use(cgroups.joined(setup.get("memory_cgroup")))  # its workers' memory groups go under the run's
    options = GradeOptions(Path(setup["out_dir"]), quiet=True, cuda=setup["cuda"], trusted=setup["trusted"],
                           use_recording=setup["use_recording"])
    grader = Grader(load_release(Path(setup["release"])), options, setup["confinement"])
    try:
        for line in sys.stdin:
            task = json.loads(line)
            result = grader.grade_one(Path(task["path"]), task["id"], more=bool(task.get("more")))
            channel.write(json.dumps({"result": result.to_dict(), "status": grader.isolation_status}) + "\n")
            channel.flush()
    finally:
        grader.close()


class GradingProcess:
    """One grading process, seen from the run: give it a task, read its answer line."""

    def __init__(self, setup: dict):
        # It starts with nothing of this process's environment (its fork server is forked from it first thing,
        # forkserver.fork_zygote), and gets it with its setup. The judges hash strings alike (set order in
        # checks); one torch thread, so that it has a single thread when it forks.
        env = {**start_environment(), "PYTHONHASHSEED": "0"}
        self.proc = subprocess.Popen(python_command("pool"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=env, text=True, encoding="utf-8")
        self.proc.stdin.write(json.dumps({**setup, "env": {**os.environ, "PYTHONHASHSEED": "0"}}) + "\n")
        self.proc.stdin.flush()
        self.task: Task | None = None
        self.graded = 0

    def kill(self) -> None:
        self.proc.kill()  # its fork server and workers follow (parent-death signals)
        self.proc.wait()

    def give(self, task: Task, more: bool) -> bool:
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


def _run_group_wire() -> list[str] | None:
    run = cgroups.current()
    return run.wire() if run is not None else None


class Pool:
    """Grades tasks with `jobs` grading processes; `finish(index, result)` as each one is done. `status` is the
    workers' confinement status line as the first answer reported it."""

    def __init__(self, release: Release, options: GradeOptions, confinement_status: str,
                 finish: Callable[[int, SubmissionResult], None]):
        self.release, self.jobs, self.finish = release, options.jobs, finish
        self.setup = {"release": str(release.dir), "out_dir": str(options.out_dir), "cuda": options.cuda,
                      "trusted": options.trusted, "confinement": confinement_status,
                      "use_recording": options.use_recording, "memory_cgroup": _run_group_wire()}
        self.status = ""
        self.todo: list[Task] = []
        self.deaths: dict[int, int] = {}  # task index -> grading processes that died on it
        self.failed_starts = 0  # grading processes in a row that died before grading anything
        self.selector = selectors.DefaultSelector()
        self.procs: list[GradingProcess] = []

    def run(self, tasks: list[Task]) -> None:
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
        gp = GradingProcess(self.setup)
        self.procs.append(gp)
        self.selector.register(gp.proc.stdout, selectors.EVENT_READ, gp)
        self._feed(gp)

    def _feed(self, gp: GradingProcess) -> None:
        gp.task = None
        if self.todo:  # if it is dead, its end of file puts the task back
            gp.give(self.todo.pop(0), more=len(self.todo) >= self.jobs)

    def _read(self, gp: GradingProcess) -> None:
        line = gp.proc.stdout.readline()
        try:
            reply = json.loads(line)
            result = SubmissionResult.from_dict(reply["result"])
        except (ValueError, KeyError, TypeError):  # end of file included: it died
            self._died(gp)
            return
        self.status = self.status or reply.get("status", "")
        gp.graded += 1
        self.finish(gp.task[0], result)
        self._feed(gp)
        if gp.task is None:
            self._retire(gp)
            gp.stop()

    def _retire(self, gp: GradingProcess) -> None:
        self.selector.unregister(gp.proc.stdout)
        self.procs.remove(gp)

    def _died(self, gp: GradingProcess) -> None:
        self._retire(gp)
        gp.kill()
        self.failed_starts = 0 if gp.graded else self.failed_starts + 1
        if gp.task is not None:
            self._retry_or_give_up(gp.task)
        if self.failed_starts >= POOL_ATTEMPTS:  # it cannot even start: no point in trying each submission
            while self.todo:
                self._give_up(self.todo.pop(0), "the grading process could not start (its error is on stderr)")
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
