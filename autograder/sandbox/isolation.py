"""Confinement a worker applies to itself before it reads any student code.

Linux only. The worker, already holding Python and torch in memory, moves into new user, mount and
PID namespaces, lays empty read-only tmpfs mounts over every path the grader keeps private (the
release bundle with the reference and hidden tests, the instructor's sources, other submissions,
the results folder), mounts a /proc of its own, then enters a nested user namespace so that it holds
no capability over those mounts and cannot remove them. Its PID namespace hides the judge: it cannot
signal or trace it, and every process it starts dies with it. Resource limits bound memory,
file size and process count.

If the kernel refuses namespaces (some container runtimes do), the worker runs without the mount and
PID layers and says so in `status`; resource limits still apply.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
from dataclasses import dataclass, field

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REC = 0x4000
MS_PRIVATE = 0x40000

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


@dataclass
class Confinement:
    """What a worker does to itself; sent by the judge as JSON."""

    hide: list[str] = field(default_factory=list)  # paths replaced by an empty read-only tmpfs
    scratch: str = ""  # the worker's working directory: a private tmpfs of its own when namespaces work
    scratch_bytes: int = 512 * 1024 * 1024  # size of that tmpfs: the disk the worker may fill
    memory_bytes: int = 0  # RLIMIT_AS; 0 = unlimited (CUDA needs a huge address space)
    file_bytes: int = 256 * 1024 * 1024  # RLIMIT_FSIZE: largest file (stdout log included) it can write
    max_processes: int = 64  # processes beyond those the user already has (fork bombs)
    namespaces: bool = True  # try user/mount/PID namespaces


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def _enter_user_namespace(extra_flags: int = 0) -> None:
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(CLONE_NEWUSER | extra_flags), "unshare")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(_libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def _hide_paths(paths: list[str]) -> None:
    _mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    for path in sorted(set(paths)):
        if os.path.isdir(path):
            _mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555")
        elif os.path.exists(path):
            _mount("/dev/null", path, None, 0x1000, None)  # MS_BIND over a file


def _fork_into_pid_namespace() -> None:
    """After unshare(CLONE_NEWPID) only children enter the new namespace: fork once, the parent
    waits and mirrors the child's exit so the judge sees one process."""
    pid = os.fork()
    if pid == 0:
        return
    _, status = os.waitpid(pid, 0)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


def _count_own_processes() -> int:
    uid, n = os.getuid(), 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    n += 1
            except OSError:
                pass
    return n


def _set_limits(conf: Confinement, existing_processes: int) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if conf.file_bytes:
        resource.setrlimit(resource.RLIMIT_FSIZE, (conf.file_bytes, conf.file_bytes))
    if conf.memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (conf.memory_bytes, conf.memory_bytes))
    if conf.max_processes:
        n = existing_processes + conf.max_processes
        soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
        if hard == resource.RLIM_INFINITY or n < hard:
            resource.setrlimit(resource.RLIMIT_NPROC, (n, n))


def confine(conf: Confinement) -> str:
    """Apply `conf` to this process; returns a one-line status for the grading log."""
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # oversized writes fail with EFBIG instead of killing
    status = "namespaces off"
    existing = _count_own_processes()  # before our own /proc hides the others
    if conf.namespaces:
        try:
            _enter_user_namespace(CLONE_NEWNS | CLONE_NEWPID)
            _hide_paths(conf.hide)
            if conf.scratch:
                _mount("tmpfs", conf.scratch, "tmpfs", MS_NOSUID | MS_NODEV, f"size={conf.scratch_bytes},mode=0700")
            _fork_into_pid_namespace()
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
            _enter_user_namespace()  # nested: no capability left over the mounts above
            status = f"isolated: {len(set(conf.hide))} private paths hidden, private scratch, own PID namespace"
        except OSError as exc:
            status = f"namespaces unavailable ({exc}); resource limits only"
    _set_limits(conf, existing)
    return status


def hideable(paths: list[str], keep: list[str]) -> list[str]:
    """The paths to cover so that everything under `paths` is hidden except what `keep` needs.

    A path that contains a kept one (a virtualenv inside the project, the package itself) is not
    covered whole: its other children are, recursively."""
    keep_real = [os.path.realpath(k) for k in keep if k]
    out = []

    def visit(path: str, depth: int) -> None:
        inside = [k for k in keep_real if k == path or k.startswith(path.rstrip("/") + "/")]
        if not inside:
            out.append(path)
            return
        if path in keep_real or depth > 6 or not os.path.isdir(path):
            return
        try:
            children = sorted(os.listdir(path))
        except OSError:
            return
        for child in children:
            visit(os.path.join(path, child), depth + 1)

    for p in sorted({os.path.realpath(p) for p in paths if p and os.path.exists(p)}):
        visit(p, 0)
    return out


def python_paths() -> list[str]:
    """What a worker must still read after confinement: the interpreter and its packages."""
    import site
    import sys

    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, *site.getsitepackages()}
    user = site.getusersitepackages()
    if isinstance(user, str) and os.path.isdir(user):
        paths.add(user)
    paths.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the autograder package
    return sorted(paths)
