"""Fail closed: markers of other grading tools stop the build (file, cell, line, what, what to do); ordinary
comments do not; a solution cell without markers becomes nbgrader's whole-cell stub and stays secret."""
import shutil

import nbformat
import pytest

from autograder.build import build, transform
from autograder.notebook.foreign import AUTOTEST, MARK_SCHEME, OTTER, OTTER_OLD, UNKNOWN, find_foreign
from autograder.notebook.markers import MarkerError, check_cell
from autograder.verify import find_leaks, secret_lines
from tests.conftest import EXAMPLE_SOURCE


def _cell(kind, source, **nbgrader):
    cell = {"code": nbformat.v4.new_code_cell, "markdown": nbformat.v4.new_markdown_cell,
            "raw": nbformat.v4.new_raw_cell}[kind](source)
    if nbgrader:
        cell.metadata["nbgrader"] = nbgrader
    return cell


@pytest.mark.parametrize("kind, line, style", [
    ("code", "### AUTOTEST squares(3); squares(5)", AUTOTEST),
    ("code", "### HASHED AUTOTEST sum_of_squares(3)", AUTOTEST),
    ("raw", "# BEGIN QUESTION", OTTER),
    ("raw", "# begin question", OTTER),  # otter reads its raw cells in any case
    ("raw", "# ASSIGNMENT CONFIG", OTTER),
    ("raw", "# BEGIN TESTS", OTTER),
    ("raw", "# END TESTS", OTTER),
    ("code", "# BEGIN SOLUTION NO PROMPT", OTTER),
    ("code", '""" # BEGIN PROMPT', OTTER),
    ("code", "    return x**2 # SOLUTION", OTTER),
    ("code", "np.random.seed(42) # SEED", OTTER),
    ("code", "# HIDDEN", OTTER),
    ("code", '""" # BEGIN TEST CONFIG', OTTER),
    ("markdown", "<!-- BEGIN QUESTION -->", OTTER),
    ("code", "x = 5 # SOLUTION", OTTER),
    ("code", "## HIDDEN TEST ##", OTTER_OLD),
    ("code", "# TEST", OTTER_OLD),
    ("code", "# BEGIN CHECKPOINT", UNKNOWN),
    ("code", '""" # BEGIN PLUGIN', OTTER),
    ("markdown", "=== BEGIN MARK SCHEME ===", MARK_SCHEME),
])
def test_foreign_markers_are_refused_with_location_style_and_advice(kind, line, style):
    cell = _cell(kind, f"x = 1\n{line}\ny = 2")
    with pytest.raises(MarkerError) as err:
        check_cell(cell, "hw.ipynb: cell 7")
    message = str(err.value)
    assert message.startswith(f"hw.ipynb: cell 7, line 2: {line.strip()!r} is a marker of {style.name}")
    assert "a marker of a " not in message
    assert style.advice in message


@pytest.mark.parametrize("line", [
    "# compute the solution", "# Hidden layer of 128 units", "# TODO: your code here", "# YOUR CODE HERE",
    "# NOTE", "x = '# SOLUTION'  # a string, then a comment", "# Test the function on a few inputs",
    "# TEST 1: shapes", "### BEGIN SOLUTION", "    ### END SOLUTION", "# BEGIN SOLUTION", "#!/usr/bin/env python",
    "## Part A (2 points)", "print('#' * 80)", "# CONFIG", "# see SOLUTION.md for details",
])
def test_ordinary_comments_are_not_markers(line):
    assert find_foreign([line], "code") == []


@pytest.mark.parametrize("line", ["# Solution", "**Question 1:** write `square`", "## Part C (1 point)",
                                  "The hidden tests check more inputs."])
def test_ordinary_markdown_is_not_a_marker(line):
    assert find_foreign([line], "markdown") == []


def _course(tmp_path, *cells, language=None):
    source = tmp_path / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    nb = nbformat.read(source / "vectors.ipynb", as_version=4)
    nb.cells += list(cells)
    if language:
        nb.metadata["kernelspec"] = {"name": language, "language": language, "display_name": language}
    nbformat.write(nb, source / "vectors.ipynb")
    return source, len(nb.cells)


def test_build_refuses_an_autotest_cell(tmp_path):
    """nbgrader's AUTOTEST lines read as comments would leave an empty check that every notebook passes."""
    test = _cell("code", '"""Check squares"""\n### AUTOTEST squares(1); squares(10)',
                 grade=True, grade_id="auto_squares", points=1, solution=False)
    source, n = _course(tmp_path, test)
    with pytest.raises(MarkerError, match=rf"vectors.ipynb: cell {n}, line 2: '### AUTOTEST squares\(1\); "
                                          r"squares\(10\)' is a marker of nbgrader's AUTOTEST"):
        build(source)


