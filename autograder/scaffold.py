"""`autograder new NAME`: a working assignment to start from, in solutions/NAME/.

The skeleton has one part (a ReLU), one public check (a notebook test cell students can run), one hidden
check (tests/test_hidden.py, compared with the reference), and a corpus of one correct variant and one bug
confined to the part. It builds, and `autograder verify NAME` passes on it as written: each piece is there
to be edited, with the rest still working. Nothing existing is overwritten.
"""
from __future__ import annotations

import re
from pathlib import Path

PART = "1. ReLU"

CONFIG = '''\
title = "{title}"
notebook = "{name}.ipynb"      # the source notebook, beside this file
files = []                     # files shipped next to the student notebook (data, helpers)

[limits]
check_seconds = 30             # wall time for one check
import_seconds = 30            # wall time for loading a submission's definitions
submission_seconds = 300       # wall time for a whole submission
'''

INTRO = "# {title}\n\nEach part: a function to write, and a test cell you can run to check it."

SOLUTION = '''\
def relu(x: torch.Tensor) -> torch.Tensor:
    """max(x, 0) elementwise, of the same shape as x."""
    ### BEGIN SOLUTION
    return x.clamp(min=0)
    ### END SOLUTION'''

PUBLIC_TEST = '''\
x = torch.tensor([-2.0, 0.0, 3.0])
assert torch.equal(relu(x), torch.tensor([0.0, 0.0, 3.0])), "relu([-2, 0, 3]) should be [0, 0, 3]"'''

HIDDEN_TESTS = '''\
"""Hidden checks: never shipped to students (see docs/writing-assignments.md)."""
import torch

from autograder.testing import check, expect_close, expect_shape

PART = "{part}"


@check("relu: matches the reference on random inputs", points=2, part=PART)
def relu_matches_reference(sub, ref):
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(1))
    out = sub.relu(x)
    expect_shape(out, (4, 5), "relu(x) for x of shape (4, 5)")
    expect_close(out, ref.relu(x), "relu(x) differs from max(x, 0) on random inputs")
'''

CORPUS = '''\
"""Submissions the checks must grade right (see "The corpus" in docs/writing-assignments.md)."""
from autograder.corpus import Bug, Variant

VARIANTS = [  # correct, written differently: every point
    Variant("relu_where", {{"relu": "def relu(x):\\n    return torch.where(x > 0, x, torch.zeros_like(x))\\n"}},
            "torch.where in place of clamp"),
]
BUGS = [  # wrong: loses points on the named checks, with a message containing the given text
    Bug("relu_abs", {{"return x.clamp(min=0)": "return x.abs()"}},
        {{"relu: matches the reference on random inputs": "differs from max(x, 0)"}},
        "absolute value in place of max(x, 0)", confined_to="{part}"),
]
'''


class ScaffoldError(ValueError):
    """A new assignment that cannot be made (its name is not an identifier)."""
    pass


def _nbgrader(grade_id: str, **flags) -> dict:
    return {"nbgrader": {"grade_id": grade_id, "grade": False, "solution": False, "locked": False,
                         "schema_version": 3, **flags}}


def notebook(title: str):
    """The source notebook of a new assignment titled `title`: an introduction, one part with a solution cell (relu)
    and its public test cell, with nbgrader metadata."""
    import nbformat

    v4 = nbformat.v4
    cells = [v4.new_markdown_cell(INTRO.format(title=title)), v4.new_code_cell("import torch"),
             v4.new_markdown_cell(f"## {PART}\n\nWrite `relu(x)`: the elementwise maximum of `x` and 0."),
             v4.new_code_cell(SOLUTION, metadata=_nbgrader("relu", solution=True)),
             v4.new_code_cell(PUBLIC_TEST, metadata=_nbgrader("relu_public", grade=True, points=1, part=PART))]
    nb = v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def new_assignment(name: str, solutions: Path, title: str | None = None) -> Path:
    """Write the skeleton to solutions/<name>/; returns that folder."""
    import nbformat

    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name):
        raise ScaffoldError(f"{name!r}: an assignment name is letters, digits and _, starting with a letter")
    target = solutions / name
    if target.exists():
        raise ScaffoldError(f"{target} exists: choose another name")
    title = title or name.replace("_", " ").capitalize()
    (target / "tests").mkdir(parents=True)
    (target / "corpus").mkdir()
    (target / "assignment.toml").write_text(CONFIG.format(title=title, name=name), encoding="utf-8")
    nbformat.write(notebook(title), target / f"{name}.ipynb")
    (target / "tests" / "test_hidden.py").write_text(HIDDEN_TESTS.format(part=PART), encoding="utf-8")
    (target / "corpus" / "cases.py").write_text(CORPUS.format(part=PART), encoding="utf-8")
    return target
