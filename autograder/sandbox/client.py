"""Judge side of one worker: load the definitions, send requests, read replies, answer the calls they cause.

Nothing here imports or executes student code. Values come back as plain data decoded by `values.Decoder`;
objects that are not plain data stay in the worker and appear here as `Remote` (remote.py). What crosses with a
request is calls.py's; the worker's process (started, confined, stopped, its end diagnosed) is lifecycle.py's,
the pipes it talks through pipes.py's, what a request can fail with faults.py's.
"""
from __future__ import annotations

import itertools
import os
import signal
import time
from dataclasses import dataclass
from typing import Callable

from autograder.sandbox.calls import Calls, called_name, no_handles, standin_reply
from autograder.sandbox.changes import write_back
from autograder.sandbox.diagnosis import last_line
from autograder.sandbox.faults import (
    MissingName, StudentError, SystemFault, TrippedCall, WorkerDied, WorkerError, WorkerTimeout,
)
from autograder.sandbox.lifecycle import WorkerLifecycle, WorkerSpec
from autograder.sandbox.processes import descendants, holds_any
from autograder.sandbox.protocol import BUNDLE, ProtocolError, pack_sources
from autograder.sandbox.remote import Remote, proxy_class
from autograder.sandbox.values import Decoder


@dataclass
class LoadReport:
    """What loading a notebook's definitions in a worker gave: the names defined (and of what kind), the statements
    that failed, the confinement and memory status."""
    defined: dict[str, str]  # name -> "module" | "callable" | "value" (data, or an object that is not callable)
    errors: dict[int, str]  # unit index -> what went wrong while running it
    status: str  # isolation status line
    memory: str = ""  # what held its memory: its own memory cgroup, or the memory monitor and RLIMIT_AS


class WorkerProcess(WorkerLifecycle):
    """One worker process with the definitions loaded; restarted transparently after a failure."""

    def __init__(self, spec: WorkerSpec):
        super().__init__(spec)
        self.excluded: dict[int, str] = {}
        self.report: LoadReport | None = None
        # Answers the calls of the worker's stand-ins (kind, payload) -> value; None: it may make none
        self.callbacks: Callable[[str, dict], object] | None = None
        self._calls = Calls(self)  # the judge's functions passed to the worker this check
        self.explain_name: Callable[[str], str | None] | None = None  # name -> why the notebook's binding of it is not there (or None)
        self.explain_hang: Callable[[str], str | None] | None = None  # what a tripped definition names -> the message (or None)

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
                defined = dict(Decoder({}, no_handles).decode(header.get("ok", {"__dict__": []})))
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
            raise self._fault(f"could not be started ({last_line(str(exc), self.last_words)})") from None

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
            why = last_line(why, self.log_tail() or self.last_words)
            raise self._fault(f"failed before it ran any statement of the notebook ({why})")
        self.excluded[unit] = why

    # -- requests -----------------------------------------------------------------------------
    def request(self, op: str, *args, what: str = "", child_label: str | None = None):
        """Send request `op` with `args` and return the answer, decoded: data, or a Remote labelled `child_label`. A
        test cell's call (`call_updating`) writes what it changed back into the judge's objects. Raises StudentError
        (what student code raised), MissingName, TrippedCall or a WorkerError; `what` names the request in their
        messages."""
        if self._calls.running_judge_function:  # the worker waits for that function's answer, not for a request
            raise TypeError("a function passed to student code cannot call the student's code itself")
        pickled: list = []  # the judge's objects that go pickled, in one pickle (Pickled)
        enc = self._calls.encoder(pickled, sources=op == "call_updating")
        header = {"op": op, "args": enc.encode(list(args))}
        if pickled:
            enc.tensors[BUNDLE] = self._calls.pickled(pickled)
        self.ready_for_check = False
        self._target = called_name(op, args)
        reply, tensors = self.roundtrip(header, enc.tensors, what or op)
        value = self.decode_reply(reply, tensors, what or op, child_label)
        self.ready_for_check = op == "end_check"
        if enc.sources is not None:  # a test cell's call: what it did to the cell's objects is written into them
            value = write_back(value, enc.sources, pickled)
        return value

    def _new_check(self) -> None:
        self._calls.new_check()
        if self._pipes is not None:
            self._pipes.replies.check_bytes = 0

    def sweep_forked(self) -> list[int]:
        """Kill every process below the worker that holds the worker's channel to the judge (pids, as this process
        sees them). Only a fork that bypassed Python's fork hooks leaves a child holding it (isolation.py gives
        os.fork's children /dev/null in its place; a started program never inherits it): such a child may read the
        judge's requests or write into the replies at any later time. Swept between checks, what it did costs the
        check during which it did it, never a later one."""
        code = self._code_pid()
        if code is None or self._pipes is None:
            return []
        channel = set()
        for fd in self._pipes.fds():
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
        """The value of a raw reply; the error it carries raised as StudentError (MissingName, TrippedCall where it
        says so), WorkerDied for a reply that is neither."""
        if "error" in reply:
            defined = self.report.defined if self.report else {}
            error = StudentError(what, reply["error"] if isinstance(reply["error"], dict) else {}, self.explain_name,
                                 self.explain_hang, frozenset(n for n, kind in defined.items() if kind == "callable"),
                                 self.spec.owner)
            if error.absent:  # the grader's own code met a name the notebook lacks: the check ends as `sub.NAME` would
                raise MissingName(error.absent) from None
            if error.hung:
                raise TrippedCall(error.hung) from None
            raise error
        if "ok" not in reply:
            raise WorkerDied(f"the process running {self.spec.label} sent an unexpected reply")
        try:
            return Decoder(tensors, lambda h: proxy_class(Remote, h.type_name)(self, h, child_label or h.type_name)
                           ).decode(reply["ok"])
        except ProtocolError as exc:
            raise WorkerDied(f"{what} returned data the grader cannot read: {exc}") from None


    def _answer(self, callback, tensors: dict, doing: str) -> None:
        """Answer a stand-in's call with `self.callbacks`, or student code's call of a test's function; what goes
        wrong goes back as an error, which the student's code meets as an exception (the check then fails like
        any other)."""
        if isinstance(callback, dict) and callback.get("kind") == "judge_function":
            reply, tensors = self._calls.judge_function_reply(callback, tensors)
            return self._send(reply, tensors, "answering a call of the test's function")
        if self.callbacks is None or not isinstance(callback, dict):
            self.kill()
            raise WorkerDied(f"the process running {self.spec.label} sent an unexpected call while {doing}")
        reply, tensors = standin_reply(self.callbacks, callback, tensors)
        self._send(reply, tensors, doing)


_REQUEST_NUMBERS = itertools.count(1)  # every request's own number, echoed by its reply (roundtrip)


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
