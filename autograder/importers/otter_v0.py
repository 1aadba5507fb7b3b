"""otter-grader's older notebook format (otter assign v0, jassign before it), rewritten in its current one (v1).

In v0 everything is in markdown and code cells: a question is a ```-fenced block whose first line is `BEGIN
QUESTION` (YAML after it) inside the question's markdown cell, `BEGIN ASSIGNMENT` the same for the assignment's
configuration. The cell after the question cell is its solution (a manual question's markdown prompt may come
first); the code cells right after it whose first line is `# TEST`, `# HIDDEN TEST` (`## TEST ##`, a TEST CONFIG)
are its test cases; the question ends at the first other cell. Solutions are marked as in v1 (`# SOLUTION`,
`# BEGIN SOLUTION`, BEGIN PROMPT), in every code cell, and a markdown cell with a line starting `**SOLUTION**`
(or `<strong>SOLUTION</strong>`) is a written solution wherever it stands.

`to_v1` rewrites the cells as otter's own converter does (`python -m otter.assign.v0.convert SRC DST`, otter 4
and 5): raw `# BEGIN QUESTION` / `# BEGIN SOLUTION` / `# BEGIN TESTS` cells around the same cells, test cells
without their `# TEST` line (`# HIDDEN` for a hidden one), the assignment block as `# ASSIGNMENT CONFIG`. Nothing
is dropped: a cell it does not recognize stays as it is, for the v1 import to convert or name.
"""
from __future__ import annotations

import copy
import re

from autograder.notebook.markers import cell_source

FENCE = "```"
_TEST = re.compile(r'(##\s*(hidden\s*)?test\s*##\s*|#\s*(hidden\s*)?test\s*|"""\s*#\s*BEGIN\s*TEST\s*CONFIG)', re.I)
_TEST_CONFIG = re.compile(r'"""\s*#\s*BEGIN\s*TEST\s*CONFIG')
_MD_SOLUTION = re.compile(r"(<strong>|\*{2})solution:?(</strong>|\*{2})", re.I)  # otter v0's MD_SOLUTION_REGEX


def spec(cell, kind: str) -> tuple[int, int] | None:
    """(first, last) line of the ``` block of a markdown cell whose first line is `BEGIN <kind>`, or None."""
    if cell.get("cell_type") != "markdown":
        return None
    lines = cell_source(cell).split("\n")
    fences = [i for i, line in enumerate(lines) if line[:3] == FENCE]
    for begin, end in zip(fences[::2], fences[1::2]):
        if begin + 1 < end and lines[begin + 1].strip(" ") == f"BEGIN {kind}":
            return begin, end
    return None


def is_v0(nb) -> bool:
    """Whether the notebook is in otter's v0 format: a ```-fenced BEGIN QUESTION or BEGIN ASSIGNMENT block."""
    return any(spec(cell, "QUESTION") or spec(cell, "ASSIGNMENT") for cell in nb.cells)


def is_test(cell) -> bool:
    """Whether a code cell is an otter v0 test cell: its first line a `## Test ##` or `# TEST` marker (hidden ones
    too) or a test config block."""
    lines = cell_source(cell).split("\n")
    return cell.get("cell_type") == "code" and bool(_TEST.match(lines[0]))


def is_markdown_solution(cell) -> bool:
    """Whether a markdown cell holds a written answer (a bold "Solution:" line, as otter v0 finds them)."""
    return cell.get("cell_type") == "markdown" and any(_MD_SOLUTION.match(line)
                                                        for line in cell_source(cell).split("\n"))


def _raw(source: str):
    from nbformat import from_dict

    return from_dict({"cell_type": "raw", "metadata": {}, "source": source})


def _delimiter(kind: str, end: bool = False):
    return _raw(f"# {'END' if end else 'BEGIN'} {kind}")


def _text(cell, lines: list[str]) -> list:
    """The cell with only `lines` (none when they are blank)."""
    if not "\n".join(lines).strip():
        return []
    cell = copy.deepcopy(cell)
    cell["source"] = "\n".join(lines).strip("\n")
    return [cell]


def _test_cell(cell):
    """The test cell without its `# TEST` line; `# HIDDEN` for a hidden one; a TEST CONFIG cell as it is."""
    lines = cell_source(cell).split("\n")
    if _TEST_CONFIG.match(lines[0]):
        return cell
    cell = copy.deepcopy(cell)
    cell["source"] = "\n".join((["# HIDDEN"] if "hidden" in lines[0].lower() else []) + lines[1:])
    return cell


def _block(cell, kind: str) -> tuple[list[str], list[str]]:
    """(the cell's lines without its BEGIN <kind> block, the block's YAML lines)."""
    lines = cell_source(cell).split("\n")
    begin, end = spec(cell, kind)
    return lines[:begin] + lines[end + 1:], lines[begin + 2:end]


def _question(cell) -> tuple[list, bool]:
    """The raw BEGIN QUESTION cell and the question's text (when any is left); whether the question is manual."""
    import yaml

    text, config = _block(cell, "QUESTION")
    try:
        manual = bool((yaml.safe_load("\n".join(config)) or {}).get("manual"))
    except (yaml.YAMLError, AttributeError):  # the v1 import reads the configuration again and names the problem
        manual = False
    return [_raw("\n".join(["# BEGIN QUESTION", *config])), *_text(cell, text)], manual


def _assignment(cell) -> list:
    text, config = _block(cell, "ASSIGNMENT")
    return [_raw("\n".join(["# ASSIGNMENT CONFIG", *config])), *_text(cell, text)]


def to_v1(cells: list[tuple[int, dict]]) -> list[tuple[int, dict]]:
    """The cells ((number in the source, cell) pairs) in otter's v1 format, question by question as otter's
    converter reads them; a cell made for a question keeps the number of the cell it was made from or for."""
    out: list = []
    question, manual, solved, testing = 0, False, False, False  # question: the number of the question's cell
    for number, cell in cells:
        if question and not solved:
            if manual and cell.get("cell_type") == "markdown" and not is_markdown_solution(cell):
                out += [(number, _delimiter("PROMPT")), (number, cell), (number, _delimiter("PROMPT", end=True))]
                continue
            if is_test(cell):
                out += [(number, _delimiter("TESTS")), (number, _test_cell(cell))]
                testing = True
            else:
                out += [(number, _delimiter("SOLUTION")), (number, cell), (number, _delimiter("SOLUTION", end=True))]
            solved = True
        elif question and is_test(cell):
            out += ([] if testing else [(number, _delimiter("TESTS"))]) + [(number, _test_cell(cell))]
            testing = True
        else:
            if question:
                out += _ends(number, testing)
                question, solved, testing = 0, False, False
            if spec(cell, "ASSIGNMENT"):
                out += [(number, c) for c in _assignment(cell)]
            elif spec(cell, "QUESTION"):
                begin, manual = _question(cell)
                out += [(number, c) for c in begin]
                question = number
            else:
                out.append((number, cell))
    return out + (_ends(len(cells), testing) if question else [])


def _ends(number: int, testing: bool) -> list[tuple[int, dict]]:
    return ([(number, _delimiter("TESTS", end=True))] if testing else []) + [(number, _delimiter("QUESTION", end=True))]
