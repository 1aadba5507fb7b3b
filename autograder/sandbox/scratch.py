"""Workers' scratch folders: a worker's HOME and working directory on the judge's machine (/tmp/ag-worker-*).

Guarantees:
- `Scratch()` makes one; `cleanup()` removes it with everything in it.
- The process that made a folder holds a lock on it (flock on the folder, through a descriptor closed on exec)
  until it removes it. A process killed before it could (SIGKILL, the OOM killer) leaves its folders unlocked.
- The first `Scratch()` of each process removes every unlocked scratch folder older than STALE_SECONDS that it
  may remove: a run killed again and again never fills /tmp. A folder whose maker lives is never touched,
  whoever made it; a folder just made (not locked yet for an instant) neither.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time

PREFIX = "ag-worker-"
STALE_SECONDS = 3600  # unlocked and older than this: its maker is gone (or is a version without the lock, and idle)
_swept = False


class Scratch:
    """One worker's scratch folder, locked by this process while it exists."""

    def __init__(self) -> None:
        global _swept
        root = "/tmp" if os.path.isdir("/tmp") else tempfile.gettempdir()
        if not _swept:
            _swept = True
            sweep(root)
        self.name = tempfile.mkdtemp(prefix=PREFIX, dir=root)
        self._fd: int | None = os.open(self.name, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except OSError:  # a file system without locks: the folder's age keeps it (no worker lives an hour)
            pass

    def cleanup(self) -> None:
        """Remove the folder and release its lock; calling it again does nothing."""
        if self._fd is None:
            return
        shutil.rmtree(self.name, ignore_errors=True)
        os.close(self._fd)  # the lock goes with it
        self._fd = None


def sweep(root: str, stale_seconds: float = STALE_SECONDS) -> list[str]:
    """Remove the scratch folders under `root` that no living process holds and that are older than
    `stale_seconds`; returns their paths."""
    removed: list[str] = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        if entry.name.startswith(PREFIX) and _stale(entry, now, stale_seconds) and _remove_unlocked(entry.path):
            removed.append(entry.path)
    return removed


def _stale(entry: os.DirEntry, now: float, stale_seconds: float) -> bool:
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return False
    return entry.is_dir(follow_symlinks=False) and now - st.st_mtime >= stale_seconds


def _remove_unlocked(path: str) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:  # another user's, or gone
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # its maker lives
        os.close(fd)
        return False
    try:
        shutil.rmtree(path, ignore_errors=True)
        return not os.path.lexists(path)
    finally:
        os.close(fd)
