"""One worker process's life, judge side: started (forked by the fork server, or a new interpreter), confined to
a memory cgroup of its own where there is one, stopped by the grader for a reason it states (StopCause), killed,
and, when it ended while a request waited, its end diagnosed (diagnosis.py): a system fault (SystemFault, never
a student's score) or the notebook's doing (WorkerDied; the definition the request called is not run again).

The worker confines itself (isolation.py); the memory monitor and process killing are in processes.py; requests
and loading are client.WorkerProcess's, built on this class. Nothing here imports or executes student code.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import BinaryIO

from autograder.sandbox import cgroups, pipes
from autograder.sandbox.diagnosis import (
    RUN_OUT_OF_MEMORY, Hang, StopCause, cause_of_end, hang_of, how_it_ended, log_tail, sample_stacks,
)
from autograder.sandbox.environment import python_command, worker_environment
from autograder.sandbox.faults import SystemFault, WorkerDied, WorkerError, WorkerTimeout
from autograder.sandbox.forkserver import START_SECONDS, Child, ForkServer
from autograder.sandbox.isolation import Confinement
from autograder.sandbox.pipes import OverBudget, Pipes, widen_pipe, write_all
from autograder.sandbox.protocol import message_parts
from autograder.sandbox.processes import MONITORED, MemoryMonitor, children_of, kill_tree, process_tree
from autograder.sandbox.scratch import Scratch


@dataclass
class WorkerSpec:
    """What a worker is started with: the definitions it loads, how messages name its code, its confinement and time
    to import."""
    units: list[dict]  # extracted definitions, see notebook.extract.Unit.to_wire
    label: str = "your notebook"  # how messages name this worker's code
    owner: str = "your"  # possessive used in messages ("your scaled_dot_product raised ...")
    confinement: Confinement = field(default_factory=Confinement)
    threads: int = 1  # torch intra-op threads: fixed, so results do not depend on the machine
    import_seconds: float = 60.0
    max_restarts: int = 8  # attempts to load around statements that hang or kill the process
    environment: dict[str, str] = field(default_factory=dict)  # the assignment's variables (never over the grader's)


class WorkerLifecycle:
    """A worker process and what the judge holds of it: its channel (Pipes), its log, its scratch folder, its
    memory group; why it was stopped, the system faults and hangs met."""

    def __init__(self, spec: WorkerSpec):
        self.spec = spec
        self.proc: subprocess.Popen | Child | None = None
        self.deadline = float("inf")
        self._pipes: Pipes | None = None
        self._log: BinaryIO | None = None
        self._scratch: Scratch | None = None
        self._stop: StopCause | None = None  # why the grader stopped it (stop), if it did
        self._stop_reason = ""  # what the grader said when it stopped it: its messages quote it
        self._isolated = False  # the worker runs in its own PID namespace: killing it ends all it started
        # The worker is in the state a check starts from (its last request was an end_check: reset and seeded),
        # so the next check needs no seed request of its own
        self.ready_for_check = False
        self._prestarted = False  # forked and confining itself; its "ready" not read yet, nothing loaded (prestart)
        self.faults: list[SystemFault] = []  # every system fault met, in order (the judge compares counts)
        self.hangs: list[Hang] = []  # requests that timed out, not yet taken by the judge (take_hangs)
        self._target: str | None = None  # the notebook's top-level name the current request calls
        self.last_words = ""  # the end of the last worker's log, kept when it is killed
        self._memory_group: cgroups.WorkerGroup | None = None  # its own memory cgroup, where there is one
        self.memory_held_by = MONITORED

    def can_answer(self) -> bool:
        """Whether a request would be answered without starting a worker (remote.Remote._shown asks)."""
        return self.pid is not None

    @property
    def pid(self) -> int | None:
        """The running worker's process id; None where none is running (or it has ended)."""
        proc = self.proc
        return proc.pid if proc is not None and proc.poll() is None else None

    # -- starting -----------------------------------------------------------------------------
    def prestart(self) -> None:
        """Fork the worker now and let it confine itself, before the definitions it will load are known
        (ensure_started loads them): the next submission's worker starts while the judge finishes this one.
        Nothing is waited for; what it holds until then is what every worker starts with."""
        self.kill()
        try:
            self._begin_spawn()
            self._prestarted = True
        except (OSError, WorkerError):
            self.kill()  # ensure_started starts one the usual way, and says what fails

    def _spawn(self) -> str:
        self._begin_spawn()
        return self._await_ready()

    def _begin_spawn(self) -> None:
        self._scratch = Scratch()
        scratch = self._scratch.name
        self._stop, self._stop_reason, self.last_words = None, "", ""
        r_in, w_in = os.pipe()
        r_out, w_out = os.pipe()
        for fd in (w_in, w_out):
            widen_pipe(fd)
        conf = Confinement(**{**asdict(self.spec.confinement), "scratch": scratch, "parent_pid": os.getpid(),
                              "channel_fds": [r_in, w_out]})
        config = {"fd_in": r_in, "fd_out": w_out, "scratch": scratch, "threads": self.spec.threads,
                  "confinement": asdict(conf)}
        env = {**self.spec.environment, **worker_environment(self.spec.threads)}
        env["HOME"] = scratch
        self._log = tempfile.TemporaryFile(prefix="ag-worker-log-")
        server = ForkServer.get()
        try:
            if server is not None:
                self.proc = server.spawn(config, env, scratch, [r_in, w_out, self._log.fileno()])
            else:
                self.proc = subprocess.Popen(
                    python_command("worker", json.dumps(config)),
                    stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, pass_fds=(r_in, w_out),
                    start_new_session=True, env=env, cwd=scratch)
        finally:
            os.close(r_in)
            os.close(w_out)
        self.ready_for_check = False
        self._pipes = Pipes(w_in, r_out)
        MemoryMonitor.watch(self)

    def _await_ready(self) -> str:
        header, _ = self._next(time.monotonic() + START_SECONDS, "starting the worker")
        status = str(header.get("ready", ""))
        self._isolated = "own PID namespace" in status  # full, or restricted where PID namespaces are allowed
        self._enter_memory_group()
        return status

    # -- its memory group ---------------------------------------------------------------------
    def _enter_memory_group(self) -> None:
        """Move the worker's processes into a memory cgroup of their own, limited to its memory limit, before any
        student code runs (it runs only once the definitions are sent). Where none can be made, the memory monitor
        and RLIMIT_AS hold its memory, as they do anyway."""
        run, proc, limit = cgroups.current_run_group(), self.proc, self.spec.confinement.memory_bytes
        if run is None or proc is None or not limit:
            return
        try:
            self._memory_group = run.new_worker(proc.pid, process_tree(proc.pid), limit)
            self.memory_held_by = self._memory_group.describe()
        except (OSError, ValueError):
            self.memory_held_by = MONITORED

    def stop_if_partly_killed(self) -> bool:
        """Where the kernel's OOM killer took one of its processes and left the rest (cgroup v1 kills one process,
        never a group), stop the rest, as v2's memory.oom.group would: at its own limit, the student's memory error;
        at the run's, a system fault. Called by the memory monitor."""
        group = self._memory_group
        if group is None or not group.partly_killed():
            return False
        if group.verdict() == cgroups.MemoryVerdict.OWN:
            self.stop(self.over_own_limit())
        else:
            self.stop(RUN_OUT_OF_MEMORY, StopCause.STOPPED_FOR_THE_MACHINE)
        return True

    def over_own_limit(self) -> str:
        """Why a worker was stopped for its own memory limit, in the words of a student's message (the limit in MB)."""
        limit = self.spec.confinement.memory_bytes
        return (f"its processes together used more than the memory limit ({limit // 2**20} MB, files kept in memory "
                "(memfd, /dev/shm) included)")

    # -- stopping -----------------------------------------------------------------------------
    def stop(self, why: str, cause: StopCause = StopCause.STOPPED_FOR_ITS_CODE) -> None:
        """Kill the worker's processes from another thread (the memory monitor); the request waiting on it fails
        with a message saying `why`: for what its code did (the student's), or for the machine's sake
        (STOPPED_FOR_THE_MACHINE: a system fault, never the student's)."""
        self._stop, self._stop_reason = cause, why
        proc = self.proc
        if proc is not None:
            kill_tree(proc.pid)

    def kill(self) -> None:
        """Kill the worker and all it started, then release its memory group and keep the end of its log (last_words)
        for a message about its end. Safe to call when none runs."""
        self._prestarted = False
        if self.proc is not None:
            kill_tree(self.proc.pid, sweep=not self._isolated)
            if isinstance(self.proc, subprocess.Popen):  # the fork server reaps its own children
                try:
                    self.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    pass
            self.proc = None
        if self._memory_group is not None:
            self._memory_group.close()
            self._memory_group = None
        if self._log is not None:
            self.last_words = self.log_tail(600)  # what it wrote last, for a message about its end
            try:
                self._log.close()
            except OSError:
                pass
        if self._pipes is not None:
            self._pipes.close()
        self._pipes = self._log = None
        if self._scratch is not None:
            try:
                self._scratch.cleanup()
            except OSError:
                pass
            self._scratch = None

    close = kill

    def log_tail(self, n: int = 1500) -> str:
        """The last `n` bytes the current worker wrote to its log, as text ("" where it has none)."""
        return log_tail(self._log, n)

    # -- its channel -------------------------------------------------------------------------
    def _next(self, deadline: float, doing: str, sample: bool = False):
        """The next message; at the deadline the worker is killed (with `sample`, where its code was is noted
        first, in self.hangs)."""
        if self._pipes is None:
            raise WorkerDied(f"the process running {self.spec.label} is gone ({doing})")
        item = self._pipes.replies.get(deadline)
        if item is None:
            if sample:
                self.hangs.append(self._hang(doing))
            self.kill()
            raise WorkerTimeout(f"{doing} did not finish in time")
        if isinstance(item, EOFError):
            raise self._death(doing)
        if isinstance(item, OverBudget):
            self.kill()
            over = WorkerDied(f"{doing} sent the grader more results during one check than it takes "
                              f"({pipes.MAX_CHECK_BYTES >> 20} MB of tensors, structured values such as lists and dicts "
                              f"counted {pipes.HEADER_WEIGHT} times their size): return less")
            self._not_run_again(doing, over)
            raise over
        if isinstance(item, Exception):
            self.kill()
            raise WorkerDied(f"the process running {self.spec.label} sent a malformed reply while {doing}: {item}")
        return item

    def _send(self, header: dict, tensors: dict, doing: str) -> None:
        """Write one message by the request's deadline: a worker that stops reading its requests (its code
        replaced the worker's loop) times out like one that never answers, never blocks the judge. The message's
        parts go out in as few writes as the pipe takes (one, usually): each write wakes the worker, and one
        wake-up per part costs both processes a context switch for nothing."""
        assert self._pipes is not None  # set with the process it writes to (_begin_spawn); started before any send
        fd = self._pipes.stdin.fileno()
        views = [memoryview(part).cast("B") for part in message_parts(header, tensors)]
        try:
            self._write_all(fd, [v for v in views if v.nbytes], doing)
        except OSError:  # BrokenPipeError: it is gone
            raise self._death(doing) from None
        finally:
            for view in views:
                view.release()

    def _write_all(self, fd: int, views: list[memoryview], doing: str) -> None:
        if not write_all(fd, views, self.deadline):
            self.hangs.append(self._hang(doing))
            self.kill()
            raise WorkerTimeout(f"{doing} did not finish in time (the worker stopped reading its requests)")

    # -- its end, diagnosed -------------------------------------------------------------------
    def _death(self, doing: str) -> WorkerDied:
        """The error of a request whose worker ended, by why it ended (StopCause): a system fault (recorded,
        returned as SystemFault), else the notebook's doing: its own memory limit, its own exit or crash, a stop
        for what its code did; what it called would do the same again, so it is not run again."""
        proc = self.proc
        try:
            code = proc.wait(timeout=5) if proc else None
        except subprocess.TimeoutExpired:
            code = None
        group = self._memory_group
        memory = group.verdict() if group and code == -signal.SIGKILL else cgroups.MemoryVerdict.NONE
        cause = cause_of_end(self._stop, code, bool(getattr(proc, "server_gone", False)), memory)
        if cause is StopCause.FORK_SERVER_GONE:
            return self._fault("ended with its fork server", doing)
        if cause is StopCause.STOPPED_FOR_THE_MACHINE:
            return self._fault(f"was stopped: {self._stop_reason}", doing)
        if cause is StopCause.RUN_MEMORY_LIMIT:
            return self._fault(f"was killed when {RUN_OUT_OF_MEMORY}", doing)
        if cause is StopCause.KILLED_FROM_OUTSIDE:
            # the machine's out-of-memory killer or another process. A worker in a PID namespace of its own cannot
            # send it to itself (its init ignores it).
            return self._fault("was killed from outside (SIGKILL: the machine's out-of-memory killer, or another "
                               "process)", doing, certain=self._isolated,
                               how="" if self._isolated else "ended (signal SIGKILL: killed, by itself or for lack "
                                                             "of memory)")
        why = self.over_own_limit() if cause is StopCause.OWN_MEMORY_LIMIT else self._stop_reason
        died = WorkerDied(f"the process running {self.spec.label} ended ({how_it_ended(code, why)}) while {doing}")
        self._not_run_again(doing, died, ended=cause is StopCause.ENDED)
        self.kill()
        return died

    def _fault(self, cause: str, doing: str = "", certain: bool = True, how: str = "") -> SystemFault:
        """A system fault (SystemFault), recorded; the worker is killed (the next request starts a fresh one)."""
        self.kill()
        summary = f"the process running {self.spec.label} {how or cause}"
        fault = SystemFault(f"{summary} while {doing}" if doing else summary, summary, certain)
        self.faults.append(fault)
        return fault

    def take_hangs(self) -> list[Hang]:
        """The requests that did not finish (Hang) since the last call."""
        hangs, self.hangs = self.hangs, []
        return hangs

    def _not_run_again(self, doing: str, error: WorkerDied, ended: bool = False) -> None:
        """Like a hang: the notebook's function the request called (if it called one) is not run again in later
        checks, which fail with `error`'s message (the worker is gone: no stack to read)."""
        if self._target:
            self.hangs.append(Hang(doing, [], False, self._target, why=str(error), ended=ended))

    def _hang(self, doing: str) -> Hang:
        return hang_of(doing, sample_stacks(self._code_pid(), self._log), self._target)

    def _code_pid(self) -> int | None:
        """The process running the code: the worker, or in a PID namespace of its own, the namespace's init (the
        worker's only child: the worker waits for it)."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return None
        if not self._isolated:
            return proc.pid
        children = children_of(proc.pid)  # (its children file: cheap enough for every check)
        return children[0] if len(children) == 1 else None
