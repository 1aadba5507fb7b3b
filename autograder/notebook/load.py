"""Read a notebook that may be broken in any way a submitted file can be.

Notebooks in format 4 (what Jupyter, JupyterLab and Colab write) are read with the json module alone:
importing nbformat costs about a second (its JSON-schema validator), which every single-submission
grading run would pay. Other formats are converted with nbformat.
"""
from __future__ import annotations

import errno
import json
import os
import re
import stat
import string
from pathlib import Path

MAX_NOTEBOOK_BYTES = 256 * 1024 * 1024
# What parsing a notebook's JSON costs the grading process beyond its text, in CPython objects: each string a str
# object and the slot that holds it; each comma a slot and a small value (a number, a dict entry); each object a dict;
# each array a list. Measured on CPython 3.11 (64-bit), rounded up.
STRING_BYTES, COMMA_BYTES, OBJECT_BYTES, ARRAY_BYTES = 64, 40, 240, 64
# Reading a notebook may cost at most this many times its size in objects (or LOAD_FLOOR_BYTES, for small files):
# with its text (1 to 4 bytes a character) and the strings' contents, a few times its size in all. Real notebooks
# stay far below (lines of source, outputs and images are long strings); a file of millions of short strings or empty
# objects (`"a",` parsed is some 15 times its bytes, `{},` 25 times) is refused before it is parsed.
LOAD_FACTOR = 4
LOAD_FLOOR_BYTES = 128 << 20
# Python's parser costs some 250 to 500 bytes a token (`x = [1,1,...]` of 1.2 MB: 280 MB, for the extraction's syntax
# trees, which the grader keeps for the whole notebook): the grader reads at most this many tokens of a notebook's code,
# about 200 MB. Real notebooks hold a few thousand to some tens of thousands; the largest cells over it go unread.
MAX_CODE_TOKENS = 400_000
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')  # (unrolled: linear in the string's length)


class Node(dict):
    """A notebook or a cell: a dict that also reads keys as attributes (as nbformat's NotebookNode does)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class NotebookError(ValueError):
    """The file is not a readable notebook; the message says why in plain words."""


class NotebookVanished(NotebookError):
    """The path names nothing at all any more (not even a dangling link): the file was removed or moved away."""


class NotebookUnreadable(NotebookError):
    """The file is there but this process may not read it (its permissions, an I/O error): the machine's problem,
    never the student's."""


def _object_cost(strings: int, commas: int, objects: int, arrays: int) -> int:
    return strings * STRING_BYTES + commas * COMMA_BYTES + objects * OBJECT_BYTES + arrays * ARRAY_BYTES


def parse_cost(raw: bytes, budget: int) -> tuple[int, int, int]:
    """(bytes of objects parsing `raw` would make, strings, other values: where over `budget`, at least that many),
    counted without a copy of `raw` (a pass that substituted its strings made a list of every piece between them,
    gigabytes for millions of short strings): first
    bounds from counts of its bytes (an upper bound counting commas and brackets inside strings too, a lower bound
    from its unescaped quotes), then, only where the budget lies between them, exactly, string by string (the
    structure between two strings counted in place), stopping as soon as the count passes `budget`."""
    commas, objects, arrays = raw.count(b","), raw.count(b"{"), raw.count(b"[")
    quotes = raw.count(b'"')
    most_strings, least_strings = quotes // 2, (quotes - raw.count(b'\\"')) // 2
    least = _object_cost(least_strings, 0, 0, 0)
    if least > budget:
        return least, least_strings, 0
    most = _object_cost(most_strings, commas, objects, arrays)
    if most <= budget:
        return most, most_strings, commas + objects + arrays
    strings = commas = objects = arrays = end = 0
    for match in _JSON_STRING.finditer(raw):
        start = match.start()
        strings += 1
        commas += raw.count(b",", end, start)
        objects += raw.count(b"{", end, start)
        arrays += raw.count(b"[", end, start)
        end = match.end()
        if strings % 4096 == 0 and _object_cost(strings, commas, objects, arrays) > budget:
            break
    else:
        commas += raw.count(b",", end)
        objects += raw.count(b"{", end)
        arrays += raw.count(b"[", end)
    return _object_cost(strings, commas, objects, arrays), strings, commas + objects + arrays


