"""The --out folder: one command at a time, ids that never collide with the run's own files, and tables that
list every result the folder holds (issue: a second command on the same folder, a notebook named grades.csv,
a late notebook graded into the folder)."""
from __future__ import annotations

import contextlib
import csv
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autograder.grading import GradeOptions, grade
from autograder.grading.grader import MAX_MESSAGE_CHARS, bounded
from autograder.grading.outdir import OutDirBusy, claim
from autograder.submissions import RUN_FILES, submission_ids


@contextlib.contextmanager
def held_by_another_process(folder):
    """Another process holding the claim on `folder` (as a second command would) while the block runs; yields it."""
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from pathlib import Path
        from autograder.grading.outdir import claim
        with claim(Path({str(folder)!r})):
            print("held", flush=True)
            time.sleep(30)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.kill()
        holder.wait()


def test_a_second_process_cannot_claim_a_folder_being_graded_into(tmp_path):
    with held_by_another_process(tmp_path) as holder:
        with pytest.raises(OutDirBusy, match=f"pid {holder.pid}"):
            with claim(tmp_path):
                pass
    with claim(tmp_path):  # released with the process that held it, however it ended
        with claim(tmp_path):  # and re-entrant within one process
            pass


def test_a_busy_folder_is_a_clear_error_of_the_command(tmp_path, example_build, submission):
    from autograder.entrypoints import command_line

    nb = submission("s.ipynb")
    with claim(tmp_path / "out"):
        pass  # the folder exists; now another process holds it:
    with held_by_another_process(tmp_path / "out"):
        code = command_line(["grade", str(example_build.release), str(nb), "--out", str(tmp_path / "out"), "--quiet"])
        assert code == 2
        assert not (tmp_path / "out" / "s").exists()


def test_ids_never_take_the_name_of_a_file_the_run_writes():
    names = [f"{name}.ipynb" for name in sorted(RUN_FILES)] + ["GRADES.CSV.ipynb", "hw (1).ipynb"]
    ids = submission_ids(names)
    assert not {i.lower() for i in ids} & RUN_FILES
    assert ids[-1] == "hw_1" and len(set(ids)) == len(ids)


def test_no_cell_of_grades_csv_reads_as_a_formula():
    from autograder.reports.results import SubmissionResult
    from autograder.reports.table import grades_csv

    ids = submission_ids(["+1+1.ipynb", "-2+3@A1.ipynb", "@SUM(A1).ipynb", "=cmd.ipynb", "a@b.ipynb"])
    assert not any(i[:1] in "=+-@" for i in ids) and ids[-1] == "a@b"
    broken = SubmissionResult("cmd", "=cmd.ipynb", [], error="=cmd.ipynb is not a notebook")
    row = grades_csv([broken], []).splitlines()[1]
    assert row.endswith(",'=cmd.ipynb is not a notebook")


def test_grades_csv_and_summary_list_every_result_in_the_folder(tmp_path, example_release, submission):
    out = tmp_path / "out"
    first, late = submission("first.ipynb"), submission("grades.csv.ipynb")
    grade(example_release, [first], GradeOptions(out, quiet=True))
    grade(example_release, [late], GradeOptions(out, quiet=True))
    rows = list(csv.DictReader((out / "grades.csv").open()))
    assert sorted(r["submission"] for r in rows) == ["first", "grades.csv_submission"]
    assert (out / "grades.csv").is_file() and (out / "grades.csv_submission" / "results.json").is_file()
    assert "2 submission" in (out / "summary.md").read_text()


def test_a_run_with_nothing_left_to_grade_keeps_the_isolation_line(tmp_path, example_release, submission):
    out, first = tmp_path / "out", submission("first.ipynb")
    grade(example_release, [first], GradeOptions(out, quiet=True))
    line = next(x for x in (out / "summary.md").read_text().splitlines() if x.startswith("Isolation:"))
    grade(example_release, [first], GradeOptions(out, quiet=True))  # already graded: no worker starts
    assert line in (out / "summary.md").read_text()


