"""Judge side of the sandbox: starts workers, talks to them, and wraps their objects in proxies.

Nothing here imports or executes student code. Values come back as plain data decoded by
`protocol.Decoder`; objects that are not plain data stay in the worker and appear here as `Remote`.

Workers are forked from a fork server: a process that imported the worker's modules (torch
included) once, so a fresh worker costs a fork instead of an interpreter start (seconds). Each worker
confines itself right after the fork (see isolation.py). Set AUTOGRADER_FORK_SERVER=0 to start every
worker as a new interpreter instead.
"""
from __future__ import annotations

import json
import os
import queue
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import asdict, dataclass, field
from pathlib import Path

from autograder.sandbox.isolation import SCRATCH_DIR, Confinement
from autograder.sandbox.protocol import (
    MAX_BLOB_BYTES, MAX_HEADER_BYTES, Decoder, Encoder, Handle, ProtocolError, read_message, write_message,
)

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
_ENV_PASSTHROUGH = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "HF_HUB_OFFLINE", "HF_HOME",
                    "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "NVIDIA_VISIBLE_DEVICES")
START_SECONDS = 120.0
MONITOR_SECONDS = 0.1  # how often the memory monitor looks at the machine's free memory
LOW_MEMORY_FRACTION = 0.08  # below this fraction of RAM available, the largest worker is stopped


def worker_environment(threads: int = 1) -> dict[str, str]:
    """The environment every worker starts with (the fork server's too)."""
    env = {k: os.environ[k] for k in _ENV_PASSTHROUGH if k in os.environ}
    env.update(PYTHONPATH=_PACKAGE_ROOT, PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1",
               OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="false",
               PYTHONWARNINGS="ignore")
    # cuBLAS picks reduction orders per run unless its workspace is fixed (read when CUDA starts)
    env.setdefault("CUBLAS_WORKSPACE_CONFIG", os.environ.get("CUBLAS_WORKSPACE_CONFIG", ":4096:8"))
    return env


# -- processes seen from outside ---------------------------------------------------------------------

