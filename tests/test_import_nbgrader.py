"""`autograder import nbgrader`: nbgrader's user-guide course ps1 imports, builds, verifies and grades its two
example submissions exactly as nbgrader autograde does, cell by cell; a test cell keeps its kernel meaning;
what cannot be converted is reported and refused by the build."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.build import build
from autograder.importers.nbgrader import TESTS_FILE, import_assignment, normalize_delimiters
from autograder.notebook.markers import MarkerError

PS1 = Path(__file__).parent / "nbgrader_ps1"
NBGRADER = json.loads((PS1 / "nbgrader_autograde.json").read_text())
STUDENTS = ("bitdiddle", "hacker")


@pytest.fixture(scope="module")
def ps1(tmp_path_factory):
    solutions = tmp_path_factory.mktemp("course") / "solutions"
    reports = import_assignment(PS1 / "source" / "ps1", "ps1", solutions)
    return solutions, {r.target.name: r for r in reports}


def grade_all(release_dir: Path, notebooks: list[Path], out: Path):
    from autograder.grading import GradeOptions, grade
    from autograder.release import load_release

    return grade(load_release(release_dir), notebooks, GradeOptions(out, quiet=True, summary=False))


def test_ps1_imports_as_one_assignment_per_notebook_with_a_report(ps1):
    solutions, reports = ps1
    assert sorted(reports) == ["ps1_problem1", "ps1_problem2"]
    one = reports["ps1_problem1"]
    assert one.not_converted == []
    assert ("cell 13: test cell 'sum_of_squares_uses_squares' (0.5 points) -> check 'sum_of_squares_uses_squares' "
            "in tests/nbgrader_tests.py") in one.converted
    assert "cell 17: code answer 'sum_of_squares_application' (2 points) -> manual check " \
           "'sum_of_squares_application' (pending, graded by hand)" in one.converted
    assert "cell 18: task 'cell-938593c4a215c6cc' (4 points) -> manual check 'cell-938593c4a215c6cc' " \
           "(pending, graded by hand)" in one.converted
    assert "1 file(s) shipped with the notebook: jupyter.png" in one.converted
    assert (solutions / "ps1_problem1" / "IMPORT.md").read_text().startswith("# Imported from nbgrader: problem1.ipynb")
    assert any("nothing is graded automatically" in note for note in reports["ps1_problem2"].notes)


def test_the_student_notebook_has_the_stubs_and_the_public_tests_only(ps1):
    solutions, _ = ps1
    paths = build(solutions / "ps1_problem1")
    assert (paths.assignment / "jupyter.png").is_file()  # the notebook shows it
    cells = nbformat.read(paths.assignment / "problem1.ipynb", as_version=4).cells
    text = {c.source for c in cells}
    assert "# YOUR CODE HERE\nraise NotImplementedError()" in text  # Part D, a solution cell without markers
    assert not any("pyramidal_number" in t or "return sum(squares(n))" in t for t in text)
    uses = next(c for c in cells if c.source.startswith('"""Check that sum_of_squares relies on squares'))
    assert "del squares" in uses.source and "skip-grading" in uses.metadata["tags"]


@pytest.mark.slow
def test_bitdiddle_and_hacker_get_nbgraders_own_scores_cell_by_cell(ps1, tmp_path):
    solutions, _ = ps1
    for problem in ("problem1", "problem2"):
        paths = build(solutions / f"ps1_{problem}")
        notebooks = [PS1 / "submitted" / s / "ps1" / f"{problem}.ipynb" for s in STUDENTS]
        for student, result in zip(STUDENTS, grade_all(paths.release, notebooks, tmp_path / problem)):
            theirs = NBGRADER["scores"][student][problem]
            ours = {c.name: c for c in result.checks}
            assert sorted(ours) == sorted(theirs), (student, problem)
            for name, score in theirs.items():
                if ours[name].status == "pending":  # graded by hand: nbgrader leaves it open, or 0 if unanswered
                    assert score in (None, 0.0) and ours[name].message.startswith("graded by hand"), name
                else:
                    assert ours[name].score == score, (student, problem, name, ours[name].message)
            assert result.score == sum(s or 0 for s in theirs.values()), (student, problem)
            assert result.max_score == sum(c.max_score for c in result.checks)  # hand-graded points stay in it


@pytest.mark.slow
def test_ps1_problem1_verifies_and_problem2_has_no_automatic_check(ps1):
    from autograder.verify import verify

    solutions, _ = ps1
    report = verify(solutions / "ps1_problem1")
    assert report.ok, report.problems
    assert report.lines[0].startswith("manual: 7 point(s) graded by hand, pending in every total: check "
                                      "sum_of_squares_equation (written answer, notebook cell 15, 1)")
    report = verify(solutions / "ps1_problem2")
    assert [p.split(":")[0] for p in report.problems] == ["no check is graded automatically"]