def test_isolation_line_counts_each_confinement_the_results_record():
    from autograder.grading.run import isolation_line
    from autograder.reports.results import SubmissionResult

    def result(name, confinement):
        return SubmissionResult(name, f"{name}.ipynb", [], confinement=confinement)

    full, weak = "isolated: own PID namespace", "restricted: no namespaces (seccomp and Landlock only)"
    assert isolation_line([result("a", full), result("b", "")], "") == f"Isolation: full confinement ({full})."
    mixed = isolation_line([result("a", full), result("b", weak), result("c", weak)], full)
    assert mixed.startswith("Isolation: 2 submission(s) with restricted confinement") and "1 submission(s) with full" in mixed
    assert isolation_line([], full) == f"Isolation: full confinement ({full})."


def not_final_class():
    """Two final grades (11, 7), one not final (9 decided, 2 ungraded) and one not graded at all (every check
    ungraded: its grading process kept dying)."""
    from autograder.judge import CheckResult
    from autograder.reports.results import SubmissionResult

    def row(sub: str, statuses: list[tuple[str, float]], error: str = "") -> SubmissionResult:
        checks = [CheckResult(name, "1. Part", points, score if status != "ungraded" else 0.0, status,
                              "not graded: a grader problem" if status == "ungraded" else "", "visible",
                              grader_problem="a grader problem" if status == "ungraded" else "")
                  for (name, points), (status, score) in zip((("a", 9.0), ("b", 2.0)), statuses)]
        return SubmissionResult(sub, f"{sub}.ipynb", checks, error=error)

    return [row("ann", [("passed", 9), ("passed", 2)]), row("ben", [("partial", 5), ("passed", 2)]),
            row("cat", [("passed", 9), ("ungraded", 0)]),
            row("dan", [("ungraded", 0), ("ungraded", 0)], error="not graded: a grader problem")]


def test_a_grade_that_is_not_final_has_no_total_and_is_in_no_class_figure(tmp_path):
    """Uploading the total column never uploads a grade too low: a row with ungraded checks has an empty total
    (its checks and its reason stay); the class figures are over the final grades and say how many were left
    out."""
    from autograder.reports.class_statistics import class_statistics
    from autograder.reports.summary import summary_markdown
    from autograder.reports.table import grades_csv

    results = not_final_class()
    rows = {r["submission"]: r for r in csv.DictReader(grades_csv(results, ["a", "b"]).splitlines())}
    assert {sub: r["total"] for sub, r in rows.items()} == {"ann": "11", "ben": "7", "cat": "", "dan": ""}
    assert (rows["cat"]["a"], rows["cat"]["b"]) == ("9", "ungraded")
    assert rows["cat"]["error"] == "not final: 1 check(s) ungraded (grader problem)"
    assert rows["dan"]["error"].startswith("not graded")
    stats = class_statistics(results)
    assert (stats.scores, stats.graded, stats.not_final, stats.errors) == ([7, 11], 2, 1, 1)
    md = summary_markdown(results)
    assert "4 submission(s): 2 graded, 1 could not be graded, 1 not final (left out of the class figures)." in md
    assert "Score: mean 9.00, median 9, min 7, max 11" in md
    assert "**Grades not final**: 2 submission(s)" in md and "left out of the class figures" in md


def test_an_interrupted_run_leaves_grades_csv_listing_every_result_it_wrote(tmp_path, example_release, submission,
                                                                            monkeypatch):
    from autograder.grading import run as run_module
    from autograder.grading.grader import Grader

    monkeypatch.setattr(run_module, "GRADES_EVERY_SECONDS", 1000.0)  # the table is written after the first only
    grade_one, graded = Grader.grade_one, []

    def interrupted_at_the_third(self, path, sub_id, more=False):
        if len(graded) == 2:
            raise KeyboardInterrupt
        graded.append(sub_id)
        return grade_one(self, path, sub_id, more)

    monkeypatch.setattr(Grader, "grade_one", interrupted_at_the_third)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        grade(example_release, [submission(f"{n}.ipynb") for n in "abc"], GradeOptions(out, quiet=True))
    rows = list(csv.DictReader((out / "grades.csv").open()))
    assert [r["submission"] for r in rows] == ["a", "b"]


