"""Why a worker ended or hung, read from what it left: its exit status, its memory cgroup's verdict, the grader's
own reason for stopping it (StopCause), its log, and samples of its stacks (where a hung request's code loops).
The cause decides whether an end is the notebook's doing (its check fails, the definition it called is not run
again) or a system fault (never a student's score: SystemFault). Nothing here runs or imports student code."""
from __future__ import annotations

import enum
import os
import re
import signal
import time
from dataclasses import dataclass
from typing import BinaryIO

from autograder.sandbox.cgroups import MemoryVerdict
from autograder.sandbox.protocol import STACK_SIGNAL

RUN_OUT_OF_MEMORY = "the grading run ran out of memory (not this notebook's memory limit)"  # a system fault


class StopCause(enum.Enum):
    """Why a worker ended, as the judge decides it (cause_of_end): the first two are the grader's own reasons for
    stopping it (WorkerProcess.stop), the rest what its end shows when no reason was given. `system`: a fault of the
    machine or the grader, never the student's score."""

    STOPPED_FOR_ITS_CODE = "stopped for what its code did"  # over its memory limit, a fork bomb
    STOPPED_FOR_THE_MACHINE = "stopped for the machine's sake"  # the machine or the run low on memory
    FORK_SERVER_GONE = "ended with its fork server"
    RUN_MEMORY_LIMIT = "killed at the run's memory limit"  # its memory cgroup's verdict
    OWN_MEMORY_LIMIT = "killed at its own memory limit"  # its memory cgroup's verdict
    KILLED_FROM_OUTSIDE = "killed by a SIGKILL the grader did not send"
    ENDED = "ended by itself"  # an exit, a crash

    @property
    def system(self) -> bool:
        """Whether this cause is the machine's or the grader's, never the student's."""
        return self in (StopCause.STOPPED_FOR_THE_MACHINE, StopCause.FORK_SERVER_GONE, StopCause.RUN_MEMORY_LIMIT,
                        StopCause.KILLED_FROM_OUTSIDE)


def cause_of_end(stopped: StopCause | None, code: int | None, server_gone: bool, memory: str) -> StopCause:
    """Why a worker ended: `stopped`, the grader's reason if it stopped it; its exit `code` (negative: a signal;
    None: unknown); whether its fork server is gone; its memory group's MemoryVerdict when SIGKILL ended it. A
    SIGKILL is never the grader's unless it says why (stop): the machine's out-of-memory killer or another process."""
    if stopped is not None:
        return stopped
    if server_gone:
        return StopCause.FORK_SERVER_GONE
    if memory == MemoryVerdict.SYSTEM:
        return StopCause.RUN_MEMORY_LIMIT
    if memory == MemoryVerdict.OWN:
        return StopCause.OWN_MEMORY_LIMIT
    if code == -signal.SIGKILL:
        return StopCause.KILLED_FROM_OUTSIDE
    return StopCause.ENDED


def how_it_ended(code: int | None, stopped_because: str) -> str:
    """The end of a worker as its message says it: "exit code 1", "signal SIGSEGV", or the grader's reason."""
    if code is None:
        how = "unknown status"
    elif code >= 0:
        how = f"exit code {code}"
    else:
        try:
            how = f"signal {signal.Signals(-code).name}"
        except ValueError:
            how = f"signal {-code}"
    if stopped_because:
        how = f"stopped: {stopped_because}"
    elif code in (-signal.SIGKILL, 137):
        how += ": killed, by itself or for lack of memory"
    elif code == -signal.SIGXCPU:
        how += ": past a CPU-time limit (RLIMIT_CPU) that the notebook's code set itself"
    return how