@pytest.mark.slow
def test_the_recorded_scores_are_nbgraders(tmp_path):
    """Recompute nbgrader_autograde.json with nbgrader itself (its commands are in the file)."""
    pytest.importorskip("nbgrader")
    from nbgrader.api import Gradebook

    course = tmp_path / "course"
    for folder in ("source", "submitted"):
        shutil.copytree(PS1 / folder, course / folder)
    (course / "nbgrader_config.py").write_text(
        'c = get_config()\nc.CourseDirectory.course_id = "course101"\n'
        'c.CourseDirectory.db_assignments = [dict(name="ps1")]\n'
        'c.CourseDirectory.db_students = [dict(id="bitdiddle"), dict(id="hacker")]\n')
    for args in (("generate_assignment", "ps1", "--force"), ("autograde", "ps1")):
        proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, capture_output=True, text=True,
                              timeout=600, env={**os.environ, "PYTHONWARNINGS": "ignore"})
        assert proc.returncode == 0, proc.stderr
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        scores = {s: {nb.name: {g.name: g.auto_score for g in nb.grades} for nb in gb.find_submission("ps1", s).notebooks}
                  for s in STUDENTS}
    assert scores == NBGRADER["scores"]


# -- a test cell keeps its kernel meaning ---------------------------------------------------------------

SOLUTION = '''\
def lookup(table, key):
    """table[key], or a KeyError naming the key."""
    ### BEGIN SOLUTION
    if key not in table:
        raise KeyError(key)
    return table[key]
    ### END SOLUTION

def count_keys(table):
    ### BEGIN SOLUTION
    return len([k for k in table if lookup(table, k) is not None])
    ### END SOLUTION'''

TESTS = {
    "raises_keyerror": (1, '''\
try:
    lookup({}, "a")
except KeyError:
    pass
else:
    raise AssertionError("lookup of a missing key did not raise KeyError")'''),
    "uses_lookup": (1, '''\
saved = lookup
del lookup
try:
    count_keys({"a": 1})
except NameError:
    pass
else:
    raise AssertionError("count_keys does not call lookup")
finally:
    lookup = saved
assert count_keys({"a": 1, "b": 2}) == 2'''),
    "partial": (2, '''\
score = 0
score += 1 if lookup({"a": 1}, "a") == 1 else 0
score += 1 if lookup({"b": 2}, "b") == 2 else 0
score'''),
    "with_hidden": (1, '''\
assert lookup({"a": 1}, "a") == 1
### BEGIN HIDDEN TESTS
assert lookup({"z": 26}, "z") == 26, "DESIRED: 26 for the key z"  # a message that would show hidden data
### END HIDDEN TESTS'''),
}


def _nbgrader_notebook(path: Path, extra_cells=()) -> Path:
    cells = [nbformat.v4.new_markdown_cell("## Part A (5 points)"), nbformat.v4.new_code_cell(SOLUTION)]
    cells[1].metadata["nbgrader"] = {"grade": False, "solution": True, "grade_id": "lookup", "locked": False,
                                     "schema_version": 3}
    for name, (points, source) in TESTS.items():
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": name, "points": points,
                                     "locked": True, "schema_version": 3}
        cells.append(cell)
    nb = nbformat.v4.new_notebook(cells=cells + list(extra_cells))
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def _submission(path: Path, answer_key: Path, old: str, new: str) -> Path:
    nb = nbformat.read(answer_key, as_version=4)
    cell = next(c for c in nb.cells if old in c.source)
    cell.source = cell.source.replace(old, new)
    nbformat.write(nb, path)
    return path


@pytest.mark.slow
def test_exceptions_del_partial_credit_and_hidden_tests_mean_what_they_mean_in_a_kernel(tmp_path):
    source = _nbgrader_notebook(tmp_path / "nbgrader" / "hw.ipynb")
    (report,) = import_assignment(source, "hw", tmp_path / "solutions")
    assert report.not_converted == []
    paths = build(report.target)
    key = paths.release / "answer_key.ipynb"
    submissions = [
        key,
        _submission(tmp_path / "wrong_error.ipynb", key, "raise KeyError(key)", "raise ValueError(key)"),
        _submission(tmp_path / "no_lookup.ipynb", key, "lookup(table, k) is not None", "table[k] is not None"),
        _submission(tmp_path / "half.ipynb", key, "    return table[key]", "    return 1"),
    ]
    results = [{c.name: c for c in r.checks} for r in grade_all(paths.release, submissions, tmp_path / "out")]
    assert [c.score for c in results[0].values()] == [1, 1, 2, 1]
    assert results[1]["raises_keyerror"].score == 0  # a ValueError is not a KeyError, in a kernel or here
    assert "your lookup raised ValueError: a" in results[1]["raises_keyerror"].message
    assert results[2]["uses_lookup"].score == 0
    assert results[2]["uses_lookup"].message == "count_keys does not call lookup"
    assert results[2]["raises_keyerror"].score == 1  # `del lookup` was undone when the check ended
    assert results[3]["partial"].score == 1  # the cell's last value: 1 of 2 points
    assert results[3]["with_hidden"].message == "a hidden test failed"


