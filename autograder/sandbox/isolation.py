"""Confinement a worker applies to itself before it reads any student code.

Linux only. The worker, already holding Python and torch in memory, confines itself in this order
(docs/isolation.md states the guarantees and what each one rests on):

1. It asks for SIGKILL when its parent dies (the judge, or the fork server that started it).
2. It enters new mount, PID, IPC, UTS and network namespaces: as real root directly, otherwise
   inside a new user namespace. The network namespace has no interface but a loopback that is down.
3. Its root becomes a fresh tmpfs holding only what it needs, bound read-only from the machine
   (rootfs.py: the interpreter and its packages, system libraries, a minimal /etc and /dev); the
   machine's root is detached, so nothing else exists for it. Writable: a private, size-limited tmpfs
   on /tmp (working directory /tmp/work) and a small private /dev/shm, both gone with the worker.
4. It forks into its PID namespace, whose init it becomes, before it builds the root, so that the root holds
   a /proc of its own: the judge and every other process of the machine are invisible, and every process it
   starts dies with it.
5. As root it drops to a uid of its own that no account uses (HOST_UID_BASE + its pid), with no
   supplementary groups and no capabilities.
6. Resource limits: address space, file size (captured output included), process count.
7. A nested user namespace maps SANDBOX_UID to that uid: student code always sees uid 1000 and holds
   no capability over any of the mounts above, so it cannot remove them; it then drops every
   capability, even those over that nested namespace.
8. no_new_privs: setuid programs cannot give privileges back.
9. Processes it forks lose the channel to the judge (it is replaced by /dev/null in the child).

That is level `FULL`, the first rung of the ladder (sandbox/ladder.py chooses the rung once per run). Each
level is all or nothing: a worker that cannot build its level raises, and never runs student code with less.

- `FULL`: all of the above. Status line "isolated: ...".
- `RESTRICTED`, where the kernel refuses namespaces or mounts: no root of its own, but the machine's files are
  hidden all the same by Landlock (sandbox/landlock.py: read only the allowlist root's paths where they lie,
  write only the scratch folder) and, for a root grader, by a uid of its own (the release is mode 0700). It
  keeps steps 1, 5, 6, 8, 9, and takes PID, IPC, UTS and network namespaces where a user namespace is still
  allowed (said in the status line either way). Refused where neither Landlock nor a dropped root can hide
  the files. Status line "restricted: ...".
- `TRUSTED` (only with --trusted-submissions): steps 1, 5, 6, 8, 9 only; the worker sees whatever the
  grader's user may read. Status line "unconfined: ...".

`python -m autograder.entrypoints probe CONFIG` builds the same confinement in a throw-away
process and prints what it got: the grader runs it once before grading anything.
"""
from __future__ import annotations

import json
import os
import resource
import signal
import sys
from dataclasses import asdict, dataclass, field

from autograder.sandbox import landlock, linux, rootfs
from autograder.sandbox.environment import python_command, worker_environment
from autograder.sandbox.rootfs import SCRATCH_DIR, python_paths  # noqa: F401 - python_paths is public here

SANDBOX_UID = 1000  # the uid and gid student code sees
HOST_UID_BASE = 2_100_000_000  # a root grader's worker runs as HOST_UID_BASE + its pid: unique, no account's
NAMESPACE_FLAGS = (linux.CLONE_NEWNS | linux.CLONE_NEWPID | linux.CLONE_NEWIPC | linux.CLONE_NEWUTS)
ISOLATED = "isolated"  # the first word of the status line of a fully confined worker
FULL, RESTRICTED, TRUSTED = "full", "restricted", "trusted"  # the ladder's levels, strongest first
STATUS_WORDS = {FULL: ISOLATED, RESTRICTED: "restricted", TRUSTED: "unconfined"}


class ConfinementRefused(OSError):
    """The kernel refuses the namespaces and the worker may not run without them."""


