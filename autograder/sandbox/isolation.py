"""Confinement a worker applies to itself before it reads any student code.

Linux only. The worker, already holding Python and torch in memory, confines itself in this order
(docs/isolation.md states the guarantees and what each one rests on):

1. It asks for SIGKILL when its parent dies (the judge, or the fork server that started it).
2. It enters new mount, PID, IPC, UTS and network namespaces: as real root directly, otherwise
   inside a new user namespace. The network namespace has no interface but a loopback that is down,
   so nothing outside the worker can be reached.
3. It lays empty read-only tmpfs mounts over every path the grader keeps private (the release bundle
   with the reference and hidden tests, the instructor's sources, the submissions, the results).
4. When the grader runs as root, the directories on the way to the interpreter that an unprivileged
   user may not enter (/root is 0700 when Python lives in /root/.pyenv) are replaced by tmpfs
   mounts holding only the needed entries, so that the worker can drop root and still import.
5. Every mount becomes read-only and nosuid. The only writable places are a private tmpfs on /tmp
   (the scratch directory, size-limited) and a small private tmpfs on /dev/shm; both vanish with
   the worker.
6. It forks into its PID namespace, whose init it becomes, and mounts a /proc of its own: the judge
   and every other process of the machine are invisible, and every process it starts dies with it.
7. As root it drops to a uid of its own that no account uses (HOST_UID_BASE + its pid), with no
   supplementary groups and no capabilities.
8. Resource limits: address space, file size (captured output included), process count.
9. A nested user namespace maps SANDBOX_UID to that uid: student code always sees uid 1000, and
   holds no capability over any of the mounts above, so it cannot remove them; it then drops every
   capability, even those over that nested namespace.
10. no_new_privs: setuid programs cannot give privileges back.
11. Processes it forks lose the channel to the judge (it is replaced by /dev/null in the child).

If the kernel refuses namespaces (some container runtimes do), the worker runs without steps 2-6
and 9 and says so in its status line; it still drops root when the interpreter is readable by
others, and resource limits still apply.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
import signal
from dataclasses import dataclass, field

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_NOATIME = 0x400
MS_NODIRATIME = 0x800
MS_BIND = 0x1000
MS_MOVE = 0x2000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MS_RELATIME = 0x200000
MS_STRICTATIME = 0x1000000
MNT_DETACH = 0x2
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
SYS_MOUNT_SETATTR = 442  # the same number on every architecture (syscalls added after 5.1 share numbers)
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2

SANDBOX_UID = 1000  # the uid and gid student code sees
HOST_UID_BASE = 2_100_000_000  # a root grader's worker runs as HOST_UID_BASE + its pid: unique, no account's
SCRATCH_DIR = "/tmp/work"  # the worker's working directory (and HOME) when namespaces work

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


@dataclass
class Confinement:
    """What a worker does to itself; sent by the judge as JSON."""

    hide: list[str] = field(default_factory=list)  # paths replaced by an empty read-only tmpfs
    scratch: str = ""  # the judge's scratch path; inside the namespaces it leads to SCRATCH_DIR
    scratch_bytes: int = 512 * 1024 * 1024  # size of the private /tmp: the disk the worker may fill
    shm_bytes: int = 64 * 1024 * 1024  # size of the private /dev/shm
    memory_bytes: int = 0  # RLIMIT_AS of each process; 0 = unlimited (CUDA needs a huge address space)
    file_bytes: int = 256 * 1024 * 1024  # RLIMIT_FSIZE: largest file (stdout log included) it can write
    max_processes: int = 64  # processes (threads count) the worker may have beyond its user's existing ones
    namespaces: bool = True  # try user/mount/PID/network namespaces
    network: bool = False  # keep the machine's network (no network namespace)
    read_only: bool = True  # every mount read-only except the private /tmp and /dev/shm
    drop_root: bool = True  # a root grader's worker switches to an unprivileged uid of its own
    expose: list[str] = field(default_factory=list)  # more paths an unprivileged worker must be able to read
    parent_pid: int = 0  # the process that started the worker: it dies with it (0: no check)
    channel_fds: list[int] = field(default_factory=list)  # the judge channel: closed in forked children


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def _unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def _enter_user_namespace(extra_flags: int = 0, inside_id: int | None = None) -> None:
    """New user namespace (plus `extra_flags` namespaces) mapping `inside_id` (default: the same
    ids) to this process's uid and gid."""
    uid, gid = os.geteuid(), os.getegid()
    _unshare(CLONE_NEWUSER | extra_flags)
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid if inside_id is None else inside_id} {uid} 1")
    _write("/proc/self/gid_map", f"{gid if inside_id is None else inside_id} {gid} 1")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def _umount(target: str) -> None:
    _check(_libc.umount2(target.encode(), MNT_DETACH), f"umount {target}")


def _set_pdeathsig(expected_parent: int = 0) -> None:
    """SIGKILL when the parent (thread) that started this process ends; exit now if it already has."""
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
    if expected_parent and os.getppid() != expected_parent:
        os._exit(70)


