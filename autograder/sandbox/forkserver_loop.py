"""The fork server's own process: it imports what workers need once (torch, the worker's code), then forks one
worker per request from its judge, and reports each one's exit. It holds nothing of the judge: no release, no
reference, no test code, only the workers' environment (sandbox/environment.py). Started by
sandbox/forkserver.py, either forked from a grading process (fork_zygote) or as
`python -m autograder.entrypoints fork-server FD JUDGE_PID`.
"""
from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import sys

from autograder.sandbox.environment import imports_without_collector
from autograder.sandbox.frames import Channel, send_frame


def serve_fork_server(sock_fd: int, judge_pid: int) -> None:
    """The fork server: imports what workers need, then forks one per request."""
    from autograder.sandbox import linux

    linux.set_pdeathsig(judge_pid)
    for stop in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # the judge stops us (it kills us, or dies): a
        signal.signal(stop, signal.SIG_IGN)  # signal to the whole group is its to act on, in order
    with imports_without_collector():
        import torch

        from autograder.sandbox import worker  # noqa: F401 - the worker's code, imported once for every fork
        try:
            import numpy  # noqa: F401 - imported once, shared by every fork
        except ImportError:
            pass
    torch.set_num_threads(1)
    sock = socket.socket(fileno=sock_fd)
    channel = Channel(sock)
    wake_r, wake_w = os.pipe()  # SIGCHLD wakes the loop: ended workers are reported at once
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    send_frame(sock, {"ready": os.getpid()})
    watched: list[socket.socket | int] = [sock, wake_r]
    while True:
        readable, _, _ = select.select(watched, [], [], 0 if channel.buffered() else 1.0)
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
            send_frame(sock, {"exited": pid, "code": os.waitstatus_to_exitcode(status)})
        if not readable and not channel.buffered():
            continue
        try:
            request = channel.recv()
            if "preload" in request:
                with imports_without_collector():
                    done = _preload([str(n) for n in request["preload"]][:5000])
                send_frame(sock, {"preloaded": done})
                continue
            fds = channel.take_fds(3)  # a spawn: its descriptors came with it
        except (EOFError, OSError, ValueError):
            os._exit(0)  # the judge is gone: its workers follow through their parent-death signal
        pid = os.fork()
        if pid == 0:
            _become_worker(request, fds)
        for fd in fds:
            os.close(fd)
        send_frame(sock, {"pid": pid})


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


def _become_worker(request: dict, fds: list[int]) -> None:
    """In a child of the fork server: the same state as `python -m autograder.entrypoints worker CONFIG`."""
    code = 1
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for stop in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # as a new interpreter has them
            signal.signal(stop, signal.SIG_DFL)
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
        from autograder.sandbox import worker

        worker.run_worker(json.dumps(config))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - report, then leave without running the server's loop
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)
