"""Judge side of one worker: start it, load the definitions, send requests, read replies.

Nothing here imports or executes student code. Values come back as plain data decoded by
`protocol.Decoder`; objects that are not plain data stay in the worker and appear here as `Remote`
(remote.py). Workers are forked from the fork server (forkserver.py) and confine themselves
(isolation.py); the memory monitor and process killing are in processes.py.
"""
from __future__ import annotations

import json
import os
import re
import select
import signal
import struct
import subprocess
import functools
import itertools
import tempfile
import time
import types
from dataclasses import asdict, dataclass, field
from typing import BinaryIO, Callable

from autograder.sandbox import cgroups
from autograder.sandbox.environment import python_command, worker_environment
from autograder.sandbox.changes import write_back
from autograder.sandbox.forkserver import START_SECONDS, Child, ForkServer
from autograder.sandbox.isolation import Confinement
from autograder.sandbox.processes import (
    MONITORED, MemoryMonitor, children_of, descendants, holds_any, kill_tree, process_tree,
)
from autograder.sandbox.protocol import (
    BUNDLE, MAX_BLOB_BYTES, MAX_HEADER_BYTES, STACK_SIGNAL, Decoder, Encoder, Handle, JudgeFunction, Pickled,
    ProtocolError, decode_message, message_parts, pack_sources,
)
from autograder.sandbox.remote import Remote, proxy_class
from autograder.sandbox.scratch import Scratch
from autograder.sandbox.worker import MODULE_NAME


class WorkerError(Exception):
    """The worker could not answer: it hung, died, or sent garbage. Costs the current check."""


class WorkerTimeout(WorkerError):
    pass


class WorkerDied(WorkerError):
    pass


class SystemFault(WorkerDied):
    """The worker ended for a cause outside the code it runs: killed by a signal it did not send itself (the
    machine's out-of-memory killer, another process), its fork server gone, or it could not be started at all.
    Never a student's score: the judge runs the check again on a fresh worker, then reports it not graded.
    `certain`: the worker could not have caused it (a worker without a PID namespace of its own can SIGKILL
    itself: its kill is tried again, and counts as before when it happens again)."""

    def __init__(self, message: str, summary: str, certain: bool = True):
        super().__init__(message)
        self.summary = summary  # the message without what the worker was doing
        self.certain = certain


STACK_SAMPLES = 3  # samples of a hung worker's stack: the frames common to all are where it loops
_FRAME = re.compile(r'^\s+File "(.*)", line (\d+) in (.*)$')
_WORKER_FILE = os.path.join("sandbox", "worker.py")


@dataclass
class Hang:
    """A request that did not finish: it timed out, or (`why`, the message then) its worker was stopped at its
    own memory limit or for sending the judge too much. `frames`: where the notebook's code was, as (file, line,
    function) of its cells' frames common to every sample of the worker's stack, innermost first (`sampled`
    False: no sample could be taken, the worker ignored the signal or was gone); `target`: the notebook's
    top-level name the request called, if it called one."""

    doing: str
    frames: list[tuple[str, int, str]]
    sampled: bool
    target: str | None
    why: str = ""
    ended: bool = False  # the worker ended by itself (an exit, a crash) rather than being stopped


def parse_stacks(text: str) -> list[tuple[str, int, str]] | None:
    """The notebook cells' frames, innermost first, of the worker's main thread in a faulthandler dump (all
    threads); None when the dump shows no main thread, or the worker waiting for the judge (a stand-in's call:
    the time went to the reference, not to the student's code)."""
    threads = []
    for block in re.split(r"\n(?=(?:Current thread|Thread) 0x)", text):
        frames = [(m.group(1), int(m.group(2)), m.group(3)) for m in map(_FRAME.match, block.splitlines()) if m]
        if frames:
            threads.append(frames)
    main = [t for t in threads if any(f.endswith(_WORKER_FILE) and fn == "main" for f, _, fn in t)]
    chosen = main[0] if main else threads[0] if len(threads) == 1 else None  # a deep stack loses its bottom
    if chosen is None or any(f.endswith(_WORKER_FILE) and fn == "ask_judge" for f, _, fn in chosen):
        return None
    return [frame for frame in chosen if frame[0].startswith("<cell ")]


def common_frames(stacks: list[list[tuple[str, int, str]]]) -> list[tuple[str, int, str]]:
    """The outermost frames (by file and function) that every stack shares, innermost first: a loop calling a
    helper shows the helper in some samples only, the loop's own frame in all."""
    outer = [list(reversed(s)) for s in stacks]
    n = 0
    while all(len(s) > n for s in outer) and len({(s[n][0], s[n][2]) for s in outer}) == 1:
        n += 1
    return list(reversed(outer[0][:n])) if outer else []


