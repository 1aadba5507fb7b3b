"""A command stopped from outside, or by a disk that cannot take its writes, stops in order and says so in one line.

- SIGTERM (what `timeout`, systemd, Kubernetes, a CI cancel and Gradescope send) and SIGHUP (a closed terminal) take
  Ctrl-C's path: grading stops, the grading processes, fork servers and workers end, grades.csv lists every result
  the folder holds, no staged copy is left, the --out lock is free, one line says so, and the exit code is
  128 + the signal's number. The same command then grades what is missing.
- A write the storage refuses (no space, quota, a file system turned read-only), wherever the command meets it
  (the lock, a zip's extraction, staging, a result, the tables), is one line and exit code 4, never a traceback,
  and leaves nothing staged.
"""
from __future__ import annotations

import csv
import errno
import fcntl
import os
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pytest

from autograder.grading.outdir import LOCK, results_in
from autograder.grading.staging import STAGED
from autograder.sandbox.processes import process_table
from tests.conftest import make_submission

NORMALIZE = "return v / v.norm(dim=-1, keepdim=True)"
SLOWER_NORMALIZE = {NORMALIZE: f"import time; time.sleep(0.4)\n    {NORMALIZE}"}  # about a second a submission
SUBMISSIONS = 6


def _slow_submissions(folder: Path, key: Path) -> Path:
    folder.mkdir()
    for n in range(SUBMISSIONS):
        make_submission(folder / f"s{n}.ipynb", key, SLOWER_NORMALIZE)
    return folder


def _descendants(pid: int) -> set[int]:
    table, found, todo = process_table(), set(), [pid]
    while todo:
        parent = todo.pop()
        children = {p for p, pp in table.items() if pp == parent} - found
        found |= children
        todo += children
    return found