def _hide_paths(paths: list[str]) -> int:
    n = 0
    for path in sorted(set(paths)):
        if os.path.isdir(path):
            _mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555")
        elif os.path.exists(path):
            _mount("/dev/null", path, None, MS_BIND, None)
        else:
            continue
        n += 1
    return n


def _may_enter(path: str, uid: int) -> bool:
    st = os.stat(path)
    if st.st_uid == uid:
        return bool(st.st_mode & 0o100)
    if st.st_gid == uid:
        return bool(st.st_mode & 0o010)
    return bool(st.st_mode & 0o001)


def _expose(paths: list[str], uid: int, stage: str) -> int:
    """Make `paths` reachable for `uid`: each ancestor directory it may not enter is replaced by a
    tmpfs (mode 0755) holding only the entries on the way to a needed path (moved back from a
    staging tmpfs with their own submounts). Returns the number of directories replaced."""
    blocked: dict[str, set[str]] = {}
    for p in paths:
        p = os.path.realpath(p)
        if not os.path.exists(p):
            continue
        current = "/"
        for name in [x for x in p.split("/") if x]:
            if not _may_enter(current, uid):
                blocked.setdefault(current, set()).add(name)
            current = os.path.join(current, name)
    if not blocked:
        return 0
    if "/" in blocked:
        raise OSError(13, "the root directory is not searchable by an unprivileged user")
    _mount("tmpfs", stage, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0700")
    try:
        for d in sorted(blocked, key=lambda s: (s.count("/"), s)):
            staged = []
            for i, name in enumerate(sorted(blocked[d])):
                src, tmp = os.path.join(d, name), os.path.join(stage, str(i))
                is_dir = os.path.isdir(src)
                os.mkdir(tmp) if is_dir else open(tmp, "w").close()
                _mount(src, tmp, None, MS_BIND | MS_REC, None)
                staged.append((name, tmp, is_dir))
            _mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
            for name, tmp, is_dir in staged:
                dst = os.path.join(d, name)
                os.mkdir(dst) if is_dir else open(dst, "w").close()
                _mount(tmp, dst, None, MS_MOVE, None)
            for _, tmp, is_dir in staged:
                os.rmdir(tmp) if is_dir else os.unlink(tmp)
    finally:
        _umount(stage)
    return len(blocked)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop_capabilities() -> None:
    """No capability left, not even over the worker's own user namespace."""
    header, data = _CapHeader(0x20080522, 0), (_CapData * 2)()  # _LINUX_CAPABILITY_VERSION_3
    _check(_libc.capset(ctypes.byref(header), data), "capset")


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


_OPTION_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
                 "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME, "strictatime": MS_STRICTATIME}


def _make_read_only() -> None:
    """Every mount of this mount namespace read-only and nosuid (the host's mounts are untouched)."""
    attr = _MountAttr(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, 0, 0)
    ret = _libc.syscall(ctypes.c_long(SYS_MOUNT_SETATTR), ctypes.c_int(AT_FDCWD), b"/",
                        ctypes.c_uint(AT_RECURSIVE), ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)))
    if ret == 0:
        return
    if ctypes.get_errno() != 38:  # ENOSYS: a kernel older than 5.12, remount one by one below
        _check(ret, "mount_setattr /")
    with open("/proc/self/mountinfo") as fh:
        mounts = [line.split() for line in fh]
    points = sorted({m[4].replace("\\040", " ") for m in mounts}, key=lambda p: p.count("/"))
    options = {m[4].replace("\\040", " "): m[5] for m in mounts}
    for point in points:
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID
        for opt in options[point].split(","):
            flags |= _OPTION_FLAGS.get(opt, 0)
        try:
            _mount(None, point, None, flags, None)
        except OSError:
            if point == "/":
                raise


def _private_tmp(conf: Confinement, owner: int) -> None:
    """A private tmpfs on /tmp holding SCRATCH_DIR, reachable through the judge's scratch path too.
    Private paths that were under /tmp look as they do elsewhere: empty and read-only."""
    hidden = [(p, os.path.isdir(p)) for p in sorted(set(conf.hide)) if p.startswith("/tmp/") and os.path.exists(p)]
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={conf.scratch_bytes},mode=1777")
    for path, is_dir in hidden:
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        if is_dir:
            os.makedirs(path, mode=0o555, exist_ok=True)
        else:
            open(path, "w").close()
            os.chmod(path, 0o444)
    os.makedirs(SCRATCH_DIR, mode=0o700)
    os.chown(SCRATCH_DIR, owner, owner)
    if os.path.isdir("/dev/shm"):
        _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV,
               f"size={conf.shm_bytes},mode=0700,uid={owner},gid={owner}")
    scratch = os.path.abspath(conf.scratch) if conf.scratch else ""
    if scratch.startswith("/tmp/") and scratch != SCRATCH_DIR:
        os.makedirs(os.path.dirname(scratch), exist_ok=True)
        os.symlink(SCRATCH_DIR, scratch)
    elif scratch and scratch != SCRATCH_DIR and os.path.isdir(scratch):
        _mount(SCRATCH_DIR, scratch, None, MS_BIND, None)


