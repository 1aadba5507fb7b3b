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
