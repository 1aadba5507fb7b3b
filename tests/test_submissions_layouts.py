"""Input layouts -> (student id, notebook): folders of notebooks, Gradescope exports (folder and zip),
nbgrader submitted/ trees; then one end-to-end run that resumes and re-grades."""
from __future__ import annotations

import csv
import os
import shutil
import struct
import sys
import zipfile
from pathlib import Path

import pytest

from autograder.entrypoints import command_line as cli_main
from autograder.sandbox.forkserver import shutdown_fork_server
from autograder.submissions import discover, extract_zip, submission_ids

METADATA = """---
submission_111:
  :submitters:
  - :name: Ada Lovelace
    :sid: '1815'
    :email: ada@example.edu
  :created_at: 2024-02-01 10:00:00.000000000 -08:00
  :score: 0.0
submission_222:
  :submitters:
  - :name: Alan Turing
    :sid: ''
    :email: alan@example.edu
  - :name: Grace Hopper
    :sid: '1906'
    :email: grace@example.edu
  :created_at: 2024-02-01 11:00:00.000000000 -08:00
submission_333:
  :submitters:
  - :name: Nobody
    :sid:
    :email:
"""


def notebook(path: Path, text: str = "{}") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def gradescope_export(root: Path) -> Path:
    (root).mkdir(parents=True, exist_ok=True)
    (root / "submission_metadata.yml").write_text(METADATA)
    notebook(root / "submission_111" / "vectors.ipynb")
    notebook(root / "submission_222" / "work" / "vectors (2).ipynb")
    notebook(root / "submission_222" / "scratch.ipynb")
    (root / "submission_333").mkdir()
    (root / "submission_333" / "notes.txt").write_text("forgot the notebook")
    return root


def test_file_names_become_ids():
    assert submission_ids([Path("hw (1).ipynb"), Path("hw.ipynb"), Path("hw.ipynb"), Path("???.ipynb")]) == \
        ["hw_1", "hw", "hw-2", "submission"]


def test_names_in_any_script_keep_their_identity_and_case_repeats_stay_apart():
    nfd = "Ünïcödé".encode().decode()  # as typed
    import unicodedata

    names = ["张伟.ipynb", "李娜.ipynb", unicodedata.normalize("NFD", nfd) + " 学生.ipynb", "Alice.ipynb",
             "alice-2.ipynb", "alice.ipynb"]
    assert submission_ids([Path(n) for n in names]) == \
        ["张伟", "李娜", "Ünïcödé_学生", "Alice", "alice-2", "alice-3"]


def test_folder_of_notebooks(tmp_path):
    for name in ("b.ipynb", "a.ipynb", "hw (1).ipynb", "notes.txt"):
        notebook(tmp_path / "class" / name)
    notebook(tmp_path / "class" / "nested" / "c.ipynb")
    inputs = discover([tmp_path / "class", tmp_path / "class" / "nested" / "c.ipynb"])
    assert [(s.student, s.path.name) for s in inputs.submissions] == \
        [("a", "a.ipynb"), ("b", "b.ipynb"), ("hw_1", "hw (1).ipynb"), ("c", "c.ipynb")]
    assert inputs.roots == [(tmp_path / "class").resolve()]


def test_folder_of_submission_folders(tmp_path):
    """submissions/<student>/... (what the CI workflow grades): one submission per folder, the folder's name its id,
    the notebook picked by the same rule as everywhere; the rubric finds each checkpoint beside its notebook."""
    from autograder.rubric.command import checkpoint_path

    notebook(tmp_path / "subs" / "alice" / "vectors.ipynb")
    notebook(tmp_path / "subs" / "alice" / "bert_gru_sentiment.pt", "weights")
    notebook(tmp_path / "subs" / "bob" / "hw" / "Copy of vectors.ipynb")
    (tmp_path / "subs" / "carol").mkdir()  # nothing handed in: a row that says so
    (tmp_path / "subs" / ".git").mkdir()
    inputs = discover([tmp_path / "subs"], notebook="vectors.ipynb")
    assert [(s.student, s.path.relative_to(tmp_path / "subs").as_posix(), s.note) for s in inputs.submissions] == \
        [("alice", "alice/vectors.ipynb", ""), ("bob", "bob/hw/Copy of vectors.ipynb", ""),
         ("carol", "carol/vectors.ipynb", "no notebook was submitted")]
    assert "folder of submission folders, 3 submission(s)" in inputs.layouts[0]
    checkpoints = [checkpoint_path(s.path, s.student, "bert_gru_sentiment.pt", None) for s in inputs.submissions[:2]]
    assert checkpoints[0].is_file() and len(set(checkpoints)) == 2


