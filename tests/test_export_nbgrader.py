"""nbgrader export: real `nbgrader generate_assignment` and `nbgrader autograde` on the exported course,
this project's grades written into the same gradebook, and a whole course round trip with nbgrader's own
commands (release, fetch, submit, collect, `autograder nbgrader-grade`, release_feedback, fetch_feedback, export)
with a late submission."""
from __future__ import annotations

import base64
import copy
import csv
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import nbformat
import pytest

from autograder.export.gradebook import course_of, grade_into_gradebook, scores_into_gradebook
from autograder.export.nbgrader import (
    NBGRADER_KEYS, PROJECT_FILE, SETUP_ID, check_grade_ids, default_course, export_nbgrader,
)
from tests.conftest import EXAMPLE_SOURCE

pytest.importorskip("nbgrader")

BROKEN = {"softmax": ("dim=dim", "dim=-1")}  # right along the last dimension only: partial credit


def nbgrader(course: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    nbgrader_bin = Path(sys.executable).with_name("nbgrader")
    cmd = [str(nbgrader_bin)] if nbgrader_bin.exists() else [sys.executable, "-m", "nbgrader"]
    # a virtual environment over the system's packages: nbconvert's templates lie under the system's prefix
    data = os.pathsep.join(filter(None, [os.environ.get("JUPYTER_PATH"), str(Path(sys.base_prefix) / "share" / "jupyter")]))
    proc = subprocess.run([*cmd, *args], cwd=course, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONWARNINGS": "ignore", "JUPYTER_PATH": data, **env})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def filled(release_nb, source_nb, broken: dict[str, tuple[str, str]] | None = None):
    """A student's submission: nbgrader's release version with the solutions written in."""
    nb = copy.deepcopy(release_nb)
    answers = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in source_nb.cells}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            text = re.sub(r"[ \t]*### (BEGIN|END) SOLUTION\n?", "", answers[meta["grade_id"]])
            if meta["grade_id"] in (broken or {}):
                text = text.replace(*broken[meta["grade_id"]])
            cell.source = text
    return nb


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("nbgrader")
    source = root / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    course = export_nbgrader(str(source), root / "course")
    return source, course


def test_export_tree(course):
    source, course_dir = course
    assert course_dir == source.parent.parent / "course"
    assert "c.CourseDirectory.course_id = 'course'" in (course_dir / "nbgrader_config.py").read_text()
    # where the assignment came from: nbgrader-grade finds it from the course folder
    assert json.loads((course_dir / PROJECT_FILE).read_text())["assignments"] == {"vectors": str(source.resolve())}
    nb = nbformat.read(course_dir / "source" / "vectors" / "vectors.ipynb", as_version=4)
    for cell in nb.cells:  # only nbgrader's own keys in its metadata; ours beside it
        assert set(cell.metadata.get("nbgrader", {})) <= NBGRADER_KEYS
    ids = check_grade_ids(nb)
    assert ids["normalize_test"] == "normalize_test"
    assert ids["tiny layer: forward with given weights"] == "ag_tiny_layer_forward_with_given_weights"
    assert len(ids) == 6
    setup = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == SETUP_ID)
    assert "### BEGIN HIDDEN TESTS" in setup.source
    packed = re.search(r"unpack\('([^']+)'\)", setup.source).group(1)
    reference_source, tests, _ = json.loads(zlib.decompress(base64.b64decode(packed)))
    assert "v.norm(dim=-1, keepdim=True)" in reference_source and tests


def _grade_ids(nb) -> list:
    return [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]


def test_a_hidden_check_of_a_part_without_test_cells_follows_its_section(course):
    """Part "3. Tiny layer" has no test cell: its hidden check's cell follows the last cell of the section under "## 3.
    A tiny layer" (the heading numbered like the part), before the next part's heading, not at the notebook's end."""
    _, course_dir = course
    nb = nbformat.read(course_dir / "source" / "vectors" / "vectors.ipynb", as_version=4)
    ids = _grade_ids(nb)
    tiny = ids.index("ag_tiny_layer_forward_with_given_weights")
    question = next(i for i, c in enumerate(nb.cells) if c.source.startswith("## 4. Question"))
    assert tiny == question - 1 and "A demo that trains the layer" in nb.cells[tiny - 1].source
    assert nb.cells[-1].metadata["nbgrader"]["grade_id"] == "q_softmax"


