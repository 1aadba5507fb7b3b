"""Judge side of the sandbox: starts workers, talks to them, and wraps their objects in proxies.

Nothing here imports or executes student code. Values come back as plain data decoded by
`protocol.Decoder`; objects that are not plain data stay in the worker and appear here as `Remote`.
"""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from autograder.sandbox.isolation import Confinement
from autograder.sandbox.protocol import (
    Decoder, Encoder, Handle, ProtocolError, read_message, write_message,
)

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
_ENV_PASSTHROUGH = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "HF_HUB_OFFLINE", "HF_HOME",
                    "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "NVIDIA_VISIBLE_DEVICES")
START_SECONDS = 120.0


class WorkerError(Exception):
    """The worker could not answer: it hung, died, or sent garbage. Costs the current check."""


class WorkerTimeout(WorkerError):
    pass


class WorkerDied(WorkerError):
    pass


class StudentError(Exception):
    """Code in the worker raised. Carries the student-facing description only."""

    def __init__(self, what: str, info: dict):
        self.what = what
        self.type = str(info.get("type", "Exception"))
        self.message = str(info.get("message", ""))
        self.trace = [str(x) for x in info.get("traceback", [])][:8]
        self.stub = bool(info.get("stub"))
        super().__init__(self.describe())

    def describe(self) -> str:
        if self.stub:
            return f"{self.what} is not implemented yet (it raised NotImplementedError)"
        text = f"{self.what} raised {self.type}: {self.message}".rstrip(": ")
        if self.trace:
            text += "\n    " + "\n    ".join(self.trace)
        return text


class MissingName(AttributeError):
    """The submission does not define a name a check uses."""


@dataclass
class WorkerSpec:
    units: list[dict]  # extracted definitions, see notebook.extract.Unit.to_wire
    label: str = "your notebook"  # how messages name this worker's code
    owner: str = "your"  # possessive used in messages ("your scaled_dot_product raised ...")
    confinement: Confinement = field(default_factory=Confinement)
    threads: int = 1  # torch intra-op threads: fixed, so results do not depend on the machine
    import_seconds: float = 60.0
    max_restarts: int = 8  # attempts to load around statements that hang or kill the process


@dataclass
class LoadReport:
    defined: dict[str, str]  # name -> "module" | "value"
    errors: dict[int, str]  # unit index -> what went wrong while running it
    status: str  # isolation status line