@pytest.mark.parametrize("layout", ["folders", "gradescope", "nbgrader"])
def test_every_layout_refuses_links_out_and_gives_fifos_and_dangling_links_a_row(tmp_path, layout):
    import os

    outside = notebook(tmp_path / "answer_key.ipynb")
    root = {"folders": tmp_path / "subs", "gradescope": tmp_path / "export",
            "nbgrader": tmp_path / "course" / "submitted"}[layout]
    if layout == "gradescope":
        gradescope_export(root)

    def holder(student: str) -> Path:  # where the student's notebook goes (nbgrader: <student>/<assignment>/)
        folder = root / student / "vectors" if layout == "nbgrader" else root / student
        folder.mkdir(parents=True)
        return folder

    (holder("linked") / "vectors.ipynb").symlink_to(outside)  # the answer key, elsewhere on the machine
    os.mkfifo(holder("fifo") / "vectors.ipynb")
    (holder("dangling") / "vectors.ipynb").symlink_to(tmp_path / "nowhere.ipynb")
    notebook(tmp_path / "elsewhere" / "vectors" / "vectors.ipynb")
    (root / "linked_folder").symlink_to(tmp_path / "elsewhere", target_is_directory=True)  # the folder a link out
    inputs = discover([root], notebook="vectors.ipynb", assignment="vectors")
    got = {s.student: s for s in inputs.submissions}
    assert {"linked", "fifo", "dangling"} <= set(got)
    assert "outside the submissions folder" in got["linked"].refused
    assert got["fifo"].path.name == "vectors.ipynb" and not got["fifo"].refused
    assert got["dangling"].path.is_symlink() and not got["dangling"].refused
    assert all(s.refused for name, s in got.items() if name.startswith("linked"))


def test_a_grading_output_folder_inside_the_submissions_is_no_student(tmp_path):
    notebook(tmp_path / "subs" / "alice" / "vectors.ipynb")
    out = tmp_path / "subs" / "results"
    notebook(out / ".staged" / "0123" / "vectors.ipynb")  # a run's own copy, left by a run that was killed
    (out / ".grading.lock").write_text("")
    notebook(tmp_path / "subs" / "bob" / ".inputs" / "x" / "vectors.ipynb")  # inside a hidden folder: not his work
    notebook(tmp_path / "subs" / "carol" / "vectors.ipynb")  # a file named as the lock beside her notebook: hers
    (tmp_path / "subs" / "carol" / ".grading.lock").write_text("")
    inputs = discover([tmp_path / "subs"], notebook="vectors.ipynb")
    assert [(s.student, s.note) for s in inputs.submissions] == [("alice", ""), ("bob", "no notebook was submitted"),
                                                                  ("carol", "")]


@pytest.mark.parametrize("yaml", [True, False], ids=["pyyaml", "without-pyyaml"])
def test_gradescope_export_folder(tmp_path, monkeypatch, yaml):
    if not yaml:
        monkeypatch.setitem(sys.modules, "yaml", None)  # the fallback reader
    inputs = discover([gradescope_export(tmp_path / "export")], notebook="vectors.ipynb")
    got = {s.student: (s.path.relative_to(tmp_path / "export").as_posix(), s.note) for s in inputs.submissions}
    assert got["1815"] == ("submission_111/vectors.ipynb", "")
    path, note = got["1906+alan@example.edu"]  # a group: every member, SID else e-mail
    assert path == "submission_222/work/vectors (2).ipynb" and "named like the assignment's notebook" in note
    assert "also submitted, not graded: scratch.ipynb" in note
    assert got["submission_333"][1] == "no notebook was submitted"
    assert "Gradescope export" in inputs.layouts[0]


