"""`autograder verify` fails on a file the notebook reads by a literal relative path that is not shipped beside it
(assignment.toml `files`), naming the notebook, the cell, the line and the path."""
from pathlib import Path

import nbformat

from autograder.notebook.opened import files_read, unshipped
from autograder.verify import unshipped_problems

READS = '''import numpy as np
import pandas as pd
from IPython.display import Image
with open("data.csv") as f:
    header = f.readline()
grades = pd.read_csv("grades/fall.csv")
weights = np.load(file="weights.npy")
Image("jupyter.png")'''

NOT_READS = '''with open("out.txt", "w") as f:
    f.write("x")
pd.DataFrame().to_csv("table.csv")
torch.save(model, "model.pt")
model = torch.load("model.pt")
remote = pd.read_csv("https://example.org/data.csv")
system = open("/etc/hostname").read()
built = open(folder + "/x.csv")'''


def _notebook():
    return nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Reading files\n![the logo](images/logo.png)\n<img src='diagram.svg'>"),
        nbformat.v4.new_code_cell(READS), nbformat.v4.new_code_cell(NOT_READS)])


def test_literal_relative_paths_read_are_found_with_cell_and_line():
    assert [(o.cell, o.line, o.path) for o in files_read(_notebook())] == [
        (1, 2, "images/logo.png"), (1, 3, "diagram.svg"), (2, 4, "data.csv"), (2, 6, "grades/fall.csv"),
        (2, 7, "weights.npy"), (2, 8, "jupyter.png")]


def test_shipped_files_and_folders_are_not_reported():
    missing = unshipped(_notebook(), ["data.csv", "./grades", "images/logo.png", "diagram.svg"])
    assert [o.path for o in missing] == ["weights.npy", "jupyter.png"]


def test_verify_names_the_notebook_cell_line_and_path(tmp_path: Path):
    path = tmp_path / "hw.ipynb"
    nbformat.write(_notebook(), path)
    problems = unshipped_problems(path, ["data.csv", "grades/fall.csv", "images/logo.png", "diagram.svg",
                                         "weights.npy"])
    assert problems == ["hw.ipynb: cell 2, line 8: reads 'jupyter.png', which is not shipped: list it in `files` of "
                        "assignment.toml (or read it from where students have it)"]


def test_shipped_files_are_at_their_relative_paths_in_the_grading_workers_working_directory(tmp_path: Path):
    """What docs/writing-assignments.md ("Files") says: a file of `files`, in a folder too, is read during grading by
    the path the notebook uses beside it, by the submission and by the reference alike."""
    import shutil

    from autograder.build import build
    from autograder.grading import GradeOptions, grade
    from autograder.release import load_release
    from tests.conftest import EXAMPLE_SOURCE, make_submission

    source = tmp_path / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    (source / "data").mkdir()
    (source / "data" / "scale.txt").write_text("2.5\n")
    config = source / "assignment.toml"
    config.write_text(config.read_text().replace("files = []", 'files = ["data/scale.txt"]'))
    nb = nbformat.read(source / "vectors.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell('def scale():\n    with open("data/scale.txt") as f:\n'
                                              '        return float(f.read())'))
    nbformat.write(nb, source / "vectors.ipynb")
    (source / "tests" / "test_files.py").write_text(
        "from autograder.testing import check\n\n\n@check('scale read from the shipped file', points=1, part='files')\n"
        "def scale_read(sub, ref):\n    assert ref.scale() == 2.5, 'the reference did not read it'\n"
        "    assert sub.scale() == 2.5\n")
    paths = build(source)
    assert (paths.assignment / "data" / "scale.txt").read_text() == "2.5\n"
    key = make_submission(tmp_path / "key.ipynb", paths.release / "answer_key.ipynb")
    [result] = grade(load_release(paths.release), [key], GradeOptions(tmp_path / "out", quiet=True, summary=False))
    check = next(c for c in result.checks if c.name == "scale read from the shipped file")
    assert (check.status, check.score) == ("passed", 1.0), check.message


# -- checks and test cells run in the notebook's folder, as in a kernel ---------------------------------------