def test_an_autotest_cell_is_reported_and_refused_by_the_build(tmp_path):
    autotest = nbformat.v4.new_code_cell('"""Check lookup"""\n### AUTOTEST lookup({"a": 1}, "a")')
    autotest.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "auto", "points": 3}
    source = _nbgrader_notebook(tmp_path / "nbgrader" / "hw.ipynb", [autotest])
    (report,) = import_assignment(source, "hw", tmp_path / "solutions")
    assert report.not_converted == [
        "cell 7: test cell 'auto' (3 points): nbgrader's AUTOTEST is not implemented: write its tests out as assert "
        "statements; the cell is left as it is, and `autograder build` refuses it until then"]
    with pytest.raises(MarkerError, match=r"hw.ipynb: cell 7, line 2: .* is a marker of nbgrader's AUTOTEST"):
        build(report.target)


def test_cells_whose_meaning_differs_are_named(tmp_path):
    shared = nbformat.v4.new_code_cell("assert total == 3")
    shared.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "shared", "points": 1}
    setter = nbformat.v4.new_code_cell("total = 3\nlookup = dict.get\ntry:\n    pass\nexcept np.linalg.LinAlgError:\n"
                                       "    pass\n%time count_keys({})\n!ls")
    setter.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "setter", "points": 1}
    same_question = nbformat.v4.new_code_cell("assert total == 3")
    same_question.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "same_question", "points": 1}
    source = _nbgrader_notebook(tmp_path / "nbgrader" / "hw.ipynb",
                                [setter, same_question, nbformat.v4.new_markdown_cell("## Part B"), shared])
    (report,) = import_assignment(source, "hw", tmp_path / "solutions")
    problems = "\n".join(report.not_converted)
    assert "shared" not in problems and "same_question" not in problems
    tests = (report.target / "tests" / "nbgrader_tests.py").read_text()
    assert "notebook_cell('same_question', 1, 'Part A', IMPORTS, SOURCE_same_question, earlier=(" in tests
    assert re.search(r"^cell (\d+), line 8: IPython line `!ls` of test cell 'setter': the check runs in the grader, "
                     r"not in a kernel, and this line has no Python equivalent here", problems, re.M)
    assert re.search(r"cell \d+, line 7: IPython line `%time count_keys\(\{\}\)` of test cell 'setter' -> "
                     r"`count_keys\(\{\}\)` in its check \(run once\)", "\n".join(report.converted))
    notes = "\n".join(report.notes)
    assert ("test cell 'shared' reads `total`, set by test cell 'setter' of another question ('Part A'): that cell "
            "runs first") in notes
    assert "test cell 'setter' binds `lookup`, which the notebook defines" in notes
    assert "test cell 'setter' catches `np.linalg.LinAlgError`" in notes


def test_a_test_cell_reading_another_questions_variable_runs_after_that_cell(tmp_path):
    setter = nbformat.v4.new_code_cell("X, y = [1, 2], [2, 4]")
    setter.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "test_load", "points": 1}
    reader = nbformat.v4.new_code_cell("assert len(X) == len(y)")
    reader.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "test_fit", "points": 1}
    source = _nbgrader_notebook(tmp_path / "nbgrader" / "hw.ipynb",
                                [setter, nbformat.v4.new_markdown_cell("## Part B"), reader])
    (report,) = import_assignment(source, "hw", tmp_path / "solutions")
    assert report.not_converted == []
    tests = (report.target / "tests" / "nbgrader_tests.py").read_text()
    assert "SOURCE_test_fit, earlier=(('test_load', SOURCE_test_load), ), cell=9)" in tests


def test_nbgraders_delimiters_anywhere_in_a_line_become_exact_markers():
    source = "def f():\n    # BEGIN SOLUTION (delete me)\n    return 1\n    #END SOLUTION here"
    assert normalize_delimiters(source) == "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION"