def test_gradescope_zip_is_extracted_safely(tmp_path):
    export = gradescope_export(tmp_path / "export")
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for p in export.rglob("*"):
            if p.is_file():
                zf.write(p, "assignment_export/" + p.relative_to(export).as_posix())
        zf.writestr("../escape.ipynb", "{}")
        zf.writestr("/abs/escape.ipynb", "{}")
        zf.writestr("assignment_export/submission_111/run.sh", "rm -rf /")
    folder, _ = extract_zip(archive, tmp_path / "unpacked")
    assert (folder / "submission_metadata.yml").is_file()
    assert not (tmp_path / "escape.ipynb").exists() and not list((tmp_path / "unpacked").rglob("run.sh"))
    inputs = discover([archive], notebook="vectors.ipynb", unpack_dir=tmp_path / "unpacked2")
    assert sorted(s.student for s in inputs.submissions) == ["1815", "1906+alan@example.edu", "submission_333"]


def test_two_exports_of_one_name_keep_their_own_notebooks(tmp_path):
    archives = []
    for folder, text in (("a", "alice's"), ("b", "bob's")):
        (tmp_path / folder).mkdir()
        archive = tmp_path / folder / "export.zip"  # Gradescope names every export alike
        with zipfile.ZipFile(archive, "w") as zf:
            zf.writestr(f"{folder}_student/hw.ipynb", text)
        archives.append(archive)
    inputs = discover(archives, unpack_dir=tmp_path / "unpacked")
    assert sorted(s.path.read_text() for s in inputs.submissions) == ["alice's", "bob's"]


def test_a_zip_bomb_stops_at_the_total_limit(tmp_path, monkeypatch):
    import autograder.submissions as subs

    monkeypatch.setattr(subs, "MAX_ZIP_BYTES", 2500)
    archive = tmp_path / "bomb.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for i in range(4):
            zf.writestr(f"s{i}/hw.ipynb", "x" * 1000)
    folder, _ = extract_zip(archive, tmp_path / "unpacked")
    assert sum(p.stat().st_size for p in folder.rglob("*.ipynb")) == 2500