RUN_OUT_OF_MEMORY = "the grading run ran out of memory (not this notebook's memory limit)"  # a system fault
MAX_CHECK_BYTES = 512 << 20  # what one check may receive from a worker, in total (_Replies.check_bytes)
# a header's JSON becomes up to some 36 times its size in Python objects (`[[{}]],` is 7 bytes, two lists, a dict and
# a slot 248): counted 40 times, what one check receives stays under MAX_CHECK_BYTES of the judge's memory
HEADER_WEIGHT = 40


class OverBudget(ProtocolError):
    """A worker sent more than MAX_CHECK_BYTES during one check."""


_UNBOUND = re.compile(r"name '([A-Za-z_][A-Za-z0-9_]*)' is not defined")
# grader helper code calling `submission.NAME` the notebook does not define (the worker's module: worker.MODULE_NAME)
_MISSING = re.compile(rf"module '{MODULE_NAME}' has no attribute '([A-Za-z_][A-Za-z0-9_]*)'")
TRIPPED = "NotRunAgain"  # what a definition that hung an earlier check raises (standins.tripwire)


class StudentError(Exception):
    """Code in the worker raised. Carries the student-facing description only."""

    def __init__(self, what: str, info: dict, explain_name=None, explain_hang=None, functions: frozenset = frozenset(),
                 owner: str = "your"):
        self.what = what
        self.functions = functions  # the notebook's top-level callables (a stub among them is named: describe)
        self.type = str(info.get("type", "Exception"))
        self.message = str(info.get("message", ""))
        self.trace = [str(x) for x in info.get("traceback", [])][:8]
        self.stub = bool(info.get("stub"))
        self.unsent = bool(info.get("unsent"))  # it returned a value that cannot be sent (too many items...)
        self.mro = [str(x) for x in info.get("mro", [])][:32]  # dotted names of the exception's classes
        # a NameError for a global the notebook binds in a statement the grader did not run: where, and why
        found = _UNBOUND.search(self.message) if self.type == "NameError" and explain_name else None
        self.hint = (explain_name(found.group(1)) or "") if found else ""
        missing = _MISSING.search(self.message) if self.type == "AttributeError" else None
        # raised by the grader's own code (no frame of the notebook's), for a name the notebook does not define here:
        # said as a test cell says it ("`MLP` is defined in cell 25, which the grader skipped: ..."), no internals
        self.absent = self.hint if found and self.hint and not self.trace else ""
        if missing:
            name = missing.group(1)
            explained = explain_name(name) if explain_name else None
            self.absent = "" if self.trace else explained or f"{owner} notebook does not define `{name}`"
            # what checks quote of the error ("... failed (AttributeError: ...)"): the worker's module name is no
            # name the student wrote
            self.message, self.hint = explained or f"the notebook does not define `{name}`", ""
        # a definition that made an earlier check time out, called again: that check's message
        self.hung = (explain_hang(self.message) or "") if self.type == TRIPPED and explain_hang else ""
        self.message = self.hung or self.message  # what checks quote of an error
        super().__init__(self.describe())

    def stub_function(self) -> str:
        """The notebook's function or method that raised NotImplementedError (the innermost frame of the notebook's
        code), by its qualified name when its class is the notebook's: `mask_inputs`, `Value.__add__`; never a cell's
        top level."""
        found = re.search(r", in ([A-Za-z_][A-Za-z0-9_.]*): ", self.trace[-1]) if self.trace else None
        name = found.group(1) if found else ""
        name = name[:-len(".__init__")] if name.endswith(".__init__") else name  # constructing Value: `Value`
        return name if name.split(".")[0] in self.functions else ""  # `mask_inputs` or `Value.__add__`

    def describe(self, what: str = "") -> str:
        """The student-facing message; `what` names the code that raised in the check's words ("your train_epoch
        (on a small stand-in model)") where the request was a worker helper's."""
        what = what or self.what
        if self.hung:
            return self.hung
        if self.stub:
            # where it was raised: a `raise NotImplementedError()` left among written code is found there
            where = f", at {self.trace[-1]}" if self.trace else ""
            stub = self.stub_function()
            if stub and not re.search(rf"\b{re.escape(stub)}\b", what):  # a helper it calls is the stub
                return f"{what} calls {stub}, which is not implemented yet (it raised NotImplementedError){where}"
            return f"{what} is not implemented yet (it raised NotImplementedError){where}"
        if self.unsent:
            return f"{what} returned a value the grader cannot take: {self.message}"
        if self.absent:
            return self.absent
        text = f"{what} raised {self.type}: {self.message}".rstrip(": ")
        if self.hint:
            text += f" ({self.hint})"
        if self.trace:
            text += "\n    " + "\n    ".join(self.trace)
        return text


class MissingName(AttributeError):
    """The submission does not define a name a check uses."""


class NotRunAgain(Exception):
    """A definition that hung or ended an earlier check was called again: the check ends with that check's
    message (never a StudentError a check would quote in its own words, "... failed (NotRunAgain: ...)")."""