COURSE_CONFIG = """c = get_config()
c.ClearSolutions.begin_solution_delimeter = "BEGIN ANSWER"
c.ClearSolutions.end_solution_delimeter = "END ANSWER"
c.ClearHiddenTests.begin_test_delimeter = "BEGIN HIDDEN CHECKS"
c.ClearHiddenTests.end_test_delimeter = "END HIDDEN CHECKS"
c.ExecutePreprocessor.timeout = 120
"""


def test_a_courses_own_delimiters_and_timeout_are_read_from_its_nbgrader_config(tmp_path):
    course = tmp_path / "course"
    source = _nbgrader_notebook(course / "source" / "hw" / "hw.ipynb")
    nb = nbformat.read(source, as_version=4)
    for cell in nb.cells:  # the course writes its own delimiters, which nbgrader finds anywhere in a line
        cell.source = cell.source.replace("BEGIN SOLUTION", "BEGIN ANSWER").replace("END SOLUTION", "END ANSWER")
        cell.source = cell.source.replace("HIDDEN TESTS", "HIDDEN CHECKS")
    nbformat.write(nb, source)
    (course / "nbgrader_config.py").write_text(COURSE_CONFIG)
    (report,) = import_assignment(source.parent, "hw", course / "solutions")
    assert report.not_converted == []
    converted = "\n".join(report.converted)
    assert "'BEGIN ANSWER' / 'END ANSWER'" in converted and "'BEGIN HIDDEN CHECKS' / 'END HIDDEN CHECKS'" in converted
    imported = (course / "solutions" / "hw" / "hw.ipynb").read_text()
    assert "### BEGIN SOLUTION" in imported and "ANSWER" not in imported
    tests = (course / "solutions" / "hw" / "tests" / TESTS_FILE).read_text()
    assert "### BEGIN HIDDEN TESTS" in tests and "CHECKS" not in tests
    # nbgrader gives every cell 120 s: so does every check and the notebook's loading
    toml = (course / "solutions" / "hw" / "assignment.toml").read_text()
    assert "[limits]\ncheck_min_seconds = 120\ncheck_seconds = 120\nimport_seconds = 120" in toml
    # the same notebook without the course's configuration: the delimiters are nobody's, and named
    bare = tmp_path / "bare" / "hw.ipynb"
    bare.parent.mkdir()
    shutil.copy(source, bare)
    (plain,) = import_assignment(bare, "hw", tmp_path / "solutions")
    assert any("'### BEGIN ANSWER'" in line for line in plain.not_converted)


@pytest.mark.parametrize("timeout, limits", [
    (-1, ""), (5, ""), (30, "[limits]\ncheck_min_seconds = 30"),
    (120, "[limits]\ncheck_min_seconds = 120\ncheck_seconds = 120\nimport_seconds = 120")])
def test_nbgraders_timeout_is_the_least_a_check_gets_never_less_than_the_projects_own(tmp_path, timeout, limits):
    from autograder.importers.nbgrader import timeout_limits
    from autograder.importers.report import ImportReport

    report = ImportReport("nbgrader", tmp_path / "hw.ipynb", tmp_path / "hw")
    assert timeout_limits(report, timeout) == limits
    assert (report.notes if not limits else report.converted)[-1].startswith("nbgrader" if not limits else "the course")


def test_an_nbgrader_config_that_cannot_be_read_is_named_and_nbgraders_defaults_are_used(tmp_path):
    course = tmp_path / "course"
    source = _nbgrader_notebook(course / "source" / "hw" / "hw.ipynb")
    (course / "nbgrader_config.py").write_text("from some_plugin_not_here import Penalty\nc = get_config()\n")
    (report,) = import_assignment(source, "hw", course / "solutions")
    assert report.not_converted == []
    assert any("nbgrader_config.py could not be read (ModuleNotFoundError" in note for note in report.notes)
    assert "could not be read" in (course / "solutions" / "hw" / "IMPORT.md").read_text()


def test_the_command_line_imports_and_refuses_to_overwrite(tmp_path, capsys):
    from autograder.entrypoints import command_line as main

    source = _nbgrader_notebook(tmp_path / "nbgrader" / "hw.ipynb")
    argv = ["import", "nbgrader", str(source), "--name", "hw", "--solutions", str(tmp_path / "solutions")]
    assert main(argv) == 0
    assert "hw.ipynb -> " in capsys.readouterr().out
    assert main(argv) == 2
    assert "exists: choose another --name, or --force to replace it" in capsys.readouterr().err
    assert main(argv + ["--force"]) == 0


# -- metadata nbgrader itself refuses: refused whole, nothing written ----------------------------------------

def _code(source: str, **meta):
    """A code cell with nbgrader metadata (schema 3): `meta` over an ungraded, unlocked cell that is no solution."""
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade": False, "solution": False, "locked": False, "schema_version": 3, **meta}
    return cell


