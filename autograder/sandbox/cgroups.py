"""Memory cgroups: every worker in a group of its own under one group for the whole run, where the grader can
create them (cgroup v2 with the memory controller, else the cgroup v1 memory controller; root in a container,
the Gradescope image, a delegated subtree).

What holds, where a run group exists:

- a worker's own group is limited to the assignment's `memory_mb`, swap excluded: every byte its processes hold
  (memfd files, /dev/shm, its tmpfs, pipes, page tables) counts, and the kernel's OOM killer ends it at the limit,
  whichever way the memory was asked for (a page fault, or a system call such as a write into a memfd): v2 kills the
  whole group (`memory.oom.group`); v1 kills one process of it and the judge's monitor the rest (`partly_killed`).
  The OOM killer is never turned off (v1's `oom_kill_disable` pauses a process only in a page fault: a system call
  at the limit fails with ENOMEM instead, which student code can catch and retry for ever);
- the run group holds the workers only (never a judge nor the command); its limit is what the enclosing groups
  and the machine have left for it, less a reserve for the judges and the command, and is kept so while the run
  lasts (`RunGroup.watch`). When memory runs out it is the run group that is full, so the kernel kills a worker,
  never a grading process; the watch kills the largest worker before that point;
- a worker killed by its own group's limit is the student's memory error (`MemoryVerdict.OWN`); one killed because the
  run group or the machine ran out is a system fault (`MemoryVerdict.SYSTEM`), which the judge never charges to a student;
- groups are named after the process that owns them and its start time: a run that crashed leaves groups the next
  run removes (`remove_stale`).

Where no group can be created, `RunGroup.create` says why, and the memory monitor and RLIMIT_AS (processes.py)
hold memory as before. Nothing here runs student code: it reads and writes the cgroup file systems.
"""
from __future__ import annotations

import errno
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass

from autograder.sandbox.cgroupfs import UNLIMITED, Group, V1Group, V2Group, read_file, subgroups, write_file

PREFIX = "autograder-"  # groups this package creates, named PREFIX + "<pid>-<start time>"
RESERVE_BYTES = 256 << 20  # at least this much is left outside the run group for the judges and the command
RESERVE_FRACTION = 0.06  # or this fraction of what the run may use, whichever is more
NEAR_FRACTION = 0.92  # the watch kills the largest worker when the run's working set passes this part of its limit
WATCH_SECONDS = 0.2
KILLED_FOR_THE_RUN = "killed-for-the-run"  # marks a worker group the watch killed (_kill_for_the_run)
LEAF = "grading-leaf"  # cgroup v2 in a container: where its processes go so that its group can delegate (_delegate)
MONITORED_FALLBACK = "no memory cgroup: RLIMIT_AS per process and the memory monitor"


class MemoryVerdict:
    """Why a worker's group says it was killed, as WorkerGroup.verdict tells it: the student's memory error, the
    system's, or not for memory."""
    OWN = "own"  # its own group's limit: the student's memory error
    SYSTEM = "system"  # the run group or the machine ran out: never the student's
    NONE = ""  # not killed for memory, as far as the groups tell


def _mounts() -> list[tuple[str, str, str, str]]:
    """(root within the hierarchy, mount point, file system type, super options) of every cgroup mount."""
    out: list[tuple[str, str, str, str]] = []
    try:
        lines = read_file("/proc/self/mountinfo").splitlines()
    except OSError:
        return out
    for line in lines:
        fields = line.split()
        sep = fields.index("-") if "-" in fields else -1
        if sep > 0 and fields[sep + 1] in ("cgroup", "cgroup2"):
            out.append((fields[3], fields[4], fields[sep + 1], fields[sep + 3] if len(fields) > sep + 3 else ""))
    return out


def _own_paths() -> tuple[str | None, str | None]:
    """This process's cgroup path in the v2 hierarchy and in the v1 memory hierarchy."""
    v2 = v1 = None
    try:
        lines = read_file("/proc/self/cgroup").splitlines()
    except OSError:
        return None, None
    for line in lines:
        number, controllers, path = line.split(":", 2)
        if number == "0" and controllers == "":
            v2 = path
        elif "memory" in controllers.split(","):
            v1 = path
    return v2, v1


