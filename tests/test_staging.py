"""Submissions staged by content: the resume marker is the checksum of the bytes that were graded, whatever happens
to the notebook while the run goes on; and a re-run grades again the rows that were NOT GRADED."""
from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil

import pytest

from autograder.files import DiskFull
from autograder.grading import GradeOptions, grade
from autograder.grading import run as run_module
from autograder.grading.resume import MARKER
from autograder.grading.staging import STAGED, Staging
from autograder.status import UNGRADED


def test_identical_notebooks_share_one_staged_copy_under_their_own_names(tmp_path):
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.ipynb").write_text("{}")
    staging = Staging(tmp_path / "out")
    (a, digest_a), (b, digest_b), (c, _) = (staging.stage(tmp_path / f"{name}.ipynb") for name in "abc")
    assert digest_a == digest_b == hashlib.sha256(b"{}").hexdigest()
    assert a.parent == b.parent and (a.name, b.name) == ("a.ipynb", "b.ipynb")
    assert os.path.samefile(a, b) and os.path.samefile(a, c)  # once per content: one file, three names
    assert staging.stage(tmp_path / "a.ipynb")[0] == a  # the same file again: the same copy
    assert staging.stage(tmp_path / "missing.ipynb")[1].startswith("unreadable")
    staging.close()
    assert not (tmp_path / "out" / STAGED).exists()


def test_where_hard_links_are_refused_each_name_keeps_a_copy_of_its_own(tmp_path, monkeypatch):
    """(a file system without hard links: a message must name the file as its own student named it)"""
    for name in ("a", "b"):
        (tmp_path / f"{name}.ipynb").write_text("{}")

    def refused(*args, **kwargs):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", refused)
    staging = Staging(tmp_path / "out")
    (a, _), (b, _) = staging.stage(tmp_path / "a.ipynb"), staging.stage(tmp_path / "b.ipynb")
    assert (a.name, b.name) == ("a.ipynb", "b.ipynb") and a.read_text() == b.read_text() == "{}"
    assert not [p for p in (tmp_path / "out" / STAGED).iterdir() if p.name.startswith(".copy-")]


def test_a_resumed_result_gets_back_every_file_derived_from_its_record_without_being_graded_again(
        example_release, tmp_path, monkeypatch):
    from autograder.grading.grader import Grader

    key = example_release.dir / "answer_key.ipynb"
    out = tmp_path / "out"
    grade(example_release, [key], GradeOptions(out, quiet=True))
    folder = out / "answer_key"
    written = {name: (folder / name).read_bytes() for name in ("feedback.md", "results.json", "grading.json")}
    (folder / "feedback.md").unlink()  # removed by hand, a sync tool, a disk that filled up
    (folder / "results.json").write_text('{"score": 1')  # cut short

    def never(*args, **kwargs):
        raise AssertionError("a result whose record is whole is not graded again")

    monkeypatch.setattr(Grader, "grade_one", never)
    [again] = grade(example_release, [key], GradeOptions(out, quiet=True))
    assert again.score == 11
    assert {name: (folder / name).read_bytes() for name in written} == written


def test_a_notebook_replaced_while_the_run_goes_on_is_graded_as_it_was_read(example_release, tmp_path, monkeypatch):
    key = example_release.dir / "answer_key.ipynb"
    nb = tmp_path / "hw.ipynb"
    shutil.copy(key, nb)
    graded_bytes = nb.read_bytes()
    grade_remaining = run_module.Run.grade_remaining

    def replaced_then_graded(run):
        nb.write_text("{ truncated")  # a late upload, another tool re-extracting the same export
        grade_remaining(run)

    monkeypatch.setattr(run_module.Run, "grade_remaining", replaced_then_graded)
    out = tmp_path / "out"
    [result] = grade(example_release, [nb], GradeOptions(out, quiet=True))
    assert result.score == 11 and result.file == str(nb)
    marker = json.loads((out / "hw" / MARKER).read_text())
    assert marker["notebook"] == hashlib.sha256(graded_bytes).hexdigest()
    assert not (out / STAGED).exists()
    monkeypatch.undo()
    [again] = grade(example_release, [nb], GradeOptions(out, quiet=True))  # what is there now: graded again
    assert again.error and "invalid JSON" in again.error


def test_a_rerun_grades_again_the_rows_that_were_not_graded(example_release, tmp_path):
    key = example_release.dir / "answer_key.ipynb"
    out = tmp_path / "out"
    grade(example_release, [key], GradeOptions(out, quiet=True))
    row = out / "answer_key" / "grading.json"
    data = json.loads(row.read_text())
    data["checks"][0].update(status=UNGRADED, score=0.0, grader_problem="the machine ran out of memory")
    row.write_text(json.dumps(data))  # as a system fault leaves it
    [again] = grade(example_release, [key], GradeOptions(out, quiet=True))
    assert again.score == 11 and not again.ungraded  # graded again, not skipped
    assert json.loads(row.read_text())["checks"][0]["status"] == "passed"


