"""`autograder verify` fails closed on points: none graded automatically, any earned by the untouched student
notebook, a whole solution cell shipped; and it lists the points graded by hand."""
import shutil

import nbformat
import pytest

from autograder.verify import verify
from tests.conftest import EXAMPLE_SOURCE

FREE_POINTS = '''

@check("free: passes whatever the notebook holds", points=1, part="1. Normalize")
def free(sub, ref):
    assert torch.ones(2).sum() == 2  # tests nothing the student writes
'''

MANUAL_CHECK = '''
from autograder.testing import manual

plot = manual("softmax plot", 2, "2. Softmax", "a plot of softmax over a temperature range")
'''

WHOLE_ANSWER = 'def pyramidal_number(n):\n    """The n-th square pyramidal number."""\n    return sum(k * k for k in range(1, n + 1))'


def _cell(kind, source, **nbgrader):
    cell = getattr(nbformat.v4, f"new_{kind}_cell")(source)
    cell.metadata["nbgrader"] = nbgrader
    return cell


@pytest.fixture
def source(tmp_path):
    src = tmp_path / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, src)
    shutil.rmtree(src / "corpus")
    return src


@pytest.mark.slow
def test_verify_names_free_points_a_whole_solution_shipped_and_lists_manual_points(source):
    test_file = source / "tests" / "test_hidden.py"
    test_file.write_text(test_file.read_text() + FREE_POINTS + MANUAL_CHECK)
    nb = nbformat.read(source / "vectors.ipynb", as_version=4)
    nb.cells += [_cell("markdown", "Softmax saturates for large logits.", grade=True, solution=True,
                       grade_id="why_saturate", points=3),
                 _cell("code", WHOLE_ANSWER, grade=True, solution=True, grade_id="pyramidal", points=2),
                 nbformat.v4.new_code_cell('def read_data():\n    return open("data.csv").read()')]
    nbformat.write(nb, source / "vectors.ipynb")
    n = len(nb.cells) - 1
    (source / "hints.py").write_text(WHOLE_ANSWER + "\n")  # the free-response answer, shipped as a "hint"
    config = source / "assignment.toml"
    config.write_text(config.read_text().replace("files = []", 'files = ["hints.py"]'))

    report = verify(source)
    problems = "\n".join(report.problems)
    assert ("the untouched student notebook gets 1 on free: passes whatever the notebook holds, without running "
            "into a stub") in problems
    assert "leak: hints.py: contains 'return sum(k * k for k in range(1, n + 1))'" in problems
    assert f"vectors.ipynb: cell {n + 1}, line 2: reads 'data.csv', which is not shipped" in problems
    assert "leak: vectors.ipynb" not in problems  # the student notebook has nbgrader's stub in place of the answer
    manual = [line for line in report.lines if line.startswith("manual:")]
    assert manual == [
        f"manual: 9 point(s) graded by hand, pending in every total: check q_softmax (written answer, notebook cell "
        f"{n - 2}, 2); check why_saturate (written answer, notebook cell {n - 1}, 3); check pyramidal (code answer, "
        f"notebook cell {n}, 2); check softmax plot (a plot of softmax over a temperature range, 2)"]
    assert not any("softmax plot" in p or "q_softmax" in p for p in report.problems)
    assert any(line.startswith("reference: 12/21 (9 points pending)") for line in report.lines), report.lines


@pytest.mark.slow
def test_verify_fails_an_assignment_without_automatic_checks(source):
    shutil.rmtree(source / "tests")
    (source / "tests").mkdir()
    (source / "tests" / "test_manual.py").write_text(MANUAL_CHECK)
    nb = nbformat.read(source / "vectors.ipynb", as_version=4)
    for cell in nb.cells:  # the notebook's test cells become plain code: nothing is checked
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            cell.source = "\n".join(line for line in cell.source.split("\n") if "HIDDEN TESTS" not in line)
            del cell.metadata["nbgrader"]
    nbformat.write(nb, source / "vectors.ipynb")
    report = verify(source)
    assert report.problems == ["no check is graded automatically: add test cells (nbgrader metadata grade: true) or "
                               "tests/*.py (every point here is graded by hand)"]