def _zip_of(archive: Path, members: dict[str, bytes], compression=zipfile.ZIP_STORED) -> Path:
    with zipfile.ZipFile(archive, "w", compression=compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return archive


def _declare_size(archive: Path, name: str, size: int) -> None:
    """Rewrite the size a member's headers (local and central) declare, leaving its data as it is."""
    data = bytearray(archive.read_bytes())
    # (signature, offset of the uncompressed size, offset of the file name) of a local and a central header
    for signature, size_at, name_at in ((b"PK\x03\x04", 22, 30), (b"PK\x01\x02", 24, 46)):
        at = data.find(signature)
        while data[at + name_at:at + name_at + len(name)] != name.encode():
            at = data.find(signature, at + 4)
        struct.pack_into("<I", data, at + size_at, size)
    archive.write_bytes(bytes(data))


def _refusals(archive: Path, tmp_path: Path) -> dict[str, str]:
    inputs = discover([archive], unpack_dir=tmp_path / "unpacked")
    return {s.student: s.refused for s in inputs.submissions}


def test_a_zip_member_over_the_size_limit_is_refused_with_its_own_size(tmp_path, monkeypatch):
    """The copy stops at the limit; the row gives the member's size, not the cut copy's (which reads as the limit
    itself), in bytes where megabytes would round to the limit's number."""
    import autograder.submissions as subs

    monkeypatch.setattr(subs, "MAX_EXTRACTED_BYTES", 1 << 20)
    members = {"big.ipynb": os.urandom(3 << 20), "near.ipynb": os.urandom((1 << 20) + 100), "fine.ipynb": b"{}"}
    for compression in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        archive = _zip_of(tmp_path / f"export{compression}.zip", members, compression)
        assert _refusals(archive, tmp_path) == {"big": "big.ipynb is 3 MB, over the 1 MB limit",
                                                "near": "near.ipynb is 1,048,676 bytes, over the 1 MB limit",
                                                "fine": ""}


def test_a_zip_header_that_lies_about_a_members_size_is_not_believed(tmp_path, monkeypatch):
    """Declared far larger than its compressed data can hold: 'more than' the limit, what the copy showed. Declared
    smaller than its data: the member cannot be read as declared, and its row says so; the zip's other notebooks
    are graded all the same."""
    import autograder.submissions as subs

    monkeypatch.setattr(subs, "MAX_EXTRACTED_BYTES", 1 << 20)
    archive = _zip_of(tmp_path / "export.zip", {"inflated.ipynb": os.urandom(2 << 20), "shrunk.ipynb": b"x" * 5000,
                                                "fine.ipynb": b"{}"}, zipfile.ZIP_DEFLATED)
    _declare_size(archive, "inflated.ipynb", 2**32 - 1)
    _declare_size(archive, "shrunk.ipynb", 1000)
    refused = _refusals(archive, tmp_path)
    assert refused["inflated"] == "inflated.ipynb is more than 1 MB, over the 1 MB limit"
    assert refused["shrunk"].startswith("shrunk.ipynb could not be read from the zip (") and "not graded" in refused["shrunk"]
    assert refused["fine"] == ""


def test_nbgrader_tree(tmp_path):
    course = tmp_path / "course"
    notebook(course / "submitted" / "alice" / "vectors" / "vectors.ipynb")
    notebook(course / "submitted" / "alice" / "vectors" / "timestamp.txt", "2024-02-01")
    notebook(course / "submitted" / "bob" / "vectors" / "Copy of vectors.ipynb")
    notebook(course / "submitted" / "bob" / "other_hw" / "other.ipynb")
    notebook(course / "submitted" / "carol" / "other_hw" / "other.ipynb")  # did not submit this one
    (course / "submitted" / "dave" / "vectors").mkdir(parents=True)
    for arg in (course, course / "submitted"):
        inputs = discover([arg], notebook="vectors.ipynb", assignment="vectors")
        got = {s.student: (s.path.name, s.note) for s in inputs.submissions}
        assert got == {"alice": ("vectors.ipynb", ""), "bob": ("Copy of vectors.ipynb", ""),
                       "dave": ("vectors.ipynb", "no notebook was submitted")}
        assert "nbgrader" in inputs.layouts[0]


MISSING_PART2 = ("part2.ipynb is missing: it was not submitted (part1.ipynb is another notebook of this course, "
                 "graded with its own assignment, not in its place); every check scores 0, as nbgrader scores a "
                 "missing notebook")


@pytest.mark.parametrize("course_folders", [True, False])
def test_a_student_who_forgot_one_notebook_of_an_nbgrader_assignment_is_missing_it(tmp_path, course_folders):
    """An nbgrader assignment of two notebooks, imported as one assignment per notebook (ps_part2): a student who
    submitted part1.ipynb only is missing part2.ipynb (0, as nbgrader scores it), never graded on part1.ipynb; the
    other notebooks are known from the course's source/ (and release/), else from what the class submitted beside
    part2.ipynb."""
    course = tmp_path / "course"
    if course_folders:
        for name in ("part1.ipynb", "part2.ipynb"):
            notebook(course / "source" / "ps" / name)
    for student in ("alice", "bob") if course_folders else ("alice", "bob", "carol"):
        for name in ("part1.ipynb", "part2.ipynb", "data.csv"):
            notebook(course / "submitted" / student / "ps" / name)
    notebook(course / "submitted" / "erin" / "ps" / "part1.ipynb")
    notebook(course / "submitted" / "fred" / "ps" / "part1.ipynb")
    notebook(course / "submitted" / "fred" / "ps" / "Part2-Copy1.ipynb")  # Jupyter's copy: his part2
    notebook(course / "submitted" / "gina" / "ps" / "part1.ipynb")
    notebook(course / "submitted" / "gina" / "ps" / "my answers.ipynb")  # not part1: graded, saying so
    notebook(course / "submitted" / "alice" / "hw0" / "hw0.ipynb")  # another assignment of the course
    inputs = discover([course], notebook="part2.ipynb", assignment="ps_part2")
    got = {s.student: (s.path.name, s.note, s.refused) for s in inputs.submissions}
    assert got["erin"] == ("part2.ipynb", MISSING_PART2, MISSING_PART2)
    # the course's other notebook is graded with its own assignment: nothing to tell its student here
    assert got["alice"] == ("part2.ipynb", "", "")
    assert got["fred"][0] == "Part2-Copy1.ipynb" and not got["fred"][2]
    assert got["gina"] == ("my answers.ipynb", "graded my answers.ipynb: no notebook is named part2.ipynb", "")
    part1 = {s.student: s for s in discover([course], notebook="part1.ipynb", assignment="ps_part1").submissions}
    assert all(s.path.name == "part1.ipynb" and not s.refused for s in part1.values())


def test_other_notebooks_are_told_by_the_class_not_by_one_student(tmp_path):
    """Submission folders (Gradescope's or a folder of them): a notebook beside the assignment's in most folders is
    another notebook of the course (part1.ipynb where part2.ipynb is graded); one student's scratch notebook beside
    it is not, and a single notebook named otherwise is still graded."""
    for student in ("alice", "bob", "carol"):
        notebook(tmp_path / "subs" / student / "part1.ipynb")
        notebook(tmp_path / "subs" / student / "part2.ipynb")
    notebook(tmp_path / "subs" / "alice" / "scratch.ipynb")
    notebook(tmp_path / "subs" / "dave" / "scratch.ipynb")
    notebook(tmp_path / "subs" / "erin" / "part1.ipynb")
    notebook(tmp_path / "subs" / "fred" / "Copy of part2.ipynb")
    got = {s.student: s for s in discover([tmp_path / "subs"], notebook="part2.ipynb").submissions}
    assert got["erin"].refused == got["erin"].note == MISSING_PART2
    assert (got["dave"].path.name, got["dave"].note, got["dave"].refused) == ("scratch.ipynb", "", "")
    assert (got["fred"].path.name, got["fred"].note, got["fred"].refused) == ("Copy of part2.ipynb", "", "")
    one = tmp_path / "one"  # a lone student: nothing tells part1.ipynb from a renamed part2.ipynb
    notebook(one / "erin" / "part1.ipynb")
    [alone] = discover([one], notebook="part2.ipynb").submissions
    assert alone.path.name == "part1.ipynb" and not alone.refused


@pytest.mark.slow
def test_end_to_end_layouts_resume_and_regrade(example_build, tmp_path, capsys):
    key = example_build.release / "answer_key.ipynb"
    stub = example_build.assignment / "vectors.ipynb"
    export = tmp_path / "export"
    export.mkdir()
    (export / "submission_metadata.yml").write_text(METADATA)
    for folder, source in (("submission_111", key), ("submission_222", stub)):
        (export / folder).mkdir()
        shutil.copy(source, export / folder / "vectors.ipynb")
    archive = shutil.make_archive(str(tmp_path / "gradescope"), "zip", export)
    tree = tmp_path / "submitted" / "zoe" / "vectors"
    tree.mkdir(parents=True)
    shutil.copy(key, tree / "vectors.ipynb")
    out = tmp_path / "out"
    source = str(example_build.source)
    args = ["grade", source, archive, str(tmp_path / "submitted"), "--out", str(out), "--jobs", "1"]
    assert cli_main(args) == 0
    rows = {r["submission"]: r for r in csv.DictReader((out / "grades.csv").open())}
    assert {k: rows[k]["total"] for k in rows} == \
        {"1815": "11", "1906+alan@example.edu": "0", "submission_333": "0", "zoe": "11"}
    assert rows["submission_333"]["error"] == "no notebook was submitted"  # in the metadata, but none uploaded
    err = capsys.readouterr().err
    assert "done 4, failed 1, pending 0" in err and "graded 4 submission(s)" in err
    summary = (out / "summary.md").read_text()
    assert "4 submission(s): 3 graded, 1 could not be graded" in summary

    assert cli_main(args) == 0  # nothing new: every submission is skipped
    assert "4 submission(s) already graded" in capsys.readouterr().err
    shutil.copy(stub, tree / "vectors.ipynb")  # zoe submits again: only she is graded again
    assert cli_main(args) == 0
    err = capsys.readouterr().err
    assert "3 submission(s) already graded" in err and "graded 1 submission(s)" in err
    rows = {r["submission"]: r for r in csv.DictReader((out / "grades.csv").open())}
    assert rows["zoe"]["total"] == "0" and rows["1815"]["total"] == "11"
    assert cli_main(args[:-2] + ["--regrade", "--quiet"]) == 0  # everything again
    assert len(list(csv.DictReader((out / "grades.csv").open()))) == 4
    shutdown_fork_server()  # the one this process started for --jobs 1


def test_progress_bar_counts(capsys):
    from autograder.grading import Progress
    from autograder.judge import CheckResult
    from autograder.reports.results import SubmissionResult

    bar = Progress(total=4, skipped=1, jobs=2, quiet=False, bar=True)
    ok = SubmissionResult("a", "a.ipynb", [CheckResult("c", "", 1, 1, "passed", "")])
    broken = SubmissionResult("b", "b.ipynb", [CheckResult("c", "", 1, 0, "failed", "")], error="is empty")
    bar.update(ok)
    bar.update(broken)
    bar.finish()
    err = capsys.readouterr().err
    assert "\r[" in err and "3/4" in err and "done 2, failed 1, pending 1" in err and err.endswith("\n")


def test_a_folder_of_notebooks_with_students_folders_beside_them_grades_both(tmp_path):
    notebook(tmp_path / "class" / "alice.ipynb")
    notebook(tmp_path / "class" / "CAROL.IPYNB")  # written on another system: still a notebook
    notebook(tmp_path / "class" / "bob" / "vectors.ipynb")
    notebook(tmp_path / "class" / "data" / "x.csv")  # no notebook: no student
    notebook(tmp_path / "class" / ".ipynb_checkpoints" / "alice-checkpoint.ipynb")
    inputs = discover([tmp_path / "class"], notebook="vectors.ipynb")
    assert [(s.student, s.path.name) for s in inputs.submissions] == \
        [("CAROL", "CAROL.IPYNB"), ("alice", "alice.ipynb"), ("bob", "vectors.ipynb")]
    assert "folder of notebooks and submission folders, 3 submission(s)" in inputs.layouts[0]


def test_a_notebook_of_millions_of_json_values_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    """Parsed, `{},` costs the grading process some 25 times its bytes (a 256 MB file, gigabytes): a notebook whose
    objects would cost more than LOAD_FACTOR times its size is refused with its row before it is parsed (scaled
    down: no floor). Commas, brackets and escaped quotes inside strings (a pasted constant, a printed list) count for
    nothing."""
    import json

    from autograder.notebook import load

    monkeypatch.setattr(load, "LOAD_FLOOR_BYTES", 0)
    bloated = tmp_path / "bloated.ipynb"
    bloated.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {"x": [{}] * 2000}, "cells": []}))
    with pytest.raises(load.NotebookError, match="more than 4 times its size.*Clear its outputs"):
        load.read_notebook(bloated)
    fine = tmp_path / "fine.ipynb"
    source = "x = '" + ',[{\\"' * 5000 + "'\n"
    fine.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                                "cells": [{"cell_type": "code", "metadata": {}, "source": source, "outputs": [],
                                           "execution_count": None}]}))
    nb, _ = load.read_notebook(fine)
    assert nb.cells[0].source == source