def _located(path: str, root: str, mount: str) -> str | None:
    """The folder of cgroup `path` under a mount of the hierarchy's `root`, if the mount reaches it."""
    if root != "/" and not (path == root or path.startswith(root.rstrip("/") + "/")):
        return None
    rest = path[len(root):] if root != "/" else path
    return os.path.join(mount, rest.lstrip("/"))


def own_group() -> tuple[Group | None, str]:
    """This process's memory cgroup (v2 preferred), or None and why there is none."""
    v2, v1 = _own_paths()
    for root, mount, fstype, _ in _mounts():
        if fstype == "cgroup2" and v2 is not None:
            folder = _located((v2[:-len(LEAF) - 1] or "/") if v2.endswith("/" + LEAF) else v2, root, mount)
            if folder and "memory" in _controllers(mount):
                return V2Group(folder), ""
    for root, mount, fstype, options in _mounts():
        if fstype == "cgroup" and v1 is not None and "memory" in options.split(","):
            folder = _located(v1, root, mount)
            if folder and os.path.isdir(folder):
                return V1Group(folder), ""
    return None, "no memory cgroup controller is mounted where this process can reach it"


def _controllers(mount: str) -> list[str]:
    try:
        return read_file(os.path.join(mount, "cgroup.controllers")).split()
    except OSError:
        return []


def _start_time(pid: int) -> str | None:
    try:
        stat = read_file(f"/proc/{pid}/stat")
        return stat[stat.rindex(")") + 2:].split()[19]
    except (OSError, ValueError, IndexError):
        return None


def group_name(pid: int) -> str:
    """The name of a group made by process `pid`: PREFIX, the pid and its start time, so a stale group is told from a
    live one even where the pid was reused."""
    return f"{PREFIX}{pid}-{_start_time(pid) or 0}"


def _owner_alive(name: str) -> bool:
    pid, _, start = name[len(PREFIX):].partition("-")
    return pid.isdigit() and _start_time(int(pid)) == start


def remove_stale(parent: Group) -> None:
    """Groups an earlier run left behind when it crashed (its owner is gone): their workers died with it."""
    try:
        names = os.listdir(parent.path)
    except OSError:
        return
    for name in names:
        if name.startswith(PREFIX) and not _owner_alive(name):
            stale = parent.child(name)
            stale.kill()
            stale.remove(wait=1.0)


def _meminfo(key: str) -> int:
    try:
        for line in read_file("/proc/meminfo").splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return UNLIMITED


@dataclass
class WorkerGroup:
    """The group of one worker."""

    group: Group
    limit: int

    def verdict(self) -> str:
        """Why its processes were killed, as far as memory is concerned (read before close): its own limit
        reached is the student's; an OOM kill without it, the run's or the machine's."""
        try:
            if os.path.isdir(self.group.file(KILLED_FOR_THE_RUN)):
                return MemoryVerdict.SYSTEM
            if self.group.limit_reached():
                return MemoryVerdict.OWN
            return MemoryVerdict.SYSTEM if self.group.oom_kills() else MemoryVerdict.NONE
        except (OSError, ValueError):
            return MemoryVerdict.NONE

    def partly_killed(self) -> bool:
        """The OOM killer took a process of it and the rest still runs (cgroup v1): the judge stops them, as v2's
        `memory.oom.group` would, for the reason `verdict` gives."""
        try:
            return self.group.partly_killed()
        except (OSError, ValueError):
            return False

    def close(self) -> None:
        """Kill what is left in it and remove it; a killed process leaves its group tens of milliseconds later,
        so the removal goes on in the background rather than in the judge's way (the run's close removes what
        is left)."""
        self.group.kill()
        if not self.group.remove():
            threading.Thread(target=self.group.remove, kwargs={"wait": 5.0}, daemon=True,
                             name="autograder-cgroup-removal").start()

    def describe(self) -> str:
        """One line for the log and the result: the group's cgroup version and the worker's limit in MB."""
        return f"memory cgroup {self.group.version}: {self.limit >> 20} MB for the worker, swap and memory files included"


