"""Grading markers of other tools: the build refuses them rather than read them as comments (fail closed).

A source notebook written for nbgrader's AUTOTEST or for otter-grader carries its solutions and tests in
markers this build does not implement. Read as comments, they would ship solutions and hidden tests to
students and grade nothing. So every cell is scanned, and any marker-like line stops the build with the
file, cell, line, the text seen, whose format it is and what to do.

What counts as a marker (case-sensitive: ordinary comments are written in lower case or mixed case):
- `AUTOTEST ...` / `HASHED AUTOTEST ...` after `#` (nbgrader's generated tests);
- `BEGIN WORDS` / `END WORDS` in capitals (otter's QUESTION, PROMPT, TESTS, IGNORE, TEST CONFIG ..., nbgrader's
  MARK SCHEME, which `autograder import nbgrader` keeps out of the notebooks), except this build's own `### BEGIN SOLUTION` / `### END HIDDEN TESTS` markers;
- a comment of a few words in capitals naming a grading notion (SOLUTION, TEST, HIDDEN, SEED, PROMPT,
  QUESTION, IGNORE, AUTOTEST) or ASSIGNMENT CONFIG, alone or at the end of a line of code (`x = 2 # SOLUTION`).
In code cells a marker is the text after a `#` up to the end of the line; in markdown and raw cells, a
whole line (an HTML comment, a heading or bold text included); raw cells in any case, as otter reads them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

OWN = re.compile(r"^\s*#+\s*(BEGIN|END) (SOLUTION|HIDDEN TESTS)\s*$|^\s*### PROMPT( |$)")  # this build's markers
#   (markers.py; a `### PROMPT` line outside a solution region is refused there)
KEYWORDS = {"SOLUTION", "SOLUTIONS", "TEST", "TESTS", "HIDDEN", "SEED", "PROMPT", "QUESTION", "IGNORE", "AUTOTEST"}
PHRASES = ("ASSIGNMENT CONFIG",)  # markers whose words are ordinary one by one
_WORDS = re.compile(r"^[A-Z]+(?:[ _][A-Z]+){0,4}$")  # a few words in capitals, nothing else
_AUTOTEST = re.compile(r"^(HASHED\s+)?AUTOTEST\b")
_BEGIN_END = re.compile(r"^(BEGIN|END)\s+[A-Z]+")
_DECORATION = " \t#*_=-:<>!"  # around a marker: comment signs, markdown emphasis, HTML comments

OUR_MARKERS = "### BEGIN SOLUTION / ### END SOLUTION and ### BEGIN HIDDEN TESTS / ### END HIDDEN TESTS"
IMPORT_OTTER = ("convert the notebook with `autograder import otter NOTEBOOK --name NAME`, or by hand: solutions "
                f"between {OUR_MARKERS.split(' and ')[0]}, tests in test cells (nbgrader metadata) or tests/*.py")


@dataclass(frozen=True)
class Style:
    """Whose marker format a foreign marker belongs to, and what the instructor does about it."""

    name: str  # whose format, in words
    advice: str  # what to do about it


AUTOTEST = Style("nbgrader's AUTOTEST (tests generated when the assignment is released)",
                 "write the test out as assert statements in the test cell "
                 "(`nbgrader generate_assignment` shows what it expands to)")
OTTER = Style("otter-grader's assignment format", IMPORT_OTTER)
OTTER_OLD = Style("otter-grader's older format (`# SOLUTION` lines, `# TEST` / `## HIDDEN TEST ##` cells)",
                  "convert the notebook with `autograder import otter NOTEBOOK --name NAME` (it reads otter's older "
                  "format too), or by hand: solutions between "
                  f"{OUR_MARKERS.split(' and ')[0]}, each test cell with nbgrader metadata (grade: "
                  "true, grade_id, points) and its hidden part between ### BEGIN HIDDEN TESTS / ### END HIDDEN TESTS")
MARK_SCHEME = Style("nbgrader's mark scheme (a task cell's instructor-only text)",
                    "convert the notebook with `autograder import nbgrader SOURCE --name NAME` (it keeps the mark "
                    "scheme out of both notebooks, beside the task's manual check), or move the text out of the notebook")
UNKNOWN = Style("another tool's grading format",
                f"this build reads only {OUR_MARKERS}; convert the cell to them")


@dataclass(frozen=True)
class ForeignMarker:
    """A marker-like line found in a cell (module docstring), with the format it was recognized as."""

    line: int  # 0-based index in the cell
    text: str  # the line as written
    marker: str  # the marker's words, as recognized
    style: Style

    def describe(self, where: str) -> str:
        """The build's refusal message for this marker: `where` (the file and cell), the line (1-based), the text,
        whose format it is and what to do."""
        return (f"{where}, line {self.line + 1}: {self.text.strip()!r} is a marker of {self.style.name}, which "
                f"this build does not implement (solutions and tests in it would be read as comments): "
                f"{self.style.advice}. If it is an ordinary comment, write it in lower case.")


def marker_words(text: str) -> str | None:
    """The marker named by `text` (what follows a `#`, or a markdown line), or None for ordinary text."""
    words = text.strip(_DECORATION)
    if _AUTOTEST.match(words):
        return words
    if not _WORDS.match(words):
        return None
    if _BEGIN_END.match(words) or KEYWORDS & set(re.split(r"[ _]", words)) or words in PHRASES:
        return words
    return None


def _code_candidates(line: str) -> list[str]:
    """Every text after a `#` of the line (a comment, or otter's `\"\"\" # BEGIN PROMPT`)."""
    return [line[i + 1:] for i, ch in enumerate(line) if ch == "#" and (i == 0 or line[i - 1] != "#")]


def classify(words: str) -> Style:
    """The Style of marker words `marker_words` found: AUTOTEST, MARK_SCHEME, OTTER_OLD, OTTER, else UNKNOWN."""
    if _AUTOTEST.match(words):
        return AUTOTEST
    if re.search(r"\bMARK SCHEME\b", words):
        return MARK_SCHEME
    if re.search(r"\bHIDDEN TEST\b|^TEST$", words):
        return OTTER_OLD
    otter = r"QUESTION|PROMPT|TESTS|IGNORE|CONFIG|SEED|SOLUTION|HIDDEN|PLUGIN"
    return OTTER if re.search(rf"\b({otter})\b", words) else UNKNOWN


def find_foreign(lines: list[str], cell_type: str) -> list[ForeignMarker]:
    """The foreign markers among a cell's lines (at most one per line; this build's own markers skipped), in line
    order. `cell_type` decides what is read: the comments of a code cell, whole lines elsewhere, raw cells in any
    case."""
    found = []
    for index, line in enumerate(lines):
        if OWN.match(line):
            continue
        # otter reads its raw cells in any case; everywhere else a marker is in capitals
        candidates = _code_candidates(line) if cell_type == "code" else [line.upper() if cell_type == "raw" else line]
        for text in candidates:
            words = marker_words(text)
            if words is not None:
                found.append(ForeignMarker(index, line, words, classify(words)))
                break
    return found