def test_students_own_zips_are_named_by_the_zip_given_alone_or_in_a_folder(tmp_path):
    """otter's grader.export() (or a student zipping their work) gives each student a zip holding hw1.ipynb: each zip
    is that student's submission, named by the zip (they were all "hw1", "hw1-2", and a folder of zips was
    "0 submission(s)"). A zip of several notebooks gives each notebook's row."""
    folder = tmp_path / "downloads"
    folder.mkdir()
    for student in ("alice_hw1", "bob_hw1"):
        _zip_of(folder / f"{student}.zip", {"hw1.ipynb": b"{}", "hw1.pdf": b"%PDF"})
    _zip_of(folder / "group.zip", {"carol.ipynb": b"{}", "dan.ipynb": b"{}"})
    inputs = discover([folder], unpack_dir=tmp_path / "unpacked")
    assert sorted(s.student for s in inputs.submissions) == ["alice_hw1", "bob_hw1", "carol", "dan"]
    alone = discover([folder / "alice_hw1.zip"], unpack_dir=tmp_path / "unpacked2")
    assert [(s.student, s.path.name) for s in alone.submissions] == [("alice_hw1", "hw1.ipynb")]


# -- long ids: capped in bytes, a search for a free folder name that ends ------------------------------------------

def test_ids_are_capped_in_bytes_never_inside_a_character_and_case_twins_stay_apart():
    """A file name's limit is 255 bytes, not characters: 90 Chinese characters are 270 bytes (they were kept whole,
    under the 120-character cap, and no folder could be made). Twins of 254 bytes differing only in case stay apart
    also where the file system ignores case, their numbers within the limit too."""
    from autograder.submissions import MAX_ID_BYTES, NAME_MAX, cut_to_bytes, numbered_id, safe_id, unique_ids

    cjk, deseret = "张" * 45 + "伟" * 45, "\U00010400" * 63 + "ab"  # 270 bytes; a 4-byte letter with a lower case
    twins = [deseret, deseret.lower(), "Ж" * 127, "ж" * 127]
    assert all(len(t.encode()) == 254 for t in twins)
    ids = unique_ids([cjk, cjk, *twins])
    assert [len(i.encode()) <= MAX_ID_BYTES < NAME_MAX for i in ids] == [True] * 6
    assert ids[0] == "张" * 45 + "伟" * 21 and ids[1] == ids[0] + "-2"  # 198 bytes: whole characters only
    assert ids[3].endswith("-2") and ids[5].endswith("-2") and len({i.casefold() for i in ids}) == 6
    assert cut_to_bytes("ab张", 4) == "ab" and cut_to_bytes("ab张", 5) == "ab张"
    assert numbered_id("张" * 100, 12) == "张" * 65 + "-12"
    assert safe_id("é" * 150).encode() == ("é" * 100).encode()


