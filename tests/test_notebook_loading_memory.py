"""Reading a notebook costs a bounded multiple of its size (autograder/notebook/load.py): a file whose JSON would
parse into more objects than LOAD_FACTOR times its size is refused before it is parsed, and a pre-scan that says so
holds no copy of it; code over MAX_CODE_TOKENS is left unread before Python's parser sees it. Either way the
submission gets its row with a message saying what to do."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from autograder.grading import GradeOptions, grade
from autograder.notebook import load
from tests.conftest import make_submission

# a notebook of short strings (a cell's source as a list of one-character lines): 4 bytes each in the file, some 60
# parsed, so 15 times the file's size
SHORT_STRINGS = 3_000_000


def _short_strings_notebook(path, count: int) -> None:
    with open(path, "w") as fh:
        fh.write('{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code", '
                 '"metadata": {}, "execution_count": null, "outputs": [], "source": [')
        fh.write(",".join(['"a"'] * count))
        fh.write("]}]}")


def test_a_notebook_of_millions_of_short_strings_is_refused_within_a_small_multiple_of_its_size(tmp_path):
    """12 MB of 3 million short strings, read in a process of its own: refused with a message, and the process grew
    by less than twice the file's size (the file itself and counts of its bytes; a pass that substituted its strings
    grew it by some 40 times its size, and parsing it by 15 times)."""
    path = tmp_path / "strings.ipynb"
    _short_strings_notebook(path, SHORT_STRINGS)
    size = path.stat().st_size
    probe = ("import resource, sys\nfrom pathlib import Path\nfrom autograder.notebook.load import NotebookError, "
             "read_notebook\nbefore = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\ntry:\n"
             "    read_notebook(Path(sys.argv[1]))\n    message = 'read'\nexcept NotebookError as exc:\n"
             "    message = str(exc)\nafter = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
             "print((after - before) * 1024)\nprint(message)\n")
    done = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, timeout=300,
                          check=True)
    grown, message = done.stdout.split("\n", 1)
    assert "is not read" in message and "more than 4 times its size" in message and "Clear its outputs" in message
    assert "3,000,0" in message  # the strings it counted
    assert int(grown) < 2 * size, (int(grown) >> 20, size >> 20)


def test_a_notebook_under_its_budget_is_read_and_structure_inside_strings_costs_nothing(tmp_path, monkeypatch):
    """The exact count (string by string) where the quick bounds do not decide: commas and brackets inside a long
    string cost nothing; the same number as JSON values is refused. Scaled down: no floor."""
    monkeypatch.setattr(load, "LOAD_FLOOR_BYTES", 0)
    inside = tmp_path / "inside.ipynb"
    source = "x = '" + "[{}]," * 20_000 + "'\n"
    inside.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": None}]}))
    nb, _ = load.read_notebook(inside)
    assert nb.cells[0].source == source
    outside = tmp_path / "outside.ipynb"
    outside.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {"x": [[{}]] * 20_000},
                                   "cells": []}))
    with pytest.raises(load.NotebookError, match="20,000 other JSON values|more than 4 times"):
        load.read_notebook(outside)


def test_code_over_the_token_budget_is_left_unread_and_the_rest_graded(example_release, tmp_path, monkeypatch):
    """A cell holding a huge literal (Python's parser costs some 500 bytes a token: 12 MB of `'a',` took 3 GB): the
    largest cells over MAX_CODE_TOKENS are emptied before anything parses them, each named in the row's notes, and
    the rest is graded. Scaled down: a budget of 20,000 tokens and a literal of 30,000."""
    monkeypatch.setattr(load, "MAX_CODE_TOKENS", 20_000)
    key = example_release.dir / "answer_key.ipynb"
    nb = make_submission(tmp_path / "literal.ipynb", key, append=["DATA = [" + ",".join(["'a'"] * 30_000) + "]\n"])
    [result] = grade(example_release, [nb], GradeOptions(tmp_path / "out", quiet=True))
    assert result.score == 11, [(c.name, c.message) for c in result.checks]
    feedback = (tmp_path / "out" / "literal" / "feedback.md").read_text()
    assert "tokens of code" in feedback and "Keep data in a file the notebook reads" in feedback


def test_a_refused_notebook_gets_its_row_with_the_message(example_release, tmp_path, monkeypatch):
    monkeypatch.setattr(load, "LOAD_FLOOR_BYTES", 1 << 20)
    path = tmp_path / "strings.ipynb"
    _short_strings_notebook(path, 500_000)
    [result] = grade(example_release, [path], GradeOptions(tmp_path / "out", quiet=True))
    assert result.score == 0 and "is not read" in result.error and "Clear its outputs" in result.error
    assert "is not read" in (tmp_path / "out" / "strings" / "feedback.md").read_text()