def load_budget(size: int) -> int:
    """What parsing a notebook of `size` bytes may cost in objects (LOAD_FACTOR)."""
    return max(LOAD_FLOOR_BYTES, LOAD_FACTOR * size)


def read_notebook(path: Path) -> tuple[Node, list[str]]:
    """The notebook as nbformat 4 with outputs dropped, plus notes on what was repaired."""
    notes = []
    try:
        info = path.stat()
    except OSError as exc:
        gone = NotebookVanished if not os.path.lexists(path) else \
            NotebookError if exc.errno in (errno.ENOENT, errno.ELOOP) else NotebookUnreadable  # (a link to nothing)
        raise gone(f"cannot read {path.name}: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):  # a FIFO or a device: reading it could block or never end
        raise NotebookError(f"{path.name} is not a regular file: it is not graded")
    size = info.st_size
    if size > MAX_NOTEBOOK_BYTES:
        raise NotebookError(f"{path.name} is {size / 2**20:.0f} MB, over the {MAX_NOTEBOOK_BYTES // 2**20} MB limit")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise NotebookUnreadable(f"cannot read {path.name}: {exc.strerror}") from None
    if not raw.strip():
        raise NotebookError(f"{path.name} is empty")
    budget = load_budget(size)
    cost, strings, values = parse_cost(raw, budget)
    if cost > budget:
        raise NotebookError(
            f"{path.name} is not read: reading it would take the grader more than {cost / 2**20:,.0f} MB for a file "
            f"of {size / 2**20:,.1f} MB (it holds at least {strings:,} strings"
            f"{f' and {values:,} other JSON values (lists, objects, numbers)' if values else ''}), more than "
            f"{LOAD_FACTOR} times its size; no notebook Jupyter writes is built like this. Clear its outputs "
            "(Edit > Clear All Outputs), keep data in a file the notebook reads rather than in its cells, save it "
            "and submit it again.")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        text = raw.decode("utf-8", errors="replace")
        notes.append(f"the file is not valid UTF-8 (byte {exc.start}); undecodable bytes were replaced")
    del raw  # its text holds it now: parsed, the notebook costs the text, its strings and cost, never a third copy
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(f"{path.name} is not a notebook: invalid JSON at line {exc.lineno}, column {exc.colno} "
                            f"({exc.msg}). Re-download it from Jupyter (File > Download) and submit again.") from None
    except RecursionError:
        raise NotebookError(f"{path.name} is not a notebook: JSON nested too deeply") from None
    del text
    if not isinstance(data, dict) or "nbformat" not in data:
        raise NotebookError(f"{path.name} is JSON but not a Jupyter notebook (no 'nbformat' field)")
    _drop_outputs(data)
    if data.get("nbformat") == 4:
        nb = _version4(data, path.name)
    else:
        nb = _converted(data, path.name)
        notes.append(f"converted from nbformat {data.get('nbformat')} to 4")
    for i, cell in enumerate(nb.get("cells", []), start=1):
        notes += _readable(cell, i)
    notes += _bounded_code(nb)
    return nb, notes


_WORD_CHARACTERS = {ord(c): "x" for c in string.ascii_letters + string.digits + "_"}
_SEPARATING = {**{i: " " for i in range(128)}, **_WORD_CHARACTERS}
_DELIMITERS = "()[]{},:;.=+-*/%<>!&|^~@'\"\n"


def code_tokens(source: str) -> int:
    """About how many tokens Python's parser makes of `source` (an upper bound for code, not far above it; the words of
    strings and comments count too), counted on copies of its text, never on a list of its pieces: its ASCII words
    (a word is a run of letters, digits and underscores) and its delimiters and operators, character by character."""
    words = source.translate(_SEPARATING)
    return words.count(" x") + words.startswith("x") + sum(source.count(c) for c in _DELIMITERS)


def _bounded_code(nb: Node) -> list[str]:
    """Leave unread, largest first, the code cells over MAX_CODE_TOKENS in all (their source emptied before anything
    parses it), and say so for each."""
    sizes = [(code_tokens(cell["source"]), i) for i, cell in enumerate(nb.get("cells", []), start=1)
             if cell.get("cell_type") == "code" and isinstance(cell.get("source"), str)]
    total, notes = sum(tokens for tokens, _ in sizes), []
    for tokens, number in sorted(sizes, reverse=True):
        if total <= MAX_CODE_TOKENS:
            break
        nb["cells"][number - 1]["source"] = ""
        total -= tokens
        notes.append(f"cell {number} holds some {tokens:,} tokens of code, and the notebook more than the "
                     f"{MAX_CODE_TOKENS:,} the grader reads (parsed, code costs it some 500 bytes a token): it was not "
                     "graded. Keep data in a file the notebook reads, not in its code.")
    return sorted(notes)


def _readable(cell: Node, number: int) -> list[str]:
    """Put right, in place, what of one cell no editor would write and the grader cannot read (a source that is
    not text, a `metadata.nbgrader` that is not a mapping); the notes that say so. The other cells are graded as
    they are: one broken cell never costs the whole notebook."""
    notes = []
    if not isinstance(cell.get("source", ""), str):
        cell["source"] = ""
        notes.append(f"cell {number} has no readable source (not text): it was not graded")
    meta = cell.get("metadata")
    if isinstance(meta, dict) and "nbgrader" in meta and not isinstance(meta["nbgrader"], dict):
        del meta["nbgrader"]
        notes.append(f"cell {number}'s nbgrader metadata is not a mapping: it was ignored")
    return notes


def _version4(data: dict, name: str) -> Node:
    cells = data.get("cells", [])
    if not isinstance(cells, list):
        raise NotebookError(f"{name} is not a notebook: its 'cells' are not a list of cells")
    nb = Node(data)
    nb["cells"] = []
    for cell in cells:
        # an entry that is no cell at all (null, a number) keeps its place, as an empty cell, so that the
        # cells after it keep their numbers; _readable notes it
        cell = Node(cell) if isinstance(cell, dict) else Node({"cell_type": "raw", "source": None, "metadata": {}})
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(line, str) for line in source):
            cell["source"] = "".join(source)
        if not isinstance(cell.get("metadata", {}), dict):
            cell["metadata"] = {}
        nb["cells"].append(cell)
    return nb