class WorkerProcess:
    """One worker process with the definitions loaded; restarted transparently after a failure."""

    def __init__(self, spec: WorkerSpec):
        self.spec = spec
        self.proc: subprocess.Popen | None = None
        self.deadline = float("inf")
        self.excluded: dict[int, str] = {}
        self.report: LoadReport | None = None
        self._replies: queue.Queue = queue.Queue()
        self._stdin = None
        self._log = None
        self._scratch: tempfile.TemporaryDirectory | None = None

    # -- process lifecycle --------------------------------------------------------------------
    def _spawn(self) -> str:
        self._scratch = tempfile.TemporaryDirectory(prefix="ag-worker-")
        scratch = self._scratch.name
        r_in, w_in = os.pipe()
        r_out, w_out = os.pipe()
        conf = Confinement(**{**asdict(self.spec.confinement), "scratch": scratch})
        config = {"fd_in": r_in, "fd_out": w_out, "scratch": scratch, "threads": self.spec.threads,
                  "confinement": asdict(conf)}
        env = {k: os.environ[k] for k in _ENV_PASSTHROUGH if k in os.environ}
        env.update(PYTHONPATH=_PACKAGE_ROOT, PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1", HOME=scratch,
                   OMP_NUM_THREADS=str(self.spec.threads), TOKENIZERS_PARALLELISM="false",
                   PYTHONWARNINGS="ignore")
        self._log = tempfile.TemporaryFile(prefix="ag-worker-log-")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "autograder.sandbox.worker", json.dumps(config)],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, pass_fds=(r_in, w_out),
            start_new_session=True, env=env, cwd=scratch)
        os.close(r_in)
        os.close(w_out)
        self._stdin = os.fdopen(w_in, "wb")
        self._replies = queue.Queue()
        threading.Thread(target=self._read_loop, args=(os.fdopen(r_out, "rb"), self._replies), daemon=True).start()
        header, _ = self._next(time.monotonic() + START_SECONDS, "starting the worker")
        return str(header.get("ready", ""))

    @staticmethod
    def _read_loop(stream, replies: queue.Queue) -> None:
        try:
            while True:
                replies.put(read_message(stream))
        except (EOFError, ProtocolError, OSError, ValueError) as exc:
            replies.put(exc)
        finally:
            stream.close()

    def kill(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
            self.proc = None
        for res in (self._stdin, self._log):
            try:
                res and res.close()
            except OSError:
                pass
        self._stdin = self._log = None
        if self._scratch is not None:
            self._scratch.cleanup()
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

    def _death(self, doing: str) -> WorkerDied:
        code = self.proc.wait(timeout=5) if self.proc else None
        how = f"exit code {code}" if code is not None and code >= 0 else f"signal {signal.Signals(-code).name}" \
            if code is not None else "unknown status"
        if code in (-signal.SIGKILL, 137):
            how += ", possibly the memory limit"
        self.kill()
        return WorkerDied(f"the process running {self.spec.label} ended ({how}) while {doing}")

    def _next(self, deadline: float, doing: str):
        try:
            wait = None if deadline == float("inf") else max(0.0, deadline - time.monotonic())
            item = self._replies.get(timeout=wait)
        except queue.Empty:
            self.kill()
            raise WorkerTimeout(f"{doing} did not finish in time") from None
        if isinstance(item, EOFError):
            raise self._death(doing)
        if isinstance(item, Exception):
            self.kill()
            raise WorkerDied(f"the process running {self.spec.label} sent a malformed reply while {doing}: {item}")
        return item

    # -- loading ------------------------------------------------------------------------------
    def ensure_started(self) -> LoadReport:
        """Start and load, excluding any statement that hung or killed the process on a previous try."""
        if self.proc is not None and self.proc.poll() is None:
            return self.report
        for _ in range(self.spec.max_restarts + 1):
            self.kill()
            status = self._spawn()
            units = [u if i not in self.excluded else {**u, "source": "pass"} for i, u in enumerate(self.spec.units)]
            write_message(self._stdin, {"op": "load", "units": units})
            deadline = time.monotonic() + self.spec.import_seconds
            current = -1
            try:
                while True:
                    header, _ = self._next(deadline, "loading definitions")
                    if "progress" in header:
                        current = int(header["progress"])
                        continue
                    break
            except WorkerTimeout:
                self._exclude(current, f"did not finish within {self.spec.import_seconds:.0f} s (an endless loop?)")
                continue
            except WorkerDied as exc:
                self._exclude(current, str(exc).replace(f"the process running {self.spec.label} ", "").strip())
                continue
            defined = dict(Decoder({}, _no_handles).decode(header.get("ok", {"__dict__": []})))
            errors = dict(self.excluded)
            for err in header.get("load_errors", []):
                trace = "; ".join(err.get("traceback", [])[-2:])
                errors[int(err["unit"])] = f"raised {err['type']}: {err['message']}" + (f" ({trace})" if trace else "")
            self.report = LoadReport(defined, errors, status)
            return self.report
        raise WorkerDied(f"{self.spec.label} could not be loaded after {self.spec.max_restarts} restarts")

    def _exclude(self, unit: int, why: str) -> None:
        if unit < 0:  # died or hung before any statement: nothing to exclude, the worker itself failed
            raise WorkerDied(f"the worker for {self.spec.label} failed to start: {why}\n{self.log_tail()}")
        self.excluded[unit] = why

    # -- requests -----------------------------------------------------------------------------
    def request(self, op: str, *args, what: str = "", child_label: str | None = None):
        self.ensure_started()
        enc = Encoder(on_unknown=self._encode_remote)
        header = {"op": op, "args": enc.encode(list(args))}
        try:
            write_message(self._stdin, header, enc.tensors)
        except (BrokenPipeError, OSError):
            raise self._death(f"receiving a call to {what or op}") from None
        reply, tensors = self._next(self.deadline, f"{what or op}")
        if "error" in reply:
            raise StudentError(what or op, reply["error"] if isinstance(reply["error"], dict) else {})
        if "ok" not in reply:
            raise WorkerDied(f"the process running {self.spec.label} sent an unexpected reply")
        try:
            return Decoder(tensors, lambda h: Remote(self, h, child_label or h.type_name)).decode(reply["ok"])
        except ProtocolError as exc:
            raise WorkerDied(f"{what or op} returned data the grader cannot read: {exc}") from None

    def _encode_remote(self, obj):
        if isinstance(obj, Remote):
            if object.__getattribute__(obj, "_worker") is not self:
                raise TypeError("an object from one worker cannot be passed to another")
            return object.__getattribute__(obj, "_handle")
        raise TypeError(f"cannot send a {type(obj).__name__} to the worker")


def _no_handles(handle: Handle):
    raise ProtocolError("unexpected object handle")


class Remote:
    """A proxy for an object in a worker. Attribute access, calls, indexing and iteration are remote
    requests; what comes back is plain data or another Remote."""

    __slots__ = ("_worker", "_handle", "_label")

    def __init__(self, worker: WorkerProcess, handle: Handle, label: str):
        object.__setattr__(self, "_worker", worker)
        object.__setattr__(self, "_handle", handle)
        object.__setattr__(self, "_label", label)

    def _req(self, op, *args, what=None):
        w = object.__getattribute__(self, "_worker")
        return w.request(op, self, *args, what=what or self._ag_what)

    @property
    def _ag_what(self) -> str:
        w = object.__getattribute__(self, "_worker")
        return f"{w.spec.owner} {object.__getattribute__(self, '_label')}"

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        label = object.__getattribute__(self, "_label")
        child = f"{label}.{name}" if label else name
        w = object.__getattribute__(self, "_worker")
        return w.request("getattr", self, name, what=f"{w.spec.owner} {child}", child_label=child)

    def __setattr__(self, name, value):
        self._req("setattr", name, value)

    def __call__(self, *args, **kwargs):
        return self._req("call", list(args), kwargs, False)

    def __getitem__(self, key):
        return self._req("getitem", key)

    def __setitem__(self, key, value):
        self._req("setitem", key, value)

    def __len__(self):
        return self._req("len")

    def __iter__(self):
        return iter(self._req("items"))

    def __repr__(self):
        h = object.__getattribute__(self, "_handle")
        return f"<remote {h.type_name}: {object.__getattribute__(self, '_label')}>"


def keep(fn: Remote, *args, **kwargs) -> Remote:
    """Call a remote callable and keep the result in the worker (e.g. a loss to call .backward() on)."""
    return fn._req("call", list(args), kwargs, True)


def remote_isinstance(obj, dotted_type: str) -> bool:
    """isinstance() evaluated in the worker, e.g. remote_isinstance(model, "torch.nn.Module")."""
    return isinstance(obj, Remote) and bool(obj._req("isinstance", dotted_type))


def remote_attr(obj: Remote, path: str):
    """A dotted attribute path read in one step inside the worker, e.g. remote_attr(model, "w.grad")
    (reading `model.w` first would copy the tensor to the judge and lose its .grad)."""
    return obj._req("getpath", path)


def remote_type(obj: Remote) -> dict:
    return obj._req("type")


def remote_items(obj: Remote) -> list:
    return obj._req("items")