def _graded(source: str, **meta):
    return _code(source, grade=True, **meta)


@pytest.mark.parametrize("extra, problem", [
    ([_graded("assert True", grade_id="lookup", points=1)], "cell 7: grade_id 'lookup' is also used by cell 2"),
    ([_graded("assert True", grade_id="", points=1)], "cell 7: nbgrader cell without a grade_id"),
    ([_graded("", grade_id="blank")], "cell 7: grade cell 'blank' needs nbgrader 'points' >= 0"),
    ([_graded("assert True", grade_id="negative", points=-1)], "cell 7: grade cell 'negative' needs nbgrader"),
    ([_code("x = 1", grade_id="future", schema_version=4)],
     "cell 7: nbgrader metadata of schema_version 4, newer than nbgrader's own (3), which nbgrader cannot read"),
])
def test_metadata_nbgrader_refuses_is_refused_naming_the_cells_and_nothing_is_written(tmp_path, extra, problem):
    from autograder.importers.common import ImportFailed

    source = _nbgrader_notebook(tmp_path / "nbgrader" / "hw.ipynb", extra)
    with pytest.raises(ImportFailed, match=re.escape(problem)):
        import_assignment(source, "hw", tmp_path / "solutions")
    assert not (tmp_path / "solutions").exists()


def test_a_refused_notebook_of_a_folder_writes_none_of_the_others(tmp_path):
    from autograder.importers.common import ImportFailed

    _nbgrader_notebook(tmp_path / "nbgrader" / "a.ipynb")
    _nbgrader_notebook(tmp_path / "nbgrader" / "b.ipynb", [_graded("assert True", grade_id="", points=1)])
    with pytest.raises(ImportFailed, match="b.ipynb: cell 7: nbgrader cell without a grade_id"):
        import_assignment(tmp_path / "nbgrader", "hw", tmp_path / "solutions")
    assert not (tmp_path / "solutions").exists()


def test_grade_ids_that_share_a_python_name_keep_both_checks(tmp_path):
    from autograder.checkspecs import load_test_file

    cells = [_graded("assert True", grade_id="a-b", points=1), _graded("", grade_id="a_b", points=2)]
    (report,) = import_assignment(_nbgrader_notebook(tmp_path / "nbgrader" / "hw.ipynb", cells), "hw",
                                  tmp_path / "solutions")
    checks, _ = load_test_file(report.target / "tests" / "nbgrader_tests.py")
    assert [(c.name, c.points) for c in checks][-2:] == [("a-b", 1), ("a_b", 2)]  # an empty cell is a test, not manual


def test_only_the_files_the_notebook_names_are_shipped(tmp_path):
    folder = tmp_path / "nbgrader"
    read = nbformat.v4.new_code_cell('import helpers\nrows = open("data/rows.csv").read()\nimgs = "images"')
    source = _nbgrader_notebook(folder / "hw.ipynb", [read, nbformat.v4.new_markdown_cell("![plot](plot.png)")])
    for name in ("data/rows.csv", "images/a.png", "plot.png", "helpers.py", "make_data.py", "notes/todo.txt"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("x")
    (report,) = import_assignment(source, "hw", tmp_path / "solutions")
    assert "4 file(s) shipped with the notebook: data/rows.csv, helpers.py, images/a.png, plot.png" in report.converted
    assert any(n.startswith("the other files of ") and "to ship one, copy it into" in n and "make_data" not in n
               for n in report.notes)
    assert not (report.target / "make_data.py").exists() and (report.target / "helpers.py").is_file()
    assert 'files = ["data/rows.csv", "helpers.py", "images/a.png", "plot.png"]' in \
        (report.target / "assignment.toml").read_text()


def test_a_read_only_cell_a_student_changed_is_graded_as_handed_out(tmp_path):
    given = _code("LIMIT = 3", locked=True, grade_id="given")
    answer = _code("def below():\n    ### BEGIN SOLUTION\n    return list(range(LIMIT))\n    ### END SOLUTION",
                   solution=True, grade_id="answer")
    test = _graded("assert below() == [0, 1, 2]", locked=True, grade_id="test", points=1)
    source = tmp_path / "nbgrader" / "hw.ipynb"
    source.parent.mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=[given, answer, test]), source)
    (report,) = import_assignment(source, "hw", tmp_path / "solutions")
    paths = build(report.target)
    key = paths.release / "answer_key.ipynb"
    cheat = _submission(tmp_path / "cheat.ipynb", key, "range(LIMIT)", "range(LIMIT + 1)")  # off by one
    cheat_nb = nbformat.read(cheat, as_version=4)
    cheat_nb.cells[0].source = "LIMIT = 2"  # ... and the read-only cell changed to make up for it
    nbformat.write(cheat_nb, cheat)
    [result] = grade_all(paths.release, [cheat], tmp_path / "out")
    assert result.score == 0
    assert any("cell 1 is read-only" in note for note in result.notes)


