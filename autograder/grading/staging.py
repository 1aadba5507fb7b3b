"""Submissions staged by content: before a run grades a notebook, its bytes are read once, hashed as they are read
and copied to DIR/.staged/<sha256>/<its file name>; the run grades that copy and its resume marker holds that
digest. So the marker is always the checksum of the bytes that were graded: a notebook replaced, truncated or
re-extracted while the run goes on (a student's late upload, another tool unpacking the same export) is graded as
it was when the run read it, and graded again by the next run if it changed.

Guarantees: a staged copy is complete or absent (written under a temporary name, then renamed); identical
notebooks are stored once, whatever their names: the first copy of some bytes stays, and each other file with the
same bytes is a hard link to it under its own name (messages name the file as the student named it; a copy of its
own where the file system has no hard links); the folder is removed when the run ends (`Staging.close`), and a
run that crashed leaves one that the next run in the same DIR removes first. Submission ids never start with a
dot, so the folder never meets a result's. A write the storage refuses (no space, quota, read-only) is
the run's DiskFull (files.storage_failure), never a row.

A notebook found inside a submissions folder (every layout but a file named on the command line) is read as it was
found: opened from that folder one component at a time without following a link, checked (a regular file) with
fstat of that descriptor and copied from it. A link put in its place after discovery's links check (the answer
key), or in place of a folder on its way, is never read: the row says so (NotStaged), as it says what else is no
regular file there now. A file named on the command line is opened as named (the instructor named it); what
cannot be staged of those (not a regular file, unreadable) is graded from its path as given, which then says why
it cannot be read. With staging off (a Ray cluster), the same check decides and the digest is of what it read, but
the nodes read the path later: the one window left.
"""
from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

from autograder.files import file_digest, open_inside, storage_failure

STAGED = ".staged"  # DIR/.staged/<sha256>/<file name>


class NotStaged(Exception):
    """A notebook found inside a submissions folder that cannot be read there now as it was found (a link put in its
    place or in place of a folder on its way, no regular file, removed, unreadable): the row says why. `machine`: a
    cause of this machine's (a permission, an I/O error), graded again by the next run, never a student's score."""

    def __init__(self, why: str, machine: bool = False):
        super().__init__(why)
        self.machine = machine

    @classmethod
    def of(cls, path: Path, exc: OSError, inside: Path) -> NotStaged:
        """Why `path` (found at `inside` of its folder) could not be opened there without a link (`exc`)."""
        if exc.errno == errno.ELOOP:
            where = "it" if exc.filename in (None, inside.name) else f"the folder {exc.filename} on its way"
            return cls(f"cannot read {path.name}: {where} is a link (one to nothing, or one put in its place after "
                       "the run found the submission): nothing was read through it, it is not graded")
        if exc.errno == errno.ENOTDIR:
            return cls(f"cannot read {path.name}: {exc.filename} is no longer a folder: it is not graded")
        if exc.errno == errno.ENOENT:
            return cls(f"cannot read {path.name}: {exc.strerror}")
        return cls(f"cannot read {path.name}: {exc.strerror} (a problem of this machine's files, not the "
                   "submission's)", machine=True)


def _digest(fd: int) -> str:
    h = hashlib.sha256()
    for block in iter(lambda: os.read(fd, 1 << 20), b""):
        h.update(block)
    return h.hexdigest()


def is_staged(path: Path) -> bool:
    """Whether path is a staged copy (DIR/.staged/<sha256>/<name>): one the run itself made."""
    return path.parent.parent.name == STAGED


class Staging:
    """`enabled` False (a Ray cluster, whose nodes may not see DIR): notebooks are graded from their paths, and the
    marker holds the checksum of their bytes when the run began."""

    def __init__(self, out_dir: Path, enabled: bool = True):
        self.root = out_dir / STAGED
        self.enabled = enabled
        shutil.rmtree(self.root, ignore_errors=True)  # left by a run that crashed: no run uses it now (the lock)

    def stage(self, path: Path, found_at: tuple[Path, Path] | None = None) -> tuple[Path, str]:
        """(the copy to grade, the sha256 of its bytes); (path, "unreadable: why") where it cannot be copied.
        `found_at` (submissions.Submission.found_at: the submissions folder and the notebook's path inside it, as
        discovery found them): the notebook is opened from that folder without following a link (files.open_inside),
        checked by fstat of that descriptor and copied from it, one operation on one open file; NotStaged where a
        link or no regular file is there now, whose row says so: nothing is read through a link swapped in after the
        links check, and the path is never handed on to be read later."""
        try:
            fd = open_inside(*found_at) if found_at else os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            if found_at:
                raise NotStaged.of(path, exc, found_at[1]) from None
            return path, file_digest(path)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                if found_at:
                    raise NotStaged(f"{path.name} is not a regular file: it is not graded")
                return path, file_digest(path)
            if not self.enabled:  # graded from its path by the cluster's nodes: the digest of what was checked
                return path, _digest(fd)
            return self._copy(fd, path.name)
        except OSError as exc:
            full = storage_failure(exc, self.root / path.name)
            if full is not None:  # the command says so in one line, exit code 4
                raise full from None
            if found_at:  # the file was open and regular: reading or copying it failed here
                raise NotStaged(f"cannot copy {path.name} to grade it: {exc.strerror} (a problem of this machine's "
                                "files, not the submission's)", machine=True) from None
            return path, file_digest(path)
        finally:
            os.close(fd)

    def _copy(self, fd: int, name: str) -> tuple[Path, str]:
        """Copy what `fd` reads to .staged/<sha256>/<name>."""
        self.root.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        out, temp = tempfile.mkstemp(dir=self.root, prefix=".copy-")
        try:
            with os.fdopen(out, "wb") as dst:
                for block in iter(lambda: os.read(fd, 1 << 20), b""):
                    digest.update(block)
                    dst.write(block)
            folder = self.root / digest.hexdigest()
            folder.mkdir(exist_ok=True)
            staged = folder / name
            first = next(iter(sorted(folder.iterdir())), None)
            # the same bytes under another name: one copy, named as this student named it
            if first is None or first == staged or not _linked(first, staged):
                os.replace(temp, staged)
            Path(temp).unlink(missing_ok=True)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        return staged, digest.hexdigest()

    def close(self) -> None:
        """Remove DIR/.staged and every staged copy in it, at the run's end."""
        shutil.rmtree(self.root, ignore_errors=True)


def _linked(first: Path, name: Path) -> bool:
    """Whether `name` is now a hard link to `first` (or was there already: the same bytes); False where the file
    system refuses hard links (the caller keeps its own copy: a message must name the file as its student named it,
    never another's)."""
    try:
        os.link(first, name)
    except FileExistsError:
        return True
    except OSError as exc:
        if storage_failure(exc) is not None:
            raise
        return False
    return True