def _fork_into_pid_namespace() -> None:
    """After unshare(CLONE_NEWPID) only children enter the new namespace: fork once, the parent
    waits and mirrors the child's exit so the judge sees one process."""
    pid = os.fork()
    if pid == 0:
        return
    _, status = os.waitpid(pid, 0)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


def _drop_root(uid: int) -> None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise OSError(1, "could not drop root")
    # Changing uid made the process non-dumpable, which leaves /proc/self owned by root; its own
    # uid needs /proc/self (uid_map, setgroups) for the nested user namespace.
    _check(_libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl(DUMPABLE)")


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


def _readable_by_others(paths: list[str]) -> bool:
    """Every ancestor of `paths` searchable and each path readable by a user with no relation to them."""
    for p in paths:
        p = os.path.realpath(p)
        if not os.path.exists(p):
            continue
        current = "/"
        for name in [x for x in p.split("/") if x] + [""]:
            st = os.stat(current)
            if not st.st_mode & 0o001 or (name == "" and os.path.isdir(current) and not st.st_mode & 0o004):
                return False
            current = os.path.join(current, name) if name else current
    return True


def needed_paths(conf: Confinement) -> list[str]:
    """What the worker reads after confinement: the interpreter, its packages, model caches."""
    paths = python_paths() + list(conf.expose)
    for var in ("HF_HOME", "HF_HUB_CACHE", "TRANSFORMERS_CACHE", "HF_DATASETS_CACHE", "TORCH_HOME"):
        if os.environ.get(var):
            paths.append(os.environ[var])
    return paths


def _sever_channel(fds: list[int]) -> None:
    """In a process forked by student code: the judge's channel becomes /dev/null, so only the worker
    itself ever talks to the judge (a child reading it gets EOF and exits)."""
    if not fds:
        return

    def after_fork_in_child() -> None:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in fds:
            try:
                os.dup2(null, fd)
            except OSError:
                pass
        os.close(null)

    os.register_at_fork(after_in_child=after_fork_in_child)


def _deterministic_cuda() -> None:
    """cuDNN's deterministic kernels and no autotuning (which picks kernels by timing). No effect
    without CUDA; what stays nondeterministic on a GPU is listed in docs/isolation.md."""
    import sys

    torch = sys.modules.get("torch")
    if torch is not None:
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True


def confine(conf: Confinement) -> str:
    """Apply `conf` to this process; returns a one-line status for the grading log."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # oversized writes fail with EFBIG instead of killing
    _deterministic_cuda()
    _set_pdeathsig(conf.parent_pid)
    root = os.geteuid() == 0 and conf.drop_root
    host_uid = HOST_UID_BASE + os.getpid() if root else os.getuid()
    existing = 0 if root else _count_own_processes()  # before our own /proc hides the others
    done: list[str] = []
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | (0 if conf.network else CLONE_NEWNET)
    in_namespaces = False
    if conf.namespaces:
        try:
            if os.geteuid() == 0:
                _unshare(flags)
            else:
                _enter_user_namespace(flags)
            in_namespaces = True
            _mount(None, "/", None, MS_REC | MS_PRIVATE, None)
            done.append(f"{_hide_paths(conf.hide)} private paths hidden")
            if root:
                _expose(needed_paths(conf), host_uid, conf.scratch or "/tmp")
            if conf.read_only:
                _make_read_only()
                done.append("filesystem read-only except a private /tmp")
            _private_tmp(conf, host_uid)
            _fork_into_pid_namespace()
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
            done.append("own PID namespace")
            if not conf.network:
                done.append("no network")
            os.environ.update(HOME=SCRATCH_DIR, TMPDIR=SCRATCH_DIR)
        except OSError as exc:
            if in_namespaces:  # half-confined: a worker must not run student code like this
                raise
            done.append(f"namespaces unavailable ({exc})")
    if root and not in_namespaces and not _readable_by_others(needed_paths(conf)):
        root = False  # dropping root would leave the interpreter unreadable
        host_uid = os.getuid()
        done.append("runs as root: the interpreter is not readable by other users")
    if root:
        if not in_namespaces and conf.scratch and os.path.isdir(conf.scratch):
            os.chown(conf.scratch, host_uid, host_uid)
        _drop_root(host_uid)
        done.append("an unprivileged uid of its own")
    _set_limits(conf, existing)
    if in_namespaces:
        _enter_user_namespace(inside_id=SANDBOX_UID)  # nested: no capability over the mounts above
        _drop_capabilities()
    _set_pdeathsig()  # again: changing credentials clears it
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
    _sever_channel(conf.channel_fds)
    return ("isolated: " if in_namespaces else "partly isolated: ") + ", ".join(done)


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
