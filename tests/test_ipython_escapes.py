"""IPython's own syntax is read where IPython reads it, at the start of a logical line (notebook/ipython.py): a
line that black starts with an operator inside brackets (`!= 0`, `% n`) is Python, in extraction, in imported
test cells and in grading, as it is in Jupyter."""
import nbformat
import pytest

from autograder.grading import GradeOptions, grade
from autograder.importers.common import parse
from autograder.importers.nbgrader import without_magics
from autograder.notebook.extract import extract, strip_ipython
from autograder.notebook.ipython import blanked, escapes

# black 26.10.1's output (`black -l 60`) for a correct normalize and softmax of the example assignment: binary
# operators start the lines black splits inside brackets
BLACK_NORMALIZE = '''def normalize(v: torch.Tensor) -> torch.Tensor:
    """Rows of v (N, D) scaled to unit L2 norm."""
    lengths_of_every_row_of_the_matrix = v.norm(
        dim=-1, keepdim=True
    )
    columns_that_a_row_of_the_matrix_holds = v.shape[-1]
    assert bool(
        columns_that_a_row_of_the_matrix_holds.bit_length()
        != columns_that_a_row_of_the_matrix_holds * 0
    ), "v has no columns"
    assert (
        lengths_of_every_row_of_the_matrix.dim()
        - columns_that_a_row_of_the_matrix_holds * 0
    ) % 2 == 0
    return v / lengths_of_every_row_of_the_matrix'''
BLACK_SOFTMAX = '''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax of x along `dim` (do not call torch.softmax)."""
    number_of_dimensions_of_the_input = max(x.dim(), 1)
    the_dimension_to_normalise_along = (
        dim
        + number_of_dimensions_of_the_input
        % number_of_dimensions_of_the_input
    )
    shifted = (
        x
        - x.max(
            dim=the_dimension_to_normalise_along,
            keepdim=True,
        ).values
    )
    e = shifted.exp()
    return e / e.sum(
        dim=the_dimension_to_normalise_along, keepdim=True
    )'''

# (cell, the 0-based lines IPython reads as an escape)
CASES = [
    (BLACK_NORMALIZE, []),
    (BLACK_SOFTMAX, []),
    ("!pip install -q torch\n" + BLACK_SOFTMAX + "\n%matplotlib inline", [0, 20]),
    ("x = (1,\n     2)\n%time f()", [2]),
    ("s = '''\n!not a shell line\n'''\n!echo yes", [3]),  # inside a string, then after it
    ("x = 1 + \\\n    2\n!echo yes", [2]),  # after a backslash continuation
    ("!pip install a \\\n   b\nx = 1", [0]),  # an escape takes its continuation lines with it
    ("if x:\n    !ls\n    %time y = 1", [1, 2]),
    ("torch.nn.Linear?\nx = 1\n??x", [0, 2]),
    ("files = !ls\nt = %timeit -o f()\na != b", [0, 1]),
    ("%%time\nx = (1,\n     != 2)", [0]),
    ("f(a\n  , b\n  / c)\nx = 1", []),  # leading commas and operators inside brackets
    ("# a comment\n\n!ls", [2]),
    ("x = f'{1}'\n!echo \"it's\"\ny = (2\n!= 3)", [1]),  # shell text that is no Python does not throw the rest
    ("!!ls\n%%capture\n", [0, 1]),
    ("def f():\n    return '''\n    %not\n    '''\n%who", [4]),
    ("text = 'is it?'\nanswer = x ?", []),  # `?` ends a string, and a line that is no help request
]


@pytest.mark.parametrize("cell, lines", CASES)
def test_escapes_are_the_lines_ipython_reads_as_escapes(cell, lines):
    assert [e.first for e in escapes(cell.split("\n"))] == lines


@pytest.mark.parametrize("cell, lines", [c for c in CASES if not c[0].startswith("%%")])
def test_ipythons_own_transformer_agrees(cell, lines):
    """Each escape found is one call IPython makes of it (`get_ipython()...`), and no other line changes."""
    transformer = pytest.importorskip("IPython.core.inputtransformer2")
    python = transformer.TransformerManager().transform_cell(cell)
    assert python.count("get_ipython()") == len(lines)
    if not lines:
        assert python == cell + "\n"


def test_a_black_formatted_cell_is_extracted_whole():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import torch"), nbformat.v4.new_code_cell(BLACK_NORMALIZE),
                nbformat.v4.new_code_cell("!pip install -q numpy\n" + BLACK_SOFTMAX)]
    extraction = extract(nb, {"normalize", "softmax"})
    assert not extraction.skipped
    units = {u.names[0]: u.source for u in extraction.units if u.kind == "definition"}
    assert units["normalize"] == BLACK_NORMALIZE and units["softmax"] == BLACK_SOFTMAX
    assert strip_ipython(BLACK_SOFTMAX) == BLACK_SOFTMAX


def test_imported_test_cells_read_black_formatted_lines_as_python():
    cell = "assert bool(\n    normalize(v).shape[-1]\n    != 0\n)\n%time n = f(1)\n!ls"
    assert parse(cell) is not None
    converted, done, left = without_magics(cell)
    assert converted.split("\n")[:4] == cell.split("\n")[:4]
    assert done == [(5, "%time n = f(1)", "n = f(1)")] and left == [(6, "!ls")]
    assert blanked("if x:\n    !ls", replacement="") == "if x:\n    pass"  # a block keeps a statement


def test_a_black_formatted_correct_submission_gets_full_marks(example_build, example_release, tmp_path):
    nb = nbformat.read(example_build.release / "answer_key.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.source.startswith("def normalize("):
            cell.source = BLACK_NORMALIZE
        elif cell.source.startswith("def softmax("):
            cell.source = "!pip install -q torch\n" + BLACK_SOFTMAX
    nbformat.write(nb, tmp_path / "black.ipynb")
    (result,) = grade(example_release, [tmp_path / "black.ipynb"], GradeOptions(tmp_path / "out", quiet=True))
    assert [(c.name, c.message) for c in result.checks if c.score != c.max_score and c.status != "pending"] == []
    assert (result.score, result.max_score) == (11, 13)  # as the answer key: the written answer's 2 are pending


def test_a_cell_too_long_to_tokenize_is_read_by_first_character_in_bounded_time(monkeypatch):
    import autograder.notebook.ipython as ipython

    monkeypatch.setattr(ipython, "MAX_TOKENIZED_CHARS", 100)
    cell = "x = [\n" + "    1,\n" * 50 + "]\n!ls"
    assert [e.first for e in escapes(cell.split("\n"))] == [52]
    assert [e.first for e in escapes(BLACK_NORMALIZE.split("\n") + ["#" * 200, "!ls"])] == [8, 16]  # as before