def test_a_hidden_check_reading_a_later_cells_name_stays_at_the_end(tmp_path):
    """A hidden check of a part without test cells that reads a name only a later cell binds is not moved up to its
    section (nbgrader's kernel would not have the name yet): its cell stays at the end."""
    source = tmp_path / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    notebook = nbformat.read(source / "vectors.ipynb", as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell("LATE = 2"))
    nbformat.write(notebook, source / "vectors.ipynb")
    (source / "tests" / "test_late.py").write_text(
        "from autograder.testing import check\n\n\n"
        "@check('tiny layer: a late constant', points=1, part='3. Tiny layer')\n"
        "def late(sub, ref):\n    assert sub.LATE == ref.LATE\n")
    course_dir = export_nbgrader(str(source), tmp_path / "course")
    ids = _grade_ids(nbformat.read(course_dir / "source" / "vectors" / "vectors.ipynb", as_version=4))
    assert ids[-1] == "ag_tiny_layer_a_late_constant"
    assert ids.index("ag_tiny_layer_forward_with_given_weights") < ids.index("q_softmax")


@pytest.mark.slow
def test_generate_autograde_and_gradebook(course, tmp_path):
    from nbgrader.api import Gradebook

    source, course_dir = course
    nbgrader(course_dir, "generate_assignment", "vectors", "--force")
    release_nb = nbformat.read(course_dir / "release" / "vectors" / "vectors.ipynb", as_version=4)
    # the student version has neither solutions nor the reference behind the hidden tests
    text = nbformat.writes(release_nb)
    assert "keepdim=True)\\n" not in text and "_AgKernelChecks" not in text and "BEGIN HIDDEN" not in text
    source_nb = nbformat.read(course_dir / "source" / "vectors" / "vectors.ipynb", as_version=4)
    for student, broken in (("alice", {}), ("bob", BROKEN)):
        folder = course_dir / "submitted" / student / "vectors"
        folder.mkdir(parents=True)
        nbformat.write(filled(release_nb, source_nb, broken), folder / "vectors.ipynb")
        (folder / "timestamp.txt").write_text("2025-01-15 12:00:00.000000 UTC")

    nbgrader(course_dir, "autograde", "vectors")
    nbgrader(course_dir, "generate_feedback", "vectors")  # feedback must not show the hidden sections
    feedback = (course_dir / "feedback" / "alice" / "vectors" / "vectors.html").read_text()
    assert "_AgKernelChecks" not in feedback and "BEGIN HIDDEN TESTS" not in feedback
    db = f"sqlite:///{course_dir / 'gradebook.db'}"

    def scores():
        with Gradebook(db) as gb:
            return {s: {g.name: g.auto_score for g in gb.find_submission("vectors", s).notebooks[0].grades}
                    for s in ("alice", "bob")}

    by_nbgrader = scores()
    assert sum(v for v in by_nbgrader["alice"].values() if v) == 11  # every autograded point
    assert by_nbgrader["alice"]["q_softmax"] is None  # the written answer waits for formgrader
    assert by_nbgrader["bob"]["ag_softmax_values_along_every_dim"] == pytest.approx(1.0)  # 1 of 3 dims
    assert by_nbgrader["bob"]["softmax_public"] == 1.0

    # this project's grades, written over nbgrader's own: the same cells, the same scores here
    with Gradebook(db) as gb:
        for s in ("alice", "bob"):
            for g in gb.find_submission("vectors", s).notebooks[0].grades:
                g.auto_score = None
        gb.db.commit()
    # nbgrader left its autograded copy read-only, which only root could open for writing: it is replaced
    autograded = course_dir / "autograded" / "alice" / "vectors" / "vectors.ipynb"
    before = autograded.stat()
    totals = grade_into_gradebook(str(source), course_dir, quiet=True)
    assert totals == {"alice": 11, "bob": 9}
    after = autograded.stat()
    assert after.st_ino != before.st_ino and after.st_mode == before.st_mode and before.st_mode & 0o222 == 0
    assert scores() == by_nbgrader
    assert (course_dir / "feedback" / "bob" / "vectors" / "vectors.html").is_file()

    nbgrader(course_dir, "export")
    csv = (course_dir / "grades.csv").read_text()
    assert ",alice," in csv and ",bob," in csv and "11.0" in csv and "9.0" in csv

    # the work in "Untitled.ipynb" beside the handout as nbgrader released it (untouched) is what is graded, by the
    # rule of every other path; a student asked for with nothing submitted is named, not graded
    gina = course_dir / "submitted" / "gina" / "vectors"
    gina.mkdir(parents=True)
    nbformat.write(release_nb, gina / "vectors.ipynb")
    nbformat.write(filled(release_nb, source_nb, {}), gina / "Untitled.ipynb")
    assert grade_into_gradebook(str(source), course_dir, ["gina", "carol"], quiet=True) == {"gina": 11}

    # the written answer left as released: 0 without a manual grade, as nbgrader's autograde records it
    erin = course_dir / "submitted" / "erin" / "vectors"
    erin.mkdir(parents=True)
    unanswered = filled(release_nb, source_nb, {})
    for cell, handed_out in zip(unanswered.cells, release_nb.cells):
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "q_softmax":
            cell.source = handed_out.source
    nbformat.write(unanswered, erin / "vectors.ipynb")
    assert grade_into_gradebook(str(source), course_dir, ["erin"], quiet=True) == {"erin": 11}
    with Gradebook(db) as gb:
        written = gb.find_grade("q_softmax", "vectors", "vectors", "erin")
        assert (written.auto_score, written.needs_manual_grade) == (0, False)

    # a submission folder without a notebook: 0 on every grade cell, as nbgrader autograde gives it
    dan = course_dir / "submitted" / "dan" / "vectors"
    dan.mkdir(parents=True)
    (dan / "notes.txt").write_text("the notebook is on my laptop")
    assert grade_into_gradebook(str(source), course_dir, ["dan"], quiet=True) == {"dan": 0}
    with Gradebook(db) as gb:
        grades = gb.find_submission("vectors", "dan").notebooks[0].grades
        assert grades and all(g.auto_score == 0 and not g.needs_manual_grade for g in grades)