def test_the_search_for_a_free_result_folder_ends_with_a_name_that_fits_or_says_why(tmp_path, monkeypatch):
    """Ids longer than the folder's file system takes (given whole, as a caller's own ids may be) are cut to fit
    it; a folder that takes no name at all stops the run with a clear error: the search once went on forever,
    every candidate "name too long"."""
    from autograder.grading import resume
    from autograder.grading.outdir import OutDirUnusable

    calls = []

    def counted(then):
        def check(folder):
            calls.append(folder)
            assert len(calls) < 1000, "the search for a free name did not end"
            return then(folder)
        return check

    monkeypatch.setattr(resume, "not_a_result_folder", counted(resume.not_a_result_folder))
    out = tmp_path / "out"
    out.mkdir()
    paths = [tmp_path / "a.ipynb", tmp_path / "b.ipynb"]
    long_id = "张" * 90
    ids, moved = resume.apart_from_earlier(out, paths, [long_id, long_id + "x"], [False, False])
    assert len(set(ids)) == 2 and moved == set()
    for name in ids:
        assert len(name.encode()) <= resume.id_bytes(out)
        (out / name).mkdir()  # each a folder this file system takes
    monkeypatch.setattr(resume.os, "pathconf", lambda *a: 143)  # eCryptfs: shorter names still
    assert all(len(i.encode()) <= 143 - 55 for i in resume.apart_from_earlier(out, paths, ids, [False, False])[0])

    calls.clear()
    no_name_fits = counted(lambda folder: True)
    monkeypatch.setattr(resume, "not_a_result_folder", no_name_fits)
    with pytest.raises(OutDirUnusable, match="no folder for the result of"):
        resume.apart_from_earlier(out, paths, ["alice", "bob"], [False, False])