def test_a_read_only_cell_is_handed_out_as_written_and_saving_it_again_is_no_change(tmp_path):
    """nbgrader's release keeps a read-only cell's final newline, and so does the student notebook built here; a
    submission whose copy of it differs only in line endings, spaces at the ends of lines or its final newlines (as
    Jupyter, Colab and editors save it) is told nothing, and every read-only cell is graded as handed out."""
    from autograder.notebook.markers import restore_locked

    given = _code("LIMIT = 3\nSTEP = 1\n", locked=True, grade_id="given")
    answer = _code("def below():\n    ### BEGIN SOLUTION\n    return list(range(LIMIT))\n    ### END SOLUTION\n",
                   solution=True, grade_id="answer")
    source = tmp_path / "nbgrader" / "hw.ipynb"
    source.parent.mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=[given, answer]), source)
    (report,) = import_assignment(source, "hw", tmp_path / "solutions")
    paths = build(report.target)
    student = nbformat.read(paths.assignment / "hw.ipynb", as_version=4)
    assert student.cells[0].source == "LIMIT = 3\nSTEP = 1\n"
    assert json.loads((paths.release / "manifest.json").read_text())["locked"] == {"given": "LIMIT = 3\nSTEP = 1\n"}
    handed_out = {"given": "LIMIT = 3\nSTEP = 1\n"}
    for saved in ("LIMIT = 3\nSTEP = 1\n", "LIMIT = 3\nSTEP = 1", "LIMIT = 3\r\nSTEP = 1\r\n",
                  "LIMIT = 3  \nSTEP = 1\n\n\n", "LIMIT = 3\rSTEP = 1\t"):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(saved, metadata=given.metadata)])
        assert restore_locked(nb, handed_out) == [], repr(saved)
        assert nb.cells[0].source == handed_out["given"]  # graded as handed out all the same
    for changed in ("LIMIT = 2\nSTEP = 1\n", "LIMIT = 3\n  STEP = 1\n", "LIMIT = 3\n\nSTEP = 1\n"):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(changed, metadata=given.metadata)])
        assert restore_locked(nb, handed_out) == [
            "cell 1 is read-only: it was graded as it was handed out, without your changes"], repr(changed)
        assert nb.cells[0].source == handed_out["given"]