def test_the_course_lands_outside_the_project_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    source = tmp_path / "ml-course" / "solutions" / "vectors"
    assert default_course(source) == tmp_path / "home" / "ml-course"
    assert default_course(source, "cs101") == tmp_path / "home" / "cs101"


@pytest.mark.slow
def test_course_round_trip_to_release_feedback_with_a_late_submission(tmp_path, monkeypatch, capfd):
    """nbgrader's own commands hand out, collect and return; `autograder nbgrader-grade`, run from the course
    folder, grades in between. bob submits after the due date under penalty_method = "zero"."""
    from nbgrader.api import Gradebook

    from autograder.entrypoints import command_line
    from autograder.sandbox.forkserver import shutdown_fork_server

    source = tmp_path / "project" / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    exchange.chmod(0o777)
    monkeypatch.chdir(tmp_path / "project")
    assert command_line(["export", "nbgrader", "vectors", "--course", str(tmp_path / "course"),
                         "--course-id", "vectors101"]) == 0
    course = tmp_path / "course"
    with open(course / "nbgrader_config.py", "a") as f:
        f.write(f"c.Exchange.root = {str(exchange)!r}\nc.LateSubmissionPlugin.penalty_method = 'zero'\n")
    nbgrader(course, "generate_assignment", "vectors")
    nbgrader(course, "release_assignment", "vectors")
    source_nb = nbformat.read(course / "source" / "vectors" / "vectors.ipynb", as_version=4)

    def as_student(student: str, *args: str) -> subprocess.CompletedProcess:
        home = tmp_path / student  # each student's own home: nbgrader keeps a cache of submissions there
        home.mkdir(exist_ok=True)
        (home / "nbgrader_config.py").write_text(
            f"c = get_config()\nc.Exchange.root = {str(exchange)!r}\nc.CourseDirectory.course_id = 'vectors101'\n")
        return nbgrader(home, *args, HOME=str(home))

    db = f"sqlite:///{course / 'gradebook.db'}"
    for student, broken in (("alice", {}), ("bob", BROKEN)):
        as_student(student, "fetch_assignment", "vectors")
        mine = tmp_path / student / "vectors" / "vectors.ipynb"
        nbformat.write(filled(nbformat.read(mine, as_version=4), source_nb, broken), mine)
        as_student(student, "submit", "vectors", "--student", student)
        if student == "alice":  # the due date passes between the two submissions
            with Gradebook(db, "vectors101") as gb:
                gb.update_or_create_assignment("vectors", duedate=datetime.datetime.utcnow())
    nbgrader(course, "collect", "vectors")

    monkeypatch.chdir(course)  # graded from the course folder: the course says where the assignment lies
    assert command_line(["nbgrader-grade", "vectors", "--quiet"]) == 0
    assert command_line(["nbgrader-grade", "vectors", "--quiet", "--student", "alcie"]) == 2  # a typo: not success
    shutdown_fork_server()
    for student in ("alice", "bob"):
        for folder in ("autograded", "feedback"):
            for carried in ("timestamp.txt", "submission_secret.txt"):
                assert (course / folder / student / "vectors" / carried).is_file(), (folder, student, carried)
    with Gradebook(db, "vectors101") as gb:
        got = {s: (gb.find_submission("vectors", s).score, gb.find_submission("vectors", s).late_submission_penalty)
               for s in ("alice", "bob")}
    assert got == {"alice": (11.0, 0.0), "bob": (9.0, 9.0)}, got  # "zero": the late penalty is the whole score
    # formgrader shows the autograded copy: each grade cell prints its check's score and message, the reason for
    # "1 / 3" (never a cell without output)
    for student, printed in (("alice", "softmax: values along every dim: 3 / 3"),
                             ("bob", "softmax: values along every dim: 1 / 3\n")):
        graded = nbformat.read(course / "autograded" / student / "vectors" / "vectors.ipynb", as_version=4)
        cells = [c for c in graded.cells if c.metadata.get("nbgrader", {}).get("grade_id", "").startswith("ag_")]
        assert cells and all(c.outputs and c.outputs[0]["name"] == "stdout" for c in cells), student
        said = "".join(o["text"] for c in cells for o in c.outputs)
        assert printed in said, said
    assert "dim" in said.split("softmax: values along every dim: 1 / 3\n")[1].split("\n")[0]  # bob's reason

    nbgrader(course, "release_feedback", "vectors")
    for student, late in (("alice", False), ("bob", True)):
        as_student(student, "fetch_feedback", "vectors", "--student", student)
        [page] = (tmp_path / student / "vectors" / "feedback").glob("*/vectors.html")
        text = page.read_text()
        assert ("11 / 13" if student == "alice" else "9 / 13") in text  # the written answer's 2: pending, by hand
        assert ("late penalty takes 9 point(s) off, so this grade is 0 / 13" in text) == late
    nbgrader(course, "export")
    rows = {r["student_id"]: r for r in csv.DictReader((course / "grades.csv").open())}
    assert (rows["alice"]["score"], rows["bob"]["raw_score"], rows["bob"]["late_submission_penalty"],
            rows["bob"]["score"]) == ("11.0", "9.0", "9.0", "0.0")

    # `autograder rubric` on the course's submitted/ tree: its points go into the same gradebook (here a check
    # of the example stands for the rubric's), the late penalty assigned again on the new total
    from autograder.judge import CheckResult

    assert course_of([str(course / "submitted")]) == course and course_of([str(tmp_path)]) is None
    rubric = CheckResult("softmax: values along every dim", "2. Softmax", 3.0, 3.0, "passed", "")
    pending = CheckResult("softmax: rows sum to 1", "2. Softmax", 2.0, 0.0, "pending", "")
    lines = scores_into_gradebook(course, "vectors", "vectors.ipynb", {"bob": [rubric, pending]})
    assert lines == ["bob: softmax: values along every dim 3/3 (late penalty 11)"], lines
    with Gradebook(db, "vectors101") as gb:
        bob = gb.find_submission("vectors", "bob")
        assert (bob.score, bob.late_submission_penalty) == (11.0, 11.0)

    # the written answer graded by hand in formgrader: graded again, the feedback page says so (not "pending")
    with Gradebook(db, "vectors101") as gb:
        gb.find_grade("q_softmax", "vectors", "vectors", "alice").manual_score = 2.0
        gb.db.commit()
    capfd.readouterr()
    assert command_line(["nbgrader-grade", "vectors", "--student", "alice"]) == 0
    shutdown_fork_server()
    said = capfd.readouterr()
    assert "[1/1] alice: 13/13 (" in said.err, said.err  # the progress line: the new total, nothing pending
    assert "alice: 13\n" in said.out
    page = (course / "feedback" / "alice" / "vectors" / "vectors.html").read_text()
    assert "graded by hand: 2 / 2" in page and "13 / 13" in page
    with Gradebook(db, "vectors101") as gb:
        assert gb.find_grade("q_softmax", "vectors", "vectors", "alice").score == 2.0  # kept, never reset

    # a written answer graded on the review page (autograder review --merge): formgrader's manual score
    hand = CheckResult("q_softmax", "Graded by hand", 2.0, 1.5, "partial", "graded by hand: 1.5 / 2")
    assert scores_into_gradebook(course, "vectors", "vectors.ipynb", {"bob": [hand]}, by_hand=True)[0].startswith(
        "bob: q_softmax 1.5/2")
    with Gradebook(db, "vectors101") as gb:
        grade = gb.find_grade("q_softmax", "vectors", "vectors", "bob")
        assert (grade.manual_score, grade.needs_manual_grade) == (1.5, False)