def test_a_message_is_bounded_whatever_the_worker_sent():
    huge = "x" * (30 * 2**20)
    cut = bounded(huge, MAX_MESSAGE_CHARS)
    assert len(cut) < MAX_MESSAGE_CHARS + 100 and cut.endswith("more characters not shown)")
    assert bounded("short", MAX_MESSAGE_CHARS) == "short"


def test_links_fifos_and_dangling_entries_of_a_folder_each_get_a_row(tmp_path, example_build, example_release,
                                                                     submission):
    import os

    from autograder.submissions import discover

    folder = tmp_path / "subs"
    folder.mkdir()
    submission("good.ipynb").rename(folder / "good.ipynb")
    (folder / "key.ipynb").symlink_to(example_build.release / "answer_key.ipynb")
    (folder / "dangling.ipynb").symlink_to(tmp_path / "nowhere.ipynb")
    os.mkfifo(folder / "fifo.ipynb")
    inputs = discover([folder], "vectors.ipynb")
    results = {r.submission: r for r in grade(example_release, inputs.submissions, GradeOptions(tmp_path / "out",
                                                                                                 quiet=True))}
    assert sorted(results) == ["dangling", "fifo", "good", "key"]
    assert results["good"].score == example_release.max_score - 2  # all but the written answer's (pending)
    assert results["key"].score == 0 and "outside the submissions folder" in results["key"].error
    assert "not a regular file" in results["fifo"].error and "cannot read" in results["dangling"].error


def test_a_result_whose_results_json_is_missing_or_cut_is_written_again(tmp_path, example_release, submission):
    out, nb = tmp_path / "out", submission("s.ipynb")
    grade(example_release, [nb], GradeOptions(out, quiet=True))
    for broken in ('{"score": 1', "{}", '{"score": 11, "tests": []}'):  # cut short by a full disk, emptied by hand
        (out / "s" / "results.json").write_text(broken)
        grade(example_release, [nb], GradeOptions(out, quiet=True))
        assert json.loads((out / "s" / "results.json").read_text())["score"] == example_release.max_score - 2


def test_a_result_of_another_version_of_the_grader_is_graded_again_and_the_run_says_so(tmp_path, example_release,
                                                                                        submission, capsys):
    from autograder.grading.resume import MARKER

    out, nb = tmp_path / "out", submission("s.ipynb")
    grade(example_release, [nb], GradeOptions(out, quiet=True))
    marker = json.loads((out / "s" / MARKER).read_text())
    (out / "s" / "results.json").write_text(json.dumps({"score": 0.0, "tests": []}))  # what an older grader gave
    (out / "s" / MARKER).write_text(json.dumps({**marker, "grader": "an older version"}))
    capsys.readouterr()
    grade(example_release, [nb], GradeOptions(out, quiet=True))
    assert "1 submission(s) in" in capsys.readouterr().err
    assert json.loads((out / "s" / "results.json").read_text())["score"] == example_release.max_score - 2
    grade(example_release, [nb], GradeOptions(out, quiet=True))  # the same version: kept, no word
    assert "another version" not in capsys.readouterr().err


def test_a_full_disk_leaves_no_partial_file_and_the_command_says_so(tmp_path, monkeypatch, capsys):
    import errno
    import os

    from autograder import cli, files

    def no_space(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "replace", no_space)
    with pytest.raises(files.DiskFull, match="no space left"):
        files.write_atomic(tmp_path / "results.json", "{}")
    assert os.listdir(tmp_path) == []

    class Full:
        def run(self, args):
            raise files.DiskFull(errno.ENOSPC, "no space left on the device holding out (writing grades.csv)")

    assert cli.run(Full(), None) == 4
    assert "run the same command again" in capsys.readouterr().err