def _nbgrader_course(folder: Path, test_source: str) -> Path:
    """An nbgrader source notebook with a solution cell and one 10-point test cell, data.txt beside it."""
    folder.mkdir(parents=True)
    (folder / "data.txt").write_text("alpha beta\ngamma\n")
    solution = nbformat.v4.new_code_cell("def count_words(path):\n    ### BEGIN SOLUTION\n    with open(path) as f:\n"
                                         "        return len(f.read().split())\n    ### END SOLUTION")
    solution.metadata["nbgrader"] = {"grade": False, "solution": True, "grade_id": "count", "locked": False,
                                     "schema_version": 3}
    test = nbformat.v4.new_code_cell(test_source)
    test.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "count_test", "points": 10,
                                 "locked": True, "schema_version": 3}
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Words"), solution, test])
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    nbformat.write(nb, folder / "hw.ipynb")
    return folder / "hw.ipynb"


def _graded_import(tmp_path: Path, test_source: str):
    from autograder.build import build
    from autograder.grading import GradeOptions, grade
    from autograder.importers.nbgrader import import_assignment
    from autograder.release import load_release

    (report,) = import_assignment(_nbgrader_course(tmp_path / "nbgrader", test_source), "hw", tmp_path / "solutions")
    paths = build(report.target)
    key = paths.release / "answer_key.ipynb"
    nb = nbformat.read(key, as_version=4)
    for cell in nb.cells:
        cell.source = cell.source.replace("return len(f.read().split())", "return 2")
    nbformat.write(nb, tmp_path / "wrong.ipynb")
    notebooks = [tmp_path / "wrong.ipynb", key]  # the wrong one first: the answer key reads what it left
    results = grade(load_release(paths.release), notebooks, GradeOptions(tmp_path / "out", quiet=True, summary=False))
    by_name = {r.submission: next(c for c in r.checks if c.name == "count_test") for r in results}
    return paths, (by_name["answer_key"], by_name["wrong"])


READS_SHIPPED = ('with open("data.txt") as f:\n    expected = len(f.read().split())\n'
                 'with open("scribble.txt", "a") as f:  # what a cell writes beside the notebook\n    f.write("x")\n'
                 'with open("scribble.txt") as f:\n    assert f.read() == "x", "a file written by an earlier submission"\n'
                 'assert count_words("data.txt") == expected')


def test_a_test_cell_reads_the_shipped_files_by_the_notebooks_paths_as_nbgrader_gives_it(tmp_path: Path):
    """nbgrader's `open("data.txt")` in a test cell, data.txt shipped: 10/10 for the answer key, as nbgrader gives,
    and 0 for a wrong count (the reference confirms it in a folder of its own); what a cell writes there is gone
    before the next submission, and never in the release or the grading command's folder."""
    paths, (key, wrong) = _graded_import(tmp_path, READS_SHIPPED)
    assert (key.status, key.score) == ("passed", 10)
    assert (wrong.status, wrong.score) == ("failed", 0)
    assert (paths.release / "files" / "data.txt").is_file() and not list(paths.release.rglob("scribble.txt"))
    assert not (Path.cwd() / "scribble.txt").exists()


def test_a_file_the_grader_cannot_find_is_not_graded_and_never_the_students_fault(tmp_path: Path):
    paths, (key, wrong) = _graded_import(tmp_path, 'with open("results/elsewhere.txt") as f:\n    f.read()\n'
                                                   'assert count_words("data.txt") == 3')
    for check in (key, wrong):
        assert check.status == "ungraded" and check.score == 0
        assert "not of your notebook" in check.message and "your code" not in check.message
        assert "not a mistake of the notebook" in check.grader_problem and "FileNotFoundError" in check.grader_problem


def test_the_notebook_folder_is_put_back_before_each_submission(tmp_path: Path):
    from autograder.sandbox.workdir import NotebookFolder

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "rows.csv").write_text("1,2\n")
    folder = NotebookFolder({"data/rows.csv": str(tmp_path / "data" / "rows.csv")})
    try:
        folder.fresh()
        with folder.entered():
            assert Path("data/rows.csv").read_text() == "1,2\n"
            Path("data/rows.csv").write_text("changed")
            Path("left.txt").write_text("x")
        assert Path.cwd() != Path(folder.path)
        folder.fresh()
        with folder.entered():
            assert Path("data/rows.csv").read_text() == "1,2\n" and not Path("left.txt").exists()
        assert (tmp_path / "data" / "rows.csv").read_text() == "1,2\n"  # the release's own file never changes
    finally:
        folder.cleanup()


def test_a_verdict_of_the_reference_quoted_as_not_graded_is_said_of_the_reference():
    from autograder.judge import _of_the_reference

    assert _of_the_reference("the grader could not use what your code returned (TypeError: x)") == \
        "the grader could not use what the reference's code returned (TypeError: x)"
    assert _of_the_reference("Your normalize raised ValueError") == "The reference's normalize raised ValueError"
