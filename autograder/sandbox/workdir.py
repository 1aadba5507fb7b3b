"""The working directory of the checks that run in the judge: the notebook's folder as the student's kernel has
it (a kernel starts beside its notebook, and nbgrader's autograde runs there), with the assignment's shipped files
at the paths the notebook reads them by. A test cell's `open("data.txt")` reads the shipped `data.txt`, as the
student's functions do in their worker (whose working directory holds the same files: Confinement.inputs).

Guarantees:
- `NotebookFolder(inputs)` (name -> file of the machine, as Confinement.inputs) makes the folder on first use, a
  copy of every file under its name (a check that writes one changes its copy, never the release's), in a Scratch
  folder (removed by `cleanup()`, swept when its process was killed).
- `fresh()` puts the folder back as it was made when anything in it changed (its names, sizes or times): what one
  submission's checks wrote there the next one never reads. Cheap when nothing changed: one walk of the folder.
- `entered()` is a context in which the process's working directory is the folder, and the one before after it
  (by descriptor: a directory renamed meanwhile is still the one returned to). The judge runs one check at a time
  and its other threads use absolute paths only, so the change is the check's alone.
- `environment_set(variables)` is a context in which os.environ has the assignment's variables ([environment] of
  assignment.toml), each put back as it was after (removed if it was not set).
- A folder that cannot be made (a full /tmp) is said once by `problem`, and the checks run where they are: a cell
  that opens a shipped file then fails, and the reference with it, so the check is not graded (never charged).
"""
from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from autograder.sandbox.scratch import Scratch


class NotebookFolder:
    """The judge's working directory for one assignment's checks (see the module docstring for what it guarantees)."""
    def __init__(self, inputs: dict[str, str] | None = None):
        self.inputs = {name: os.path.abspath(path) for name, path in (inputs or {}).items()}
        self._scratch: Scratch | None = None
        self._made: dict[str, tuple[int, int]] | None = None  # relative path -> (size, mtime_ns) as made
        self.problem = ""

    @property
    def path(self) -> str | None:
        """The folder's path; None until it is made (and after cleanup)."""
        return self._scratch.name if self._scratch is not None else None

    def _make(self) -> None:
        if self._scratch is None:
            self._scratch = Scratch()
        root = Path(self._scratch.name)
        for entry in list(root.iterdir()):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
        for name, source in sorted(self.inputs.items()):
            target = root / name
            if not os.path.abspath(target).startswith(str(root) + os.sep):
                continue  # a name that leads out of the folder (`../x`): nowhere a notebook's folder has it
            target.parent.mkdir(parents=True, exist_ok=True)
            if os.path.isdir(source):
                shutil.copytree(source, target, symlinks=False, dirs_exist_ok=True)
            elif os.path.isfile(source):
                shutil.copyfile(source, target)
        self._made = self._listing()

    def _listing(self) -> dict[str, tuple[int, int]]:
        assert self._scratch is not None
        found: dict[str, tuple[int, int]] = {}
        for dirpath, dirnames, filenames in os.walk(self._scratch.name):
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                found[os.path.relpath(path, self._scratch.name)] = (st.st_size if name in filenames else 0,
                                                                    st.st_mtime_ns if name in filenames else 0)
        return found

    def fresh(self) -> None:
        """The folder as made (made now if it was not): before each submission's checks."""
        try:
            if self._made is None or self._listing() != self._made:
                self._make()
        except OSError as exc:
            self.problem = f"the checks' working directory with the shipped files could not be made ({exc})"
            self._made = None

    @contextlib.contextmanager
    def entered(self) -> Iterator[None]:
        """A context in which the working directory is the folder (made first where it was not), and the one before
        after it."""
        if self._made is None:
            self.fresh()
        if self._made is None or self.path is None:
            yield
            return
        try:
            before = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            before = None  # the working directory is gone or unreadable: nothing to return to but the folder
        try:
            os.chdir(self.path)
            yield
        finally:
            if before is not None:
                with contextlib.suppress(OSError):
                    os.fchdir(before)
                os.close(before)

    def cleanup(self) -> None:
        """Remove the folder; the next use makes it again."""
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None
        self._made = None


@contextlib.contextmanager
def environment_set(variables: dict[str, str]) -> Iterator[None]:
    """A context in which os.environ has `variables`; each variable is put back after it as it was (or unset)."""
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