def test_files_of_other_assignments_are_not_shipped_by_name_and_a_missing_image_is_named(tmp_path):
    """A folder holding several assignments: a file of another one's folder is shipped only when the notebook names
    its path (not its bare name), IMPORT.md lists none of them, and names the image the notebook shows that is not
    there (`verify` would fail on it)."""
    folder = tmp_path / "course"
    shows = nbformat.v4.new_markdown_cell("![logo](logo.png)\n![diagram](img/diagram.png)")
    source = _nbgrader_notebook(folder / "hw.ipynb", [shows])
    for name in ("hw2/hw2.ipynb", "hw2/logo.png", "hw2/release/data.csv", "img/diagram.png"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("x")
    (report,) = import_assignment(source, "hw", tmp_path / "solutions")
    assert "1 file(s) shipped with the notebook: img/diagram.png" in report.converted
    assert report.not_converted == [
        f"imported notebook, cell 7, line 1: `logo.png` (an image the notebook shows): not in {folder}, so not "
        f"shipped: put it there and import again, or copy it into {report.target} and add it to `files` in "
        "assignment.toml (`autograder verify` fails until then)"]
    assert not any("hw2" in line for line in report.notes + report.converted)


MARK_SCHEME = "Write it well.\n\n=== BEGIN MARK SCHEME ===\n\n- 1 mark for tidy code\n- 1 mark for comments\n\n" \
              "=== END MARK SCHEME ==="


def _task(source: str, **meta):
    cell = nbformat.v4.new_markdown_cell(source)
    cell.metadata["nbgrader"] = {"grade": False, "solution": False, "task": True, "grade_id": "task1", "points": 2,
                                 "locked": True, "schema_version": 3, **meta}
    return cell


def test_a_tasks_mark_scheme_stays_out_of_both_notebooks_and_the_task_keeps_its_points(tmp_path):
    """nbgrader's mark scheme is instructor-only: in neither the student notebook nor the answer key, but as a
    comment above the task's manual check; the task is a manual check with its points."""
    source = _nbgrader_notebook(tmp_path / "nbgrader" / "hw.ipynb", [_task(MARK_SCHEME)])
    (report,) = import_assignment(source, "hw", tmp_path / "solutions")
    assert report.not_converted == []
    assert "cell 7: task 'task1' (2 points) -> manual check 'task1' (pending, graded by hand)" in report.converted
    assert ("cell 7: mark scheme of task 'task1' -> out of the student notebook and the answer key, a comment above "
            "its manual check in tests/nbgrader_tests.py (for whoever grades it)") in report.converted
    tests = (report.target / "tests" / "nbgrader_tests.py").read_text()
    assert ("# Mark scheme of 'task1' (nbgrader's, for whoever grades it by hand; not in the notebooks):\n"
            "#   - 1 mark for tidy code\n#   - 1 mark for comments\n"
            "check_task1 = manual('task1', 2, 'Part A', 'task, nbgrader cell 7')") in tests
    paths = build(report.target)
    for notebook in (paths.assignment / "hw.ipynb", paths.release / "answer_key.ipynb"):
        cells = nbformat.read(notebook, as_version=4).cells
        assert "Write it well." in [c.source for c in cells]
        assert not any("mark" in c.source.lower() for c in cells), notebook


@pytest.mark.parametrize("cell, problem", [
    (nbformat.v4.new_markdown_cell(MARK_SCHEME), "cell 7: a mark scheme outside a task cell ('Manually graded task')"),
    (_task("=== BEGIN MARK SCHEME ===\n- 1 mark"), "cell 7: a mark scheme without END MARK SCHEME"),
])
def test_a_mark_scheme_nbgrader_refuses_is_refused_whole(tmp_path, cell, problem):
    from autograder.importers.common import ImportFailed

    source = _nbgrader_notebook(tmp_path / "nbgrader" / "hw.ipynb", [cell])
    with pytest.raises(ImportFailed, match=re.escape(problem)):
        import_assignment(source, "hw", tmp_path / "solutions")


def test_a_marker_of_an_unknown_tool_is_named_in_plain_words(tmp_path):
    cell = nbformat.v4.new_code_cell("x = 1\n# BEGIN CHECKPOINT")
    source = _nbgrader_notebook(tmp_path / "nbgrader" / "hw.ipynb", [cell])
    (report,) = import_assignment(source, "hw", tmp_path / "solutions")
    assert report.not_converted == ["cell 7: cell: '# BEGIN CHECKPOINT' is a marker of another tool's grading format; "
                                    "the cell is left as it is, and `autograder build` refuses it until then"]


def test_a_written_answer_with_solution_markers_keeps_its_parts_heading(tmp_path):
    """A manually graded markdown answer holding `### BEGIN SOLUTION` / `### END SOLUTION`: markdown reads the marker
    lines as headings, but a part is named after the last real heading, never after a marker."""
    answer = nbformat.v4.new_markdown_cell("### BEGIN SOLUTION\nBecause the keys are unique.\n### END SOLUTION")
    answer.metadata["nbgrader"] = {"grade": True, "solution": True, "grade_id": "why", "points": 2, "locked": False,
                                   "schema_version": 3}
    source = _nbgrader_notebook(tmp_path / "nbgrader" / "hw.ipynb",
                                [nbformat.v4.new_markdown_cell("## Part B: why (2 points)"), answer])
    (report,) = import_assignment(source, "hw", tmp_path / "solutions")
    tests = (report.target / "tests" / "nbgrader_tests.py").read_text()
    assert "manual('why', 2, 'Part B: why'," in tests and "SOLUTION'" not in tests


@pytest.mark.parametrize("source, part", [
    ("## Q3 (2 points)\n### BEGIN SOLUTION\nx\n### END SOLUTION", "Q3"), ("### BEGIN SOLUTION\nx\n### END SOLUTION", None),
    ("# Part 1\n# BEGIN QUESTION\n## END HIDDEN TESTS", "Part 1"), ("## Results", "Results"),
])
def test_marker_lines_are_no_headings(source, part):
    from autograder.importers.nbgrader import heading

    assert heading(nbformat.v4.new_markdown_cell(source)) == part


# -- IPython lines of test cells; a notebook of the other format --------------------------------------------------

@pytest.mark.parametrize("source, expected, left", [
    ("%time total = f(1)\nassert total == 2", "total = f(1)\nassert total == 2", []),
    ("%timeit -n 3 -r 1 f(1)\nassert f(1) == 2", "_ = f(1)\nassert f(1) == 2", []),  # %timeit gives no value
    ("%%time\nassert f(1) == 2", "\nassert f(1) == 2", []),
    ("%matplotlib inline\nif True:\n    %matplotlib inline\n    assert f(1)", "\nif True:\n    pass\n    assert f(1)", []),
    ("!pip install x\n%load_ext foo\nf(1)", "!pip install x\n%load_ext foo\nf(1)", [(1, "!pip install x"),
                                                                                (2, "%load_ext foo")]),
])
def test_ipython_lines_of_a_test_cell_are_converted_where_python_can_do_them(source, expected, left):
    from autograder.importers.nbgrader import without_magics

    converted, _, not_converted = without_magics(source)
    assert (converted, not_converted) == (expected, left)


def test_a_converted_magic_runs_in_the_check_and_a_test_cells_own_error_names_its_notebook_cell(tmp_path):
    from autograder.judge import check_error

    timed = _graded("%time n = count_keys({'a': 1})\nassert n == 1", grade_id="timed", points=1)
    source = _nbgrader_notebook(tmp_path / "nbgrader" / "hw.ipynb", [timed])
    (report,) = import_assignment(source, "hw", tmp_path / "solutions")
    assert report.not_converted == []
    tests = (report.target / "tests" / "nbgrader_tests.py").read_text()
    assert "n = count_keys({'a': 1})\nassert n == 1'''" in tests and ", cell=7)\n" in tests
    # the student notebook keeps the magic: students run the cell in a kernel
    assert "%time n = count_keys" in nbformat.read(report.target / "hw.ipynb", as_version=4).cells[6].source
    try:
        compile("!ls", "<test cell timed, source notebook cell 7>", "exec")
    except SyntaxError as exc:
        broken = check_error(None, exc)
    assert broken is not None and broken.where == "<test cell timed, source notebook cell 7>, line 1"


def test_an_otter_notebook_is_refused_naming_the_otter_import_and_the_reverse(tmp_path, capsys):
    from autograder.entrypoints import command_line as main
    from autograder.importers import otter
    from autograder.importers.common import ImportFailed

    otter_source = Path(__file__).parent / "otter_demo" / "source" / "demo.ipynb"
    with pytest.raises(ImportFailed, match=r"no nbgrader cell .* found, nothing to import: it looks like an otter "
                                           r"notebook \(\d+ cell\(s\) with otter-grader marker\); import it with "
                                           r"`autograder import otter .*demo.ipynb --name NAME`"):
        import_assignment(otter_source, "demo", tmp_path / "solutions")
    ps1 = PS1 / "source" / "ps1" / "problem1.ipynb"
    with pytest.raises(ImportFailed, match=r"no otter question \(`# BEGIN QUESTION`\) or solution found, nothing to "
                                           r"import: it looks like an nbgrader notebook .* import it with `autograder "
                                           r"import nbgrader .*problem1.ipynb --name NAME`"):
        otter.import_assignment(ps1, "p1", tmp_path / "solutions")
    argv = ["import", "otter", str(ps1), "--name", "p1", "--solutions", str(tmp_path / "solutions")]
    assert main(argv) == 2 and "autograder import nbgrader" in capsys.readouterr().err
    assert not (tmp_path / "solutions").exists()


# -- what nbgrader's autograde sets, and what the build's advice changes -------------------------------------

@pytest.mark.slow
def test_cells_reading_nbgrader_execution_see_autograde_as_under_nbgrader(tmp_path):
    """nbgrader's autograde sets NBGRADER_EXECUTION=autograde while it runs the notebook: the student's code (in its
    worker) and the test cell (in the judge) read it here too, and find it unset again after grading."""
    mode = _code("import os\n\ndef mode():\n    ### BEGIN SOLUTION\n    return os.environ.get('NBGRADER_EXECUTION', 'kernel')\n"
                 "    ### END SOLUTION", grade_id="mode", solution=True)
    reads = _graded("import os\nassert os.environ.get('NBGRADER_EXECUTION') == 'autograde'\nassert mode() == 'autograde'",
                    grade_id="mode_test", points=1)
    (report,) = import_assignment(_nbgrader_notebook(tmp_path / "nbgrader" / "hw.ipynb", [mode, reads]), "hw",
                                  tmp_path / "solutions")
    assert '[environment]' in (report.target / "assignment.toml").read_text()
    assert any("NBGRADER_EXECUTION" in line for line in report.converted)
    paths = build(report.target)
    (result,) = grade_all(paths.release, [paths.release / "answer_key.ipynb"], tmp_path / "out")
    assert {c.name: c.score for c in result.checks}["mode_test"] == 1
    assert "NBGRADER_EXECUTION" not in os.environ


def test_the_advice_to_declare_depends_on_says_it_moves_scores_away_from_nbgraders(ps1):
    solutions, _ = ps1
    notes = [n for n in build(solutions / "ps1_problem1").notes if "depends_on" in n]
    assert notes and all("this changes scores away from nbgrader's, which runs the student's own `squares`" in n
                         for n in notes)