def _process_table() -> dict[int, int]:
    """pid -> parent pid, for every process of the machine."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
            table[int(entry)] = int(stat[stat.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            pass
    return table


def process_tree(pid: int, table: dict[int, int] | None = None) -> list[int]:
    """`pid` and all its descendants (a worker's, with its PID namespace: everything it started)."""
    table = _process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for child, parent in table.items():
        children.setdefault(parent, []).append(child)
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        if p in table or p == pid:
            out.append(p)
            todo.extend(children.get(p, []))
    return out


def _memory_of(pid: int) -> int:
    """Proportional set size (shared pages split between their users), or resident size."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
            for line in fh:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _available_memory() -> tuple[int, int]:
    total = avail = 0
    try:
        with open("/proc/meminfo", "rb") as fh:
            for line in fh:
                if line.startswith(b"MemTotal:"):
                    total = int(line.split()[1]) * 1024
                elif line.startswith(b"MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return total, avail


class _MemoryMonitor:
    """One thread per judge process. RLIMIT_AS bounds each process of a worker; this bounds a
    worker's processes together (a fork bomb whose children each allocate): every second, and at
    once when the machine runs low on memory, a worker with more than one process whose processes
    hold more than its memory limit is killed. When memory is low and no worker is over its limit,
    the largest multi-process worker is killed: losing a submission is better than losing the machine."""

    _lock = threading.Lock()
    _instance: "_MemoryMonitor | None" = None

    def __init__(self):
        self.workers: weakref.WeakSet = weakref.WeakSet()
        self.owner = os.getpid()
        threading.Thread(target=self._run, daemon=True, name="autograder-memory-monitor").start()

    @classmethod
    def watch(cls, worker: "WorkerProcess") -> None:
        with cls._lock:
            if cls._instance is None or cls._instance.owner != os.getpid():
                cls._instance = cls()
            cls._instance.workers.add(worker)

    def _run(self) -> None:
        last_full = 0.0
        while True:
            time.sleep(MONITOR_SECONDS)
            workers = [w for w in list(self.workers) if w.pid is not None]
            if not workers:
                continue
            total, avail = _available_memory()
            low = total > 0 and avail < LOW_MEMORY_FRACTION * total
            if not low and time.monotonic() - last_full < 1.0:
                continue
            last_full = time.monotonic()
            try:
                self._check(workers, low)
            except Exception:  # noqa: BLE001 - the monitor must outlive a vanished process
                pass

    @staticmethod
    def _check(workers: list["WorkerProcess"], low: bool) -> None:
        table = _process_table()
        usage = []
        for w in workers:
            tree = process_tree(w.pid, table)
            if len(tree) <= 2:  # the worker (and the namespace's init): bounded by RLIMIT_AS
                continue
            used = sum(_memory_of(p) for p in tree)
            limit = w.spec.confinement.memory_bytes
            if limit and used > limit:
                w.stop(f"its processes together used more than the memory limit ({limit // 2**20} MB)")
            else:
                usage.append((used, w))
        if low and usage:
            used, w = max(usage, key=lambda x: x[0])
            w.stop("the machine ran low on memory while it ran several processes")


# -- the fork server ------------------------------------------------------------------------------

_FRAME = struct.Struct("<Q")


def _send_frame(sock: socket.socket, data: dict, fds: list[int] = ()) -> None:
    payload = json.dumps(data).encode()
    blob = _FRAME.pack(len(payload)) + payload
    if fds:
        socket.send_fds(sock, [blob], list(fds))
    else:
        sock.sendall(blob)


class _Channel:
    """Length-framed JSON messages over a stream socket, file descriptors riding along."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = b""
        self.fds: list[int] = []

    def recv(self, want_fds: int = 0) -> tuple[dict, list[int]]:
        while True:
            if len(self.buf) >= 8:
                (n,) = _FRAME.unpack(self.buf[:8])
                if len(self.buf) >= 8 + n:
                    payload, self.buf = self.buf[8:8 + n], self.buf[8 + n:]
                    fds, self.fds = self.fds, []
                    return json.loads(payload), fds
            if want_fds:
                data, fds, _, _ = socket.recv_fds(self.sock, 65536, want_fds)
                self.fds += fds
            else:
                data = self.sock.recv(65536)
            if not data:
                raise EOFError("fork server channel closed")
            self.buf += data


class _Child:
    """A worker started by the fork server; the subset of Popen the client uses."""

    def __init__(self, server: "_ForkServer", pid: int):
        self.server = server
        self.pid = pid
        self.returncode: int | None = None
        self.done = threading.Event()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        if not self.done.wait(timeout if timeout is not None else 60.0):
            if timeout is not None:
                raise subprocess.TimeoutExpired("worker", timeout)
        return self.returncode

    def _exited(self, code: int) -> None:
        self.returncode = code
        self.done.set()


FORK_SERVER_FD = "AUTOGRADER_FORK_SERVER_FD"  # a fork server started for this process by its parent


def start_fork_server(for_pid: int | None = None) -> tuple[socket.socket, subprocess.Popen]:
    """Start a fork server; returns the socket its client talks to it on, and the process. The server
    ends when the process that called this ends (`for_pid`: that process's pid, checked at start)."""
    parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    proc = subprocess.Popen(
        [sys.executable, "-m", "autograder.sandbox.client", "--fork-server", str(child_sock.fileno()),
         str(for_pid or os.getpid())],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        pass_fds=(child_sock.fileno(),), start_new_session=True, env={**worker_environment(), "HOME": SCRATCH_DIR},
        cwd="/")
    child_sock.close()
    return parent_sock, proc


class _ForkServer:
    """Judge side of the fork server: one per judge process, started on first use (or handed over by
    the parent process through FORK_SERVER_FD, already starting while this process imports)."""

    _lock = threading.Lock()
    _instance: "_ForkServer | None" = None
    _failed_at = 0.0

    def __init__(self, sock: socket.socket | None = None):
        self.proc = None
        if sock is None:
            sock, self.proc = start_fork_server()
        self.sock = sock
        self.channel = _Channel(sock)
        self.owner = os.getpid()
        self.children: dict[int, _Child] = {}
        self.early_exits: dict[int, int] = {}  # ended before spawn() registered them
        self.children_lock = threading.Lock()
        self.replies: queue.Queue = queue.Queue()
        self.send_lock = threading.Lock()
        self.alive = True
        self.sock.settimeout(START_SECONDS)
        try:
            header, _ = self.channel.recv()
        except (OSError, EOFError) as exc:
            self.close()
            raise OSError(f"the fork server did not start: {exc}") from None
        self.sock.settimeout(None)
        if "ready" not in header:
            self.close()
            raise OSError("the fork server did not start")
        threading.Thread(target=self._read_loop, daemon=True, name="autograder-fork-server").start()

    @classmethod
    def get(cls) -> "_ForkServer | None":
        if os.environ.get("AUTOGRADER_FORK_SERVER", "1") == "0":
            return None
        with cls._lock:
            inst = cls._instance
            if inst is not None and inst.alive and inst.owner == os.getpid() and \
                    (inst.proc is None or inst.proc.poll() is None):
                return inst
            if inst is not None and inst.owner == os.getpid():
                inst.close()
            handed = os.environ.pop(FORK_SERVER_FD, "")
            if not handed and time.monotonic() - cls._failed_at < 30:
                return None
            try:
                cls._instance = cls(socket.socket(fileno=int(handed)) if handed else None)
            except Exception:  # noqa: BLE001 - fall back to starting interpreters
                cls._instance = None
                cls._failed_at = time.monotonic()
            return cls._instance

    def _read_loop(self) -> None:
        try:
            while True:
                header, _ = self.channel.recv()
                if "exited" in header:
                    pid, code = int(header["exited"]), int(header["code"])
                    with self.children_lock:
                        child = self.children.pop(pid, None)
                        if child is None:
                            self.early_exits[pid] = code
                    if child is not None:
                        child._exited(code)
                else:
                    self.replies.put(header)
        except (EOFError, OSError, ValueError, ProtocolError):
            pass
        self.alive = False
        self.replies.put({"error": "the fork server ended"})
        with self.children_lock:
            orphans = list(self.children.values())
        for child in orphans:
            child._exited(-signal.SIGKILL)  # its workers died with it (parent-death signal)

    def spawn(self, config: dict, env: dict, cwd: str, fds: list[int]) -> _Child:
        with self.send_lock:
            _send_frame(self.sock, {"config": config, "env": env, "cwd": cwd}, fds)
            try:
                reply = self.replies.get(timeout=START_SECONDS)
            except queue.Empty:
                raise OSError("the fork server did not answer") from None
            if "pid" not in reply:
                raise OSError(reply.get("error", "the fork server refused"))
            child = _Child(self, int(reply["pid"]))
            with self.children_lock:
                early = self.early_exits.pop(child.pid, None)
                if early is None:
                    self.children[child.pid] = child
            if early is not None:
                child._exited(early)
            elif not self.alive:  # it ended between the reply and now
                child._exited(-signal.SIGKILL)
            return child

    def preload(self, names: list[str]) -> list[str]:
        with self.send_lock:
            _send_frame(self.sock, {"preload": list(names)})
            try:
                reply = self.replies.get(timeout=START_SECONDS)
            except queue.Empty:
                raise OSError("the fork server did not answer") from None
            return list(reply.get("preloaded", []))

    def close(self) -> None:
        """Close the channel: the server ends (and its workers with it); kill it if it is ours."""
        self.alive = False
        try:
            self.sock.close()
        except OSError:
            pass
        if self.proc is not None:
            try:
                self.proc.kill()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass


def shutdown_fork_server() -> None:
    """Stop this process's fork server (it also stops by itself when this process ends). Workers it
    started are killed with it; the next worker starts a new one."""
    with _ForkServer._lock:
        inst, _ForkServer._instance = _ForkServer._instance, None
    if inst is not None and inst.owner == os.getpid():
        inst.close()


def _fork_server_main(sock_fd: int, judge_pid: int) -> None:
    """The fork server: imports what workers need, then forks one per request."""
    from autograder.sandbox import isolation

    isolation._set_pdeathsig(judge_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import torch  # noqa: F401 - the point of the server: imported once, shared by every fork

    from autograder.sandbox import worker  # noqa: F401
    try:
        import numpy  # noqa: F401
    except ImportError:
        pass
    torch.set_num_threads(1)
    sock = socket.socket(fileno=sock_fd)
    channel = _Channel(sock)
    wake_r, wake_w = os.pipe()  # SIGCHLD wakes the loop: ended workers are reported at once
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    _send_frame(sock, {"ready": os.getpid()})
    while True:
        readable, _, _ = select.select([sock, wake_r], [], [], 1.0)
        if wake_r in readable:
            try:
                os.read(wake_r, 4096)
            except BlockingIOError:
                pass
            readable.remove(wake_r)
        while True:  # report every worker that ended
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            _send_frame(sock, {"exited": pid, "code": os.waitstatus_to_exitcode(status)})
        if not readable:
            continue
        try:
            request, fds = channel.recv(want_fds=3)
        except (EOFError, OSError, ProtocolError):
            os._exit(0)  # the judge is gone: its workers follow through their parent-death signal
        if "preload" in request:
            for fd in fds:
                os.close(fd)
            _send_frame(sock, {"preloaded": _preload([str(n) for n in request["preload"]][:5000])})
            continue
        pid = os.fork()
        if pid == 0:
            _become_worker(request, fds, sock_fd)
        for fd in fds:
            os.close(fd)
        _send_frame(sock, {"pid": pid})


_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _preload(names: list[str]) -> list[str]:
    """In the fork server: import library modules that workers will import anyway, so that each fork
    has them already. Only modules of the interpreter's own installation or the autograder package
    (found there before anything is imported): never a file of a course, whose code would then be in
    every worker's memory."""
    import importlib
    import importlib.util

    from autograder.sandbox.isolation import python_paths

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    roots = [os.path.realpath(p) for p in python_paths() if os.path.realpath(p) != os.path.dirname(package)]
    roots.append(os.path.realpath(package))

    def allowed(location: str | None) -> bool:
        if not location or location in ("built-in", "frozen"):
            return True
        real = os.path.realpath(location)
        return any(real == r or real.startswith(r.rstrip("/") + "/") for r in roots)

    done = []
    for name in names:
        if name in sys.modules or not _MODULE_NAME.match(name):
            continue
        try:
            parts = name.split(".")
            for i in range(1, len(parts) + 1):  # each package on the way must be a library's
                prefix = ".".join(parts[:i])
                if prefix in sys.modules:
                    continue
                spec = importlib.util.find_spec(prefix)
                if spec is None or not all(allowed(loc) for loc in [spec.origin,
                                                                    *(spec.submodule_search_locations or [])]):
                    raise ImportError(prefix)
                importlib.import_module(prefix)
            done.append(name)
        except BaseException:  # noqa: BLE001 - a module that cannot be preloaded is imported by the worker
            continue
    return done


def preload_modules(names: list[str]) -> list[str]:
    """Have this process's fork server import these library modules (see `_preload`); returns those
    it imported. Workers forked afterwards start with them loaded."""
    server = _ForkServer.get()
    if server is None or not names:
        return []
    try:
        return server.preload(names)
    except OSError:
        return []


def _become_worker(request: dict, fds: list[int], server_fd: int) -> None:
    """In a child of the fork server: the same state as `python -m autograder.sandbox.worker CONFIG`."""
    code = 1
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        r_in, w_out, log = fds
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        keep = {0, 1, 2, r_in, w_out}
        for fd in sorted(int(x) for x in os.listdir("/proc/self/fd")):
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        config = request["config"]
        config.update(fd_in=r_in, fd_out=w_out)
        config["confinement"].update(parent_pid=os.getppid(), channel_fds=[r_in, w_out])
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        sys.argv = ["autograder.sandbox.worker", json.dumps(config)]
        from autograder.sandbox import worker

        worker.main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - report, then leave without running the server's loop
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


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


class _ViewStream:
    """read() over a memoryview, handing out slices rather than copies."""

    def __init__(self, view: memoryview):
        self.view, self.pos = view, 0

    def read(self, n: int) -> memoryview:
        chunk = self.view[self.pos:self.pos + n]
        self.pos += len(chunk)
        return chunk


class _Replies:
    """The worker's replies, read in the calling thread with a deadline (no reader thread: one less
    thread hand-off per request). A reply is framed as protocol.write_message frames it; lengths
    over the protocol's limits are refused before anything is buffered."""

    def __init__(self, fd: int):
        self.fd = fd
        os.set_blocking(fd, False)
        self.buf = bytearray()
        self.closed = False

    def _frame_length(self) -> int | None:
        """Bytes of the first complete frame in the buffer, or None."""
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
        return 16 + n_head + n_blob if len(self.buf) >= 16 + n_head + n_blob else None

    def _want(self) -> int:
        """How much to read next: the rest of the current frame when its size is known (capped),
        else a small block."""
        if len(self.buf) >= 8:
            (n_head,) = struct.unpack_from("<Q", self.buf, 0)
            if len(self.buf) >= 16 + n_head:
                (n_blob,) = struct.unpack_from("<Q", self.buf, 8 + n_head)
                return max(4096, min(16 << 20, 16 + n_head + n_blob - len(self.buf)))
            return max(4096, min(16 << 20, 16 + n_head - len(self.buf)))
        return 65536

    def get(self, deadline: float):
        """(header, tensors); an EOFError or ProtocolError instance when the channel ended or carried
        garbage; None at the deadline."""
        while True:
            try:
                n = self._frame_length()
                if n is not None:
                    with memoryview(self.buf) as view:
                        message = read_message(_ViewStream(view[:n]))  # one copy of the tensor data
                    del self.buf[:n]
                    return message
            except (ProtocolError, EOFError, ValueError) as exc:
                return exc if isinstance(exc, (ProtocolError, EOFError)) else ProtocolError(str(exc))
            if self.closed:
                return EOFError("the worker closed the channel")
            wait = None if deadline == float("inf") else max(0.0, deadline - time.monotonic()) * 1000
            try:
                poller = select.poll()
                poller.register(self.fd, select.POLLIN)
                if not poller.poll(wait):
                    return None
            except (OSError, ValueError) as exc:
                return EOFError(str(exc))
            try:
                chunk = os.read(self.fd, self._want())
            except BlockingIOError:
                continue
            except OSError as exc:
                return EOFError(str(exc))
            if not chunk:
                self.closed = True
            self.buf += chunk

    def close(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


class WorkerProcess:
    """One worker process with the definitions loaded; restarted transparently after a failure."""

    def __init__(self, spec: WorkerSpec):
        self.spec = spec
        self.proc: subprocess.Popen | _Child | None = None
        self.deadline = float("inf")
        self.excluded: dict[int, str] = {}
        self.report: LoadReport | None = None
        self._replies: _Replies | None = None
        self._stdin = None
        self._log = None
        self._scratch: tempfile.TemporaryDirectory | None = None
        self._stopped_because = ""
        self._isolated = False  # the worker runs in its own PID namespace: killing it ends all it started

    @property
    def pid(self) -> int | None:
        proc = self.proc
        return proc.pid if proc is not None and proc.poll() is None else None

    # -- process lifecycle --------------------------------------------------------------------
    def _spawn(self) -> str:
        scratch_root = "/tmp" if os.path.isdir("/tmp") else None
        self._scratch = tempfile.TemporaryDirectory(prefix="ag-worker-", dir=scratch_root)
        scratch = self._scratch.name
        self._stopped_because = ""
        r_in, w_in = os.pipe()
        r_out, w_out = os.pipe()
        conf = Confinement(**{**asdict(self.spec.confinement), "scratch": scratch, "parent_pid": os.getpid(),
                              "channel_fds": [r_in, w_out]})
        config = {"fd_in": r_in, "fd_out": w_out, "scratch": scratch, "threads": self.spec.threads,
                  "confinement": asdict(conf)}
        env = worker_environment(self.spec.threads)
        env["HOME"] = scratch
        self._log = tempfile.TemporaryFile(prefix="ag-worker-log-")
        server = _ForkServer.get()
        try:
            if server is not None:
                self.proc = server.spawn(config, env, scratch, [r_in, w_out, self._log.fileno()])
            else:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "autograder.sandbox.worker", json.dumps(config)],
                    stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, pass_fds=(r_in, w_out),
                    start_new_session=True, env=env, cwd=scratch)
        finally:
            os.close(r_in)
            os.close(w_out)
        self._stdin = os.fdopen(w_in, "wb")
        self._replies = _Replies(r_out)
        _MemoryMonitor.watch(self)
        header, _ = self._next(time.monotonic() + START_SECONDS, "starting the worker")
        status = str(header.get("ready", ""))
        self._isolated = status.startswith("isolated") and "PID namespace" in status
        return status

    def stop(self, why: str) -> None:
        """Kill the worker's processes from another thread (the memory monitor); the request waiting
        on it fails with a message saying `why`."""
        self._stopped_because = why
        proc = self.proc
        if proc is not None:
            _kill_tree(proc.pid)

    def kill(self) -> None:
        if self.proc is not None:
            _kill_tree(self.proc.pid, sweep=not self._isolated)
            if isinstance(self.proc, subprocess.Popen):  # the fork server reaps its own children
                try:
                    self.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    pass
            self.proc = None
        for res in (self._stdin, self._log, self._replies):
            try:
                res and res.close()
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

    def _death(self, doing: str) -> WorkerDied:
        try:
            code = self.proc.wait(timeout=5) if self.proc else None
        except subprocess.TimeoutExpired:
            code = None
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
        self.kill()
        return WorkerDied(f"the process running {self.spec.label} ended ({how}) while {doing}")

    def _next(self, deadline: float, doing: str):
        if self._replies is None:
            raise WorkerDied(f"the process running {self.spec.label} is gone ({doing})")
        item = self._replies.get(deadline)
        if item is None:
            self.kill()
            raise WorkerTimeout(f"{doing} did not finish in time")
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


def _kill_tree(pid: int, sweep: bool = True) -> None:
    """SIGKILL a worker, its process group and, with `sweep`, every descendant (found before any of
    them dies, so none is re-parented away first). With namespaces, killing the worker ends its PID
    namespace and everything in it; the sweep is for workers that run without."""
    victims = process_tree(pid) if sweep else []
    for target in (lambda: os.killpg(pid, signal.SIGKILL), *[lambda p=p: os.kill(p, signal.SIGKILL) for p in victims]):
        try:
            target()
        except (ProcessLookupError, PermissionError):
            pass


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "--fork-server":
    _fork_server_main(int(sys.argv[2]), int(sys.argv[3]))
