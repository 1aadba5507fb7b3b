"""Processes seen from outside: the machine's process table, a worker's process tree, killing it, and
the memory monitor that bounds all processes of a worker together.

Nothing here runs student code; it reads /proc and sends signals.
"""
from __future__ import annotations

import os
import signal
import stat
import threading
import time
import weakref

from autograder.sandbox.diagnosis import StopCause

MONITOR_SECONDS = 0.1  # how often the memory monitor looks at the machine's free memory
LOW_MEMORY_FRACTION = 0.08  # below this fraction of RAM available, the largest worker is stopped
FULL_CHECK_SECONDS = 0.25  # how often every worker's processes and files held in memory are summed
# A worker holding at least this share of its process limit in processes, at every full check for a second, is
# stopped: a fork bomb that catches the error of each failed fork spins on every core until its check times out,
# slowing every other student's grading; no notebook needs that many processes at once for that long.
CROWDED_SHARE, CROWDED_CHECKS, CROWDED_MIN = 0.5, 4, 16
MONITORED = "RLIMIT_AS per process and the memory monitor (memory files counted)"  # without a memory cgroup


def process_table() -> dict[int, int]:
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
    table = process_table() if table is None else table
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


def children_of(pid: int) -> list[int]:
    """`pid`'s children, from its threads' `children` files (a few small reads, not the machine's process table);
    none when it is gone or the kernel does not list children."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                out.extend(int(child) for child in fh.read().split())
        except (OSError, ValueError):
            continue
    return out


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children first), walked from its children files."""
    out, todo = [], children_of(pid)
    while todo:
        child = todo.pop(0)
        out.append(child)
        todo.extend(children_of(child))
    return out


def holds_any(pid: int, files: set[tuple[int, int]]) -> bool:
    """Whether `pid` has a descriptor open on one of `files` ((device, inode) pairs: pipes, sockets)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in files:
            return True
    return False


def memory_of(pid: int) -> int:
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


def memory_held_in_files(pids: list[int]) -> int:
    """Bytes of memory that processes hold in files rather than in their address space: memfd files and
    deleted files (tmpfs, /dev/shm) they keep open. Neither RLIMIT_AS nor PSS sees them once unmapped; a
    notebook can fill the machine's memory with them. Counted once per file (several descriptors, several
    processes). Where the processes' descriptors cannot be read (another user's, without privileges), 0."""
    seen: set[tuple[int, int]] = set()
    held = 0
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            held += _file_in_memory(f"/proc/{pid}/fd/{fd}", seen)
    return held


def _file_in_memory(link: str, seen: set[tuple[int, int]]) -> int:
    try:
        target = os.readlink(link)
        if not (target.startswith("/memfd:") or target.endswith(" (deleted)") or target.startswith("/dev/shm/")):
            return 0
        info = os.stat(link)
    except OSError:
        return 0
    key = (info.st_dev, info.st_ino)
    if key in seen or not stat.S_ISREG(info.st_mode):
        return 0
    seen.add(key)
    return info.st_blocks * 512


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


class MemoryMonitor:
    """One thread per judge process. RLIMIT_AS bounds each process of a worker; this bounds a
    worker's processes together (a fork bomb whose children each allocate): every second, and at
    once when the machine runs low on memory, a worker with more than one process whose processes
    hold more than its memory limit is killed. When memory is low and no worker is over its limit,
    the largest multi-process worker is killed, a system fault (retried, never the student's score): losing a
    worker is better than losing the machine. A worker of which the kernel's OOM killer took one process (cgroup
    v1) is stopped whole at once.
    A worker crowded with processes (CROWDED_SHARE of its process limit, for a second) is stopped: its own fault."""

    _lock = threading.Lock()
    _instance: "MemoryMonitor | None" = None

    def __init__(self):
        self.workers: weakref.WeakSet = weakref.WeakSet()
        self.crowded: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # worker -> full checks in a row
        self.owner = os.getpid()
        threading.Thread(target=self._run, daemon=True, name="autograder-memory-monitor").start()

    @classmethod
    def watch(cls, worker) -> None:
        """Watch `worker` from this process's monitor (started on first use, and again in a forked child)."""
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
            for w in workers:
                try:
                    w.stop_if_partly_killed()
                except Exception:  # noqa: BLE001 - the monitor must outlive a vanished process or group
                    pass
            total, avail = _available_memory()
            low = total > 0 and avail < LOW_MEMORY_FRACTION * total
            if not low and time.monotonic() - last_full < FULL_CHECK_SECONDS:
                continue
            last_full = time.monotonic()
            try:
                self._check(workers, low)
            except Exception:  # noqa: BLE001 - the monitor must outlive a vanished process
                pass

    def _check(self, workers: list, low: bool) -> None:
        table = process_table()
        usage = []
        for w in workers:
            tree = process_tree(w.pid, table)
            if self._crowded(w, len(tree)):
                w.stop(f"it ran {len(tree)} processes at once for a second (a fork bomb?): a notebook may run at "
                       f"most {w.spec.confinement.max_processes} processes and threads, and none needs half as many "
                       "for that long")
                continue
            in_files = memory_held_in_files(tree)
            if len(tree) <= 2 and not in_files:  # the worker (and the namespace's init): bounded by RLIMIT_AS
                continue
            used = sum(memory_of(p) for p in tree) + in_files
            limit = w.spec.confinement.memory_bytes
            if limit and used > limit:
                held = f", {in_files // 2**20} MB of it in files kept in memory (memfd, /dev/shm)" if in_files else ""
                w.stop(f"its processes together used more than the memory limit ({limit // 2**20} MB{held})")
            else:
                usage.append((used, w))
        if low and usage:
            used, w = max(usage, key=lambda x: x[0])
            w.stop("the machine ran low on memory while it ran several processes", StopCause.STOPPED_FOR_THE_MACHINE)

    def _crowded(self, worker, processes: int) -> bool:
        """Whether `worker` has held CROWDED_SHARE of its process limit at CROWDED_CHECKS full checks in a row."""
        limit = worker.spec.confinement.max_processes
        if not limit or processes < max(CROWDED_MIN, CROWDED_SHARE * limit):
            self.crowded.pop(worker, None)
            return False
        self.crowded[worker] = self.crowded.get(worker, 0) + 1
        return self.crowded[worker] >= CROWDED_CHECKS


def kill_tree(pid: int, sweep: bool = True) -> None:
    """SIGKILL a worker, its process group and, with `sweep`, every descendant (found before any of
    them dies, so none is re-parented away first). With namespaces, killing the worker ends its PID
    namespace and everything in it; the sweep is for workers that run without."""
    victims = process_tree(pid) if sweep else []
    for target in (lambda: os.killpg(pid, signal.SIGKILL), *[lambda p=p: os.kill(p, signal.SIGKILL) for p in victims]):
        try:
            target()
        except (ProcessLookupError, PermissionError):
            pass