def last_line(why: str, log: str) -> str:
    """`why`, with the last line the worker wrote (its error, when it failed on its own)."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    return f"{why}; its last words: {lines[-1][:300]}" if lines else why


def log_tail(log: BinaryIO | None, n: int = 1500) -> str:
    """The last `n` bytes a worker wrote to its log, as text."""
    if log is None:
        return ""
    try:
        log.seek(0, os.SEEK_END)
        size = log.tell()
        log.seek(max(0, size - n))
        return log.read().decode("utf-8", "replace")
    except OSError:
        return ""


STACK_SAMPLES = 3  # samples of a hung worker's stack: the frames common to all are where it loops
_FRAME = re.compile(r'^\s+File "(.*)", line (\d+) in (.*)$')
_WORKER_FILE = os.path.join("sandbox", "worker.py")


@dataclass
class Hang:
    """A request that did not finish: it timed out, or (`why`, the message then) its worker was stopped at its
    own memory limit or for sending the judge too much. `frames`: where the notebook's code was, as (file, line,
    function) of its cells' frames common to every sample of the worker's stack, innermost first (`sampled`
    False: no sample could be taken, the worker ignored the signal or was gone); `target`: the notebook's
    top-level name the request called, if it called one."""

    doing: str
    frames: list[tuple[str, int, str]]
    sampled: bool
    target: str | None
    why: str = ""
    ended: bool = False  # the worker ended by itself (an exit, a crash) rather than being stopped


def parse_stacks(text: str) -> list[tuple[str, int, str]] | None:
    """The notebook cells' frames, innermost first, of the worker's main thread in a faulthandler dump (all
    threads); None when the dump shows no main thread, or the worker waiting for the judge (a stand-in's call:
    the time went to the reference, not to the student's code)."""
    threads = []
    for block in re.split(r"\n(?=(?:Current thread|Thread) 0x)", text):
        frames = [(m.group(1), int(m.group(2)), m.group(3)) for m in map(_FRAME.match, block.splitlines()) if m]
        if frames:
            threads.append(frames)
    main = [t for t in threads if any(f.endswith(_WORKER_FILE) and fn == "main" for f, _, fn in t)]
    chosen = main[0] if main else threads[0] if len(threads) == 1 else None  # a deep stack loses its bottom
    if chosen is None or any(f.endswith(_WORKER_FILE) and fn == "ask_judge" for f, _, fn in chosen):
        return None
    return [frame for frame in chosen if frame[0].startswith("<cell ")]


def common_frames(stacks: list[list[tuple[str, int, str]]]) -> list[tuple[str, int, str]]:
    """The outermost frames (by file and function) that every stack shares, innermost first: a loop calling a
    helper shows the helper in some samples only, the loop's own frame in all."""
    outer = [list(reversed(s)) for s in stacks]
    n = 0
    while all(len(s) > n for s in outer) and len({(s[n][0], s[n][2]) for s in outer}) == 1:
        n += 1
    return list(reversed(outer[0][:n])) if outer else []



def sample_stacks(pid: int | None, log: BinaryIO | None) -> list[str]:
    """Dumps of a running worker's stacks (`pid`: the process running its code): STACK_SIGNAL makes its
    faulthandler write them to its log (a worker that ignores or blocks the signal, or whose log is full, gives
    none)."""
    if pid is None or log is None:
        return []
    fd, texts = log.fileno(), []
    for _ in range(STACK_SAMPLES):
        try:
            start = os.fstat(fd).st_size
            os.kill(pid, STACK_SIGNAL)
        except OSError:
            break
        size, still, end = start, 0, time.monotonic() + 0.5
        while time.monotonic() < end and still < 2:  # written once it stops growing
            time.sleep(0.01)
            now = os.fstat(fd).st_size
            still = still + 1 if now == size and now > start else 0
            size = now
        if size <= start:
            break
        texts.append(os.pread(fd, min(size - start, 1 << 18), start).decode("utf-8", "replace"))
    return texts


def hang_of(doing: str, stacks: list[str], target: str | None) -> Hang:
    """The Hang of a request that did not finish, from samples of its worker's stacks (sample_stacks)."""
    parsed = [s for s in map(parse_stacks, stacks) if s is not None]
    return Hang(doing, common_frames(parsed), bool(parsed), target)
