"""The fork server: a process that imported the worker's modules (torch included) once, so that a fresh
worker costs a fork instead of an interpreter start and a torch import (seconds).

One per judge process. A grading command forks it from itself first thing, torch imported and nothing of a
course read yet (fork_zygote: one torch import per process); elsewhere it is started as a new interpreter, early
(start_fork_server_early) or on first use. Either way it holds nothing of the judge (no release, no reference, no test code)
and only a filtered environment (a grading command restarts itself clean before it forks: entrypoints.restart_clean). Each
worker confines itself
right after the fork (isolation.py). Set AUTOGRADER_FORK_SERVER=0 to start every worker as a new interpreter.
"""
from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import threading
import time
from typing import Protocol

from autograder.sandbox.environment import (
    fork_server_enabled, imports_without_collector, python_command, worker_environment,
)
from autograder.sandbox.frames import Channel, send_frame
from autograder.sandbox.rootfs import SCRATCH_DIR

START_SECONDS = 120.0


class Child:
    """A worker started by the fork server; the subset of Popen the client uses."""

    def __init__(self, server: "ForkServer", pid: int):
        self.server = server
        self.pid = pid
        self.returncode: int | None = None
        self.done = threading.Event()
        self.server_gone = False  # it ended because its fork server did (a system fault, never its code's)

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


class ServerProcess(Protocol):
    """The fork server's process as ForkServer uses it: a subprocess.Popen, or a _Forked (fork_zygote)."""

    def poll(self) -> int | None: ...

    def kill(self) -> None: ...

    def wait(self, timeout: float | None = None) -> int | None: ...


def start_fork_server(for_pid: int | None = None) -> tuple[socket.socket, subprocess.Popen]:
    """Start a fork server; returns the socket its client talks to it on, and the process. The server
    ends when the process that called this ends (`for_pid`: that process's pid, checked at start)."""
    parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    proc = subprocess.Popen(
        python_command("fork-server", str(child_sock.fileno()), str(for_pid or os.getpid())),
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
    _early: tuple[socket.socket, ServerProcess] | None = None  # see start_fork_server_early

    def __init__(self, sock: socket.socket | None = None, proc: ServerProcess | None = None):
        self.proc = proc
        if sock is None:
            sock, self.proc = start_fork_server()
        self.sock = sock
        self.channel = Channel(sock)
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
        """This process's fork server, started (or adopted from start_fork_server_early) where none is running; None
        where fork servers are off, or one failed to start in the last 30 s (workers are then started as new
        interpreters)."""
        if not fork_server_enabled():
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
            child.server_gone = True
            child._exited(-signal.SIGKILL)  # its workers died with it (parent-death signal)

    def spawn(self, config: dict, env: dict, cwd: str, fds: list[int]) -> Child:
        """Fork a worker with `config`, `env`, working directory `cwd` and the descriptors `fds` passed to it;
        OSError where the server refuses or does not answer in START_SECONDS."""
        with self.send_lock:
            send_frame(self.sock, {"config": config, "env": env, "cwd": cwd}, fds)
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
                child.server_gone = True
                child._exited(-signal.SIGKILL)
            return child

    def preload(self, names: list[str], wait: bool = True) -> list[str]:
        """Import these modules in the server. Without `wait`, return at once: the server imports them
        before it forks the next worker (it answers requests in order)."""
        with self.send_lock:
            send_frame(self.sock, {"preload": list(names)})
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
    if not fork_server_enabled():
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
            from autograder.sandbox.forkserver_loop import serve_fork_server

            serve_fork_server(child_sock.fileno(), judge)
        finally:
            os._exit(0)
    child_sock.close()
    ForkServer._early = (parent_sock, _Forked(pid))
    return True


def start_fork_server_early() -> None:
    """Start this process's fork server now, before this process imports torch: the two imports then run
    side by side instead of one after the other (a second or more of every single-submission run). The
    first worker uses it (ForkServer.get). Importing this module imports neither torch nor anything of a
    course."""
    if not fork_server_enabled():
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