def test_a_folder_replaced_under_a_running_command_stops_it_and_the_new_one_keeps_its_own(tmp_path, example_release,
                                                                                          monkeypatch):
    from autograder.grading import run as run_module
    from autograder.grading.outdir import OutDirLost
    from autograder.grading.staging import STAGED

    out = tmp_path / "out"
    nbs = []
    for name in ("a", "b"):
        nbs.append(tmp_path / f"{name}.ipynb")
        nbs[-1].write_bytes((example_release.dir / "answer_key.ipynb").read_bytes())
    grade_remaining = run_module.Run.grade_remaining

    def folder_replaced_then_graded(run):
        import shutil

        shutil.rmtree(out)  # `rm -rf out` while this command runs, then a new command on it
        (out / STAGED / "theirs").mkdir(parents=True)
        (out / ".grading.lock").write_text("4242")
        grade_remaining(run)

    monkeypatch.setattr(run_module.Run, "grade_remaining", folder_replaced_then_graded)
    with pytest.raises(OutDirLost, match="removed or replaced"):
        grade(example_release, nbs, GradeOptions(out, quiet=True))
    assert sorted(p.name for p in out.iterdir()) == [".grading.lock", STAGED]  # no row of its own written there
    assert (out / STAGED / "theirs").is_dir()  # nor the new command's copies removed