def test_a_full_disk_while_staging_is_the_runs_full_disk(tmp_path, monkeypatch):
    (tmp_path / "a.ipynb").write_text("{}")

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", no_space)
    with pytest.raises(DiskFull, match="no space left"):
        Staging(tmp_path / "out").stage(tmp_path / "a.ipynb")
    assert not [p for p in (tmp_path / "out" / STAGED).iterdir() if p.name.startswith(".copy-")]


def test_a_staged_copy_removed_while_the_run_goes_on_is_not_graded_never_zero(example_release, tmp_path, monkeypatch):
    nb = tmp_path / "hw.ipynb"
    shutil.copy(example_release.dir / "answer_key.ipynb", nb)
    grade_remaining = run_module.Run.grade_remaining

    def copies_removed_then_graded(run):
        shutil.rmtree(tmp_path / "out" / STAGED)  # a clean-up script, a hand in the folder
        grade_remaining(run)

    monkeypatch.setattr(run_module.Run, "grade_remaining", copies_removed_then_graded)
    [result] = grade(example_release, [nb], GradeOptions(tmp_path / "out", quiet=True))
    assert result.ungraded and all(c.status == UNGRADED for c in result.checks)
    assert "removed while it ran" in result.error and result.file == str(nb)
    monkeypatch.undo()
    [again] = grade(example_release, [nb], GradeOptions(tmp_path / "out", quiet=True))
    assert again.score == 11 and not again.ungraded


def test_a_rerun_copies_only_what_it_grades_and_knows_a_result_by_its_bytes_not_its_path(example_release, tmp_path,
                                                                                        monkeypatch):
    key = example_release.dir / "answer_key.ipynb"
    (tmp_path / "subs").mkdir()
    for name in ("a", "b"):
        shutil.copy(key, tmp_path / "subs" / f"{name}.ipynb")
    out = tmp_path / "out"
    grade(example_release, sorted((tmp_path / "subs").iterdir()), GradeOptions(out, quiet=True))
    shutil.move(tmp_path / "subs", tmp_path / "moved")  # the same bytes, by another path
    shutil.copy(key, tmp_path / "moved" / "c.ipynb")  # a late one
    staged = []
    stage = Staging.stage
    monkeypatch.setattr(Staging, "stage", lambda self, path, *found: staged.append(path.name) or stage(self, path, *found))
    results = grade(example_release, sorted((tmp_path / "moved").iterdir()), GradeOptions(out, quiet=True))
    assert staged == ["c.ipynb"]  # a disk that filled up is not filled again by copies of what was graded
    assert [r.score for r in results] == [11, 11, 11]


def test_a_result_cut_short_by_a_full_disk_is_no_row_of_the_table(example_release, tmp_path):
    from autograder.grading.outdir import results_in

    out = tmp_path / "out"
    grade(example_release, [example_release.dir / "answer_key.ipynb"], GradeOptions(out, quiet=True))
    assert list(results_in(out)) == ["answer_key"]
    (out / "answer_key" / "results.json").unlink()  # grading.json written, then the disk was full
    assert results_in(out) == {}


# -- a link swapped in between discovery's links check and the copy ----------------------------------------------

def _class_of_stubs(example_release, tmp_path):
    """subs/<student>/vectors.ipynb, each the notebook as handed out (no error, 0 points: never the key's 11), and
    the answer key elsewhere, as discovery finds them."""
    from autograder.submissions import discover

    stub = example_release.dir.parent.parent / "assignments" / "vectors" / "vectors.ipynb"
    for student in ("alice", "bob", "carol"):
        (tmp_path / "subs" / student).mkdir(parents=True)
        shutil.copy(stub, tmp_path / "subs" / student / "vectors.ipynb")
    (tmp_path / "keys").mkdir()
    shutil.copy(example_release.dir / "answer_key.ipynb", tmp_path / "keys" / "vectors.ipynb")
    return discover([tmp_path / "subs"], "vectors.ipynb").submissions


def _swap_for_links(tmp_path):
    """alice's notebook becomes a link to the answer key; bob's folder a link to the key's folder."""
    alice = tmp_path / "subs" / "alice" / "vectors.ipynb"
    alice.unlink()
    alice.symlink_to(tmp_path / "keys" / "vectors.ipynb")
    shutil.rmtree(tmp_path / "subs" / "bob")
    (tmp_path / "subs" / "bob").symlink_to(tmp_path / "keys", target_is_directory=True)