def test_build_refuses_otter_old_format(tmp_path):
    """otter's older format built as comments: 0 checks, and the solution and hidden tests shipped."""
    solution = _cell("code", "def square(x):\n    return x ** 2 # SOLUTION")
    hidden = _cell("code", "## HIDDEN TEST ##\nassert square(3) == 9")
    source, n = _course(tmp_path, solution, hidden)
    with pytest.raises(MarkerError, match=rf"cell {n - 1}, line 2: 'return x \*\* 2 # SOLUTION' is a marker of otter"):
        build(source)
    with pytest.raises(MarkerError, match="line 1: '## HIDDEN TEST ##' is a marker of otter-grader's older format") as err:
        check_cell(hidden, "hw.ipynb: cell 2")
    assert "### BEGIN HIDDEN TESTS" in str(err.value)  # the remedy, in this build's markers


def test_nothing_of_an_otter_old_format_notebook_reaches_students(tmp_path):
    """Refused before anything is written: no student notebook, no release; an earlier build stays as it was."""
    source, _ = _course(tmp_path)
    paths = build(source)
    before = {p: p.read_bytes() for p in paths.assignment.rglob("*") if p.is_file()}
    nb = nbformat.read(source / "vectors.ipynb", as_version=4)
    nb.cells += [_cell("code", "def square(x):\n    return x ** 2 # SOLUTION"),
                 _cell("code", "# TEST\nassert square(2) == 4"), _cell("code", "## HIDDEN TEST ##\nassert square(3) == 9")]
    nbformat.write(nb, source / "vectors.ipynb")
    with pytest.raises(MarkerError):
        build(source)
    after = {p: p.read_bytes() for p in paths.assignment.rglob("*") if p.is_file()}
    assert after == before
    shipped = b"".join(after.values())
    assert b"return x ** 2" not in shipped and b"square(3) == 9" not in shipped


def test_build_refuses_otter_format_with_a_hint(tmp_path):
    source, n = _course(tmp_path, _cell("raw", "# BEGIN QUESTION\nname: q1"), _cell("code", "x = 2 # SOLUTION"))
    with pytest.raises(MarkerError, match=rf"cell {n - 1}, line 1: .*autograder import otter"):
        build(source)


def test_a_solution_cell_without_markers_becomes_nbgraders_stub_and_is_secret(tmp_path):
    """nbgrader's Part D: the whole cell is the answer (here a manually graded one)."""
    answer = _cell("code", 'def pyramidal_number(n):\n    """Returns the n^th pyramidal number"""\n'
                           "    return sum(i * i for i in range(n + 1))",
                   grade=True, solution=True, grade_id="pyramidal", points=2)
    source, n = _course(tmp_path, answer)
    paths = build(source)
    student = nbformat.read(paths.assignment / "vectors.ipynb", as_version=4)
    assert student.cells[n - 1].source == "# YOUR CODE HERE\nraise NotImplementedError()"
    key = nbformat.read(paths.release / "answer_key.ipynb", as_version=4)
    assert "return sum(i * i for i in range(n + 1))" in key.cells[n - 1].source
    secrets = secret_lines(source)
    assert "return sum(i * i for i in range(n + 1))" in secrets and "def pyramidal_number(n):" in secrets
    shutil.copyfile(paths.release / "answer_key.ipynb", paths.assignment / "leaked.ipynb")
    assert any("def pyramidal_number(n):" in leak for leak in find_leaks(paths.assignment, secrets))


@pytest.mark.parametrize("language, stub", [("R", "# YOUR CODE HERE\nfail()"), ("java", "// YOUR CODE HERE")])
def test_the_whole_cell_stub_is_nbgraders_for_the_language(language, stub):
    nb = nbformat.v4.new_notebook(cells=[_cell("code", "x <- 1", solution=True, grade=False, grade_id="x")])
    nb.metadata["kernelspec"] = {"language": language}
    assert transform(nb, "nb.ipynb").student.cells[0].source == stub


def test_a_whole_solution_cell_in_an_unknown_language_is_refused():
    nb = nbformat.v4.new_notebook(cells=[_cell("code", "x = 1", solution=True, grade=False, grade_id="x")])
    nb.metadata["kernelspec"] = {"language": "cobol"}
    with pytest.raises(MarkerError, match="nb.ipynb: cell 1: a solution cell without markers in a 'cobol' notebook"):
        transform(nb, "nb.ipynb")
