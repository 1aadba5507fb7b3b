"""Turn a notebook into the definitions the grader loads: imports, functions, classes, constants.

Only top-level statements that define something are kept; calls, loops and demos are dropped, and
so are cells tagged `skip-grading` and the notebook's test cells (the grader runs the instructor's
copies of those). Each kept statement becomes a `Unit` that the worker runs on its own, so one
failing definition does not take the others with it.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

SKIP_TAG = "skip-grading"

# Calls allowed in a kept constant assignment: pure, cheap, and common in settings cells.
_ALLOWED_CALLS = {
    "int", "float", "str", "bool", "tuple", "list", "dict", "set", "frozenset", "range", "len", "min",
    "max", "abs", "round", "sorted", "Path", "pathlib.Path", "os.environ.get", "os.getenv", "os.path.join",
    "os.path.expanduser", "torch.device", "torch.cuda.is_available", "torch.backends.mps.is_available",
    "math.sqrt", "math.log", "math.exp", "math.ceil", "math.floor",
}
_IPYTHON_LINE = re.compile(r"^(\s*)[%!]")
_DEF_NAME = re.compile(r"^(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)", re.M)


@dataclass
class Unit:
    """One top-level statement (with its decorators) to run in the worker."""

    cell: int  # 1-based index of the cell among all cells, as Jupyter users count them
    line: int  # first line of the statement within the cell
    source: str
    names: list[str]  # names it binds
    kind: str = "definition"  # "import", "definition" (def / class) or "constant" (an assignment, if, try)

    def to_wire(self) -> dict:
        return {"cell": self.cell, "line": self.line, "source": self.source, "names": self.names, "kind": self.kind}


@dataclass
class Skipped:
    cell: int
    reason: str
    names: list[str] = field(default_factory=list)  # definitions the cell seemed to hold


@dataclass
class Extraction:
    units: list[Unit]
    skipped: list[Skipped]

    def where_defined(self, name: str) -> str | None:
        """Why NAME is not available, if some cell tried to define it."""
        for s in self.skipped:
            if name in s.names:
                return f"`{name}` is defined in cell {s.cell}, which the grader skipped: {s.reason}"
        return None


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _is_simple(node: ast.AST) -> bool:
    """A constant-like expression: literals, names, attribute chains, arithmetic, allowed calls."""
    if isinstance(node, ast.Call):
        return (_dotted(node.func) in _ALLOWED_CALLS and all(_is_simple(a) for a in node.args)
                and all(_is_simple(k.value) for k in node.keywords))
    if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Await,
                         ast.Yield, ast.YieldFrom, ast.NamedExpr)):
        return False
    return all(_is_simple(child) for child in ast.iter_child_nodes(node))


def _targets_are_names(targets) -> bool:
    def ok(t):
        if isinstance(t, ast.Name):
            return True
        if isinstance(t, (ast.Tuple, ast.List)):
            return all(ok(e) for e in t.elts)
        return False
    return all(ok(t) for t in targets)


def _keep(node: ast.stmt) -> bool:
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Pass)):
        return True
    if isinstance(node, ast.Assign):
        return _targets_are_names(node.targets) and _is_simple(node.value)
    if isinstance(node, ast.AnnAssign):
        return isinstance(node.target, ast.Name) and (node.value is None or _is_simple(node.value))
    if isinstance(node, ast.If):  # e.g. `if torch.cuda.is_available(): DEVICE = "cuda"`
        return _is_simple(node.test) and all(_keep(n) for n in node.body + node.orelse)
    if isinstance(node, ast.Try):  # e.g. optional imports
        blocks = node.body + node.orelse + node.finalbody + [n for h in node.handlers for n in h.body]
        return all(_keep(n) for n in blocks)
    return False


def _bound_names(node: ast.stmt) -> list[str]:
    names = []
    for sub in ast.walk(node):
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and sub is node:
            names.append(sub.name)
        elif isinstance(sub, ast.alias):
            names.append((sub.asname or sub.name).split(".")[0])
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            names.append(sub.id)
    if isinstance(node, ast.If | ast.Try):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.append(child.name)
    return sorted(set(names))


def strip_ipython(source: str) -> str:
    """Replace IPython magics and shell lines (`%time`, `!pip install`) by `pass`, keeping line numbers."""
    out = []
    for line in source.splitlines():
        m = _IPYTHON_LINE.match(line)
        out.append(f"{m.group(1)}pass" if m else line)
    return "\n".join(out)


def is_test_cell(cell) -> bool:
    nb = cell.get("metadata", {}).get("nbgrader", {})
    return bool(nb.get("grade")) and not nb.get("solution")


def extract(nb) -> Extraction:
    units, skipped = [], []
    for index, cell in enumerate(nb.get("cells", []), start=1):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        names = _DEF_NAME.findall(source)
        if SKIP_TAG in (cell.get("metadata", {}).get("tags") or []):
            skipped.append(Skipped(index, f"it is tagged {SKIP_TAG}", names))
            continue
        if is_test_cell(cell):
            continue
        code = strip_ipython(source)
        try:
            tree = ast.parse(code)
        except SyntaxError as exc:
            skipped.append(Skipped(index, f"line {exc.lineno}: SyntaxError: {exc.msg}", names))
            continue
        except (ValueError, RecursionError, MemoryError) as exc:
            skipped.append(Skipped(index, f"it could not be parsed: {type(exc).__name__}", names))
            continue
        lines = code.splitlines()
        for node in tree.body:
            if isinstance(node, ast.Pass) or not _keep(node):
                continue
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            text = "\n".join(lines[first - 1:node.end_lineno])
            kind = ("import" if isinstance(node, (ast.Import, ast.ImportFrom)) else
                    "definition" if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else
                    "constant")
            units.append(Unit(index, first, text, _bound_names(node), kind))
    return Extraction(units, skipped)


def module_source(extraction: Extraction) -> str:
    """The units as one readable Python module (the answer key's reference.py)."""
    parts = [f"# cell {u.cell}, line {u.line}\n{u.source}\n" for u in extraction.units]
    return "\n".join(parts)