@pytest.mark.parametrize("kind", ["nbgrader", "otter"])
def test_an_imported_course_exports_as_a_course_nbgrader_accepts(kind, tmp_path):
    """Imported material keeps its hand-graded points in its tests and its metadata as its own tool wrote it: the
    export still gives nbgrader complete metadata (written answers as graded cells with their points), a setup
    cell before the first hidden check, and no marker of the imported tests inside the setup cell."""
    from autograder.importers import nbgrader as nbgrader_importer
    from autograder.importers import otter as otter_importer

    here = Path(__file__).parent
    if kind == "nbgrader":
        (report, *_) = nbgrader_importer.import_assignment(here / "nbgrader_ps1" / "source" / "ps1", "ps1",
                                                            tmp_path / "solutions")
    else:
        (report,) = otter_importer.import_assignment(here / "otter_demo" / "source" / "demo.ipynb", "demo",
                                                      tmp_path / "solutions")
    course = export_nbgrader(str(report.target), tmp_path / "course")
    name = report.target.name
    for path in (course / "source" / name).glob("*.ipynb"):
        nb = nbformat.read(path, as_version=4)
        ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
        hidden = [i for i, g in enumerate(ids) if g and g.startswith("ag_")]
        assert not hidden or ids.index(SETUP_ID) < hidden[0]
        setup = nb.cells[ids.index(SETUP_ID)].source if SETUP_ID in ids else ""
        assert setup.count("BEGIN HIDDEN TESTS") == 1
        # each point once: a question graded by hand is its answer cell, never also a hidden check's cell
        from autograder.grading import resolve_release
        release = resolve_release(str(report.target))
        points = sum(c.metadata["nbgrader"].get("points", 0) for c in nb.cells
                     if c.metadata.get("nbgrader", {}).get("grade"))
        assert points == pytest.approx(release.max_score)
        by_hand = [c.name for c in release.checks if c.fn is not None and hasattr(c.fn, "_ag_manual")]
        graded = [c.metadata.get("autograder", {}).get("check", c.metadata["nbgrader"].get("grade_id"))
                  for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
        assert by_hand and all(graded.count(name) == 1 for name in by_hand), (by_hand, graded)
        if kind == "otter":  # otter's answer cells (q4_solution_4) are the questions graded by hand, no extra cell
            assert not {"ag_q4", "ag_q5"} & set(ids) and {"q4", "q5"} <= set(graded)
    nbgrader(course, "generate_assignment", name, "--force")


def test_nbgrader_grade_never_grades_another_notebook_of_the_course_in_place_of_the_missing_one(tmp_path, capsys):
    """The same rule as `autograder grade` (submissions.other_notebooks): a folder holding only another notebook of
    the course's assignment is a missing notebook, 0 in the gradebook as nbgrader autograde gives, and says why."""
    from autograder.export.gradebook import _picked_notebooks

    course = tmp_path / "course"
    for path in ("source/ps/part1.ipynb", "source/ps/part2.ipynb", "submitted/alice/ps/part1.ipynb",
                 "submitted/alice/ps/part2.ipynb", "submitted/erin/ps/part1.ipynb"):
        (course / path).parent.mkdir(parents=True, exist_ok=True)
        (course / path).write_text("{}")
    picked, empty = _picked_notebooks(course / "submitted", "ps", "part2.ipynb", None, frozenset())
    assert [(student, path.name) for student, _, path, _ in picked] == [("alice", "part2.ipynb")]
    assert [student for student, _ in empty] == ["erin"]
    assert "erin submitted no notebook for ps" in capsys.readouterr().err
