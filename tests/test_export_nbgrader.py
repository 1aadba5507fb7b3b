"""nbgrader export: real `nbgrader generate_assignment` and `nbgrader autograde` on the exported course,
and this project's grades written into the same gradebook."""
from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.export.nbgrader import NBGRADER_KEYS, SETUP_ID, check_grade_ids, export_nbgrader, grade_into_gradebook
from tests.conftest import EXAMPLE_SOURCE

pytest.importorskip("nbgrader")

BROKEN = {"softmax": ("dim=dim", "dim=-1")}  # right along the last dimension only: partial credit


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    nbgrader_bin = Path(sys.executable).with_name("nbgrader")
    cmd = [str(nbgrader_bin)] if nbgrader_bin.exists() else [sys.executable, "-m", "nbgrader"]
    proc = subprocess.run([*cmd, *args], cwd=course, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
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
    course = export_nbgrader(str(source))
    return source, course


def test_export_tree(course):
    source, course_dir = course
    assert course_dir == source.parent.parent / "release" / "nbgrader"
    assert (course_dir / "nbgrader_config.py").is_file()
    nb = nbformat.read(course_dir / "source" / "vectors" / "vectors.ipynb", as_version=4)
    for cell in nb.cells:  # only nbgrader's own keys in its metadata; ours beside it
        assert set(cell.metadata.get("nbgrader", {})) <= NBGRADER_KEYS
    ids = check_grade_ids(nb)
    assert ids["normalize_test"] == "normalize_test"
    assert ids["tiny layer: forward with given weights"] == "ag_tiny_layer_forward_with_given_weights"
    assert len(ids) == 6
    setup = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == SETUP_ID)
    assert "### BEGIN HIDDEN TESTS" in setup.source and "v.norm(dim=-1, keepdim=True)" in setup.source


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
    totals = grade_into_gradebook(str(source), course_dir, quiet=True)
    assert totals == {"alice": 11, "bob": 9}
    assert scores() == by_nbgrader
    assert (course_dir / "feedback" / "bob" / "vectors" / "vectors.html").is_file()

    nbgrader(course_dir, "export")
    csv = (course_dir / "grades.csv").read_text()
    assert ",alice," in csv and ",bob," in csv and "11.0" in csv and "9.0" in csv