def test_a_link_swapped_in_after_the_links_check_is_never_read(example_release, tmp_path, monkeypatch):
    """Discovery found regular files inside the folder; before the run copies them, one student's notebook and
    another's folder become links to the answer key: their rows say so, nothing is read through the links (they
    were graded as the answer key, 11 points, without a note)."""
    subs = _class_of_stubs(example_release, tmp_path)
    stage = Staging.stage

    def swapped_then_staged(self, path, *found):
        if path.parts[-2] == "alice":  # the run reaches the first submission: the swap happens now
            _swap_for_links(tmp_path)
        return stage(self, path, *found)

    monkeypatch.setattr(Staging, "stage", swapped_then_staged)
    results = {r.submission: r for r in grade(example_release, subs, GradeOptions(tmp_path / "out", quiet=True))}
    assert results["carol"].score == 0 and not results["carol"].error  # the notebook as handed out, graded
    for student, where in (("alice", "it is a link"), ("bob", "the folder bob on its way is a link")):
        assert results[student].score == 0 and not results[student].ungraded, student
        assert f"cannot read vectors.ipynb: {where}" in results[student].error
        assert "nothing was read through it" in results[student].error


def test_a_link_swapped_in_once_the_file_is_open_changes_nothing(example_release, tmp_path, monkeypatch):
    """The check and the copy are one open file: a swap after the file is opened leaves what is graded the bytes
    of the file that was checked."""
    from autograder.grading import staging

    subs = _class_of_stubs(example_release, tmp_path)
    open_inside = staging.open_inside

    def opened_then_swapped(root, inside):
        fd = open_inside(root, inside)
        if inside.parts[0] == "alice":
            _swap_for_links(tmp_path)
        return fd

    monkeypatch.setattr(staging, "open_inside", opened_then_swapped)
    results = {r.submission: r for r in grade(example_release, subs, GradeOptions(tmp_path / "out", quiet=True))}
    assert (results["alice"].score, results["alice"].error) == (0, "")  # the notebook as handed out: its own
    assert "the folder bob on its way is a link" in results["bob"].error  # swapped before bob's was opened


def test_what_cannot_be_read_as_found_is_a_row_not_a_path_read_later(tmp_path, monkeypatch):
    """A notebook found in a folder is never handed on by its path when it cannot be staged: a FIFO there now, a
    notebook removed (the student's), a permission (the machine's)."""
    from autograder.grading import staging as staging_module
    from autograder.grading.staging import NotStaged

    (tmp_path / "subs" / "a").mkdir(parents=True)
    nb = tmp_path / "subs" / "a" / "vectors.ipynb"
    os.mkfifo(nb)
    staging = Staging(tmp_path / "out")
    found_at = (tmp_path / "subs", nb.relative_to(tmp_path / "subs"))
    with pytest.raises(NotStaged, match="not a regular file") as fifo:
        staging.stage(nb, found_at)
    nb.unlink()
    with pytest.raises(NotStaged, match="No such file") as gone:
        staging.stage(nb, found_at)
    assert (fifo.value.machine, gone.value.machine) == (False, False)  # the submission's: a row with 0
    nb.write_text("{}")

    def broken_disk(*args):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    with monkeypatch.context() as patch:  # copying it failed here: the machine's, never the student's zero
        patch.setattr(os, "replace", broken_disk)
        with pytest.raises(NotStaged, match="cannot copy vectors.ipynb to grade it") as copy_failed:
            staging.stage(nb, found_at)
    assert copy_failed.value.machine

    def denied_here(root, inside):  # what a folder of mode 000 gives any user but root
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), inside.parts[0])

    monkeypatch.setattr(staging_module, "open_inside", denied_here)
    with pytest.raises(NotStaged, match="Permission denied") as denied:
        staging.stage(nb, found_at)
    assert denied.value.machine  # this machine's: NOT GRADED, graded again by the next run


def test_with_staging_off_the_same_check_decides_and_the_digest_is_of_what_it_read(tmp_path):
    """A Ray cluster's nodes read the notebooks from their paths: the links check on the descriptor still decides,
    and the marker's digest is of the bytes that descriptor read."""
    from autograder.grading.staging import NotStaged

    (tmp_path / "subs" / "a").mkdir(parents=True)
    nb = tmp_path / "subs" / "a" / "vectors.ipynb"
    nb.write_text("{}")
    found_at = (tmp_path / "subs", nb.relative_to(tmp_path / "subs"))
    staging = Staging(tmp_path / "out", enabled=False)
    assert staging.stage(nb, found_at) == (nb, hashlib.sha256(b"{}").hexdigest())
    nb.unlink()
    nb.symlink_to(tmp_path / "answer_key.ipynb")
    (tmp_path / "answer_key.ipynb").write_text('{"key": 1}')
    with pytest.raises(NotStaged, match="it is a link"):
        staging.stage(nb, found_at)
    assert not (tmp_path / "out" / STAGED).exists()
