"""otter-grader's seeding at grading time (assignment.toml `[seed]`): a seed variable (otter's `seed: {variable,
autograder_value, student_value}`: students' notebook sets it to one value, grading to another), and cell seeding
(otter's `generate: seed: N`: random's and numpy's generators seeded with N at the top of every code cell).

Guarantees: `with_value(nb, variable, value)` returns a copy of `nb` in which every top-level statement of a code
cell that assigns `variable` alone (`rng_seed = ...`, `rng_seed: int = ...`) reads `variable = value`, on its first
line (the statement's other lines left blank, so that every line keeps its number for the messages that cite it);
a notebook that assigns it nowhere gets such a statement in a cell of its own before its first code cell, as otter
defines it before every cell. Nothing else changes: an assignment inside a function, a loop or a tuple is the
student's, and test cells are never touched.

`cell_seeding(seed)` is the statement that `extract(..., each_cell=...)` runs before the statements it runs of each
code cell, in the submission and in the reference, whatever the submission contains: otter's GradingPreprocessor
puts `np.random.seed(N)` and `random.seed(N)` at the top of every code cell of the notebook it grades (but cells
starting with a `%%` magic, which the grader never runs as Python anyway). It binds no name, and runs as the
grader's own statement (cell 0), so no message of the student's cells ever cites it.

`record_cells(nb, seed)` writes `[seed] cells` into the student notebook's metadata (`autograder.seed.cells`), and
`notebook_seed(nb)` reads it back as the `[seed]` table cell_seeding takes: `autograder check`, which has the
student's notebook but not assignment.toml, then extracts it as grading does (a missing or malformed entry: no
cell seeding, as grading without `[seed] cells`).
"""
from __future__ import annotations

import ast
import copy

from autograder.notebook.extract import is_test_cell, strip_ipython


def assignment(variable: str, value) -> str:
    """The statement that sets the seed variable: `variable = repr(value)`."""
    return f"{variable} = {value!r}"


def _assigns(node: ast.stmt, variable: str) -> bool:
    if isinstance(node, ast.Assign):
        return len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and node.targets[0].id == variable
    return isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == variable


def _rewritten(source: str, variable: str, value) -> str | None:
    """The cell's source with its top-level assignments of `variable` replaced, or None when it has none (or is
    not Python: the grader reports that cell as it is)."""
    try:
        tree = ast.parse(strip_ipython(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    found = [n for n in tree.body if _assigns(n, variable)]
    if not found:
        return None
    lines = source.split("\n")
    for node in found:
        indent = lines[node.lineno - 1][: node.col_offset]
        lines[node.lineno - 1] = indent + assignment(variable, value)
        for i in range(node.lineno, node.end_lineno):
            lines[i] = ""
    return "\n".join(lines)


def with_value(nb, variable: str, value):
    """A copy of `nb` in which `variable` is `value` wherever the notebook assigns it at top level (see above)."""
    out, seen = copy.deepcopy(nb), False
    for cell in out.get("cells", []):
        if cell.get("cell_type") != "code" or is_test_cell(cell):
            continue
        source = cell.get("source", "")
        rewritten = _rewritten("".join(source) if isinstance(source, list) else str(source), variable, value)
        if rewritten is not None:
            cell["source"], seen = rewritten, True
    if not seen:
        first = next((i for i, c in enumerate(out.get("cells", [])) if c.get("cell_type") == "code"), 0)
        out.setdefault("cells", []).insert(first, _code_cell(assignment(variable, value)))
    return out


def _code_cell(source: str) -> dict:
    from nbformat import from_dict

    return from_dict({"cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": None})


def for_grading(nb, seed: dict):
    """`nb` as the grader reads it: the seed variable at its grading value (unchanged without one)."""
    return with_value(nb, seed["variable"], seed["grading"]) if seed and "variable" in seed else nb


def cell_seeding(seed: dict) -> str:
    """The statement run before each code cell's statements when grading ([seed] `cells`), or "" without one."""
    if not seed or "cells" not in seed:
        return ""
    value = int(seed["cells"])
    return (f"try:  # otter's seeding of each cell: [seed] cells = {value}\n"
            f"    __import__('random').seed({value})\n    __import__('numpy').random.seed({value})\n"
            "except ImportError:\n    pass")


NOTEBOOK_KEY = "autograder"  # the student notebook's metadata entry for what `autograder check` needs of the config


def record_cells(nb, seed: dict) -> None:
    """Record `[seed] cells` in `nb`'s metadata (in place), for `autograder check`; nothing without it."""
    if seed and "cells" in seed:
        nb.setdefault("metadata", {}).setdefault(NOTEBOOK_KEY, {})["seed"] = {"cells": int(seed["cells"])}


def notebook_seed(nb) -> dict:
    """The `[seed]` table record_cells left in `nb` ({"cells": N}), or {} when none is there as it wrote it."""
    entry = nb.get("metadata", {}).get(NOTEBOOK_KEY, {})
    seed = entry.get("seed", {}) if isinstance(entry, dict) else {}
    cells = seed.get("cells") if isinstance(seed, dict) else None
    return {"cells": cells} if isinstance(cells, int) and not isinstance(cells, bool) and cells >= 0 else {}
