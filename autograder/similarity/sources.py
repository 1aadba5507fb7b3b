"""A notebook read for comparison: per part, the code its student wrote and the answers they wrote.

What is student-written: every top-level statement of the code cells (imports and test cells left out) whose
normalised tokens differ from the handed-out student notebook's statement of the same name (an untouched stub is
no one's work), and every markdown cell whose text the student notebook does not hold as it is. Fingerprints of
the student notebook's code (the starter code, the stubs) are taken out in compare.py.

The part of a definition: the part the answer key places it in (the heading above it, else the test cell after
it: notebook/parts.py), else the part the heading above it in the submission names, else `(other)`.

Reading never raises for what a file holds: a notebook that cannot be read, or holds nothing written, is a Source
with its `problem` said in plain words (a row of the report).
"""
from __future__ import annotations

import functools
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from autograder.notebook.extract import is_test_cell
from autograder.notebook.load import NotebookError, read_notebook
from autograder.notebook.markers import ANSWER_STUB, cell_source
from autograder.notebook.parts import definition_part, headings, part_named_by, part_order
from autograder.similarity.fingerprints import fingerprints
from autograder.similarity.normalise import cell_definitions, defined_names, plain_statement

OTHER = "(other)"
CURRENT, PAST, KEY = "current", "past", "answer key"
SHINGLE = 5  # words per shingle of a written answer
MAX_CELL_CHARS = 2_000_000  # a code cell longer than this is compared by its first part only (said in a note)


@dataclass
class Source:
    """One notebook read for comparison (module docstring): per part, its student-written code and answers and their
    fingerprints; `problem` when it could not be compared."""

    id: str
    kind: str  # CURRENT, PAST (an earlier term's, --past) or KEY
    path: Path | None = None
    code: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # part -> [(name, source)] written
    code_fps: dict[str, np.ndarray] = field(default_factory=dict)
    text: dict[str, str] = field(default_factory=dict)  # part -> the written answers
    text_fps: dict[str, np.ndarray] = field(default_factory=dict)
    problem: str = ""  # why it could not be compared (a row of the report)
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        """The source's name in the report: its id, with its kind for an earlier term's or the answer key."""
        return self.id if self.kind == CURRENT else f"{self.id} ({self.kind})"


@dataclass
class Layout:
    """What the assignment hands out and where each definition belongs."""

    parts: list[str]
    part_of: dict[str, str]  # definition name -> part (from the answer key)
    names: set[str]  # every def / class name of the notebooks: the role G in the tokens
    starter_tokens: dict[str, str] = field(default_factory=dict)  # name -> tokens as handed out
    starter_statements: set[str] = field(default_factory=set)  # plain_statement texts as handed out
    # statement text -> (name, fingerprints): a statement many notebooks hold as it is is normalised once per run
    # (the roles of its names depend on `names` only, the same for the run)
    cache: dict[str, tuple[str, np.ndarray]] = field(default_factory=dict)
    starter_code_fps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    starter_text: set[str] = field(default_factory=set)  # normalised markdown cells as handed out
    starter_text_fps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))


def _normal_words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def shingles(text: str, n: int = SHINGLE) -> np.ndarray:
    """The word n-grams of a text (lower case, punctuation and markup gone) as sorted unique uint64 hashes."""
    words = _normal_words(text)
    grams = [" ".join(words[i:i + n]) for i in range(max(1, len(words) - n + 1))] if words else []
    return np.unique(np.array([zlib.crc32(g.encode()) << 32 | zlib.crc32(g[::-1].encode()) for g in grams],
                              dtype=np.uint64))


@functools.lru_cache(maxsize=4096)
def _part_named(text: str, parts: tuple[str, ...]) -> str | None:
    return part_named_by(text, parts)


def heading_parts(cells, parts) -> list[str | None]:
    """notebook/parts.heading_parts, with each heading's part remembered (every notebook of a class has the same
    headings)."""
    parts = tuple(parts)
    return [next((p for p in (_part_named(text, parts) for _, text in reversed(under)) if p), None)
            for under in headings(cells)]


def _code_cells(nb) -> list[tuple[int, dict]]:
    return [(i, c) for i, c in enumerate(nb.get("cells", []), start=1)
            if c.get("cell_type") == "code" and not is_test_cell(c)]