def _alive(pid: int) -> bool:
    """Running (a zombie is not: an orphan's zombie waits for an init that may never reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _lock_is_free(out: Path) -> bool:
    fd = os.open(out / LOCK, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def _rows(out: Path) -> list[str]:
    return [row["submission"] for row in csv.DictReader((out / "grades.csv").open(encoding="utf-8"))]


def _left_behind(out: Path) -> list[str]:
    """Staged copies and temporary files: what an orderly stop removes."""
    return [str(p.relative_to(out)) for p in out.rglob("*") if p.name == STAGED or ".tmp" in p.name
            or p.name.startswith(".copy-")]


@pytest.mark.slow
@pytest.mark.parametrize("signum, to_group, jobs", [
    (signal.SIGTERM, False, 1),  # Kubernetes, `kill PID`: the command's process alone
    (signal.SIGTERM, True, 2),  # `timeout`, systemd: every process of the group, grading processes included
    (signal.SIGHUP, True, 1),  # the terminal closed
], ids=["sigterm-to-the-command", "sigterm-to-the-group-jobs-2", "sighup-to-the-group"])
def test_a_command_stopped_by_a_signal_leaves_its_folder_whole_and_the_same_command_finishes_it(
        example_build, tmp_path, signum, to_group, jobs):
    subs = _slow_submissions(tmp_path / "subs", example_build.release / "answer_key.ipynb")
    out = tmp_path / "out"
    command = [sys.executable, "-m", "autograder", "grade", str(example_build.release), str(subs), "--out", str(out),
               "--jobs", str(jobs)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # a group of its own, as `timeout` makes one
    try:
        while len(list(out.glob("*/results.json"))) < 2 and proc.poll() is None:  # mid-run: some graded, not all
            time.sleep(0.05)
        tree = _descendants(proc.pid)
        (os.killpg if to_group else os.kill)(proc.pid, signum)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (f"interrupted by {signal.Signals(signum).name}; results written so far are "
                                            "kept: run the same command again to go on")
    present = sorted(results_in(out))
    assert 2 <= len(present) < SUBMISSIONS  # stopped mid-run
    assert _rows(out) == present  # the table is whole: one row per result the folder holds
    assert _left_behind(out) == [] and _lock_is_free(out)
    deadline = time.monotonic() + 30  # parent-death signals are immediate; a loaded machine schedules late
    while any(_alive(p) for p in tree) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in tree if _alive(p)], "a grading process, fork server or worker outlived the command"

    again = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert f"{len(present)} submission(s) already graded" in again.stderr
    assert _rows(out) == sorted(results_in(out)) == [f"s{n}" for n in range(SUBMISSIONS)]
    assert _left_behind(out) == []


def test_a_second_signal_while_the_command_stops_does_not_cut_the_stop_short():
    from autograder.cli import Terminated, stopped_by_signals

    stopped_in = []
    with pytest.raises(Terminated) as stop:
        with stopped_by_signals():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)  # the signal is raised here
            finally:
                os.kill(os.getpid(), signal.SIGTERM)  # again, while the tables are written: ignored
                os.kill(os.getpid(), signal.SIGHUP)
                stopped_in.append("cleanup done")
    assert stop.value.signum == signal.SIGTERM and stopped_in == ["cleanup done"]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # as it was before


def test_a_signal_the_caller_ignores_stays_ignored(monkeypatch):
    """`nohup autograder grade ...`: a closed terminal does not stop it."""
    from autograder.cli import stopped_by_signals

    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with stopped_by_signals():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)


# -- a disk that cannot take the command's writes ---------------------------------------------------------------

def _refused(code: int):
    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code))
    return fail


def _under(out: Path, code: int, original, name: str | None = None):
    """`original` (a function that writes), failing with `code` where it writes under `out` (a file called `name`)."""
    renames, opens, opens_fd = original is os.replace, original is open, original is os.open  # (before the patch)

    def write(*args, **kwargs):
        path = args[1] if renames else kwargs.get("dir", args[0] if args else None)
        writes = True
        if opens:
            writes = any(m in (args[1] if len(args) > 1 else kwargs.get("mode", "r")) for m in "wax+")
        elif opens_fd:
            writes = bool(args[1] & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
        path = os.fsdecode(path) if path is not None and not isinstance(path, int) else ""
        if writes and path.startswith(str(out)) and (name is None or Path(path).name == name):
            raise OSError(code, os.strerror(code), path)
        return original(*args, **kwargs)
    return write


def _zip_of(key: Path, tmp_path: Path) -> Path:
    """An export of one student's own zip (otter's grader.export()): extracted into DIR/.inputs."""
    archive = tmp_path / "alice.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(key, "vectors.ipynb")
    return archive


WRITES = {
    # where the run writes, as each write fails: the lock (who holds it), the lock file itself, --out made
    "lock's pid": lambda mp, out: mp.setattr(os, "pwrite", _refused(errno.ENOSPC)),
    "lock file": lambda mp, out: mp.setattr(os, "open", _under(out, errno.EDQUOT, os.open)),
    "results folder": lambda mp, out: mp.setattr(os, "mkdir", _under(out, errno.ENOSPC, os.mkdir)),
    # a zip's members extracted into DIR/.inputs
    "zip extraction": lambda mp, out: mp.setattr("autograder.submissions.open", _under(out, errno.ENOSPC, open),
                                                 raising=False),
    # staging, results, tables: a temporary file, then a rename
    "temporary file": lambda mp, out: mp.setattr(tempfile, "mkstemp", _under(out, errno.ENOSPC, tempfile.mkstemp)),
    "rename": lambda mp, out: mp.setattr(os, "replace", _under(out, errno.ENOSPC, os.replace)),
    "read-only file system": lambda mp, out: mp.setattr(os, "replace", _under(out, errno.EROFS, os.replace)),
    # once graded: a result's files, the table
    "a result": lambda mp, out: mp.setattr(os, "replace", _under(out, errno.ENOSPC, os.replace, "results.json")),
    "the table": lambda mp, out: mp.setattr(os, "replace", _under(out, errno.EDQUOT, os.replace, "grades.csv")),
}


@pytest.mark.parametrize("where", list(WRITES))
def test_a_write_the_storage_refuses_anywhere_is_one_line_and_exit_4(example_build, tmp_path, monkeypatch, capsys,
                                                                      where):
    from autograder.entrypoints import command_line

    key = example_build.release / "answer_key.ipynb"
    archive = _zip_of(key, tmp_path)
    out = tmp_path / "out"
    if where != "results folder":
        out.mkdir()
    WRITES[where](monkeypatch, out)
    code = command_line(["grade", str(example_build.release), str(key), str(archive), "--out", str(out), "--quiet"])
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert code == 4, err
    assert "Traceback" not in err
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    if where == "read-only file system":
        assert "is read-only" in line and "make the file system writable again" in line
    else:
        assert ("no space left" in line or "quota exceeded" in line) and "free some space" in line
    assert "run the same command again" in line
    if out.exists():
        assert [p for p in out.rglob("*") if p.name == STAGED or ".tmp" in p.name] == []
        if (out / LOCK).exists():
            assert _lock_is_free(out)


def test_a_full_disk_while_staging_leaves_no_staged_copy(example_release, tmp_path, monkeypatch):
    """Staging fails at the second notebook: the first one's copy goes too, and no row is written for either."""
    from autograder.files import DiskFull
    from autograder.grading import GradeOptions, grade
    from autograder.grading.staging import Staging

    key = example_release.dir / "answer_key.ipynb"
    notebooks = [make_submission(tmp_path / f"{name}.ipynb", key, append=[f"# {name}"]) for name in "ab"]
    copy = Staging._copy
    monkeypatch.setattr(Staging, "_copy", lambda self, fd, name: copy(self, fd, name) if name == "a.ipynb"
                        else _refused(errno.ENOSPC)())
    out = tmp_path / "out"
    with pytest.raises(DiskFull, match="no space left"):
        grade(example_release, notebooks, GradeOptions(out, quiet=True))
    assert not (out / STAGED).exists() and results_in(out) == {}
