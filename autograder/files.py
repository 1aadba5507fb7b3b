"""Writing files so that a reader never sees half of one: the only place the package writes results,
releases, bundles and caches.

Guarantees: `write_atomic` and `atomic_folder` either leave the complete new content at the target path or
leave the target as it was (a crash, a full disk or a kill midway leaves at most a hidden temporary entry
next to it, never a truncated file). Two writers of the same path never share a temporary name (the name
holds the process id and a random part); the last to finish wins, whole. `open_inside` opens a file inside a folder
without following a link anywhere below the folder: what a caller checks (fstat) and reads is that one descriptor.
"""
from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import os
import stat
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


class DiskFull(OSError):
    """A write the storage refused for the machine's cause: no space or quota left, or a file system that turned
    read-only (ext4's errors=remount-ro) or refuses a file that large. Nothing half-written is left, the run can
    resume once the cause is fixed (`remedy`). The command says so in one line, exit code 4 (cli.py)."""

    remedy = "free some space"


class ReadOnlyStorage(DiskFull):
    """A DiskFull whose cause is a file system that turned read-only (EROFS): the same exit code, its own remedy."""

    remedy = "make the file system writable again (the system log says why it turned read-only)"


# errno -> (the one line, {where}: " holding <folder>" where known; the class): the write failures that are the
# storage's, never a student's
STORAGE_ERRORS = {errno.ENOSPC: ("no space left on the device{where}", DiskFull),
                  errno.EDQUOT: ("disk quota exceeded on the device{where}", DiskFull),
                  errno.EFBIG: ("a file too large for the file system{where}", DiskFull),
                  errno.EROFS: ("the file system{where} is read-only", ReadOnlyStorage)}


def storage_failure(exc: BaseException, path: Path | str | None = None) -> DiskFull | None:
    """`exc` as the DiskFull the command reports (a DiskFull as it is), naming the file written (`path`, else the
    error's own file name) where known; None where it is no storage failure."""
    if isinstance(exc, DiskFull):
        return exc
    if not isinstance(exc, OSError) or exc.errno not in STORAGE_ERRORS:
        return None
    line, kind = STORAGE_ERRORS[exc.errno]
    written = path if path is not None else exc.filename
    if written is None:  # a write to a descriptor: the path is not known here
        return kind(exc.errno, line.format(where=""))
    written = Path(os.fsdecode(written))
    return kind(exc.errno, line.format(where=f" holding {written.parent}") + f" (writing {written.name})")


def write_atomic(path: Path, data: str | bytes, mode: int | None = None) -> None:
    """Write `data` (text as UTF-8, each lone surrogate as U+FFFD) to a temporary file beside `path`, then rename it over `path`. A write the
    storage refuses (no space, quota, read-only) raises DiskFull naming the path."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".tmp{os.getpid()}", dir=path.parent)
    except OSError as exc:
        raise _full(exc, path) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            # a lone surrogate (from a notebook's "\ud800" escape or a file name's undecodable byte) has no UTF-8:
            # it is written as U+FFFD, never an error that loses the file
            fh.write(data.encode("utf-8", "replace") if isinstance(data, str) else data)
        os.chmod(tmp, 0o644 if mode is None else mode)  # mkstemp's 0600 would hide a result from its reader
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise _full(exc, path) from None
        raise


def _full(exc: OSError, path: Path) -> OSError:
    """DiskFull for a write the storage refused (STORAGE_ERRORS), the error itself otherwise."""
    return storage_failure(exc, path) or exc


@contextlib.contextmanager
def atomic_folder(path: Path) -> Iterator[Path]:
    """Fill the yielded temporary folder; on success it is renamed to `path`. When `path` exists already
    (another writer finished first: callers are caches keyed by what they hold, so both copies are the
    same), the first copy stays and this one is dropped. On any failure the temporary folder is removed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=f".tmp{os.getpid()}", dir=path.parent))
    try:
        tmp.chmod(0o755)
        yield tmp
        os.replace(tmp, path)
    except OSError:
        if not path.is_dir():  # not "another writer finished first": the caller must hear of it
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes, read in blocks; "unreadable: <why>" when it cannot be read."""
    h = hashlib.sha256()
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block the reader forever
            return "unreadable: not a regular file"
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def package_digest() -> str:
    """The checksum of this package's code (its .py files): which version of the grader ran."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def resolved(path: Path) -> Path:
    """The path with links resolved and made absolute; as given where that fails (a loop of links)."""
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError):
        return Path(path)


_FOLDER_NO_LINK = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_NO_LINK = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO opens without waiting for a writer


def open_inside(root: Path, inside: Path) -> int:
    """A read-only descriptor of `root`/`inside` (a relative path), opened one component at a time from a descriptor
    of `root`, never through a link anywhere under `root`: a link put in place of the file or of a folder on its way
    after a check is never followed (OSError ELOOP, its `filename` the component; ENOTDIR where a folder became a
    file). What is opened may be anything but a link (a FIFO does not block here): check it with os.fstat of this
    descriptor, and read from it."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the folder itself is the caller's to trust
    try:
        for part in inside.parts[:-1]:
            below = _open_folder(part, fd)
            os.close(fd)
            fd = below
        return os.open(inside.name, _FILE_NO_LINK, dir_fd=fd)
    finally:
        os.close(fd)


def _open_folder(name: str, parent: int) -> int:
    """The folder `name` of `parent` (a descriptor), not through a link: ELOOP where it is one (Linux says ENOTDIR
    for a link opened with O_DIRECTORY | O_NOFOLLOW, as for a file)."""
    try:
        return os.open(name, _FOLDER_NO_LINK, dir_fd=parent)
    except NotADirectoryError:
        if stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name) from None
        raise