def layout(parts: list[str], student_nb: Path | None, answer_key: Path | None) -> Layout:
    """The layout from the release's student notebook and answer key (either may be missing: then no code is taken
    as handed out, or parts come from headings only)."""
    parts = part_order(parts)
    part_of: dict[str, str] = {}
    names: set[str] = set()
    key_nb = _read_or_none(answer_key)
    if key_nb is not None:
        cells = key_nb.get("cells", [])
        names |= defined_names([cell_source(c) for c in cells if c.get("cell_type") == "code"])
        by_heading = heading_parts(cells, parts)
        for index, cell in enumerate(cells):
            if cell.get("cell_type") != "code" or is_test_cell(cell):
                continue
            position = _part_of_next_test(cells, index, parts)
            for name in defined_names([cell_source(cell)]):
                part = definition_part([], by_heading[index], position, parts)
                part_of.setdefault(name, part or OTHER)
    result = Layout(parts, part_of, names)
    student = _read_or_none(student_nb)
    if student is not None:
        code = [cell_source(c) for _, c in _code_cells(student)]
        result.names |= defined_names(code)
        result.starter_statements |= {plain_statement(c) for c in code}
        fps = []
        for source in code:
            for d in cell_definitions(source, result.names):
                result.starter_statements.add(plain_statement(d.source))
                result.starter_tokens[d.name or d.source] = " ".join(t.text for t in d.tokens)
                fps.append(fingerprints(d.tokens))
        result.starter_code_fps = np.unique(np.concatenate(fps)) if fps else result.starter_code_fps
        markdown = [cell_source(c) for c in student.get("cells", []) if c.get("cell_type") == "markdown"]
        result.starter_text = {" ".join(_normal_words(m)) for m in markdown}
        texts = [shingles(m) for m in markdown]
        result.starter_text_fps = np.unique(np.concatenate(texts)) if texts else result.starter_text_fps
    return result


def _part_of_next_test(cells, index: int, parts: list[str]) -> str | None:
    """The part of the first test cell after `index` whose heading names a part."""
    by_heading = None
    for j in range(index + 1, len(cells)):
        if is_test_cell(cells[j]):
            by_heading = by_heading or heading_parts(cells, parts)
            if by_heading[j]:
                return by_heading[j]
    return None


def _read_or_none(path: Path | None):
    if path is None or not Path(path).is_file():
        return None
    try:
        return read_notebook(Path(path))[0]
    except NotebookError:
        return None


def read_source(source_id: str, path: Path, kind: str, lay: Layout) -> Source:
    """One notebook read for comparison; never raises for what the file holds."""
    src = Source(source_id, kind, path)
    try:
        nb, notes = read_notebook(path)
    except NotebookError as exc:
        src.problem = str(exc)
        return src
    except (OSError, MemoryError, RecursionError) as exc:
        src.problem = f"{path.name} could not be read: {type(exc).__name__}"
        return src
    src.notes += notes
    cells = nb.get("cells", [])
    by_heading = heading_parts(cells, lay.parts)
    _read_code(src, cells, by_heading, lay)
    _read_text(src, cells, by_heading, lay)
    if not src.code and not src.text:
        src.problem = "nothing written: no code or answer differs from the notebook as handed out"
    return src


def _read_code(src: Source, cells, by_heading, lay: Layout) -> None:
    fps: dict[str, list[np.ndarray]] = {}
    for number, cell in enumerate(cells, start=1):
        if cell.get("cell_type") != "code" or is_test_cell(cell):
            continue
        text = cell_source(cell)
        if len(text) > MAX_CELL_CHARS:
            src.notes.append(f"cell {number} holds {len(text):,} characters: its first {MAX_CELL_CHARS:,} are compared")
            text = text[:MAX_CELL_CHARS]
        if plain_statement(text) in lay.starter_statements:
            continue  # a cell as handed out: not even parsed
        for name, source, found in _statements(text, number, lay):
            part = lay.part_of.get(name) or by_heading[number - 1] or OTHER
            src.code.setdefault(part, []).append((name, source))
            fps.setdefault(part, []).append(found)
    src.code_fps = {p: np.unique(np.concatenate(arrays)) for p, arrays in fps.items()}


CACHE_ENTRIES = 50_000


def _statements(text: str, number: int, lay: Layout) -> list[tuple[str, str, np.ndarray]]:
    """(name, source, fingerprints) of each statement of a code cell that is not as handed out."""
    known: list[str] = []

    def skip(statement: str) -> bool:
        if statement in lay.cache:
            known.append(statement)
            return True
        return plain_statement(statement) in lay.starter_statements

    found = []
    for d in cell_definitions(text, lay.names, number, skip):
        handed_out = not d.tokens or lay.starter_tokens.get(d.name or d.source) == " ".join(t.text for t in d.tokens)
        entry = (d.name, fingerprints(d.tokens) if not handed_out else np.zeros(0, np.uint64))
        if len(lay.cache) < CACHE_ENTRIES:
            lay.cache[d.source] = entry
        found.append((d.name, d.source, entry[1]))
    found += [(lay.cache[s][0], s, lay.cache[s][1]) for s in known]
    return [f for f in found if len(f[2])]


def _read_text(src: Source, cells, by_heading, lay: Layout) -> None:
    texts: dict[str, list[str]] = {}
    for number, cell in enumerate(cells, start=1):
        if cell.get("cell_type") != "markdown":
            continue
        text = cell_source(cell)
        plain = " ".join(_normal_words(text))
        if not plain or plain in lay.starter_text or plain == " ".join(_normal_words(ANSWER_STUB)):
            continue
        texts.setdefault(by_heading[number - 1] or OTHER, []).append(text)
    for part, written in texts.items():
        src.text[part] = "\n\n".join(written)
        src.text_fps[part] = shingles(src.text[part])