def test_a_name_moved_aside_differs_from_every_other_id_in_more_than_case(tmp_path):
    """Bob's folder holds another file's result: he becomes Bob-3, not Bob-2, which a Mac or Windows takes for the
    folder of the student named bob-2."""
    from autograder.grading.resume import MARKER, apart_from_earlier

    out = tmp_path / "out"
    (out / "Bob").mkdir(parents=True)
    (out / "Bob" / MARKER).write_text('{"origin": "/elsewhere/Bob.ipynb", "notebook": "0"}')
    paths = [notebook(tmp_path / "Bob.ipynb"), notebook(tmp_path / "bob-2.ipynb")]
    assert apart_from_earlier(out, paths, ["Bob", "bob-2"], [True, True]) == (["Bob-3", "bob-2"], {0})


def test_zip_members_and_zips_named_past_the_file_name_limit_are_extracted(tmp_path):
    long = "学" * 100  # 300 bytes: no file system takes it as one name
    archive = _zip_of(tmp_path / f"{long[:80]}.zip", {f"{long}/{long}.ipynb": b"{}", "b.ipynb": b"{}"})  # 244 bytes
    folder, refused = extract_zip(archive, tmp_path / "unpacked")
    got = sorted(folder.rglob("*.ipynb"))
    assert refused == {} and len(got) == 2 and got[0].read_bytes() == b"{}"
    assert all(len(part.encode()) <= 255 for p in got for part in p.relative_to(tmp_path).parts)
    assert got[1].name.endswith(".ipynb") and got[1].name.startswith("学")


