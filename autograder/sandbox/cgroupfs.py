"""One memory cgroup's files, cgroup v1 and v2 alike (Group, V1Group, V2Group): its usage, limit, OOM kills,
processes; creating, killing and removing it. What the groups are for, and which exist, is cgroups.py's. Nothing
here runs student code: it reads and writes a cgroup file system.
"""
from __future__ import annotations

import os
import signal
import time

UNLIMITED = 1 << 62
PAGE_SLACK = 1 << 20  # a v1 group whose peak came this close to its limit reached it


def read_file(path: str) -> str:
    """A cgroup file's whole text; OSError where the group or the file is gone."""
    with open(path) as fh:
        return fh.read()


def write_file(path: str, value: str) -> None:
    """Write `value` to a cgroup file (the kernel takes each write whole); OSError where it refuses it."""
    with open(path, "w") as fh:
        fh.write(value)


def number(text: str) -> int:
    """A byte count as cgroup files write it; "max", empty or anything at or over UNLIMITED reads as UNLIMITED."""
    text = text.strip()
    return UNLIMITED if text in ("max", "") or int(text) >= UNLIMITED else int(text)


def keyed(text: str) -> dict[str, int]:
    """'key value' lines (memory.stat, memory.events, memory.oom_control) as a dict."""
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value)
    return out


class Group:
    """One memory cgroup (a folder of a cgroup file system); V1Group and V2Group name its files."""

    version = ""

    def __init__(self, path: str):
        self.path = path

    def file(self, name: str) -> str:
        """The path of its file `name` (not checked to exist)."""
        return os.path.join(self.path, name)

    def child(self, name: str) -> "Group":
        """The group `name` below it, of the same version (not created)."""
        return type(self)(os.path.join(self.path, name))

    def parent(self) -> "Group":
        """The group that holds it, of the same version."""
        return type(self)(os.path.dirname(self.path))

    def usage(self) -> int:
        """Bytes it uses now, its children's included (page cache counted)."""
        raise NotImplementedError

    def limit(self) -> int:
        """Its own memory limit in bytes; UNLIMITED where none is set."""
        raise NotImplementedError

    def set_limit(self, limit: int) -> None:
        """Set its memory limit to `limit` bytes, swap excluded; OSError where the kernel refuses it."""
        raise NotImplementedError

    def limit_reached(self) -> bool:
        """Its usage came to its own limit since it was created."""
        raise NotImplementedError

    def partly_killed(self) -> bool:
        """The kernel's OOM killer took a process of it; others may be left (v1 kills one process, never a group;
        v2 without `memory.oom.group`, before Linux 4.19, the same)."""
        return self.oom_kills() > 0

    def oom_kills(self) -> int:
        """Processes of it the kernel's OOM killer took, whichever group's limit (or the machine) made it kill."""
        raise NotImplementedError

    def inactive_file(self) -> int:
        """Bytes of inactive page cache it holds: what the kernel may drop before it kills."""
        raise NotImplementedError

    def working_set(self) -> int:
        """What it holds that cannot simply be dropped: usage less the inactive page cache."""
        return max(0, self.usage() - self.inactive_file())

    def create(self) -> None:
        """Make the folder (FileExistsError where it exists) and set what each version needs so its limit holds."""
        os.mkdir(self.path)

    def admit(self, pid: int) -> None:
        """Move process `pid` into it; OSError where the process is gone or the kernel refuses."""
        write_file(self.file("cgroup.procs"), str(pid))

    def pids(self) -> list[int]:
        """The processes directly in it now (not its children's); [] where the group is gone or unreadable."""
        try:
            return [int(p) for p in read_file(self.file("cgroup.procs")).split()]
        except (OSError, ValueError):
            return []

    def kill(self) -> None:
        """SIGKILL each process directly in it; those already gone are passed over. Does not wait for them to end."""
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def remove(self, wait: float = 0.0) -> bool:
        """Remove it and its children (deepest first); their processes must have ended. Retries for `wait` s:
        a killed process leaves its group a moment after it is reaped."""
        end = time.monotonic() + wait
        for sub in sorted(subgroups(self.path), key=len, reverse=True):
            while True:
                try:
                    os.rmdir(sub)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() >= end:
                        return False
                    time.sleep(0.02)
        return True


def subgroups(path: str) -> list[str]:
    """`path` and every folder below it, parents before children (os.walk order)."""
    return [root for root, _, _ in os.walk(path)]


class V1Group(Group):
    """A cgroup v1 memory group: memory.* files of the v1 controller, memsw for swap."""
    version = "v1"

    def usage(self) -> int:
        return number(read_file(self.file("memory.usage_in_bytes")))

    def limit(self) -> int:
        return number(read_file(self.file("memory.limit_in_bytes")))

    def set_limit(self, limit: int) -> None:
        """Memory and memory+swap alike (swap excluded); memsw may never be under the memory limit, so it is
        raised first and lowered last."""
        memsw = self.file("memory.memsw.limit_in_bytes")
        memory = self.file("memory.limit_in_bytes")
        order = [memsw, memory] if limit > self.limit() else [memory, memsw]
        for name in order:
            if name != memsw or os.path.exists(memsw):
                write_file(name, str(limit))

    def create(self) -> None:
        super().create()
        # where swap is not accounted (no memsw), none is used; the OOM killer acts at the limit even where an
        # enclosing group turned it off (a new v1 group inherits oom_kill_disable from its parent)
        for name, value in (("memory.swappiness", "0"), ("memory.oom_control", "0")):
            try:
                write_file(self.file(name), value)
            except OSError:
                pass

    def limit_reached(self) -> bool:
        """The kernel killed a process of it for memory while its peak usage was at its own limit (v1 counts no
        failures at a limit: peak and kills are what it tells). A peak at the limit alone is page cache reclaimed
        as it should be, not an error."""
        if not self.oom_kills():
            return False
        peak = number(read_file(self.file("memory.max_usage_in_bytes")))
        return peak >= self.limit() - max(PAGE_SLACK, self.limit() >> 8)

    def oom_kills(self) -> int:
        """Processes of this group itself (not of its children: v1 counts no further) the OOM killer took."""
        return keyed(read_file(self.file("memory.oom_control"))).get("oom_kill", 0)

    def inactive_file(self) -> int:
        stat = keyed(read_file(self.file("memory.stat")))
        return stat.get("total_inactive_file", stat.get("inactive_file", 0))


class V2Group(Group):
    """A cgroup v2 group on the unified hierarchy: memory.current, memory.max, memory.events."""
    version = "v2"

    def usage(self) -> int:
        return number(read_file(self.file("memory.current")))

    def limit(self) -> int:
        return number(read_file(self.file("memory.max")))

    def set_limit(self, limit: int) -> None:
        write_file(self.file("memory.max"), str(limit))

    def create(self) -> None:
        super().create()
        for name, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
            try:  # swap excluded; an OOM kill takes the whole group (a worker and all it started)
                write_file(self.file(name), value)
            except OSError:
                pass

    def limit_reached(self) -> bool:
        """An allocation failed at its own limit (memory.events counts a group's own OOMs and its children's)."""
        return keyed(read_file(self.file("memory.events"))).get("oom", 0) > 0

    def oom_kills(self) -> int:
        return keyed(read_file(self.file("memory.events"))).get("oom_kill", 0)

    def inactive_file(self) -> int:
        return keyed(read_file(self.file("memory.stat"))).get("inactive_file", 0)

    def delegate_memory(self) -> None:
        """Let its children have the memory controller (refused when it holds processes, unless it is a root)."""
        write_file(self.file("cgroup.subtree_control"), "+memory")
