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
from pathlib import Path

MAX_NOTEBOOK_BYTES = 256 * 1024 * 1024
# JSON values (objects, lists, numbers...) a notebook may hold outside its strings: parsed, each costs the grading
# process some 50 to 100 bytes (a file of 256 MB of `{},` would take some 6 GB), and no notebook holds this many
# (a line of source or an image is one value; a 69 MB string constant is one)
MAX_JSON_VALUES = 5_000_000
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


def _json_values(raw: bytes) -> int:
    """About how many JSON values `raw` holds outside its strings (its commas, objects and lists): an upper bound
    counted on the bytes as they are first, and only when that is over the limit again with the strings taken out
    (commas in a printed output count for nothing)."""
    count = raw.count(b",") + raw.count(b"{") + raw.count(b"[")
    if count <= MAX_JSON_VALUES:
        return count
    bare = _JSON_STRING.sub(b'""', raw)
    return bare.count(b",") + bare.count(b"{") + bare.count(b"[")


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
    values = _json_values(raw)
    if values > MAX_JSON_VALUES:
        raise NotebookError(f"{path.name} holds more than {MAX_JSON_VALUES:,} JSON values (objects, lists, numbers) "
                            "outside its strings, more than any notebook holds: it is not read")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        text = raw.decode("utf-8", errors="replace")
        notes.append(f"the file is not valid UTF-8 (byte {exc.start}); undecodable bytes were replaced")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(f"{path.name} is not a notebook: invalid JSON at line {exc.lineno}, column {exc.colno} "
                            f"({exc.msg}). Re-download it from Jupyter (File > Download) and submit again.") from None
    except RecursionError:
        raise NotebookError(f"{path.name} is not a notebook: JSON nested too deeply") from None
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
    return nb, notes


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