@dataclass
class Confinement:
    """What a worker does to itself; sent by the judge as JSON."""

    scratch: str = ""  # the judge's scratch folder: the working directory of a worker without namespaces
    scratch_bytes: int = 512 * 1024 * 1024  # size of the private /tmp: the disk the worker may fill
    shm_bytes: int = 64 * 1024 * 1024  # size of the private /dev/shm
    memory_bytes: int = 0  # RLIMIT_AS of each process; 0 = unlimited (CUDA needs a huge address space)
    file_bytes: int = 256 * 1024 * 1024  # RLIMIT_FSIZE: largest file (stdout log included) it can write
    max_processes: int = 64  # processes (threads count) the worker may have beyond its user's existing ones
    level: str = FULL  # FULL, RESTRICTED or TRUSTED (the ladder's rung, chosen by sandbox/ladder.py)
    network: bool = False  # keep the machine's network (no network namespace)
    drop_root: bool = True  # a root grader's worker switches to an unprivileged uid of its own
    cuda: bool = False  # the NVIDIA device files and /sys are visible
    expose: list[str] = field(default_factory=list)  # more paths of the machine visible read-only
    inputs: dict[str, str] = field(default_factory=dict)  # name in /tmp/work -> file of the machine (read-only)
    parent_pid: int = 0  # the process that started the worker: it dies with it (0: no check)
    channel_fds: list[int] = field(default_factory=list)  # the judge channel: closed in forked children


def _fork_into_pid_namespace() -> None:
    """After unshare(CLONE_NEWPID) only children enter the new namespace: fork once, the parent waits and
    mirrors the child's exit so the judge sees one process."""
    proc = _open_proc()  # the machine's /proc, before the child mounts its own over it: the child's limits, later
    pid = os.fork()
    if pid == 0:
        if proc is not None:
            os.close(proc)  # never in the child's hands: it would see the machine's processes
        # a process group of its own: kill(0, ...) from student code reaches only the namespace, never this
        # parent outside it (which shares the worker's uid when the grader is not root)
        os.setpgid(0, 0)
        return
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # ended, not yet reaped: its limits can still be read
    cpu_limit = _cpu_limit(proc, pid)
    _, status, usage = os.wait4(pid, 0)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
        if usage.ru_utime + usage.ru_stime + CPU_LIMIT_SLACK >= cpu_limit:
            # the kernel's SIGKILL at the CPU-time limit the code lowered itself (setrlimit): its own doing, said
            # as SIGXCPU (that limit's signal), never as a kill from outside
            signal.signal(signal.SIGXCPU, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGXCPU)
        # killed from outside (its init ignores a SIGKILL of its own): said the same way, never as an exit code
        # 137 that the student's code could have chosen
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


CPU_LIMIT_SLACK = 1.0  # seconds: the CPU time a process was charged when it was reaped lags its limit's check