def _converted(data: dict, name: str) -> Node:
    import nbformat

    try:
        nb = nbformat.reads(json.dumps(data), as_version=4)
    except Exception as exc:  # noqa: BLE001 - nbformat raises several types for malformed or unknown versions
        raise NotebookError(f"{name} is not a notebook nbformat can read: {type(exc).__name__}: {exc}") from None
    return Node({**nb, "cells": [Node(c) for c in nb.get("cells", [])]})


def _drop_outputs(data: dict) -> None:
    """Outputs can be huge and are never graded: drop them before anything else looks at them."""
    cells = data.get("cells")
    if cells is None:  # nbformat 3 keeps cells in worksheets
        cells = [c for ws in data.get("worksheets", []) if isinstance(ws, dict) for c in ws.get("cells", [])]
    for cell in cells if isinstance(cells, list) else []:
        if isinstance(cell, dict) and "outputs" in cell:
            cell["outputs"] = []


def code_digest(source: str) -> str:
    """A code cell's source as a short digest, blind to trailing spaces and blank lines (what editors change)."""
    import hashlib

    text = "\n".join(line.rstrip() for line in source.replace("\r\n", "\n").split("\n")).strip("\n")
    return hashlib.sha256(text.encode("utf-8", errors="replace")).hexdigest()[:16]


def code_digests(nb) -> list[str]:
    """The digests of a notebook's non-empty code cells, in order (see `code_digest`)."""
    out = []
    for cell in nb.get("cells", []):
        source = cell.get("source", "")
        if isinstance(source, list):
            source = "".join(source)
        if cell.get("cell_type") == "code" and isinstance(source, str) and source.strip():
            out.append(code_digest(source))
    return out