@dataclass
class WorkerSpec:
    units: list[dict]  # extracted definitions, see notebook.extract.Unit.to_wire
    label: str = "your notebook"  # how messages name this worker's code
    owner: str = "your"  # possessive used in messages ("your scaled_dot_product raised ...")
    confinement: Confinement = field(default_factory=Confinement)
    threads: int = 1  # torch intra-op threads: fixed, so results do not depend on the machine
    import_seconds: float = 60.0
    max_restarts: int = 8  # attempts to load around statements that hang or kill the process
    environment: dict[str, str] = field(default_factory=dict)  # the assignment's variables (never over the grader's)


@dataclass
class LoadReport:
    defined: dict[str, str]  # name -> "module" | "callable" | "value" (data, or an object that is not callable)
    errors: dict[int, str]  # unit index -> what went wrong while running it
    status: str  # isolation status line
    memory: str = ""  # what held its memory: its own memory cgroup, or the memory monitor and RLIMIT_AS


class _Replies:
    """The worker's replies, read in the calling thread with a deadline (no reader thread: one less
    thread hand-off per request). A reply is framed as protocol.write_message frames it; lengths
    over the protocol's limits are refused before anything is buffered. A frame's tensor data is read
    straight into the buffer its tensors then use (no copy on the judge's side)."""

    def __init__(self, fd: int):
        self.fd = fd
        os.set_blocking(fd, False)
        self.buf = bytearray()  # bytes read and not yet part of a message
        self.head: bytes | None = None  # the current frame's header, once read
        self.blob: bytearray | None = None  # its tensor data, filled up to self.got
        self.got = 0
        self.check_bytes = 0  # received since the current check began (WorkerProcess.start_check resets it)
        self.closed = False
        self.poller = select.poll()
        self.poller.register(fd, select.POLLIN)

    def _message(self):
        """The first frame as a message, once it is all read; else None."""
        if self.head is None:
            if len(self.buf) < 8:
                return None
            (n_head,) = struct.unpack_from("<Q", self.buf, 0)
            if n_head > MAX_HEADER_BYTES:
                raise ProtocolError(f"message header of {n_head} bytes is over the limit")
            if len(self.buf) < 16 + n_head:
                return None
            (n_blob,) = struct.unpack_from("<Q", self.buf, 8 + n_head)
            if n_blob > MAX_BLOB_BYTES:
                raise ProtocolError(f"message of {n_blob} bytes is over the limit")
            self.check_bytes += 16 + HEADER_WEIGHT * n_head + n_blob
            if self.check_bytes > MAX_CHECK_BYTES:  # before its data is read: the judge never holds it
                raise OverBudget(f"{self.check_bytes} bytes in one check")
            take = min(n_blob, len(self.buf) - 16 - n_head)
            self.head = bytes(self.buf[8:8 + n_head])
            self.blob = bytearray(n_blob)
            self.blob[:take] = self.buf[16 + n_head:16 + n_head + take]
            self.got = take
            del self.buf[:16 + n_head + take]
        assert self.blob is not None  # set with self.head, above or by an earlier call
        if self.got < len(self.blob):
            return None
        head, blob, self.head, self.blob = self.head, self.blob, None, None
        return decode_message(head, blob)

    def _read(self) -> bool:
        """Read what the pipe holds: into the current frame's tensor data, or the buffer. False at its end."""
        if self.blob is not None:
            with memoryview(self.blob) as view:
                n = os.readv(self.fd, [view[self.got:]])
            self.got += n
            return n > 0
        chunk = os.read(self.fd, 65536)
        self.buf += chunk
        return bool(chunk)

    def get(self, deadline: float):
        """(header, tensors); an EOFError or ProtocolError instance when the channel ended or carried
        garbage; None at the deadline."""
        while True:
            try:
                message = self._message()
                if message is not None:
                    return message
            except (ProtocolError, EOFError, ValueError) as exc:
                return exc if isinstance(exc, (ProtocolError, EOFError)) else ProtocolError(str(exc))
            if self.closed:
                return EOFError("the worker closed the channel")
            wait = None if deadline == float("inf") else max(0.0, deadline - time.monotonic()) * 1000
            try:
                if not self.poller.poll(wait):
                    return None
            except (OSError, ValueError) as exc:
                return EOFError(str(exc))
            try:
                self.closed = not self._read()
            except BlockingIOError:
                continue
            except OSError as exc:
                return EOFError(str(exc))

    def close(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


class WorkerProcess:
    """One worker process with the definitions loaded; restarted transparently after a failure."""

    def __init__(self, spec: WorkerSpec):
        self.spec = spec
        self.proc: subprocess.Popen | Child | None = None
        self.deadline = float("inf")
        self.excluded: dict[int, str] = {}
        self.report: LoadReport | None = None
        self._replies: _Replies | None = None
        self._stdin: BinaryIO | None = None
        self._log: BinaryIO | None = None
        self._scratch: Scratch | None = None
        self._stopped_because = ""
        self._stopped_for_system = False  # stopped for the machine's sake, not for what the worker did
        self._isolated = False  # the worker runs in its own PID namespace: killing it ends all it started
        # Answers the calls of the worker's stand-ins (kind, payload) -> value; None: it may make none
        self.callbacks: Callable[[str, dict], object] | None = None
        self._judge_functions: list[Callable] = []  # the judge's functions passed to the worker this check
        self._running_judge_function = False  # one is running: it may not call into the worker it was called from
        self.explain_name: Callable[[str], str | None] | None = None  # name -> why the notebook's binding of it is not there (or None)
        self.explain_hang: Callable[[str], str | None] | None = None  # what NotRunAgain names -> the message (or None)
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
        proc = self.proc
        return proc.pid if proc is not None and proc.poll() is None else None

    # -- process lifecycle --------------------------------------------------------------------
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
        self._stopped_because = self.last_words = ""
        self._stopped_for_system = False
        r_in, w_in = os.pipe()
        r_out, w_out = os.pipe()
        for fd in (w_in, w_out):
            _widen_pipe(fd)
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
        os.set_blocking(w_in, False)  # written by _send, by the request's deadline
        self._stdin = os.fdopen(w_in, "wb")
        self._replies = _Replies(r_out)
        MemoryMonitor.watch(self)

    def _await_ready(self) -> str:
        header, _ = self._next(time.monotonic() + START_SECONDS, "starting the worker")
        status = str(header.get("ready", ""))
        self._isolated = "own PID namespace" in status  # full, or restricted where PID namespaces are allowed
        self._enter_memory_group()
        return status

    def _enter_memory_group(self) -> None:
        """Move the worker's processes into a memory cgroup of their own, limited to its memory limit, before any
        student code runs (it runs only once the definitions are sent). Where none can be made, the memory monitor
        and RLIMIT_AS hold its memory, as they do anyway."""
        run, proc, limit = cgroups.current(), self.proc, self.spec.confinement.memory_bytes
        if run is None or proc is None or not limit:
            return
        try:
            self._memory_group = run.new_worker(proc.pid, process_tree(proc.pid), limit)
            self.memory_held_by = self._memory_group.describe()
        except (OSError, ValueError):
            self.memory_held_by = MONITORED

    def stop(self, why: str, system: bool = False) -> None:
        """Kill the worker's processes from another thread (the memory monitor); the request waiting
        on it fails with a message saying `why` (`system`: as a system fault, never the student's)."""
        self._stopped_because = why
        self._stopped_for_system = system
        proc = self.proc
        if proc is not None:
            kill_tree(proc.pid)

    def kill(self) -> None:
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
        for res in (self._stdin, self._log, self._replies):
            try:
                if res:
                    res.close()
            except OSError:
                pass
        self._stdin = self._log = self._replies = None
        if self._scratch is not None:
            try:
                self._scratch.cleanup()
            except OSError:
                pass
            self._scratch = None

    close = kill

    def log_tail(self, n: int = 1500) -> str:
        if self._log is None:
            return ""
        try:
            self._log.seek(0, os.SEEK_END)
            size = self._log.tell()
            self._log.seek(max(0, size - n))
            return self._log.read().decode("utf-8", "replace")
        except OSError:
            return ""

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

    def _death(self, doing: str) -> WorkerDied:
        proc = self.proc
        try:
            code = proc.wait(timeout=5) if proc else None
        except subprocess.TimeoutExpired:
            code = None
        if not self._stopped_because and getattr(proc, "server_gone", False):
            return self._fault("ended with its fork server", doing)
        if self._stopped_because and self._stopped_for_system:
            return self._fault(f"was stopped: {self._stopped_because}", doing)
        memory = self._memory_group.verdict() if self._memory_group and code == -signal.SIGKILL else ""
        if memory == cgroups.Verdict.SYSTEM and not self._stopped_because:
            return self._fault(f"was killed when {RUN_OUT_OF_MEMORY}", doing)
        if memory == cgroups.Verdict.OWN:
            self._stopped_because = self._stopped_because or self.over_own_limit()
        if not self._stopped_because and code == -signal.SIGKILL:
            # SIGKILL is never the grader's unless it says why (stop): the machine's out-of-memory killer or another
            # process. A worker in a PID namespace of its own cannot send it to itself (its init ignores it).
            return self._fault("was killed from outside (SIGKILL: the machine's out-of-memory killer, or another "
                               "process)", doing, certain=self._isolated,
                               how="" if self._isolated else "ended (signal SIGKILL: killed, by itself or for lack "
                                                             "of memory)")
        if code is None:
            how = "unknown status"
        elif code >= 0:
            how = f"exit code {code}"
        else:
            try:
                how = f"signal {signal.Signals(-code).name}"
            except ValueError:
                how = f"signal {-code}"
        if self._stopped_because:
            how = f"stopped: {self._stopped_because}"
        elif code in (-signal.SIGKILL, 137):
            how += ": killed, by itself or for lack of memory"
        elif code == -signal.SIGXCPU:
            how += ": past a CPU-time limit (RLIMIT_CPU) that the notebook's code set itself"
        died = WorkerDied(f"the process running {self.spec.label} ended ({how}) while {doing}")
        # its own memory limit, its own exit or crash (the faults of the machine returned above): what it called
        # would do the same again, so it is not run again
        self._not_run_again(doing, died, ended=not self._stopped_because)
        self.kill()
        return died

    def stop_if_partly_killed(self) -> bool:
        """Where the kernel's OOM killer took one of its processes and left the rest (cgroup v1 kills one process,
        never a group), stop the rest, as v2's memory.oom.group would: at its own limit, the student's memory error;
        at the run's, a system fault. Called by the memory monitor."""
        group = self._memory_group
        if group is None or not group.partly_killed():
            return False
        if group.verdict() == cgroups.Verdict.OWN:
            self.stop(self.over_own_limit())
        else:
            self.stop(RUN_OUT_OF_MEMORY, system=True)
        return True

    def over_own_limit(self) -> str:
        limit = self.spec.confinement.memory_bytes
        return (f"its processes together used more than the memory limit ({limit // 2**20} MB, files kept in memory "
                "(memfd, /dev/shm) included)")

    def _next(self, deadline: float, doing: str, sample: bool = False):
        """The next message; at the deadline the worker is killed (with `sample`, where its code was is noted
        first, in self.hangs)."""
        if self._replies is None:
            raise WorkerDied(f"the process running {self.spec.label} is gone ({doing})")
        item = self._replies.get(deadline)
        if item is None:
            if sample:
                self.hangs.append(self._hang(doing))
            self.kill()
            raise WorkerTimeout(f"{doing} did not finish in time")
        if isinstance(item, EOFError):
            raise self._death(doing)
        if isinstance(item, OverBudget):
            self.kill()
            over = WorkerDied(f"{doing} sent the grader more results during one check than it takes ({MAX_CHECK_BYTES >> 20} "
                              f"MB of tensors, structured values such as lists and dicts counted {HEADER_WEIGHT} times "
                              "their size): return less")
            self._not_run_again(doing, over)
            raise over
        if isinstance(item, Exception):
            self.kill()
            raise WorkerDied(f"the process running {self.spec.label} sent a malformed reply while {doing}: {item}")
        return item

    def _not_run_again(self, doing: str, error: WorkerDied, ended: bool = False) -> None:
        """Like a hang: the notebook's function the request called (if it called one) is not run again in later
        checks, which fail with `error`'s message (the worker is gone: no stack to read)."""
        if self._target:
            self.hangs.append(Hang(doing, [], False, self._target, why=str(error), ended=ended))

    def _hang(self, doing: str) -> Hang:
        stacks = [s for s in map(parse_stacks, self._sample_stacks()) if s is not None]
        return Hang(doing, common_frames(stacks), bool(stacks), self._target)

    def _sample_stacks(self) -> list[str]:
        """Dumps of the running worker's stacks: STACK_SIGNAL makes its faulthandler write them to its log (a
        worker that ignores or blocks the signal, or whose log is full, gives none)."""
        pid, log = self._code_pid(), self._log
        if pid is None or log is None:
            return []
        fd, texts = log.fileno(), []
        for _ in range(STACK_SAMPLES):
            try:
                start = os.fstat(fd).st_size
                os.kill(pid, STACK_SIGNAL)
            except OSError:
                break
            size, still, end = start, 0, time.monotonic() + 0.5
            while time.monotonic() < end and still < 2:  # written once it stops growing
                time.sleep(0.01)
                now = os.fstat(fd).st_size
                still = still + 1 if now == size and now > start else 0
                size = now
            if size <= start:
                break
            texts.append(os.pread(fd, min(size - start, 1 << 18), start).decode("utf-8", "replace"))
        return texts

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

    # -- loading ------------------------------------------------------------------------------
    def ensure_started(self) -> LoadReport:
        """Start and load, excluding any statement that hung or killed the process on a previous try."""
        if self.proc is not None and self.proc.poll() is None and not self._prestarted:
            assert self.report is not None  # set by the load that started this process
            return self.report
        for _ in range(self.spec.max_restarts + 1):
            status = self._start()
            units, sources = pack_sources([u if i not in self.excluded else {**u, "source": "pass"}
                                           for i, u in enumerate(self.spec.units)])
            deadline = time.monotonic() + self.spec.import_seconds
            current = -1
            try:
                self._send({"op": "load", "units": units}, sources, "receiving its definitions")
                while True:
                    header, _ = self._next(deadline, "loading definitions")
                    if "progress" in header:  # each statement gets the whole time limit, once
                        reached = header["progress"]
                        if type(reached) is int and current < reached < len(units):  # repeated: no more time
                            current = reached
                            deadline = time.monotonic() + self.spec.import_seconds
                        continue
                    break
            except WorkerTimeout:
                self._exclude(current, f"did not finish within {self.spec.import_seconds:.0f} s (an endless loop?)")
                continue
            except SystemFault as exc:
                if exc.certain:
                    raise  # not the statement's doing: never excluded for it
                self._exclude(current, str(exc).replace(f"the process running {self.spec.label} ", "").strip())
                continue
            except WorkerDied as exc:
                self._exclude(current, str(exc).replace(f"the process running {self.spec.label} ", "").strip())
                continue
            try:  # a reply the notebook forged (it can write to its channel) defines what it says, or nothing
                defined = dict(Decoder({}, _no_handles).decode(header.get("ok", {"__dict__": []})))
            except (ProtocolError, TypeError, ValueError):
                defined = {}
            errors = dict(self.excluded)
            errors.update(_load_errors(header.get("load_errors")))
            self.report = LoadReport(defined, errors, status, self.memory_held_by)
            return self.report
        raise WorkerDied(f"{self.spec.label} could not be loaded after {self.spec.max_restarts} restarts")

    def _start(self) -> str:
        """A worker ready to load (the prestarted one, or a new one); its status line. A worker that cannot be
        started is a system fault: no code of the notebook has run in it yet."""
        try:
            status = self._prestarted_status()
            if status is None:
                self.kill()
                status = self._spawn()
            return status
        except SystemFault:
            raise
        except (OSError, WorkerError) as exc:
            raise self._fault(f"could not be started ({_last_line(str(exc), self.last_words)})") from None

    def _prestarted_status(self) -> str | None:
        """The status of the worker prestart() started, once it is ready; None if there is none, or it failed
        (it is then started again the usual way)."""
        prestarted, self._prestarted = self._prestarted, False
        if not prestarted or self.proc is None:
            return None
        try:
            return self._await_ready()
        except WorkerError:
            return None

    def _exclude(self, unit: int, why: str) -> None:
        if unit < 0:  # died or hung before any statement: nothing to exclude, the worker itself failed
            why = _last_line(why, self.log_tail() or self.last_words)
            raise self._fault(f"failed before it ran any statement of the notebook ({why})")
        self.excluded[unit] = why

    # -- requests -----------------------------------------------------------------------------
    def request(self, op: str, *args, what: str = "", child_label: str | None = None):
        if self._running_judge_function:  # the worker waits for that function's answer, not for a request
            raise TypeError("a function passed to student code cannot call the student's code itself")
        pickled: list = []  # the judge's objects that go pickled, in one pickle (Pickled)
        enc = Encoder(on_unknown=functools.partial(self._encode_remote, pickled), by_value=True,
                      sources=op == "call_updating")
        header = {"op": op, "args": enc.encode(list(args))}
        if pickled:
            enc.tensors[BUNDLE] = self._pickled(pickled)
        self.ready_for_check = False
        self._target = _called_name(op, args)
        reply, tensors = self.roundtrip(header, enc.tensors, what or op)
        value = self.decode_reply(reply, tensors, what or op, child_label)
        self.ready_for_check = op == "end_check"
        if enc.sources is not None:  # a test cell's call: what it did to the cell's objects is written into them
            value = write_back(value, enc.sources, pickled)
        return value

    def _new_check(self) -> None:
        self._judge_functions.clear()
        if self._replies is not None:
            self._replies.check_bytes = 0

    def sweep_forked(self) -> list[int]:
        """Kill every process below the worker that holds the worker's channel to the judge (pids, as this process
        sees them). Only a fork that bypassed Python's fork hooks leaves a child holding it (isolation.py gives
        os.fork's children /dev/null in its place; a started program never inherits it): such a child may read the
        judge's requests or write into the replies at any later time. Swept between checks, what it did costs the
        check during which it did it, never a later one."""
        code = self._code_pid()
        if code is None or self._stdin is None or self._replies is None:
            return []
        channel = set()
        for fd in (self._stdin.fileno(), self._replies.fd):
            st = os.fstat(fd)
            channel.add((st.st_dev, st.st_ino))
        forked = [pid for pid in descendants(code) if holds_any(pid, channel)]
        for pid in forked:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        return forked

    def start_check(self, seed: int) -> None:
        """Bring the worker to the state a check starts from, if its last request did not (see end_check)."""
        self._new_check()
        self.sweep_forked()  # (a child forked while the notebook loaded, or by the last check)
        if not self.ready_for_check:
            self.request("seed", seed, what="seeding")

    def end_check(self, seed: int) -> bool:
        """After a check: whether student code hit a stub during it; the worker is then reset and seeded for the
        next check (one request for both). A worker that is not running has nothing to reset."""
        self._new_check()
        if self.proc is None:
            return False
        self.sweep_forked()
        self.deadline = time.monotonic() + 10
        return bool(self.request("end_check", seed, what="bookkeeping"))

    def roundtrip(self, header: dict, tensors: dict, what: str) -> tuple[dict, dict]:
        """Send one encoded request, answer the stand-ins' calls it causes, return the raw reply."""
        self.ensure_started()
        number = next(_REQUEST_NUMBERS)
        self._send({**header, "n": number}, tensors, f"receiving a call to {what}")
        reply, tensors = self._next(self.deadline, what, sample=True)
        while "callback" in reply:  # a stand-in asks for the reference's answer first (standins.py)
            self._answer(reply["callback"], tensors, what)
            reply, tensors = self._next(self.deadline, what, sample=True)
        if reply.get("re") != number:  # a reply to no request, or to another (the notebook wrote on the channel)
            self.kill()
            raise WorkerDied(f"the process running {self.spec.label} answered another request than {what}: its "
                             "replies were out of step (the notebook's code wrote on the grader's channel?)")
        return reply, tensors

    def decode_reply(self, reply: dict, tensors: dict, what: str, child_label: str | None = None):
        if "error" in reply:
            defined = self.report.defined if self.report else {}
            error = StudentError(what, reply["error"] if isinstance(reply["error"], dict) else {}, self.explain_name,
                                 self.explain_hang, frozenset(n for n, kind in defined.items() if kind == "callable"),
                                 self.spec.owner)
            if error.absent:  # the grader's own code met a name the notebook lacks: the check ends as `sub.NAME` would
                raise MissingName(error.absent) from None
            if error.hung:
                raise NotRunAgain(error.hung) from None
            raise error
        if "ok" not in reply:
            raise WorkerDied(f"the process running {self.spec.label} sent an unexpected reply")
        try:
            return Decoder(tensors, lambda h: proxy_class(Remote, h.type_name)(self, h, child_label or h.type_name)
                           ).decode(reply["ok"])
        except ProtocolError as exc:
            raise WorkerDied(f"{what} returned data the grader cannot read: {exc}") from None

    def _send(self, header: dict, tensors: dict, doing: str) -> None:
        """Write one message by the request's deadline: a worker that stops reading its requests (its code
        replaced the worker's loop) times out like one that never answers, never blocks the judge. The message's
        parts go out in as few writes as the pipe takes (one, usually): each write wakes the worker, and one
        wake-up per part costs both processes a context switch for nothing."""
        assert self._stdin is not None  # set with the process it writes to (_begin_spawn); started before any send
        fd = self._stdin.fileno()
        views = [memoryview(part).cast("B") for part in message_parts(header, tensors)]
        try:
            self._write_all(fd, [v for v in views if v.nbytes], doing)
        except OSError:  # BrokenPipeError: it is gone
            raise self._death(doing) from None
        finally:
            for view in views:
                view.release()

    def _write_all(self, fd: int, views: list[memoryview], doing: str) -> None:
        while views:
            try:
                written = os.writev(fd, views[:_IOV_MAX])
            except BlockingIOError:
                written = 0
            if written:
                views = _after(views, written)
                continue
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([], [fd], [], None if left == float("inf") else left)[1]:
                self.hangs.append(self._hang(doing))
                self.kill()
                raise WorkerTimeout(f"{doing} did not finish in time (the worker stopped reading its requests)")

    def _answer(self, callback, tensors: dict, doing: str) -> None:
        """Answer a stand-in's call with `self.callbacks`; what goes wrong goes back as an error, which the
        student's code meets as an exception (the check then fails like any other)."""
        if isinstance(callback, dict) and callback.get("kind") == "judge_function":
            return self._answer_judge_function(callback, tensors)
        if self.callbacks is None or not isinstance(callback, dict):
            self.kill()
            raise WorkerDied(f"the process running {self.spec.label} sent an unexpected call while {doing}")
        try:
            payload = Decoder(tensors, _no_handles).decode(callback.get("payload"))
            value = self.callbacks(str(callback.get("kind")), payload)
            enc = Encoder(on_unknown=_not_plain, by_value=True)
            reply = {"callback_ok": enc.encode(value)}
        except StudentError as exc:
            reply, enc = {"callback_error": f"the reference could not answer: {exc.describe()}"}, None
        except (WorkerError, ProtocolError, TypeError, ValueError, AttributeError) as exc:
            reply, enc = {"callback_error": f"the reference could not answer: {exc}"}, None
        self._send(reply, enc.tensors if enc else {}, doing)

    def _answer_judge_function(self, callback: dict, tensors: dict) -> None:
        """Run the judge's function student code called, on the plain data it passed; its value goes back."""
        enc = None
        try:
            payload = Decoder(tensors, _no_handles).decode(callback.get("payload"))
            number = payload.get("id") if isinstance(payload, dict) else None
            if not isinstance(number, int) or not 0 <= number < len(self._judge_functions):
                raise ValueError("no such function was passed to the notebook in this check")
            args, kwargs = payload.get("args", []), payload.get("kwargs", {})
            if not isinstance(args, list) or not isinstance(kwargs, dict):
                raise ValueError("malformed call")
            self._running_judge_function = True
            try:
                value = self._judge_functions[number](*args, **kwargs)
            finally:
                self._running_judge_function = False
            enc = Encoder(on_unknown=_not_plain, by_value=True)
            reply = {"callback_ok": enc.encode(value)}
        except (ProtocolError, WorkerError) as exc:
            reply, enc = {"callback_error": f"the test's function could not be called: {exc}"}, None
        except Exception as exc:  # noqa: BLE001 - the test's function raised: student code meets it as an error
            reply, enc = {"callback_error": f"the test's function raised {type(exc).__name__}: {exc}"}, None
        self._send(reply, enc.tensors if enc else {}, "answering a call of the test's function")

    def _encode_remote(self, pickled: list, obj):
        """What an object the Encoder does not know travels as: a function of the judge's is called back, a proxy
        is its handle, anything else goes pickled (its place in `pickled`, the request's objects that do)."""
        if isinstance(obj, JUDGE_FUNCTION_TYPES) and not isinstance(obj, Remote):
            self._judge_functions.append(obj)
            return JudgeFunction(len(self._judge_functions) - 1, getattr(obj, "__name__", "function"),
                                 next(_NONCES))
        if isinstance(obj, Remote):
            if object.__getattribute__(obj, "_worker") is not self:
                raise TypeError("an object from one worker cannot be passed to another")
            return object.__getattribute__(obj, "_handle")
        for i, earlier in enumerate(pickled):
            if earlier is obj:
                return Pickled(i)
        pickled.append(obj)
        return Pickled(len(pickled) - 1)

    def _pickled(self, objects: list):
        """The judge's objects that are not data (a test cell's `nn.MSELoss()`, a DataLoader, a model) as one pickle
        the worker unpickles, so that what they share stays shared (the worker's objects in them travel as their
        handles). One a class or function the worker cannot import by name makes (one a test cell defines) cannot
        go: TypeError."""
        import io
        import pickle

        import torch

        def persistent_id(x):
            if isinstance(x, Remote):
                handle = self._encode_remote([], x)
                return (handle.id, handle.path)
            return None

        def dumped(value) -> bytes:
            buf = io.BytesIO()
            pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
            pickler.persistent_id = persistent_id  # type: ignore[method-assign]
            pickler.dump(value)
            return buf.getvalue()

        try:
            data = dumped(objects)
        except Exception:  # noqa: BLE001 - unpicklable: a lambda inside, a test cell's own class, a lock...
            culprit = objects[0]
            for obj in objects:
                try:
                    dumped(obj)
                except Exception:  # noqa: BLE001 - (the same, one at a time, to name the object)
                    culprit = obj
                    break
            raise TypeError(f"cannot send a {type(culprit).__name__} to the worker") from None
        return torch.frombuffer(bytearray(data), dtype=torch.uint8)


_REQUEST_NUMBERS = itertools.count(1)  # every request's own number, echoed by its reply (roundtrip)

PIPE_BYTES = 1 << 20  # the channel's pipes hold this much: a large tensor crosses in a few writes, not hundreds


_IOV_MAX = 1024  # buffers one writev takes (Linux's UIO_MAXIOV)


def _after(views: list[memoryview], n: int) -> list[memoryview]:
    """What is left of `views` once their first `n` bytes are written."""
    while views and n >= views[0].nbytes:
        n -= views[0].nbytes
        views = views[1:]
    return [views[0][n:], *views[1:]] if views and n else views


def _load_errors(reported) -> dict[int, str]:
    """{unit: what it raised} from a load reply's "load_errors"; entries that are not what a worker writes (a
    notebook that forged its reply) are left out, never the judge's error."""
    errors = {}
    for err in reported if isinstance(reported, list) else []:
        if not isinstance(err, dict) or type(err.get("unit")) is not int:
            continue
        lines = err["traceback"] if isinstance(err.get("traceback"), list) else []
        trace = "; ".join(str(line) for line in lines[-2:])
        errors[err["unit"]] = f"raised {err.get('type')}: {err.get('message')}" + (f" ({trace})" if trace else "")
    return errors


def _widen_pipe(fd: int) -> None:
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (OSError, AttributeError, ImportError):
        pass  # the system's limit is lower (fs.pipe-max-size): the default size works, with more wake-ups


def _last_line(why: str, log: str) -> str:
    """`why`, with the last line the worker wrote (its error, when it failed on its own)."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    return f"{why}; its last words: {lines[-1][:300]}" if lines else why


def _called_name(op: str, args: tuple) -> str | None:
    """The notebook's top-level name a request calls (a Remote looked up by name in the module), if any."""
    if op not in ("call", "call_updating") or not args or not isinstance(args[0], Remote):
        return None
    handle = object.__getattribute__(args[0], "_handle")
    return handle.path if handle.id == 0 and handle.path and "." not in handle.path else None


# what a test passes to student code as a function it calls back (a lambda, a def of the cell, a bound method,
# math.sin, functools.partial)
JUDGE_FUNCTION_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, functools.partial)
_NONCES = itertools.count()


def _no_handles(handle: Handle):
    raise ProtocolError("unexpected object handle")


def _not_plain(obj):
    raise TypeError(f"a {type(obj).__name__} cannot be sent to another worker")

