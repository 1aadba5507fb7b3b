"""The fork server: a process that imported the worker's modules (torch included) once, so that a fresh
worker costs a fork instead of an interpreter start and a torch import (seconds).

One per judge process. A grading command forks it from itself first thing, torch imported and nothing of a
course read yet (fork_zygote: one torch import per process); elsewhere it is started as a new interpreter, early
(start_early) or on first use. Either way it holds nothing of the judge (no release, no reference, no test code)
and only a filtered environment (a grading command restarts itself clean before it forks: restart_clean). Each
worker confines itself
right after the fork (isolation.py). Set AUTOGRADER_FORK_SERVER=0 to start every worker as a new interpreter.
"""
from __future__ import annotations

import contextlib
import gc
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
import threading
import time
from pathlib import Path

from autograder.sandbox.rootfs import SCRATCH_DIR  # noqa: I001 - nothing here imports torch: see start_early

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
_ENV_PASSTHROUGH = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "HF_HUB_OFFLINE", "HF_HOME",
                    "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "NVIDIA_VISIBLE_DEVICES")
START_SECONDS = 120.0


def worker_environment(threads: int = 1) -> dict[str, str]:
    """The environment every worker starts with (the fork server's too)."""
    env = {k: os.environ[k] for k in _ENV_PASSTHROUGH if k in os.environ}
    env.update(PYTHONPATH=_PACKAGE_ROOT, PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1",
               OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="false",
               PYTHONWARNINGS="ignore")
    # cuBLAS picks reduction orders per run unless its workspace is fixed (read when CUDA starts)
    env.setdefault("CUBLAS_WORKSPACE_CONFIG", os.environ.get("CUBLAS_WORKSPACE_CONFIG", ":4096:8"))
    return env



