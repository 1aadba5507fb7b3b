"""The --out folder: one command at a time, ids that never collide with the run's own files, and tables that
list every result the folder holds (issue: a second command on the same folder, a notebook named grades.csv,
a late notebook graded into the folder)."""
from __future__ import annotations

import csv
import subprocess
import sys
import textwrap

import pytest

from autograder.grading import GradeOptions, grade
from autograder.grading.grader import MAX_MESSAGE_CHARS, bounded
from autograder.grading.outdir import OutDirBusy, claim
from autograder.submissions import RUN_FILES, submission_ids


def test_a_second_process_cannot_claim_a_folder_being_graded_into(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from autograder.grading.outdir import claim
        with claim(Path({str(tmp_path)!r})):
            print("held", flush=True)
            time.sleep(30)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(OutDirBusy, match=f"pid {holder.pid}"):
            with claim(tmp_path):
                pass
    finally:
        holder.kill()
        holder.wait()
    with claim(tmp_path):  # released with the process that held it, however it ended
        with claim(tmp_path):  # and re-entrant within one process
            pass


def test_a_busy_folder_is_a_clear_error_of_the_command(tmp_path, example_build, submission):
    from autograder.entrypoints import command_line

    nb = submission("s.ipynb")
    with claim(tmp_path / "out"):
        pass  # the folder exists; now another process holds it:
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from pathlib import Path
        from autograder.grading.outdir import claim
        with claim(Path({str(tmp_path / 'out')!r})):
            print("held", flush=True)
            time.sleep(30)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        code = command_line(["grade", str(example_build.release), str(nb), "--out", str(tmp_path / "out"), "--quiet"])
        assert code == 2
        assert not (tmp_path / "out" / "s").exists()
    finally:
        holder.kill()
        holder.wait()


def test_ids_never_take_the_name_of_a_file_the_run_writes():
    names = [f"{name}.ipynb" for name in sorted(RUN_FILES)] + ["GRADES.CSV.ipynb", "hw (1).ipynb"]
    ids = submission_ids(names)
    assert not {i.lower() for i in ids} & RUN_FILES
    assert ids[-1] == "hw_1" and len(set(ids)) == len(ids)


def test_grades_csv_and_summary_list_every_result_in_the_folder(tmp_path, example_release, submission):
    out = tmp_path / "out"
    first, late = submission("first.ipynb"), submission("grades.csv.ipynb")
    grade(example_release, [first], GradeOptions(out, quiet=True))
    grade(example_release, [late], GradeOptions(out, quiet=True))
    rows = list(csv.DictReader((out / "grades.csv").open()))
    assert sorted(r["submission"] for r in rows) == ["first", "grades.csv_submission"]
    assert (out / "grades.csv").is_file() and (out / "grades.csv_submission" / "results.json").is_file()
    assert "2 submission" in (out / "summary.md").read_text()


def test_a_message_is_bounded_whatever_the_worker_sent():
    huge = "x" * (30 * 2**20)
    cut = bounded(huge, MAX_MESSAGE_CHARS)
    assert len(cut) < MAX_MESSAGE_CHARS + 100 and cut.endswith("more characters not shown)")
    assert bounded("short", MAX_MESSAGE_CHARS) == "short"