class RunGroup:
    """The run's group: every worker's group lives under it. One process owns it (creates, watches, removes);
    grading processes of the same run join it by path (`join`)."""

    _current: "RunGroup | None" = None

    def __init__(self, group: Group, owner: bool):
        self.group = group
        self.owner = owner
        self.stopped = threading.Event()
        self.mount = _mount_of(group.path)  # the enclosing groups end at the top of this hierarchy

    @classmethod
    def create(cls) -> tuple["RunGroup | None", str]:
        """A run group under this process's own group, its limit set; None and why where none can be made."""
        own, why = own_group()
        if own is None:
            return None, why
        remove_stale(own)
        group = own.child(group_name(os.getpid()))
        if os.path.isdir(group.path):  # this process's earlier run, whose workers were still ending
            cls(group, owner=True).close()
        try:
            _prepare(own, group)
        except OSError as exc:
            group.remove()
            return None, f"cannot create a memory cgroup {own.version} under {own.path}: {exc.strerror or exc}"
        run = cls(group, owner=True)
        run.refresh()
        return run, ""

    @classmethod
    def join(cls, path: str, version: str) -> "RunGroup | None":
        """The run group at `path` (made by the grading command, `version` "v1" or "v2"), joined without owning it;
        None where it does not exist."""
        if not path or not os.path.isdir(path):
            return None
        return cls(V2Group(path) if version == "v2" else V1Group(path), owner=False)

    def new_worker(self, pid: int, pids: list[int], limit: int) -> WorkerGroup:
        """A group of its own for the worker `pid`, limited to `limit` bytes, holding `pids` (its processes)."""
        group = self.group.child(f"worker-{pid}")
        if os.path.isdir(group.path):
            group.remove()
        group.create()
        try:
            group.set_limit(limit)
            for p in pids:
                group.admit(p)
        except OSError:
            WorkerGroup(group, limit).close()
            raise
        return WorkerGroup(group, limit)

    def allowed(self) -> int:
        """What the run may hold: what every enclosing group and the machine have left, plus what it holds."""
        held = self.group.usage()
        room = _meminfo("MemAvailable")
        above = self.group.parent()
        while above.path.startswith(self.mount) and os.path.isfile(above.file(_usage_file(above))):
            try:
                room = min(room, above.limit() - above.working_set())
            except (OSError, ValueError):
                break
            if os.path.dirname(above.path) == above.path:
                break
            above = above.parent()
        return held + max(0, room)

    def refresh(self) -> int:
        """Set the run's limit from what is allowed now, less the reserve; returns it."""
        allowed = self.allowed()
        limit = max(64 << 20, allowed - max(RESERVE_BYTES, int(RESERVE_FRACTION * allowed)))
        try:
            self.group.set_limit(limit)
        except OSError:
            pass  # under what it holds now (v1 refuses): the watch makes room
        return limit

    def watch(self) -> None:
        """In the owner: keep the limit, and kill the largest worker when the run nears it (before the kernel's
        OOM killer has to choose)."""
        threading.Thread(target=self._watch, daemon=True, name="autograder-run-memory").start()

    def _watch(self) -> None:
        marked = ""
        while not self.stopped.wait(WATCH_SECONDS):
            try:
                limit = self.refresh()
                sizes = self._worker_sizes()
                if sizes:
                    marked = _mark_for_oom(sizes, marked)
                if sizes and self.group.working_set() > NEAR_FRACTION * limit:
                    _kill_for_the_run(max(sizes)[2])
            except (OSError, ValueError):
                pass

    def _worker_sizes(self) -> list[tuple[int, str, Group]]:
        """(working set, path, group) of every worker group of the run, memory files included."""
        sizes = []
        for name in os.listdir(self.group.path):
            worker = self.group.child(name)
            if name.startswith("worker-") and not os.path.isdir(worker.file(KILLED_FOR_THE_RUN)):
                try:
                    sizes.append((worker.working_set(), worker.path, worker))
                except (OSError, ValueError):
                    pass
        return sizes

    def describe(self) -> str:
        """One line for the run's header: the cgroup version and the run's limit in MB."""
        return f"{self.group.version}, the run's limit {self.group.limit() >> 20} MB"

    def wire(self) -> list[str]:
        """How a grading process of the run finds it (joined)."""
        return [self.group.path, self.group.version]

    def close(self) -> None:
        """Stop watching; where this process owns it, kill what is left in it and its children and remove them (up to
        5 s for killed processes to leave)."""
        self.stopped.set()
        if self.owner:
            for sub in subgroups(self.group.path):
                type(self.group)(sub).kill()
            self.group.remove(wait=5.0)