@contextlib.contextmanager
def imports_without_collector():
    """Import large libraries (torch, transformers) with the cyclic garbage collector paused: it would walk every
    object imported so far, again and again (a fifth of their import time), and what they import lives as long as
    the process. Afterwards gc.freeze(): later collections skip all of it, in this process and in the processes
    forked from it (no walk over it, and no copy-on-write of the pages it is on)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        gc.freeze()


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

    def buffered(self) -> bool:
        """A whole frame is already read (requests sent back to back arrive in one read)."""
        return len(self.buf) >= 8 and len(self.buf) >= 8 + _FRAME.unpack(self.buf[:8])[0]

    def recv(self) -> dict:
        """The next frame. Descriptors are kept as they arrive (a spawn's come with its frame, which may be
        read together with the frames sent before it): take them with take_fds."""
        while True:
            if self.buffered():
                (n,) = _FRAME.unpack(self.buf[:8])
                payload, self.buf = self.buf[8:8 + n], self.buf[8 + n:]
                return json.loads(payload)
            data, fds, _, _ = socket.recv_fds(self.sock, 65536, 16)
            self.fds += fds
            if not data:
                raise EOFError("fork server channel closed")
            self.buf += data

    def take_fds(self, n: int) -> list[int]:
        fds, self.fds = self.fds[:n], self.fds[n:]
        return fds


class Child:
    """A worker started by the fork server; the subset of Popen the client uses."""

    def __init__(self, server: "ForkServer", pid: int):
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




def start_fork_server(for_pid: int | None = None) -> tuple[socket.socket, subprocess.Popen]:
    """Start a fork server; returns the socket its client talks to it on, and the process. The server
    ends when the process that called this ends (`for_pid`: that process's pid, checked at start)."""
    parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    proc = subprocess.Popen(
        [sys.executable, "-m", "autograder.sandbox.forkserver", "--fork-server", str(child_sock.fileno()),
         str(for_pid or os.getpid())],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        pass_fds=(child_sock.fileno(),), start_new_session=True, env={**worker_environment(), "HOME": SCRATCH_DIR},
        cwd="/")
    child_sock.close()
    return parent_sock, proc


class ForkServer:
    """Judge side of the fork server: one per judge process (forked or started early, see the module's
    docstring; else started on first use)."""

    _lock = threading.Lock()
    _instance: "ForkServer | None" = None
    _failed_at = 0.0
    _early: tuple[socket.socket, subprocess.Popen] | None = None  # see start_early

    def __init__(self, sock: socket.socket | None = None, proc: subprocess.Popen | None = None):
        self.proc = proc
        if sock is None:
            sock, self.proc = start_fork_server()
        self.sock = sock
        self.channel = _Channel(sock)
        self.owner = os.getpid()
        self.children: dict[int, Child] = {}
        self.early_exits: dict[int, int] = {}  # ended before spawn() registered them
        self.children_lock = threading.Lock()
        self.replies: queue.Queue = queue.Queue()
        self.preloaded: queue.Queue = queue.Queue()  # replies to preload requests, read by whoever waits
        self.pending_preloads = 0
        self.send_lock = threading.Lock()
        self.alive = True
        self.sock.settimeout(START_SECONDS)
        try:
            header = self.channel.recv()
        except (OSError, EOFError) as exc:
            self.close()
            raise OSError(f"the fork server did not start: {exc}") from None
        self.sock.settimeout(None)
        if "ready" not in header:
            self.close()
            raise OSError("the fork server did not start")
        threading.Thread(target=self._read_loop, daemon=True, name="autograder-fork-server").start()

    @classmethod
    def get(cls) -> "ForkServer | None":
        if os.environ.get("AUTOGRADER_FORK_SERVER", "1") == "0":
            return None
        with cls._lock:
            inst = cls._instance
            if inst is not None and inst.alive and inst.owner == os.getpid() and \
                    (inst.proc is None or inst.proc.poll() is None):
                return inst
            if inst is not None and inst.owner == os.getpid():
                inst.close()
            early, cls._early = cls._early, None
            if not early and time.monotonic() - cls._failed_at < 30:
                return None
            try:
                cls._instance = cls(*early) if early else cls()
            except Exception:  # noqa: BLE001 - fall back to starting interpreters
                cls._instance = None
                cls._failed_at = time.monotonic()
            return cls._instance

    def _read_loop(self) -> None:
        try:
            while True:
                header = self.channel.recv()
                if "exited" in header:
                    pid, code = int(header["exited"]), int(header["code"])
                    with self.children_lock:
                        child = self.children.pop(pid, None)
                        if child is None:
                            self.early_exits[pid] = code
                    if child is not None:
                        child._exited(code)
                elif "preloaded" in header:
                    self.preloaded.put(header)
                else:
                    self.replies.put(header)
        except (EOFError, OSError, ValueError):
            pass
        self.alive = False
        self.replies.put({"error": "the fork server ended"})
        self.preloaded.put({"preloaded": []})
        with self.children_lock:
            orphans = list(self.children.values())
        for child in orphans:
            child._exited(-signal.SIGKILL)  # its workers died with it (parent-death signal)

    def spawn(self, config: dict, env: dict, cwd: str, fds: list[int]) -> Child:
        with self.send_lock:
            _send_frame(self.sock, {"config": config, "env": env, "cwd": cwd}, fds)
            try:
                reply = self.replies.get(timeout=START_SECONDS)
            except queue.Empty:
                raise OSError("the fork server did not answer") from None
            if "pid" not in reply:
                raise OSError(reply.get("error", "the fork server refused"))
            child = Child(self, int(reply["pid"]))
            with self.children_lock:
                early = self.early_exits.pop(child.pid, None)
                if early is None:
                    self.children[child.pid] = child
            if early is not None:
                child._exited(early)
            elif not self.alive:  # it ended between the reply and now
                child._exited(-signal.SIGKILL)
            return child

    def preload(self, names: list[str], wait: bool = True) -> list[str]:
        """Import these modules in the server. Without `wait`, return at once: the server imports them
        before it forks the next worker (it answers requests in order)."""
        with self.send_lock:
            _send_frame(self.sock, {"preload": list(names)})
            self.pending_preloads += 1
            if not wait:
                return []
            reply: dict = {}
            try:
                while self.pending_preloads:  # the replies of earlier requests first, then this one's
                    reply = self.preloaded.get(timeout=START_SECONDS)
                    self.pending_preloads -= 1
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


class _Forked:
    """A fork server forked from this process (fork_zygote); the subset of Popen the client uses."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                done, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                done, status = self.pid, 0
            if done:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def wait(self, timeout: float | None = None) -> int | None:
        end = time.monotonic() + (timeout if timeout is not None else 3600)
        while self.poll() is None and time.monotonic() < end:
            time.sleep(0.01)
        return self.returncode


def fork_zygote() -> bool:
    """Fork this process's fork server from this very process, which has torch imported already: one import
    of torch per grading process instead of two. Call it first thing, while nothing of a course is in memory
    and the process has a single thread (OMP_NUM_THREADS=1 before torch is imported: its thread pool starts
    with the import otherwise). Its environment and command line must hold nothing the workers may not see:
    a grading command first restarts itself clean (restart_clean). Returns False (nothing done: a fork server
    will be started as a new process) where that cannot be done safely."""
    if os.environ.get("AUTOGRADER_FORK_SERVER", "1") == "0":
        return False
    if ForkServer._instance is not None or ForkServer._early is not None:
        return False
    with imports_without_collector():
        import torch  # noqa: F401 - what the fork is for

        from autograder.sandbox import worker  # noqa: F401 - the worker's code, imported once for every fork
    if threading.active_count() > 1 or len(os.listdir("/proc/self/task")) > 1:
        return False  # a fork would copy another thread's locks, held: never fork a process with threads
    keep_env = worker_environment()
    judge = os.getpid()
    parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        try:
            parent_sock.close()
            os.setsid()
            os.chdir("/")
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.closerange(3, child_sock.fileno())
            os.closerange(child_sock.fileno() + 1, 65536)
            os.environ.clear()
            os.environ.update(keep_env)
            _fork_server_main(child_sock.fileno(), judge)
        finally:
            os._exit(0)
    child_sock.close()
    ForkServer._early = (parent_sock, _Forked(pid))
    return True


# What a grading process needs from its environment to start the same Python as its caller: nothing secret.
# (PYTHONPATH is this package's folder only: the caller's, perhaps a course's folder, is added after the fork.)
START_ENVIRONMENT = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "LD_LIBRARY_PATH", "PYTHONHOME", "PYTHONNOUSERSITE",
                     "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED", "AUTOGRADER_FORK_SERVER")


def start_environment() -> dict[str, str]:
    """The environment a grading process starts with (see START_ENVIRONMENT)."""
    env = {k: os.environ[k] for k in START_ENVIRONMENT if k in os.environ}
    env.update(PYTHONPATH=_PACKAGE_ROOT, OMP_NUM_THREADS="1")  # one thread: torch's pool would start with its import
    return env


def adopt_environment(env: dict[str, str]) -> None:
    """After the fork: the caller's environment, and its PYTHONPATH on this process's import path (the judge may
    import what the caller's path holds; the fork server and the workers never saw it)."""
    os.environ.clear()
    os.environ.update(env)
    for entry in reversed([e for e in env.get("PYTHONPATH", "").split(os.pathsep) if e]):
        if entry not in sys.path:
            sys.path.insert(1, entry)


def restart_clean(argv: list[str]) -> None:
    """Start this command again as a process whose command line and environment hold nothing of the caller's:
    both travel through an in-memory file that the new process reads only after it has forked its fork server
    (resume_clean). So the fork server, and every worker forked from it, has never held the caller's environment
    (tokens, keys) or command line (the paths of the submissions). Does not return."""
    import json

    fd = os.memfd_create("autograder-command", 0)  # not inherited by a fork server: it closes every descriptor
    os.write(fd, json.dumps({"argv": list(argv), "env": dict(os.environ)}).encode())
    os.lseek(fd, 0, os.SEEK_SET)
    code = f"import autograder.cli as cli; raise SystemExit(cli.main(resume_fd={fd}))"
    os.execve(sys.executable, [sys.executable, "-P", "-c", code], start_environment())


def resume_clean(fd: int) -> list[str]:
    """In the process restart_clean started: fork the fork server first, then read the command line and the
    environment, restore the environment, and return the command line."""
    import json

    fork_zygote()
    with os.fdopen(fd, "rb") as fh:
        command = json.loads(fh.read())
    adopt_environment(command["env"])
    return list(command["argv"])


def start_early() -> None:
    """Start this process's fork server now, before this process imports torch: the two imports then run
    side by side instead of one after the other (a second or more of every single-submission run). The
    first worker uses it (ForkServer.get). Importing this module imports neither torch nor anything of a
    course."""
    if os.environ.get("AUTOGRADER_FORK_SERVER", "1") == "0":
        return
    with ForkServer._lock:
        if ForkServer._instance is None and ForkServer._early is None:
            try:
                ForkServer._early = start_fork_server()
            except OSError:
                pass


def shutdown_fork_server() -> None:
    """Stop this process's fork server (it also stops by itself when this process ends). Workers it
    started are killed with it; the next worker starts a new one."""
    with ForkServer._lock:
        inst, ForkServer._instance = ForkServer._instance, None
        early, ForkServer._early = ForkServer._early, None
    if inst is not None and inst.owner == os.getpid():
        inst.close()
    if early is not None:  # started early and never used
        sock, proc = early
        sock.close()
        proc.kill()
        proc.wait()


def _fork_server_main(sock_fd: int, judge_pid: int) -> None:
    """The fork server: imports what workers need, then forks one per request."""
    from autograder.sandbox import linux

    linux.set_pdeathsig(judge_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with imports_without_collector():
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
        readable, _, _ = select.select([sock, wake_r], [], [], 0 if channel.buffered() else 1.0)
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
        if not readable and not channel.buffered():
            continue
        try:
            request = channel.recv()
            if "preload" in request:
                with imports_without_collector():
                    done = _preload([str(n) for n in request["preload"]][:5000])
                _send_frame(sock, {"preloaded": done})
                continue
            fds = channel.take_fds(3)  # a spawn: its descriptors came with it
        except (EOFError, OSError, ValueError):
            os._exit(0)  # the judge is gone: its workers follow through their parent-death signal
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

    from autograder.sandbox.rootfs import python_paths

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


def preload_modules(names: list[str], wait: bool = True) -> list[str]:
    """Have this process's fork server import these library modules (see `_preload`); returns those
    it imported (nothing without `wait`). Workers forked afterwards start with them loaded."""
    server = ForkServer.get()
    if server is None or not names:
        return []
    try:
        return server.preload(names, wait)
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



if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "--fork-server":
    _fork_server_main(int(sys.argv[2]), int(sys.argv[3]))
