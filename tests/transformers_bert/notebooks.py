"""Submission notebooks made from the answer key: text replaced, or whole definitions rewritten."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat


def replace_definition(source: str, name: str, new: str) -> str | None:
    """`source` with the top-level `def name` / `class name` (up to the next top-level statement or the
    end) replaced by `new`; None if the cell does not define `name`."""
    lines = source.split("\n")
    start = next((i for i, line in enumerate(lines) if re.match(rf"(def|class) {re.escape(name)}\b", line)), None)
    if start is None:
        return None
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or lines[end][0] in " \t#)"):
        end += 1
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1  # keep the blank lines that separate it from what follows
    return "\n".join(lines[:start] + new.rstrip("\n").split("\n") + lines[end:])


def make_notebook(path: Path, answer_key: Path, replace: dict[str, str] | None = None,
                  definitions: dict[str, str] | None = None) -> Path:
    """The answer key with text replaced and definitions rewritten; every replacement must apply."""
    nb = nbformat.read(answer_key, as_version=4)
    for old, new in (replace or {}).items():
        hits = 0
        for cell in nb.cells:
            if cell.cell_type == "code" and old in cell.source:
                cell.source = cell.source.replace(old, new)
                hits += 1
        assert hits, f"{old!r} is not in the answer key"
    for name, new in (definitions or {}).items():
        hits = 0
        for cell in nb.cells:
            if cell.cell_type == "code":
                changed = replace_definition(cell.source, name, new)
                if changed is not None:
                    cell.source = changed
                    hits += 1
        assert hits == 1, f"{name} is defined {hits} times in the answer key"
    nbformat.write(nb, path)
    return path