def _open_proc() -> int | None:
    try:
        return os.open("/proc", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None


def _cpu_limit(proc: int | None, pid: int) -> float:
    """The hard RLIMIT_CPU of an ended, unreaped child in seconds, read from `proc` (the machine's /proc: prlimit()
    on a child in a user namespace of its own is refused); infinite when it has none or it cannot be read."""
    if proc is None:
        return float("inf")
    try:
        fd = os.open(f"{pid}/limits", os.O_RDONLY, dir_fd=proc)
        with open(fd, encoding="ascii") as f:
            line = next((row for row in f if row.startswith("Max cpu time")), "")
        hard = line[len("Max cpu time"):].split()[1]
        return float("inf") if hard == "unlimited" else float(hard)
    except (OSError, IndexError, ValueError):
        return float("inf")


def level_of(status: str) -> str:
    """The level a worker's status line was confined at (FULL for an empty one: nothing chosen yet)."""
    word = status.split(":", 1)[0].strip()
    return next((level for level, w in STATUS_WORDS.items() if w == word), FULL)


def _drop_root(uid: int) -> None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise OSError(1, "could not drop root")
    # Changing uid made the process non-dumpable, which leaves /proc/self owned by root; its own uid
    # needs /proc/self (uid_map, setgroups) for the nested user namespace.
    linux.set_dumpable()


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


def mapped_bytes() -> int:
    """The address space this process has mapped now (libraries included, touched or not)."""
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


def address_space_limit(memory_bytes: int) -> int:
    """RLIMIT_AS for a process that may allocate `memory_bytes` beyond what it has mapped already. The address
    space counts every library mapped, used or not: a CUDA build of torch maps some 3 GB it never touches on a
    machine without a GPU (a CPU build about 0.6 GB), so a limit of `memory_bytes` alone would leave the code
    nothing, or a different amount with each build."""
    return mapped_bytes() + memory_bytes


def _set_limits(conf: Confinement, existing_processes: int) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if conf.file_bytes:
        resource.setrlimit(resource.RLIMIT_FSIZE, (conf.file_bytes, conf.file_bytes))
    if conf.memory_bytes:
        limit = address_space_limit(conf.memory_bytes)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if conf.max_processes:
        n = existing_processes + conf.max_processes
        soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
        if hard == resource.RLIM_INFINITY or n < hard:
            resource.setrlimit(resource.RLIMIT_NPROC, (n, n))


def _readable_by_others(paths: list[str], whole_path: bool = True) -> bool:
    """Each path readable by a user with no relation to it (folders: also searchable) and, with
    `whole_path`, each ancestor searchable (without namespaces the worker reaches the paths through the
    machine's own folders; with them, through folders of its own root)."""
    for p in paths:
        p = os.path.realpath(p)
        if not os.path.exists(p):
            continue
        ancestors = []
        if whole_path:
            parts = p.split("/")
            ancestors = ["/".join(parts[:i]) or "/" for i in range(1, len(parts))]
        if any(not os.stat(a).st_mode & 0o001 for a in ancestors):
            return False
        st = os.stat(p)
        wanted = 0o005 if os.path.isdir(p) else 0o004
        if st.st_mode & wanted != wanted:
            return False
    return True


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
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True


def _enter_namespaces(flags: int) -> None:
    if os.geteuid() == 0:
        linux.unshare(flags)
    else:
        linux.enter_user_namespace(flags)


def _host_uid(root: bool) -> int:
    return HOST_UID_BASE + os.getpid() if root else os.getuid()


def _may_drop_root(conf: Confinement, whole_path: bool) -> bool:
    """Root drops to a uid of its own, unless the interpreter would then be unreadable to it."""
    return (os.geteuid() == 0 and conf.drop_root
            and _readable_by_others(rootfs.visible_paths(conf.expose), whole_path=whole_path))


def _confine_full(conf: Confinement, done: list[str]) -> tuple[bool, int]:
    """Level full: namespaces and the allowlist root. Any step that fails raises: never half of it."""
    root = os.geteuid() == 0 and conf.drop_root
    if root and not _may_drop_root(conf, whole_path=False):
        root = False
        done.append("runs as root: the interpreter is not readable by other users")
    host_uid = _host_uid(root)
    _enter_namespaces(NAMESPACE_FLAGS | (0 if conf.network else linux.CLONE_NEWNET))
    # the first process of the PID namespace builds the root: an unprivileged user namespace may mount a /proc
    # only while the machine's own /proc is still visible in its mount namespace
    _fork_into_pid_namespace()
    n = rootfs.build(host_uid, conf.scratch_bytes, conf.shm_bytes, conf.expose, conf.inputs, conf.cuda)
    done += [f"allowlist root ({n} paths of the machine, read-only)", "own PID namespace"]
    if not conf.network:
        done.append("no network")
    os.chdir(SCRATCH_DIR)
    os.environ.update(HOME=SCRATCH_DIR, TMPDIR=SCRATCH_DIR)
    return root, host_uid


def _place_input(source: str, target: str, copy: bool) -> None:
    """A declared input file in the scratch folder: a copy where the worker will drop root (the release it lies in
    is closed to other users), else a link to it (read-only through Landlock, where the worker cannot write)."""
    if not copy:
        os.symlink(source, target)
        return
    import shutil

    shutil.copyfile(source, target)
    os.chmod(target, 0o444)


def _use_scratch(conf: Confinement, root: bool, host_uid: int) -> None:
    """Without a root of its own the worker works in the judge's scratch folder: its HOME and TMPDIR, with the
    declared input files as links to their read-only originals."""
    if not (conf.scratch and os.path.isdir(conf.scratch)):
        return
    for name, source in sorted(conf.inputs.items()):
        target = os.path.normpath(os.path.join(conf.scratch, name))
        if target.startswith(conf.scratch + "/") and os.path.exists(source) and not os.path.lexists(target):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            _place_input(source, target, copy=root)
    if root:
        for dirpath, _, _ in os.walk(conf.scratch):
            os.chown(dirpath, host_uid, host_uid)
    os.chdir(conf.scratch)
    os.environ.update(HOME=conf.scratch, TMPDIR=conf.scratch)
    import tempfile

    tempfile.tempdir = conf.scratch  # the fork server may have asked already: its answer, the machine's /tmp, is kept


def _try_process_namespaces(conf: Confinement, done: list[str]) -> bool:
    """Level restricted, where the kernel allows it: PID, IPC, UTS and network namespaces without a mount
    namespace (a user namespace that may not mount still has them). Their absence is said, not fatal."""
    flags = linux.CLONE_NEWPID | linux.CLONE_NEWIPC | linux.CLONE_NEWUTS | (0 if conf.network else linux.CLONE_NEWNET)
    try:
        if os.geteuid() != 0:
            # the user namespace first, on its own: where its id maps are refused (AppArmor), the process keeps its
            # credentials and enters none of the other namespaces half-way
            linux.enter_user_namespace()
        linux.unshare(flags)
    except OSError as exc:
        done.append(f"no namespaces ({exc.strerror or exc})")
        return False
    _fork_into_pid_namespace()
    done.append("own PID namespace (the machine's /proc)")
    if not conf.network:
        done.append("no network")
    return True


def _restricted_paths(conf: Confinement) -> tuple[list[str], list[str]]:
    """What a restricted worker may read (the allowlist root's paths, where they lie on the machine) and write."""
    readable = [*rootfs.visible_paths(conf.expose), *rootfs.ETC_PATHS, "/etc/passwd", "/etc/group", "/etc/hosts",
                *_proc_without_processes(),
                *(["/sys"] if conf.cuda else ["/sys/devices/system/cpu", "/sys/devices/system/node"]),
                *conf.inputs.values()]
    devices = [f"/dev/{name}" for name in rootfs.DEVICES]
    if conf.cuda:
        devices += sorted(f"/dev/{n}" for n in os.listdir("/dev") if n.startswith("nvidia"))
    return readable, [*devices, *([conf.scratch] if conf.scratch else [])]


def _proc_without_processes() -> list[str]:
    """/proc's entries but the other processes': /proc/self (opened, so its own folder) and the machine-wide
    files. /proc itself is left out, so the worker cannot list the machine's processes."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    return ["/proc/self", "/proc/thread-self",
            *(f"/proc/{n}" for n in names if not n.isdigit() and n not in ("self", "thread-self"))]


def _confine_restricted(conf: Confinement, done: list[str]) -> tuple[bool, int]:
    """Level restricted: no root of its own, but the machine's files hidden all the same (Landlock, and a uid
    of its own for a root grader). Raises when neither can hide them."""
    abi = landlock.abi_version()
    root = _may_drop_root(conf, whole_path=True)
    if os.geteuid() == 0 and conf.drop_root and not root:
        done.append("runs as root: the interpreter is not readable by other users")
    if not abi and not root:
        raise OSError(1, "restricted confinement needs Landlock (Linux 5.13+, enabled) to hide the machine's files "
                         "from a worker that runs as the grader's own user, and this kernel has none")
    host_uid = _host_uid(root)
    _try_process_namespaces(conf, done)
    _use_scratch(conf, root, host_uid)
    if root:
        _drop_root(host_uid)
        done.append("an unprivileged uid of its own")
    if abi:
        readable, writable = _restricted_paths(conf)
        n, denies = landlock.restrict(readable, writable, abi)
        done.append(f"file allowlist (Landlock ABI {abi}: {n} paths, writable only its scratch folder)")
        done += denies
    linux.drop_capabilities()  # none over a user namespace of its own, none of root's where root kept its uid
    if os.geteuid() == 0:
        done.append("no capabilities")
    return False, host_uid


def _confine_trusted(conf: Confinement, done: list[str]) -> tuple[bool, int]:
    """Level trusted: what needs neither namespaces nor Landlock (the caller adds the limits)."""
    done.append("trusted submissions: no namespaces, no file allowlist")
    root = _may_drop_root(conf, whole_path=True)
    host_uid = _host_uid(root)
    _use_scratch(conf, root, host_uid)
    return root, host_uid


def confine(conf: Confinement) -> str:
    """Apply `conf` at its level to this process; returns a one-line status for the grading log, its first word
    the level's (`ISOLATED`, `RESTRICTED`, `UNCONFINED`). Raises when the level cannot be had, never falls back."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # oversized writes fail with EFBIG instead of killing
    _deterministic_cuda()
    linux.set_pdeathsig(conf.parent_pid)
    root = os.geteuid() == 0 and conf.drop_root
    existing = 0 if root else _count_own_processes()  # before our own /proc hides the others
    done: list[str] = []
    level = conf.level
    if level == FULL:
        try:
            root, host_uid = _confine_full(conf, done)
        except OSError as exc:
            raise ConfinementRefused(exc.errno or 1, f"full confinement failed: {exc}") from None
    else:
        root, host_uid = (_confine_restricted if level == RESTRICTED else _confine_trusted)(conf, done)
    if root:
        _drop_root(host_uid)
        done.append("an unprivileged uid of its own")
    _set_limits(conf, existing)
    if level == FULL:
        linux.enter_user_namespace(inside_id=SANDBOX_UID)  # nested: no capability over the mounts above
        linux.drop_capabilities()
    linux.set_pdeathsig()  # again: changing credentials clears it
    linux.set_no_new_privs()
    _sever_channel(conf.channel_fds)
    return f"{STATUS_WORDS[level]}: " + ", ".join(done)


def probe(conf: Confinement, timeout: float = 60.0) -> tuple[bool, str]:
    """Build `conf` in a throw-away process (no student code): (confined as required, status or error)."""
    import subprocess

    config = {**asdict(conf), "parent_pid": 0, "channel_fds": [], "scratch": ""}
    try:
        done = subprocess.run(python_command("probe", json.dumps(config)),
                              capture_output=True, text=True, timeout=timeout, env=worker_environment(), cwd="/")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"the confinement probe did not run: {exc}"
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return False, tail[0]
    return True, lines[-1]


def probe_confinement(config: str) -> None:
    """The probe's process (`python -m autograder.entrypoints probe CONFIG`): confine itself, print the status."""
    conf = Confinement(**json.loads(config))
    try:
        status = confine(conf)
    except ConfinementRefused as exc:
        print(exc.strerror, file=sys.stderr)
        os._exit(3)
    except BaseException as exc:  # noqa: BLE001 - the probe reports whatever went wrong
        print(f"confinement failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        os._exit(4)
    print(status, flush=True)
    os._exit(0)

