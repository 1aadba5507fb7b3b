"""What a test cell binds, deletes, defines and reads, from its source alone (no judge, no worker): which earlier
test cells a cell shares variables with (autograder/kernel.py replays them first, as the kernel kept them), and
what does not hold in the grader, said when the notebook is built (`cell_caveats`). A cell that is not Python
binds and reads nothing here; parsed trees are cached per source and only read."""
from __future__ import annotations

import ast
import functools
from collections.abc import Sequence
from dataclasses import dataclass

from autograder.notebook.extract import CACHED_SOURCE_CHARS, per_source


@functools.lru_cache(maxsize=1024)  # the same test cells run for every submission of a run
def _parsed(source: str) -> ast.Module:
    return ast.parse(source)


def cell_tree(source: str) -> ast.Module:
    """The cell's syntax tree (SyntaxError as ast.parse raises it); shared: callers only read it."""
    return ast.parse(source) if len(source) > CACHED_SOURCE_CHARS else _parsed(source)


@per_source
def bound_at_top(source: str) -> frozenset[str]:
    """The names a cell binds at its top level (assignments, imports, def, class, for, with)."""
    try:
        tree = cell_tree(source)
    except SyntaxError:
        return frozenset()
    names: set[str] = set()
    for node in tree.body:
        names |= _binds(node)
    return frozenset(names)


def _binds(node) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
    targets = {ast.Assign: lambda n: n.targets, ast.AnnAssign: lambda n: [n.target], ast.AugAssign: lambda n: [n.target],
               ast.For: lambda n: [n.target], ast.With: lambda n: [i.optional_vars for i in n.items if i.optional_vars]}
    found = targets.get(type(node))
    if found is None:
        return set()
    return {n.id for t in found(node) for n in ast.walk(t) if isinstance(n, ast.Name)}


@per_source
def deleted_at_top(source: str) -> frozenset[str]:
    """The names a cell deletes at its top level (`del squares`) and binds nowhere in it: `del squares` with a
    `squares = saved` in its `finally` leaves the name as it found it."""
    try:
        tree = cell_tree(source)
    except SyntaxError:
        return frozenset()
    deleted = {t.id for node in tree.body if isinstance(node, ast.Delete) for t in node.targets if isinstance(t, ast.Name)}
    return frozenset(deleted - {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)})


def defined_at_top(source: str) -> set[str]:
    """The functions and classes a cell defines at its top level."""
    return set(definitions_at_top(source))


def definitions_at_top(source: str) -> dict[str, str]:
    """{name: "class" or "function"} for the classes and functions a cell defines at its top level."""
    try:
        tree = cell_tree(source)
    except SyntaxError:
        return {}
    return {n.name: "class" if isinstance(n, ast.ClassDef) else "function" for n in tree.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


@per_source
def names_read(source: str) -> frozenset[str]:
    """Every name a cell's code reads (ast.Load); none where it does not parse."""
    try:
        tree = cell_tree(source)
    except SyntaxError:
        return frozenset()
    return frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))


def earlier_cells(cells: Sequence[tuple[str, str, str]]) -> dict[str, list[tuple[str, str]]]:
    """For each test cell (name, part, source), in notebook order: the earlier cells it may share variables with,
    (name, source) in notebook order: those of its part, and those of other parts that bind a name it reads and
    binds not itself (`X, y` set by the cell of the question before, as the kernel kept them)."""
    out: dict[str, list[tuple[str, str]]] = {}
    seen: list[tuple[str, str, str]] = []
    for name, part, source in cells:
        wanted = names_read(source) - bound_at_top(source)
        out[name] = [(n, s) for n, p, s in seen if p == part or wanted & bound_at_top(s)]
        seen.append((name, part, source))
    return out


def shared_with(source: str, earlier: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The earlier cells (name, source) of the part to replay before `source`: all of them when it reads a name one
    of them binds and it does not bind itself, or when one of them deletes a name (the student's functions then
    meet a NameError, as in the kernel); none otherwise (a cell on its own runs alone, as fast as ever)."""
    wanted = names_read(source) - bound_at_top(source)
    if any(wanted & bound_at_top(s) or deleted_at_top(s) for _, s in earlier):
        return list(earlier)
    return []


# -- what does not hold, said when the notebook is built ------------------------------------------------------

@dataclass(frozen=True)
class GradedCell:
    """A test cell of a notebook as the caveat checks see it: its number, check name, part and source."""
    number: int  # the cell's number in the notebook, 1-based
    name: str
    part: str
    source: str


def cell_caveats(cells: list[GradedCell], notebook_names: set[str], definitions: set[str]) -> list[tuple[int, int, str]]:
    """(cell number, line, what does not hold) for test cells whose meaning in the grader differs from the
    kernel's: a magic line, a function or class of the notebook (`definitions`) bound to another value."""
    found: list[tuple[int, int, str]] = []
    for cell in cells:
        try:
            tree = ast.parse(cell.source)
        except SyntaxError as exc:
            found.append((cell.number, exc.lineno or 1, "not Python (an IPython magic or shell line?): the check fails "
                          "for every notebook; write it in Python"))
            continue
        found += _rebinds(cell, tree, definitions)
    return found


def _rebinds(cell: GradedCell, tree, definitions: set[str]) -> list[tuple[int, int, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and not isinstance(node.value, ast.Name):  # `f = saved` puts it back
            for name in sorted({n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
                               & definitions):
                out.append((cell.number, node.lineno, f"binds `{name}`, which the notebook defines: in the grader this "
                            "changes the test's name only; the student's functions keep calling their own"))
    return out
