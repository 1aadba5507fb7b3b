"""Files a notebook reads by a literal relative path: what it needs shipped beside it.

Found in code cells: the first argument (or a `filename`/`fname`/`path`/`filepath_or_buffer`/`file` keyword) of
a call to a reading function (`open`, pandas' `read_*`, `np.load`/`loadtxt`/`genfromtxt`/`fromfile`, `torch.load`,
IPython's `Image`, `imread`, safetensors' `load_file`), when it is a string literal naming a relative path
(`open(path, "w")` writes and is left out); in markdown cells: images (`![...](path)`, `<img src="path">`).
A path the notebook itself writes anywhere (a literal given to a call whose name has `save`, `to_` or `write`,
or to `open` with a writing mode) is not needed beforehand. URLs, absolute paths and paths built at run time are
not found: only what is certain is reported.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from autograder.notebook import ipython
from autograder.notebook.markers import cell_source

READERS = {"open", "load", "loadtxt", "genfromtxt", "fromfile", "Image", "imread", "load_file", "safe_open"}
PATH_KEYWORDS = ("filename", "fname", "path", "filepath_or_buffer", "file", "filepath")
_MARKDOWN_IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|<img[^>]*\bsrc=[\"']([^\"']+)[\"']")


@dataclass(frozen=True)
class Opened:
    """A relative path a notebook reads, and where: `cell` and `line` count from 1."""

    cell: int  # 1-based
    line: int  # 1-based, in the cell
    path: str


def _name(func) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _literal_path(call: ast.Call) -> ast.Constant | None:
    given = call.args[:1] + [k.value for k in call.keywords if k.arg in PATH_KEYWORDS]
    for node in given:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node
    return None


def _writes(call: ast.Call) -> bool:
    name = _name(call.func)
    if "save" in name or name.startswith("to_") or "write" in name:
        return True
    modes = call.args[1:2] + [k.value for k in call.keywords if k.arg == "mode"]
    return name == "open" and any(isinstance(m, ast.Constant) and isinstance(m.value, str)
                                  and set(m.value) & set("wax") for m in modes)


def _reads(call: ast.Call) -> bool:
    name = _name(call.func)
    return name in READERS or name.startswith("read_")


def relative(path: str) -> bool:
    """Whether `path` is a path relative to the notebook's folder: not empty, not a URL, not absolute or under `~`,
    not a data URI or an anchor, one line."""
    return bool(path) and "://" not in path and not path.startswith(("/", "~", "data:", "#")) and "\n" not in path


def _code(source: str, cell: int) -> tuple[list[Opened], set[str]]:
    """(the paths a code cell reads, the paths it writes)."""
    try:
        tree = ast.parse(ipython.blanked(source))  # a `!pip install` line does not hide the rest of the cell
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return [], set()
    reads, writes = [], set()
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        if _writes(call):  # torch.save(model, "model.pt"): any literal it is given may be the path
            writes |= {a.value for a in [*call.args, *(k.value for k in call.keywords)]
                       if isinstance(a, ast.Constant) and isinstance(a.value, str)}
            continue
        node = _literal_path(call)
        if node is not None and relative(node.value) and _reads(call):
            reads.append(Opened(cell, node.lineno, node.value))
    return sorted(reads, key=lambda o: o.line), writes


def _markdown(source: str, cell: int) -> list[Opened]:
    return [Opened(cell, number, m.group(1) or m.group(2)) for number, line in enumerate(source.split("\n"), 1)
            for m in _MARKDOWN_IMAGE.finditer(line) if relative(m.group(1) or m.group(2))]


def files_read(nb) -> list[Opened]:
    """Every relative path the notebook reads by a literal (and does not write itself), in cell order."""
    reads, writes = [], set()
    for index, cell in enumerate(nb.cells, 1):
        if cell.get("cell_type") == "code":
            found, written = _code(cell_source(cell), index)
            reads += found
            writes |= written
        elif cell.get("cell_type") == "markdown":
            reads += _markdown(cell_source(cell), index)
    return [o for o in reads if normal_path(o.path) not in {normal_path(w) for w in writes}]


def path_literals(nb) -> list[str]:
    """Every string literal of the code cells that could be a relative path (`DATA_PATH = "data/points.csv"`): what
    a notebook may read by a name bound to it. Whether each is a file is for the caller to see."""
    found: list[str] = []
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        try:
            tree = ast.parse(ipython.blanked(cell_source(cell)))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        found += [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                  and 0 < len(n.value) < 260 and relative(n.value) and "\0" not in n.value]
    return list(dict.fromkeys(found))


def normal_path(path: str) -> str:
    """A relative path as one spelling: `./data//x.csv` and `data\\x.csv` are `data/x.csv`."""
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
    return "/".join(parts)


def unshipped(nb, shipped: list[str]) -> list[Opened]:
    """The files the notebook reads that are not among `shipped` (assignment.toml `files`) nor inside a folder
    listed there."""
    have = {normal_path(s) for s in shipped}
    return [o for o in files_read(nb)
            if not any(normal_path(o.path) == h or normal_path(o.path).startswith(h + "/") for h in have)]