@pytest.mark.slow
def test_a_gradescope_export_of_long_multibyte_ids_and_case_twins_grades_every_row(example_build, tmp_path, capsys):
    """The issue's export: a student whose SID is 90 Chinese characters (two of them, alike to the 90th), a group
    whose e-mails join past the limit, and folders of 254 bytes differing only in case: every row, each its own."""
    key = example_build.release / "answer_key.ipynb"
    export = tmp_path / "export"
    export.mkdir()
    sids = {"submission_1": "张" * 90, "submission_2": "张" * 90 + "x", "submission_3": "李" * 90 + "@example.edu"}
    (export / "submission_metadata.yml").write_text("---\n" + "".join(
        f"{folder}:\n  :submitters:\n  - :name: N\n    :sid: '{sid}'\n    :email: ''\n" for folder, sid in sids.items()),
        encoding="utf-8")
    twins = tmp_path / "twins"
    for folder in [export / name for name in sids] + [twins / ("Ж" * 127), twins / ("ж" * 127)]:
        folder.mkdir(parents=True)
        shutil.copy(key, folder / "vectors.ipynb")
    out = tmp_path / "out"
    try:
        assert cli_main(["grade", str(example_build.source), str(export), str(twins), "--out", str(out),
                         "--quiet"]) == 0
    finally:
        shutdown_fork_server()  # the one this process started for --jobs 1
    capsys.readouterr()
    rows = list(csv.DictReader((out / "grades.csv").open(encoding="utf-8")))
    assert len(rows) == 5 and {r["total"] for r in rows} == {"11"}
    assert len({r["submission"].casefold() for r in rows}) == 5


def test_the_notebooks_of_a_folder_of_zips_are_checked_for_links_against_where_they_were_extracted(tmp_path):
    """--out outside the folder of zips (the normal layout): each zip's notebook lies under --out, outside the folder
    given, and is no link out (every one was refused as one); a zip that is itself a link out is."""
    folder = tmp_path / "downloads"
    folder.mkdir()
    for student in ("alice", "bob", "carol"):
        _zip_of(folder / f"{student}_hw1.zip", {"hw1.ipynb": b"{}", "hw1.pdf": b"%PDF", ".OTTER_LOG": b""})
    (folder / "dan_hw1.zip").symlink_to(_zip_of(tmp_path / "solutions.zip", {"hw1.ipynb": b"{}"}))
    unpacked = tmp_path / "elsewhere" / ".inputs"
    got = {s.student: s for s in discover([folder], unpack_dir=unpacked).submissions}
    assert sorted(got) == ["alice_hw1", "bob_hw1", "carol_hw1", "dan_hw1"]
    for student in ("alice_hw1", "bob_hw1", "carol_hw1"):
        root, inside = got[student].found_at
        assert not got[student].refused and unpacked.resolve() in root.parents and (root / inside).is_file()
    assert "reached through a link to a file outside the submissions folder" in got["dan_hw1"].refused
