"""Malformed markers fail the build with file, cell and line."""
import shutil

import nbformat
import pytest

from autograder.build import build
from autograder.notebook.markers import MarkerError, find_regions, student_source, check_cell
from tests.conftest import EXAMPLE_SOURCE


def _code(src, **nbgrader):
    cell = nbformat.v4.new_code_cell(src)
    if nbgrader:
        cell.metadata["nbgrader"] = nbgrader
    return cell


@pytest.mark.parametrize("lines, problem", [
    (["### BEGIN SOLUTION", "### BEGIN SOLUTION", "x", "### END SOLUTION"], "line 2: BEGIN SOLUTION inside"),
    (["x = 1", "### BEGIN SOLUTION", "y = 2"], "line 2: BEGIN SOLUTION is never closed"),
    (["### END SOLUTION"], "line 1: END SOLUTION without a matching BEGIN"),
    (["### BEGIN SOLUTION", "### END HIDDEN TESTS"], "line 2: END HIDDEN TESTS without a matching BEGIN"),
    (["### BEGIN SOLUTIONS", "x", "### END SOLUTION"], "line 1: malformed marker"),
    (["# begin solution", "x"], "line 1: malformed marker"),
])
def test_malformed_regions_name_the_line(lines, problem):
    with pytest.raises(MarkerError, match=problem):
        find_regions(lines, "nb.ipynb: cell 3")


def test_hidden_tests_outside_a_test_cell_are_rejected():
    cell = _code("x = 1\n### BEGIN HIDDEN TESTS\nassert x\n### END HIDDEN TESTS")
    with pytest.raises(MarkerError, match="cell 4, line 2: HIDDEN TESTS markers outside a test cell"):
        check_cell(cell, "nb.ipynb: cell 4")


def test_solution_inside_a_test_cell_is_rejected():
    cell = _code("### BEGIN SOLUTION\nx = 1\n### END SOLUTION", grade=True, grade_id="t", points=1)
    with pytest.raises(MarkerError, match="line 1: SOLUTION markers inside a test cell"):
        check_cell(cell, "nb.ipynb: cell 2")


def test_stub_keeps_signature_and_indentation():
    cell = _code("def f(x):\n    \"\"\"Doc.\"\"\"\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n")
    out = student_source(cell, check_cell(cell, "c"))
    assert out == "def f(x):\n    \"\"\"Doc.\"\"\"\n    # TODO: your code here\n    raise NotImplementedError()"


def test_broken_source_notebook_fails_build_with_location(tmp_path):
    source = tmp_path / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    nb = nbformat.read(source / "vectors.ipynb", as_version=4)
    index = next(i for i, c in enumerate(nb.cells) if "def softmax" in c.source)
    nb.cells[index].source = nb.cells[index].source.replace("    ### END SOLUTION", "    pass")
    nbformat.write(nb, source / "vectors.ipynb")
    with pytest.raises(MarkerError) as err:
        build(source)
    message = str(err.value)
    assert f"vectors.ipynb: cell {index + 1}, line 3: BEGIN SOLUTION is never closed" in message


def test_duplicate_grade_id_fails_build(tmp_path):
    source = tmp_path / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    nb = nbformat.read(source / "vectors.ipynb", as_version=4)
    tests = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"]
    tests[1].metadata["nbgrader"]["grade_id"] = tests[0].metadata["nbgrader"]["grade_id"]
    nbformat.write(nb, source / "vectors.ipynb")
    with pytest.raises(MarkerError, match="grade_id 'normalize_test' is also used by cell"):
        build(source)


def test_labelled_assertions_keep_lines_and_meaning_and_say_their_line():
    """verify's labels (notebook/assertions.py): each assert's message names its line; nothing else changes."""
    from autograder.notebook.assertions import label_assertions, read_label

    source = ('x = 1\nassert (x ==\n      1)\nassert x == 1, "é fine"; assert [[x]] == [[1]]\n'
              'for i in range(3):\n    assert i < 2, f"i is {i} ]]"\n')
    labelled = label_assertions(source)
    assert labelled.count("\n") == source.count("\n")
    with pytest.raises(AssertionError) as err:
        exec(labelled, {})
    assert read_label(str(err.value)) == (6, "i is 2 ]]")
    for failing, line in (("x = 0\nassert x", 2), ("x = 0\nassert (\n  x == 1\n)", 2)):
        with pytest.raises(AssertionError) as err:
            exec(label_assertions(failing), {})
        assert read_label(str(err.value)) == (line, "")
    assert label_assertions("def f(:\n") is None and read_label("a hidden check failed") is None


def test_the_autotest_refusal_says_once_that_it_is_not_implemented():
    cell = _code("# AUTOTEST f(1)\nassert True", grade=True, grade_id="t", points=1)
    with pytest.raises(MarkerError) as err:
        check_cell(cell, "nb.ipynb: cell 2")
    assert str(err.value).count("not implement") == 1 and "nb.ipynb: cell 2, line 1:" in str(err.value)
