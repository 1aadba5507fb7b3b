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
dot, so the folder never meets a result's. What cannot be staged (not a regular file, unreadable) is graded from its
path as given, which then says why it cannot be read. A write the storage refuses (no space, quota, read-only) is
the run's DiskFull (files.storage_failure), never a row.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

from autograder.files import file_digest, storage_failure

STAGED = ".staged"  # DIR/.staged/<sha256>/<file name>


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

    def stage(self, path: Path) -> tuple[Path, str]:
        """(the copy to grade, the sha256 of its bytes); (path, "unreadable: why") where it cannot be copied."""
        try:
            if not self.enabled or not stat.S_ISREG(os.stat(path).st_mode):
                return path, file_digest(path)
            return self._copy(path)
        except OSError as exc:
            full = storage_failure(exc, self.root / path.name)
            if full is not None:  # the command says so in one line, exit code 4
                raise full from None
            return path, file_digest(path)

    def _copy(self, path: Path) -> tuple[Path, str]:
        self.root.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        fd, temp = tempfile.mkstemp(dir=self.root, prefix=".copy-")
        try:
            with open(path, "rb") as src, os.fdopen(fd, "wb") as dst:
                for block in iter(lambda: src.read(1 << 20), b""):
                    digest.update(block)
                    dst.write(block)
            folder = self.root / digest.hexdigest()
            folder.mkdir(exist_ok=True)
            staged = folder / path.name
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
