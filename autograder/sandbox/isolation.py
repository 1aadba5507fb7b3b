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
4. It forks into its PID namespace, whose init it becomes, and mounts a /proc of its own: the judge
   and every other process of the machine are invisible, and every process it starts dies with it.
5. As root it drops to a uid of its own that no account uses (HOST_UID_BASE + its pid), with no
   supplementary groups and no capabilities.
6. Resource limits: address space, file size (captured output included), process count.
7. A nested user namespace maps SANDBOX_UID to that uid: student code always sees uid 1000 and holds
   no capability over any of the mounts above, so it cannot remove them; it then drops every
   capability, even those over that nested namespace.
8. no_new_privs: setuid programs cannot give privileges back.
9. Processes it forks lose the channel to the judge (it is replaced by /dev/null in the child).

Where the kernel refuses namespaces, a worker of a grader that is not root refuses to run student code
(`Confinement.required`), unless the grader was told the submissions are trusted. A root grader's worker
runs without steps 2-4 and 7 ("partly isolated": it still drops root, and the release is mode 0700) and
says so in its status line.

`python -m autograder.sandbox.isolation --probe CONFIG` builds the same confinement in a throw-away
process and prints what it got: the grader runs it once before grading anything.
"""
from __future__ import annotations

import json
import os
import resource
import signal
import sys
from dataclasses import asdict, dataclass, field

from autograder.sandbox import linux, rootfs
from autograder.sandbox.environment import python_command, worker_environment
from autograder.sandbox.rootfs import SCRATCH_DIR, python_paths  # noqa: F401 - python_paths is public here

SANDBOX_UID = 1000  # the uid and gid student code sees
HOST_UID_BASE = 2_100_000_000  # a root grader's worker runs as HOST_UID_BASE + its pid: unique, no account's
NAMESPACE_FLAGS = (linux.CLONE_NEWNS | linux.CLONE_NEWPID | linux.CLONE_NEWIPC | linux.CLONE_NEWUTS)
ISOLATED = "isolated"  # the first word of the status line of a fully confined worker


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
    namespaces: bool = True  # confine with namespaces and the allowlist root
    required: bool = True  # without namespaces, a grader that is not root refuses to run student code
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
    pid = os.fork()
    if pid == 0:
        return
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
        # killed from outside (its init ignores a SIGKILL of its own): said the same way, never as an exit code
        # 137 that the student's code could have chosen
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


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


def _enter_namespaces(conf: Confinement) -> None:
    flags = NAMESPACE_FLAGS | (0 if conf.network else linux.CLONE_NEWNET)
    if os.geteuid() == 0:
        linux.unshare(flags)
    else:
        linux.enter_user_namespace(flags)


def refusal_message(error: str) -> str:
    return (f"the kernel refuses the namespaces that confine student code ({error}), and this grader does not "
            "run as root. Grading stopped: notebooks would run with the whole machine visible to them. Either "
            "allow unprivileged user namespaces (Ubuntu 24.04: `sudo sysctl -w "
            "kernel.apparmor_restrict_unprivileged_userns=0`, or an AppArmor profile for this Python; other "
            "systems: `sysctl -w user.max_user_namespaces=15000`), or grade as root in a container that allows "
            "namespaces (the Gradescope image; `docker run --security-opt seccomp=unconfined --cap-add SYS_ADMIN`), "
            "or pass --trusted-submissions to grade submissions you trust without confinement")


def confine(conf: Confinement) -> str:
    """Apply `conf` to this process; returns a one-line status for the grading log. Raises
    ConfinementRefused when namespaces are refused and required."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # oversized writes fail with EFBIG instead of killing
    _deterministic_cuda()
    linux.set_pdeathsig(conf.parent_pid)
    root = os.geteuid() == 0 and conf.drop_root
    existing = 0 if root else _count_own_processes()  # before our own /proc hides the others
    done: list[str] = []
    in_namespaces = False
    if conf.namespaces:
        if root and not _readable_by_others(rootfs.visible_paths(conf.expose), whole_path=False):
            root = False  # dropping root would leave the interpreter unreadable
            done.append("runs as root: the interpreter is not readable by other users")
        host_uid = HOST_UID_BASE + os.getpid() if root else os.getuid()
        try:
            _enter_namespaces(conf)
        except OSError as exc:
            if conf.required and os.geteuid() != 0:
                raise ConfinementRefused(exc.errno, refusal_message(str(exc))) from None
            done.append(f"namespaces unavailable ({exc})")
        else:
            in_namespaces = True
            n = rootfs.build(host_uid, conf.scratch_bytes, conf.shm_bytes, conf.expose, conf.inputs, conf.cuda)
            done.append(f"allowlist root ({n} paths of the machine, read-only)")
            _fork_into_pid_namespace()
            linux.mount("proc", "/proc", "proc", linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC)
            done.append("own PID namespace")
            if not conf.network:
                done.append("no network")
            os.chdir(SCRATCH_DIR)
            os.environ.update(HOME=SCRATCH_DIR, TMPDIR=SCRATCH_DIR)
    else:
        done.append("no namespaces: trusted submissions")
    if not in_namespaces:
        if root and not _readable_by_others(rootfs.visible_paths(conf.expose)):
            root = False
            done.append("runs as root: the interpreter is not readable by other users")
        host_uid = HOST_UID_BASE + os.getpid() if root else os.getuid()
        if conf.scratch and os.path.isdir(conf.scratch):
            if root:
                os.chown(conf.scratch, host_uid, host_uid)
            os.chdir(conf.scratch)
    if root:
        _drop_root(host_uid)
        done.append("an unprivileged uid of its own")
    _set_limits(conf, existing)
    if in_namespaces:
        linux.enter_user_namespace(inside_id=SANDBOX_UID)  # nested: no capability over the mounts above
        linux.drop_capabilities()
    linux.set_pdeathsig()  # again: changing credentials clears it
    linux.set_no_new_privs()
    _sever_channel(conf.channel_fds)
    return (f"{ISOLATED}: " if in_namespaces else "partly isolated: ") + ", ".join(done)


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


def probe_main(config: str) -> None:
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

