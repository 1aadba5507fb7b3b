"""The --out folder of a grading run: one command at a time, and everything it holds.

- `claim(out_dir)`: DIR made if missing (OutDirUnusable, one line, where it is a file or cannot be made or
  written; DiskFull, files.storage_failure, where the disk is full: the machine's cause, exit 4); an exclusive lock on DIR/.grading.lock for as long as the command grades into DIR. A second
  command on the same folder (an impatient re-run, two terminals, two CI jobs) stops at once with a message
  saying which process holds it, before it unpacks or writes anything: it never deletes inputs another run
  reads, nor writes results beside it. The lock is the kernel's (flock): it goes with the process that held it,
  however that process ended. Re-entrant within one process (the command claims DIR, then grade() does).
- `ensure_held(out_dir)`: before each result is written: DIR's lock file is still the one this command locked. A
  folder removed or replaced under a running command (`rm -rf DIR` and a new command on it) stops this one with
  OutDirLost: it never writes its rows into a folder another command now owns.
- `results_in(out_dir)`: every result DIR holds (DIR/<id>/grading.json), whichever command graded it: the
  tables of a run (grades.csv, summary.md) list them all, not only the last command's.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path

from autograder.errors import UserError
from autograder.files import storage_failure
from autograder.reports.results import SubmissionResult
from autograder.submissions import OUTPUT_LOCK

LOCK = OUTPUT_LOCK  # (submissions.py leaves out the folders holding one)
_held: dict[str, list[int]] = {}  # resolved folder -> [how many claims this process holds on it, the lock's fd]


class OutDirBusy(UserError, RuntimeError):
    """Another command is grading into the same --out folder."""


class OutDirUnusable(UserError, RuntimeError):
    """The --out path cannot be a results folder: a file is there, or it cannot be created or written."""


class OutDirLost(UserError, RuntimeError):
    """The --out folder, or its lock file, was removed or replaced while this command graded into it."""


@contextlib.contextmanager
def claim(out_dir: Path) -> Iterator[None]:
    """Hold DIR for this command (module docstring): made if missing, locked for as long as the context lasts.
    OutDirBusy when another command holds it; OutDirUnusable or DiskFull when it cannot be made or written."""
    _make(out_dir)
    key = str(out_dir.resolve())
    if key in _held:
        _held[key][0] += 1
        try:
            yield
        finally:
            _held[key][0] -= 1
        return
    try:
        fd = os.open(out_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise _unusable(exc, out_dir, f"cannot write into the results folder {out_dir}") from None
    try:
        _lock(fd, out_dir)
        _held[key] = [1, fd]
        try:
            yield
        finally:
            del _held[key]
    finally:
        os.close(fd)  # releases the lock


def _make(out_dir: Path) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise OutDirUnusable(f"--out {out_dir} is a file, not a folder: give a folder for the results (it is "
                             "created if missing)")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _unusable(exc, out_dir, f"cannot create the results folder {out_dir}") from None


def _unusable(exc: OSError, out_dir: Path, what: str) -> Exception:
    """A disk that is full is the machine's (DiskFull); a folder this user may not write, or a file system mounted
    read-only, is the user's choice of --out (OutDirUnusable)."""
    full = storage_failure(exc, out_dir / LOCK)
    if full is not None and exc.errno != errno.EROFS:
        return full
    return OutDirUnusable(f"{what}: {exc.strerror}")


def _lock(fd: int, out_dir: Path) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
        raise OutDirBusy(f"{out_dir} is being graded into by another autograder command (pid {holder}); wait for "
                         f"it to end, or give this one another --out") from None
    try:  # who holds it, for the message of a second command
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
    except OSError as exc:
        raise storage_failure(exc, out_dir / LOCK) or exc from None


def ensure_held(out_dir: Path) -> None:
    """Raise OutDirLost unless DIR/.grading.lock is the file this process locked (nothing to check where this
    process holds no claim on DIR)."""
    held = _held.get(str(out_dir.resolve()))
    if held is None:
        return
    locked = os.fstat(held[1])
    try:
        now = os.stat(out_dir / LOCK)
    except OSError:
        now = None
    if now is None or (now.st_dev, now.st_ino) != (locked.st_dev, locked.st_ino):
        raise OutDirLost(f"{out_dir} was removed or replaced while this command graded into it: it stops here and "
                         "writes nothing more there. Results it wrote before that went with the old folder; run the "
                         "command again to grade what is missing")


def results_in(out_dir: Path) -> dict[str, SubmissionResult]:
    """id -> result, for every DIR/<id>/grading.json that can be read, beside a results.json that can be read too
    (written after it: without it the result is incomplete, a disk that filled up between the two)."""
    found = {}
    for path in sorted(out_dir.glob("*/grading.json")):
        try:
            json.loads((path.parent / "results.json").read_text(encoding="utf-8"))
            found[path.parent.name] = SubmissionResult.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found