def test_an_out_path_that_is_a_file_or_a_non_positive_jobs_is_one_line_of_error(tmp_path, example_build, submission,
                                                                                 capsys):
    from autograder.entrypoints import command_line

    nb, a_file = submission("s.ipynb"), tmp_path / "results.txt"
    a_file.write_text("notes")
    for out in (a_file, a_file / "inside"):
        assert command_line(["grade", str(example_build.release), str(nb), "--out", str(out), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and "Traceback" not in err and str(a_file) in err
    assert a_file.read_text() == "notes"
    for jobs in ("0", "-2", "two"):
        with pytest.raises(SystemExit) as stop:  # argparse's usage error, before anything is read
            command_line(["grade", str(example_build.release), str(nb), "--out", str(tmp_path / "o"), "--jobs", jobs])
        assert stop.value.code == 2 and "--jobs" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_the_rubric_command_stops_on_a_folder_another_command_grades_into(tmp_path, example_build, submission,
                                                                          capsys):
    from autograder.entrypoints import command_line

    nb = submission("s.ipynb")
    with held_by_another_process(tmp_path / "out"):
        code = command_line(["rubric", str(example_build.release), str(nb), "--out", str(tmp_path / "out"), "--quiet"])
        assert code == 2 and "being graded into by another autograder command" in capsys.readouterr().err


def test_a_notebook_this_machine_may_not_read_is_not_graded_never_zero(tmp_path, example_release, submission,
                                                                       monkeypatch):
    from pathlib import Path

    from autograder.status import UNGRADED

    locked = submission("locked.ipynb")
    read_bytes = Path.read_bytes

    def as_mode_000(path):  # what an unprivileged grader meets with chmod 000 (root reads anything)
        if path.name == "locked.ipynb":
            raise PermissionError(13, "Permission denied")
        return read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", as_mode_000)
    [result] = grade(example_release, [locked], GradeOptions(tmp_path / "out", quiet=True, jobs=1))
    assert result.ungraded and all(c.status == UNGRADED for c in result.checks)
    assert "cannot read locked.ipynb: Permission denied" in result.error


def test_a_run_whose_output_nobody_reads_any_more_goes_on(tmp_path, example_build, submission):
    """`autograder grade ... 2>&1 | head -1`: the reader closes the pipe after one line; the run grades everything
    and writes its tables all the same."""
    subs = tmp_path / "subs"
    subs.mkdir()
    for i in range(3):
        submission(f"subs/s{i}.ipynb")
    command = [sys.executable, "-m", "autograder", "grade", str(example_build.release), str(subs), "--out",
               str(tmp_path / "out")]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    proc.stdout.readline()
    proc.stdout.close()  # as `head -1` does
    assert proc.wait(timeout=300) == 0
    assert len((tmp_path / "out" / "grades.csv").read_text().splitlines()) == 4
    assert (tmp_path / "out" / "summary.md").exists()


def test_a_submissions_folder_that_is_not_there_or_an_empty_out_is_an_error_not_a_row(tmp_path, example_build):
    from autograder.entrypoints import command_line

    release = str(example_build.release)
    assert command_line(["grade", release, str(tmp_path / "nonexist"), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    assert not (tmp_path / "out").exists()
    assert command_line(["grade", release, str(tmp_path), "--out", "", "--quiet"]) == 2


def test_a_submission_not_graded_at_all_is_one_line_not_one_per_check(example_release, capsys):
    from autograder.grading.grader import ungraded_result
    from autograder.grading.run import report_grader_problems

    whole = ungraded_result(example_release, Path("alice.ipynb"), "alice", "cannot read alice.ipynb: Permission denied")
    report_grader_problems([whole])
    err = capsys.readouterr().err
    assert "1 submission(s) not graded at all" in err and "  - alice: cannot read alice.ipynb" in err
    assert "check(s) could not be graded here" not in err and len(err.splitlines()) == 3


def test_another_file_of_the_same_name_never_replaces_an_earlier_students_result(tmp_path, example_build, submission,
                                                                                   capsys):
    """sec1/alice.ipynb graded, then sec2/alice.ipynb (another student, other bytes) into the same folder: both
    rows stay. The same file edited is graded again in place; the same bytes from elsewhere are resumed."""
    from autograder.entrypoints import command_line

    out = tmp_path / "out"
    (tmp_path / "sec1").mkdir()
    (tmp_path / "sec2").mkdir()
    first = submission("sec1/alice.ipynb")
    second = submission("sec2/alice.ipynb", replace={"return e / e.sum(dim=dim, keepdim=True)": "return e"})
    run = ["grade", str(example_build.release), "--out", str(out), "--quiet"]
    assert command_line(run[:2] + [str(first)] + run[2:]) == 0
    assert command_line(run[:2] + [str(second)] + run[2:]) == 0
    assert "graded as alice-2" in capsys.readouterr().err
    rows = {r["submission"]: r for r in csv.DictReader((out / "grades.csv").open())}
    assert set(rows) == {"alice", "alice-2"} and rows["alice"]["total"] != rows["alice-2"]["total"]
    capsys.readouterr()
    # both again, in the other order: each file keeps its id and is resumed, none graded twice
    assert command_line(run[:2] + [str(second), str(first)] + run[2:]) == 0
    assert "graded as" not in capsys.readouterr().err and sorted(p.name for p in out.iterdir() if p.is_dir()) == \
        ["alice", "alice-2"]
    first.write_text(second.read_text())  # the same file, edited: graded again under its own id
    assert command_line(run[:2] + [str(first)] + run[2:]) == 0
    rows = {r["submission"]: r for r in csv.DictReader((out / "grades.csv").open())}
    assert set(rows) == {"alice", "alice-2"} and rows["alice"]["total"] == rows["alice-2"]["total"]


def test_a_folder_of_out_that_is_no_result_is_never_written_into(tmp_path, example_release, submission, capsys):
    out = tmp_path / "course"  # `--out .` in a course folder: its release/ is no result
    (out / "release").mkdir(parents=True)
    (out / "release" / "manifest.json").write_text("{}")
    nb = submission("release.ipynb")
    grade(example_release, [nb], GradeOptions(out, quiet=True))
    assert sorted(p.name for p in (out / "release").iterdir()) == ["manifest.json"]
    assert json.loads((out / "release-2" / "results.json").read_text())["score"] == example_release.max_score - 2
    assert "graded as release-2" in capsys.readouterr().err
    grade(example_release, [nb], GradeOptions(out, quiet=True))  # resumed under the same name, not release-3
    assert not (out / "release-3").exists()


def test_a_submission_whose_every_check_the_reference_fails_says_why(example_release, capsys):
    from dataclasses import replace

    from autograder.grading.grader import ungraded_result
    from autograder.grading.run import report_grader_problems

    whole = ungraded_result(example_release, Path("alice.ipynb"), "alice", "x")
    whole = replace(whole, error="", checks=[replace(c, grader_problem="the reference solution gets 0/1 on this "
                                                     "check here: this assertion failed") for c in whole.checks])
    report_grader_problems([whole])
    assert "  - alice: the reference solution gets 0/1 on this check here" in capsys.readouterr().err
