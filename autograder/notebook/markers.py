"""nbgrader-style markers: find solution and hidden-test regions, and make the student version.

`### BEGIN SOLUTION` / `### END SOLUTION` mark solution code (or a written answer in a markdown
solution cell); `### BEGIN HIDDEN TESTS` / `### END HIDDEN TESTS` mark the hidden part of a test
cell. Anything that looks like a marker but is not exactly one is an error: a typo in a marker must
never let a solution through to students. So is a marker of another grading tool (foreign.py).

A `### PROMPT text` line inside a code solution region is what students get in place of the region (one line per
prompt line, at its indentation; `### PROMPT` alone: nothing), instead of the TODO stub: `### PROMPT m100 = ...`
hands out `m100 = ...` (otter-grader's prompt for a solution line, `autograder import otter`). The answer key drops
prompt lines; they are comments in the source notebook, so running it is unchanged.

A cell marked as a solution in its nbgrader metadata without markers is a solution as a whole: students
get nbgrader's stub for the notebook's language (code) or YOUR ANSWER HERE (markdown), and every line
of it is secret for the leak check.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from autograder.errors import UserError
from autograder.notebook.foreign import find_foreign

SOLUTION, HIDDEN = "SOLUTION", "HIDDEN TESTS"
_MARKER = re.compile(r"^\s*#{1,}\s*(BEGIN|END) (SOLUTION|HIDDEN TESTS)\s*$")
_LOOSE = re.compile(r"(BEGIN|END)\s*_?\s*(SOLUTION|HIDDEN\s*_?\s*TESTS?)", re.I)
_PROMPT = re.compile(r"^(\s*)### PROMPT(?: (.*))?$")  # a solution region's prompt line (see above)
CODE_STUB = ["# TODO: your code here", "raise NotImplementedError()"]
ANSWER_STUB = "YOUR ANSWER HERE"
# What nbgrader writes in place of a whole solution cell, by kernel language (its ClearSolutions.code_stub)
WHOLE_CELL_STUBS = {
    "python": "# YOUR CODE HERE\nraise NotImplementedError()",
    "R": "# YOUR CODE HERE\nfail()",
    "matlab": "% YOUR CODE HERE\nerror('No Answer Given!')",
    "octave": "% YOUR CODE HERE\nerror('No Answer Given!')",
    "sas": "/* YOUR CODE HERE */\n %notImplemented;",
    "java": "// YOUR CODE HERE",
}
# Every line of every stub above, stripped: text the student notebook is meant to hold, so never a leaked solution
STUB_LINES = frozenset(line.strip() for stub in (*CODE_STUB, ANSWER_STUB, *WHOLE_CELL_STUBS.values())
                       for line in stub.split("\n") if line.strip())


class MarkerError(UserError, ValueError):
    """A malformed source notebook; the message starts with `file: cell N, line L:`."""


@dataclass
class Region:
    """One marked region of a cell (BEGIN ... END marker lines, both included): a solution or hidden tests."""
    kind: str  # SOLUTION or HIDDEN
    begin: int  # 0-based line index of the BEGIN marker
    end: int  # 0-based line index of the END marker
    indent: str  # indentation of the BEGIN marker


def cell_source(cell) -> str:
    """A cell's source as one string, whether the notebook stores it as a string or a list of lines."""
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def nbgrader_meta(cell) -> dict:
    """A cell's nbgrader metadata; {} where there is none or it is not a dict (edited by hand)."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta if isinstance(meta, dict) else {}


def is_test_cell(cell) -> bool:
    """Whether nbgrader grades the cell automatically: `grade` set, `solution` not (a test cell, not a graded
    answer)."""
    meta = nbgrader_meta(cell)
    return bool(meta.get("grade")) and not meta.get("solution")


def is_answer_cell(cell) -> bool:
    """Whether the cell is a markdown cell students write in (nbgrader's `solution` on markdown: graded by hand)."""
    return cell.get("cell_type") == "markdown" and bool(nbgrader_meta(cell).get("solution"))


def is_solution_cell(cell) -> bool:
    """A code or markdown cell nbgrader marks as the student's to write (solution: true)."""
    return cell.get("cell_type") in ("code", "markdown") and bool(nbgrader_meta(cell).get("solution"))


def hand_graded(cell) -> str | None:
    """What nbgrader grades by hand in this cell ("written answer", "code answer", "task"), or None."""
    meta = nbgrader_meta(cell)
    if meta.get("task"):
        return "task"
    if meta.get("grade") and meta.get("solution"):
        return "written answer" if cell.get("cell_type") == "markdown" else "code answer"
    return None


def answer_digest(cell) -> str:
    """What a hand-graded answer cell holds, as a digest that ignores line endings and whitespace at line ends and at
    either end: the same digest as the cell handed out means the student did not answer it."""
    text = "\n".join(line.rstrip() for line in cell_source(cell).replace("\r\n", "\n").split("\n")).strip()
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def unanswered(nb, grade_id: str, handed_out: str) -> bool:
    """Whether the answer cell `grade_id` of the submitted notebook `nb` is as it was handed out (digest
    `handed_out`). A notebook without a cell of that grade_id (metadata dropped) cannot tell: False."""
    cells = [c for c in nb.get("cells", []) if nbgrader_meta(c).get("grade_id") == grade_id]
    return len(cells) == 1 and answer_digest(cells[0]) == handed_out


def heading_above(cells, index: int) -> str:
    """The text of the last markdown heading at or above cell `index` ("7. Question" for `## 7. Question`), or ""."""
    for cell in reversed(cells[:index + 1]):
        if cell.get("cell_type") == "markdown":
            found = [line.lstrip("#").strip() for line in cell_source(cell).split("\n")
                     if re.match(r"#{1,6}\s", line) and line.lstrip("#").strip()]
            if found:
                return found[-1]
    return ""


_CELL_NUMBER = re.compile(r"\b(notebook|nbgrader) cell \d+")


def cite_own_cell(text: str, grade_id: str, nb, heading: str | None) -> str:
    """`text` (a hand-graded check's "written answer, notebook cell 24") naming the cell as the reader finds it, as
    every message citing a cell does: by its number in the submitted notebook `nb`, the cell found by its nbgrader
    grade_id; where no cell has it (metadata dropped) and `heading` is not None (a cell of the assignment's own
    notebook, numbered in the built student notebook), by the heading above it instead of a number that may be
    another notebook's; else as it was."""
    for number, cell in enumerate(nb.get("cells", []), 1):
        if nbgrader_meta(cell).get("grade_id") == grade_id:
            return _CELL_NUMBER.sub(f"notebook cell {number}", text, count=1)  # (an import's "nbgrader cell" too)
    if heading is None:
        return text
    where = f"the cell under the heading \u201c{heading}\u201d" if heading else f"the cell whose grade_id is {grade_id}"
    return _CELL_NUMBER.sub(where, text, count=1)


def notebook_language(nb) -> str:
    """The kernel's language, as nbgrader reads it (python when the notebook does not say)."""
    return str(nb.get("metadata", {}).get("kernelspec", {}).get("language", "python"))


def whole_cell_stub(language: str, where: str) -> str:
    """The stub that replaces a solution cell without markers in a `language` notebook; MarkerError naming `where`
    for a language no stub is known for."""
    if language not in WHOLE_CELL_STUBS:
        raise MarkerError(f"{where}: a solution cell without markers in a {language!r} notebook: no stub is known "
                          f"for {language!r} (known: {sorted(WHOLE_CELL_STUBS)}); mark the solution with markers")
    return WHOLE_CELL_STUBS[language]


def find_regions(lines: list[str], where: str) -> list[Region]:
    """Regions in order; raises MarkerError for nesting, stray END, unclosed BEGIN, loose markers."""
    regions, open_region = [], None
    for i, line in enumerate(lines):
        m = _MARKER.match(line)
        if not m:
            if _LOOSE.search(line):
                raise MarkerError(f"{where}, line {i + 1}: malformed marker {line.strip()!r} "
                                  "(write exactly '### BEGIN SOLUTION', '### END HIDDEN TESTS', ...)")
            continue
        verb, kind = m.group(1), m.group(2)
        if verb == "BEGIN":
            if open_region is not None:
                raise MarkerError(f"{where}, line {i + 1}: BEGIN {kind} inside the {open_region.kind} region "
                                  f"opened on line {open_region.begin + 1} (regions cannot nest)")
            open_region = Region(kind, i, -1, line[: len(line) - len(line.lstrip())])
        else:
            if open_region is None or open_region.kind != kind:
                raise MarkerError(f"{where}, line {i + 1}: END {kind} without a matching BEGIN {kind}")
            open_region.end = i
            regions.append(open_region)
            open_region = None
    if open_region is not None:
        raise MarkerError(f"{where}, line {open_region.begin + 1}: BEGIN {open_region.kind} is never closed")
    return regions


def check_cell(cell, where: str) -> list[Region]:
    """Regions of a cell, after checking each kind of marker is in a cell where it belongs and that the
    cell holds no marker of another tool."""
    lines = cell_source(cell).split("\n")
    foreign = find_foreign(lines, cell.get("cell_type", ""))
    if foreign:
        raise MarkerError(foreign[0].describe(where))
    regions = find_regions(lines, where)
    kinds = {r.kind for r in regions}
    if HIDDEN in kinds and not (cell.get("cell_type") == "code" and is_test_cell(cell)):
        raise MarkerError(f"{where}, line {_first(regions, HIDDEN) + 1}: HIDDEN TESTS markers outside a test cell "
                          "(a code cell with nbgrader metadata grade: true)")
    if SOLUTION in kinds and cell.get("cell_type") == "code" and is_test_cell(cell):
        raise MarkerError(f"{where}, line {_first(regions, SOLUTION) + 1}: SOLUTION markers inside a test cell")
    if SOLUTION in kinds and cell.get("cell_type") == "markdown" and not is_answer_cell(cell):
        raise MarkerError(f"{where}, line {_first(regions, SOLUTION) + 1}: SOLUTION markers in a markdown cell "
                          "without nbgrader metadata solution: true")
    if SOLUTION in kinds and cell.get("cell_type") not in ("code", "markdown"):
        raise MarkerError(f"{where}: markers in a {cell.get('cell_type')} cell")
    inside = {i for r in regions if r.kind == SOLUTION and cell.get("cell_type") == "code"
              for i in range(r.begin + 1, r.end)}
    for i, line in enumerate(lines):
        if _PROMPT.match(line) and i not in inside:
            raise MarkerError(f"{where}, line {i + 1}: `### PROMPT` outside a code cell's SOLUTION region (it gives "
                              "what students get in place of the region)")
    return regions


def prompt_lines(body: list[str]) -> list[str] | None:
    """What students get in place of a solution region whose body has `### PROMPT` lines (None when it has none)."""
    found = [m for m in map(_PROMPT.match, body) if m]
    return [m.group(1) + m.group(2) for m in found if m.group(2)] if found else None


def _first(regions: list[Region], kind: str) -> int:
    return next(r.begin for r in regions if r.kind == kind)


def replace_regions(lines: list[str], regions: list[Region], replace) -> list[str]:
    """Lines with each region (markers included) swapped for `replace(region, body_lines)`."""
    out, pos = [], 0
    for r in regions:
        out.extend(lines[pos:r.begin])
        out.extend(replace(r, lines[r.begin + 1:r.end]))
        pos = r.end + 1
    out.extend(lines[pos:])
    return out


def student_source(cell, regions: list[Region], language: str = "python", where: str = "") -> str:
    """The cell as students see it: solutions stubbed, hidden tests removed; a solution cell without
    markers replaced whole, as nbgrader does."""
    lines = cell_source(cell).split("\n")
    if cell.get("cell_type") == "code" and is_solution_cell(cell) and not regions:
        return whole_cell_stub(language, where)
    if cell.get("cell_type") == "markdown":
        if is_answer_cell(cell) and not regions:
            return ANSWER_STUB
        return "\n".join(replace_regions(lines, regions, lambda r, body: [ANSWER_STUB]))

    def stub(region, body):
        if region.kind == HIDDEN:
            return []
        prompt = prompt_lines(body)
        return prompt if prompt is not None else [region.indent + s for s in CODE_STUB]

    return _strip_trailing_blank("\n".join(replace_regions(lines, regions, stub)))


def solution_source(cell, regions: list[Region], keep_hidden: bool) -> str:
    """The cell with solutions kept, their markers removed; hidden tests dropped, or kept with their markers (the
    judge runs them, and hidden_lines reads which lines they are: a failure there says only that a hidden test
    failed; the markers are comments, and every line keeps its number in the instructor's cell)."""
    lines = cell_source(cell).split("\n")
    def kept(region, body):
        if region.kind == SOLUTION:
            return [line for line in body if not _PROMPT.match(line)]
        return [lines[region.begin], *body, lines[region.end]] if keep_hidden else []

    return _strip_trailing_blank("\n".join(replace_regions(lines, regions, kept)))


def secret_lines(cell, regions: list[Region]) -> list[str]:
    """The text inside solution and hidden regions (for the leak check), plus whole answer cells."""
    lines = cell_source(cell).split("\n")
    if is_solution_cell(cell) and not regions:
        return lines
    return [line for r in regions for line in lines[r.begin + 1:r.end] if not _PROMPT.match(line)]


def public_lines(cell, regions: list[Region]) -> list[str]:
    """Source lines outside every region, markers excluded: what students may see."""
    lines = cell_source(cell).split("\n")
    if is_solution_cell(cell) and not regions:
        return []
    inside = {i for r in regions for i in range(r.begin, r.end + 1)}
    prompts = [p for r in regions if r.kind == SOLUTION for p in prompt_lines(lines[r.begin + 1:r.end]) or []]
    return [line for i, line in enumerate(lines) if i not in inside] + prompts


def _strip_trailing_blank(text: str) -> str:
    return text.rstrip("\n")


def hidden_lines(source: str) -> set[int]:
    """1-based numbers of a test cell's lines inside `### BEGIN HIDDEN TESTS` regions (the markers included)."""
    regions = find_regions(source.split("\n"), "test cell")
    return {i + 1 for r in regions if r.kind == HIDDEN for i in range(r.begin, r.end + 1)}


def locked_code(nb) -> dict[str, str]:
    """{grade_id: source} of the notebook's read-only code cells (nbgrader `locked`, neither an answer nor a test):
    code handed out that students must not change."""
    return {nbgrader_meta(cell)["grade_id"]: cell_source(cell) for cell in nb.get("cells", []) if is_locked_code(cell)}


def is_locked_code(cell) -> bool:
    """A read-only code cell: nbgrader `locked`, neither an answer nor a test, with a grade_id to find it by."""
    meta = nbgrader_meta(cell)
    return cell.get("cell_type") == "code" and bool(meta.get("locked")) and not meta.get("solution") \
        and not meta.get("grade") and isinstance(meta.get("grade_id"), str)


def same_code(mine: str, handed_out: str) -> bool:
    """Whether two sources of a cell are the same code to a reader: line endings (\\r\\n from Windows, \\r), spaces
    and tabs at the ends of lines, and blank lines at the end of the cell aside. Jupyter, nbgrader, Colab and
    editors differ in exactly these on save (a cell's final newline is kept by one and dropped by another)."""
    def norm(text: str) -> str:
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        return "\n".join(line.rstrip(" \t\f\v") for line in lines).rstrip("\n")
    return norm(mine) == norm(handed_out)


def restore_locked(nb, handed_out: dict[str, str]) -> list[str]:
    """Put back, as nbgrader's autograde does, the code of each read-only cell of a submission (found by its
    grade_id): every such cell is graded as handed out; one note per cell whose code the student changed (a
    difference `same_code` ignores is no change)."""
    notes = []
    for number, cell in enumerate(nb.get("cells", []), 1):
        grade_id = nbgrader_meta(cell).get("grade_id")
        if cell.get("cell_type") == "code" and isinstance(grade_id, str) and grade_id in handed_out:
            changed = not same_code(cell_source(cell), handed_out[grade_id])
            cell["source"] = handed_out[grade_id]
            if changed:
                notes.append(f"cell {number} is read-only: it was graded as it was handed out, without your changes")
    return notes