def _kill_for_the_run(worker: Group) -> None:
    """Kill a worker to keep the run under its limit, marked so that its judge (another process) can tell: the
    mark is a child folder, the only thing a cgroup file system lets one create."""
    try:
        os.mkdir(worker.file(KILLED_FOR_THE_RUN))
    except OSError:
        pass
    worker.kill()


def _mark_for_oom(sizes: list[tuple[int, str, Group]], marked: str) -> str:
    """Make the largest worker the one the kernel's OOM killer takes first, should it have to act before the
    watch: the kernel ranks processes by their resident memory and cannot see memory files, which the groups
    count. Returns the group marked."""
    path = max(sizes)[1]
    for _, other, group in sizes:
        if other in (path, marked):
            _set_oom_score(group.pids(), 1000 if other == path else 0)
    return path


def _set_oom_score(pids: list[int], score: int) -> None:
    for pid in pids:
        try:
            write_file(f"/proc/{pid}/oom_score_adj", str(score))
        except OSError:
            pass


def _prepare(own: Group, run: Group) -> None:
    if isinstance(own, V2Group):
        _delegate(own)
    run.create()
    if isinstance(run, V2Group):
        run.delegate_memory()
    elif read_file(run.file("memory.use_hierarchy")).strip() != "1":
        raise OSError(0, "memory.use_hierarchy is 0: a worker's group would not count against the run's")


def _delegate(own: V2Group) -> None:
    """Hand the memory controller to `own`'s children. In a container whose cgroup namespace begins at its own
    group (Docker, the Gradescope image) that group holds the container's processes, and cgroup v2 gives no
    controller to the children of a group that holds processes: they move into a leaf group first, as container
    init systems do (the container's limit stays where it is, on the group above the leaf)."""
    try:
        own.delegate_memory()
    except OSError as exc:
        if exc.errno != errno.EBUSY or _own_paths()[0] != "/":
            raise
        leaf = own.child(LEAF)
        os.makedirs(leaf.path, exist_ok=True)
        for pid in own.pids():
            try:
                leaf.admit(pid)
            except OSError:
                pass  # ended meanwhile
        own.delegate_memory()


def _mount_of(path: str) -> str:
    for _, mount, _, _ in _mounts():
        if path.startswith(mount.rstrip("/") + "/"):
            return mount
    return "/"


def _usage_file(group: Group) -> str:
    return "memory.current" if isinstance(group, V2Group) else "memory.usage_in_bytes"


def current_run_group() -> RunGroup | None:
    """The run group workers of this process go into, if any."""
    return RunGroup._current


def use_run_group(run: RunGroup | None) -> None:
    """Make `run` the group new worker groups are made under in this process (None: no run group)."""
    RunGroup._current = run


@contextmanager
def run_memory_groups():
    """For the length of a run: its run group, watched (None where none can be made), and a line saying what
    holds the workers' memory."""
    run, why = RunGroup.create()
    if run is None:
        yield None, f"{MONITORED_FALLBACK} ({why})"
        return
    use_run_group(run)
    run.watch()
    try:
        yield run, f"a memory cgroup per worker ({run.describe()})"
    finally:
        use_run_group(None)
        run.close()


def joined_run_group(setup: list | None) -> RunGroup | None:
    """In a grading process: the run group its command made (`RunGroup.wire`), joined."""
    return RunGroup.join(*setup) if setup else None
