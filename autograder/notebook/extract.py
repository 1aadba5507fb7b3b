"""Turn a notebook into the definitions the grader loads: imports, functions, classes, constants, and
the assignments those need.

Kept: top-level imports, functions, classes and simple constant assignments, and every other top-level
assignment that a kept statement uses, directly or through other such assignments (a module-level
`loss_fn = nn.CrossEntropyLoss(...)` read inside a function; `model = ...` and `history = train(...)`
that nothing uses are not run; an assignment that downloads from a hub or loads a dataset is never run, even
when something uses it). A loop, block or bare call that binds or changes a name the checks read, or one that name
is computed from (`for s in scores: total += s`, `df.sort_values(..., inplace=True)`), runs too, in notebook order.
Other calls, loops and demos are dropped, and so are cells tagged
`skip-grading` and the notebook's test cells (the grader runs the instructor's copies of those). Each
kept statement becomes a `Unit` that the worker runs on its own (with its own time limit), so one
failing definition does not take the others with it. Every top-level binding that is not run is
remembered (`NotRun`), so that a NameError in a student's function can say where the name was bound
and why the grader did not run that line.
"""
from __future__ import annotations

import ast
import functools
import re
import symtable
from dataclasses import dataclass, field

from autograder.notebook import ipython
from autograder.notebook.markers import is_test_cell

SKIP_TAG = "skip-grading"

# Calls allowed in a kept constant assignment: pure, cheap, and common in settings cells.
_ALLOWED_CALLS = {
    "int", "float", "str", "bool", "tuple", "list", "dict", "set", "frozenset", "range", "len", "min",
    "max", "abs", "round", "sorted", "Path", "pathlib.Path", "os.environ.get", "os.getenv", "os.path.join",
    "os.path.expanduser", "torch.device", "torch.cuda.is_available", "torch.backends.mps.is_available",
    "math.sqrt", "math.log", "math.exp", "math.ceil", "math.floor",
}
_DEF_NAME = re.compile(r"^(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)", re.M)


@dataclass
class Unit:
    """One top-level statement (with its decorators) to run in the worker."""

    cell: int  # 1-based index of the cell among all cells, as Jupyter users count them
    line: int  # first line of the statement within the cell
    source: str
    names: list[str]  # names it binds
    kind: str = "definition"  # "import", "definition" (def / class), "constant" (a simple assignment, if, try)
    #                           or "assignment" (any other assignment that a kept statement uses)

    def to_wire(self) -> dict:
        return {"cell": self.cell, "line": self.line, "source": self.source, "names": self.names, "kind": self.kind}


@dataclass
class Skipped:
    cell: int
    reason: str
    names: list[str] = field(default_factory=list)  # definitions the cell seemed to hold


@dataclass
class NotRun:
    """A top-level statement binding names that the grader does not run."""

    cell: int
    line: int
    names: list[str]
    reason: str
    changes: list[str] = field(default_factory=list)  # names it changes in place (`a[i, j] = ...`, `xs.append(x)`)

    def explain(self, name: str) -> str:
        return f"`{name}` is bound in cell {self.cell}, line {self.line}, which the grader did not run: {self.reason}"


@dataclass
class Extraction:
    units: list[Unit]
    skipped: list[Skipped]
    not_run: list[NotRun] = field(default_factory=list)

    def unbound_hints(self) -> dict[str, str]:
        """name -> why it is not bound in the grader, for names that a statement of the notebook the grader
        did not run binds (shown with a NameError a student's function meets)."""
        bound = {n for u in self.units for n in u.names}
        hints: dict[str, str] = {}
        for s in self.skipped:
            for name in s.names:
                hints.setdefault(name, f"`{name}` is defined in cell {s.cell}, which the grader skipped: {s.reason}")
        for n in self.not_run:
            for name in n.names:
                if name not in bound:
                    hints.setdefault(name, n.explain(name))
        return hints


def dotted(node: ast.AST) -> str | None:
    """`a.b.c` of an attribute chain ending in a name; None for anything else."""
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
        return (dotted(node.func) in _ALLOWED_CALLS and all(_is_simple(a) for a in node.args)
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


def bound_names(node: ast.stmt) -> list[str]:
    """The global names a top-level statement binds, at any depth of its blocks (a `with` or `for` body too), not
    the local names of the functions, classes and comprehensions it holds; walked without recursion."""
    names: set[str] = set()
    todo: list[ast.AST] = [node]
    while todo:
        sub = todo.pop()
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(sub.name)
            todo.extend(sub.decorator_list)
            continue
        if isinstance(sub, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue  # their own scopes
        if isinstance(sub, ast.alias):
            names.add((sub.asname or sub.name).split(".")[0])
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            names.add(sub.id)
        todo.extend(ast.iter_child_nodes(sub))
    return sorted(names)


def strip_ipython(source: str) -> str:
    """Replace IPython's own syntax (`%time`, `!pip install`, `obj?`) by `pass`, keeping line numbers: only where
    IPython reads it, at the start of a logical line (notebook/ipython.py), so that a line black starts with `!=`
    or `%` inside brackets stays Python."""
    return ipython.blanked(source)


_NOT_RUN = {
    ast.For: "a `for` loop at the top level of a cell is never run by the grader",
    ast.AsyncFor: "a loop at the top level of a cell is never run by the grader",
    ast.While: "a `while` loop at the top level of a cell is never run by the grader",
    ast.With: "a `with` block at the top level of a cell is never run by the grader",
    ast.AsyncWith: "a `with` block at the top level of a cell is never run by the grader",
}
# Calls that download from the Hugging Face Hub or another hub, or load a whole dataset: at load time they wait
# on the network (tens of seconds offline) or read gigabytes, and a check never needs their result from the
# notebook (checks build their own models and data).
_LOAD_TIME_DOWNLOADS = ("from_pretrained", "load_dataset", "load_from_disk", "hf_hub_download", "snapshot_download",
                        "torch.hub.load", "pipeline", "SentenceTransformer", "fetch_openml", "urlretrieve",
                        "requests.get", "download_url")
DOWNLOADS = ("it downloads a model or reads a dataset when it runs (`{call}`); the grader never runs such "
             "lines from a notebook: define what a function needs inside it, or take it as an argument")


def _download_call(node: ast.AST) -> str | None:
    """The first hub download or dataset load a statement calls, as written (`AutoModel.from_pretrained`)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            name = dotted(sub.func) or ""
            if any(name == d or name.endswith("." + d) for d in _LOAD_TIME_DOWNLOADS):
                return name
    return None


UNUSED = ("the grader runs definitions, imports, constants and the assignments they use; no function or class "
          "of the notebook uses this name")


def _assigned_names(node: ast.stmt) -> list[str]:
    """Plain names a top-level assignment binds (`x = ...`, `x, y = ...`, `x += ...`, `x: T = ...`)."""
    assert isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))  # extract() passes only these
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    names = []
    for target in targets:
        names += [n.id for n in ast.walk(target) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
    return names


def _mutated_name(node: ast.stmt) -> str | None:
    """`x` for `x[...] = ...` or `x.attr = ...` (a statement that changes an object a name holds)."""
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if len(targets) == 1 and isinstance(targets[0], (ast.Subscript, ast.Attribute)):
            base: ast.expr = targets[0]
            while isinstance(base, (ast.Subscript, ast.Attribute)):
                base = base.value
            if isinstance(base, ast.Name):
                return base.id
    return None


def _loaded_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def global_references(source: str) -> set[str]:
    """Names a statement reads from the module's globals when it runs or when what it defines is called:
    the free names of its functions and classes (Python's own scoping, through symtable) and those it
    reads at the top level (decorators, default values, base classes, the value of an assignment)."""
    try:
        table = symtable.symtable(source, "<unit>", "exec")
    except (SyntaxError, ValueError, RecursionError):
        return set()
    found: set[str] = set()

    def visit(t: symtable.SymbolTable) -> None:
        for sym in t.get_symbols():
            if sym.is_referenced() and (t.get_type() == "module" or sym.is_global()):
                found.add(sym.get_name())
        for child in t.get_children():
            visit(child)

    visit(table)
    return found


CACHED_SOURCE_CHARS = 100_000  # a cell's source up to this long is analysed once per process; a longer one every time


def per_source(fn):
    """`fn(source)` computed once per cell source in this process (the same test cells, skipped cells and imports
    come back in every submission of a run); a source longer than CACHED_SOURCE_CHARS every time. What it returns is
    shared: immutable."""
    cached = functools.lru_cache(maxsize=4096)(fn)

    @functools.wraps(fn)
    def per_cell(source: str):
        return cached(source) if len(source) <= CACHED_SOURCE_CHARS else fn(source)

    return per_cell


def _top_level_bindings(source: str) -> list[str]:
    """Every name the top-level statements of a cell bind (definitions, imports, assignments, loop targets)."""
    return list(_top_level_binding_names(source))


@per_source  # a skipped cell (training, downloads) is the same in most submissions of a run
def _top_level_binding_names(source: str) -> tuple[str, ...]:
    try:
        tree = ast.parse(strip_ipython(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    names: set[str] = set()
    for node in tree.body:
        names.update(bound_names(node))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
    return tuple(sorted(names))


MAX_DEPTH = 300  # levels of a statement's syntax tree the grader reads; real code stays far below


def _too_deep(node: ast.AST) -> bool:
    """Whether a statement other than a definition is deeper than MAX_DEPTH (walked without recursion: `1+1+...+1`
    a thousand times is a thousand levels). A definition is kept as it is, never walked that deep: the worker's
    compiler judges it."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False
    stack = [(node, 1)]
    while stack:
        n, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(n))
    return False


@dataclass
class _Statement:
    cell: int
    line: int
    source: str
    node: ast.stmt
    unit: Unit | None  # kept as it is (definitions, imports, constants)


def _statements(nb, skipped: list[Skipped], not_run: list[NotRun]) -> list[_Statement]:
    """Every top-level statement of the code cells the grader reads, in notebook order."""
    out = []
    for index, cell in enumerate(nb.get("cells", []), start=1):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        names = _DEF_NAME.findall(source)
        if SKIP_TAG in (cell.get("metadata", {}).get("tags") or []):
            skipped.append(Skipped(index, f"it is tagged {SKIP_TAG}", _top_level_bindings(source) or names))
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
            if isinstance(node, ast.Pass):
                continue
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            if _too_deep(node):  # (the analysis below recurses once per level)
                skipped.append(Skipped(index, f"its statement at line {first} is nested more than {MAX_DEPTH} levels "
                                              "deep (a very long expression?); the rest of the cell was read",
                                       bound_names(node)))
                continue
            text = "\n".join(lines[first - 1:node.end_lineno])
            unit = None
            if _keep(node):
                kind = ("import" if isinstance(node, (ast.Import, ast.ImportFrom)) else
                        "definition" if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else
                        "constant")
                unit = Unit(index, first, text, bound_names(node), kind)
            elif type(node) in _NOT_RUN:
                bound = sorted({n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)})
                changed = _changed_in_place(node)
                if bound or changed:
                    not_run.append(NotRun(index, first, bound, _NOT_RUN[type(node)], changed))
            out.append(_Statement(index, first, text, node, unit))
    return out


_IN_PLACE = {"append", "extend", "insert", "update", "add", "setdefault", "pop", "remove", "clear", "sort",
             "reverse", "fill", "put", "resize"}


def _changed_in_place(node) -> list[str]:
    """Names a statement changes without binding them: `a[i, j] = x`, `a.b = x`, `a += x` on an element,
    `xs.append(x)`, `w.fill_(0)` (a method ending in _: torch's in-place operations)."""
    def base(target):
        while isinstance(target, (ast.Subscript, ast.Attribute)):
            target = target.value
        return target.id if isinstance(target, ast.Name) else None

    changed = set()
    for n in ast.walk(node):
        if isinstance(n, (ast.Subscript, ast.Attribute)) and isinstance(n.ctx, (ast.Store, ast.Del)):
            changed.add(base(n))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                (n.func.attr in _IN_PLACE or (n.func.attr.endswith("_") and not n.func.attr.startswith("_"))):
            changed.add(base(n.func.value))
    return sorted(name for name in changed if name)


_COMPUTING = (ast.For, ast.While, ast.If, ast.With, ast.Try, ast.Expr)


def _stored_names(node: ast.AST) -> set[str]:
    """Plain names a statement binds at any depth (a loop's target and what its body assigns), not inside the
    functions or classes it defines."""
    found, stack = set(), [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            found.add(n.id)
        if n is node or not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(n))
    return found


def _computes(node: ast.AST) -> set[str]:
    """Names a loop, a block or a bare call binds or changes in place (an `inplace=True` call included); empty for
    anything else."""
    if not isinstance(node, _COMPUTING) or isinstance(node, ast.Expr) and not isinstance(node.value, ast.Call):
        return set()
    names = _stored_names(node) | set(_changed_in_place(node))
    for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
        if isinstance(call.func, ast.Attribute) and any(
                k.arg == "inplace" and isinstance(k.value, ast.Constant) and k.value.value is True for k in call.keywords):
            base: ast.expr = call.func.value
            while isinstance(base, (ast.Attribute, ast.Subscript)):
                base = base.value
            if isinstance(base, ast.Name):
                names.add(base.id)
    return names


# the calls that seed a global generator: run where they stand when the grader seeds each cell (extract's `each_cell`)
SEEDING_CALLS = frozenset({"np.random.seed", "numpy.random.seed", "random.seed", "torch.manual_seed"})


def extract(nb, uses=(), each_cell: str = "") -> Extraction:
    """`uses`: names the grader itself reads from the submission (its checks' `sub.NAME`), needed too; `each_cell`:
    a statement run before the statements run of each cell (seedvar.cell_seeding: otter's seeding of every cell),
    as the grader's own (cell 0), binding nothing; with it, a top-level call of SEEDING_CALLS runs where it stands
    (`np.random.seed(7)` before a draw changes the draw, as in otter's run of the notebook)."""
    skipped: list[Skipped] = []
    not_run: list[NotRun] = []
    statements = _statements(nb, skipped, not_run)
    if each_cell:  # the grader seeds each cell as otter does; a cell's own seeding call then runs where it stands
        for st in statements:
            if st.unit is None and isinstance(st.node, ast.Expr) and isinstance(st.node.value, ast.Call) \
                    and dotted(st.node.value.func) in SEEDING_CALLS:
                st.unit = Unit(st.cell, st.line, st.source, [], "constant")
    needed: set[str] = set(uses)
    for st in statements:
        if st.unit is not None:
            needed |= global_references(st.source)
    # Assignments that kept statements use, directly or through one another: run them too.
    candidates = [st for st in statements if st.unit is None
                  and isinstance(st.node, (ast.Assign, ast.AugAssign, ast.AnnAssign))]
    chosen: set[int] = set()
    downloads: set[int] = set()  # needed, but never run (see _LOAD_TIME_DOWNLOADS)
    # Loops, blocks and calls that compute a value the checks read (`for s in scores: total += s`, an answer inside
    # an `if`, `df.sort_values(..., inplace=True)`): run too, in notebook order, and what they read. Only for the
    # checks' own names and what those are computed from, never for the globals a function reads (a training loop
    # filling a `history` some plotting function reads is not run).
    direct = set(uses)
    kept_values = [st for st in statements if st.unit is not None and st.unit.kind == "constant"]
    runs = [st for st in statements if st.unit is None and _computes(st.node)]
    ran: set[int] = set()
    changed = True
    while changed:
        changed = False
        for i, st in enumerate(candidates):
            binds = _assigned_names(st.node) + [n for n in [_mutated_name(st.node)] if n]
            if i not in chosen and i not in downloads and needed.intersection(binds):
                if _download_call(st.node):
                    downloads.add(i)
                    continue
                chosen.add(i)
                needed |= _loaded_names(st.node)
                changed = True
            if i in chosen and direct.intersection(binds) and not _loaded_names(st.node) <= direct:
                direct |= _loaded_names(st.node)
                changed = True
        for st in kept_values:  # (`if total > 3: mean = total / n` kept as it is: what it reads is computed too)
            if st.unit is not None and direct.intersection(st.unit.names) and not _loaded_names(st.node) <= direct:
                direct |= _loaded_names(st.node)
                changed = True
        for i, st in enumerate(runs):
            if i not in ran and direct.intersection(_computes(st.node)) and not _download_call(st.node):
                ran.add(i)
                needed |= _loaded_names(st.node)
                direct |= _loaded_names(st.node)
                changed = True
    units = []
    for st in statements:
        if st.unit is not None:
            units.append(st.unit)
    for i in sorted(ran):
        st = runs[i]
        units.append(Unit(st.cell, st.line, st.source, sorted(_stored_names(st.node)), "assignment"))
        not_run = [n for n in not_run if (n.cell, n.line) != (st.cell, st.line)]
    for i, st in enumerate(candidates):
        names = sorted(set(_assigned_names(st.node)))
        if i in chosen:
            units.append(Unit(st.cell, st.line, st.source, names, "assignment"))
        elif i in downloads:
            not_run.append(NotRun(st.cell, st.line, names, DOWNLOADS.format(call=_download_call(st.node))))
        elif names:
            not_run.append(NotRun(st.cell, st.line, names, UNUSED))
    units.sort(key=lambda u: (u.cell, u.line))
    if each_cell:
        seeded: list[Unit] = []
        for unit in units:
            if not seeded or seeded[-1].cell != unit.cell:
                seeded.append(Unit(0, 1, each_cell, [], "constant"))
            seeded.append(unit)
        units = seeded
    return Extraction(units, skipped, not_run)


def module_source(extraction: Extraction) -> str:
    """The units as one readable Python module (the answer key's reference.py)."""
    parts = [f"# cell {u.cell}, line {u.line}\n{u.source}\n" for u in extraction.units]
    return "\n".join(parts)


class _ReadsBeforeBinding(ast.NodeVisitor):
    """Walks a cell in the order Python runs it and collects the names read before the cell binds them.

    `batch = next(iter(loader)); model(batch)` reads `loader` from outside but not `batch`: the cell binds
    `batch` first. The value of an assignment is visited before its targets, a loop's iterable before its
    target, and a comprehension's own variables stay inside it."""

    def __init__(self) -> None:
        self.bound: set[str] = set()
        self.reads: set[str] = set()

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            if node.id not in self.bound:
                self.reads.add(node.id)
        else:
            self.bound.add(node.id)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self.visit(target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self.visit(node.target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        if isinstance(node.target, ast.Name) and node.target.id not in self.bound:
            self.reads.add(node.target.id)  # `x += 1` reads x first
        self.visit(node.target)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self.visit(node.target)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        self.visit(node.target)
        for stmt in node.body + node.orelse:
            self.visit(stmt)

    visit_AsyncFor = visit_For

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        self.bound.update((a.asname or a.name).split(".")[0] for a in node.names)

    visit_ImportFrom = visit_Import

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        for expr in node.decorator_list:
            self.visit(expr)
        # A function runs later, when every binding of the cell before its call exists: what it reads from
        # the globals and the cell never binds comes from outside.
        inner = global_references(ast.unparse(node)) - {node.name}
        self.reads |= {name for name in inner if name not in self.bound}
        self.bound.add(node.name)

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_ClassDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.reads |= {name for name in global_references(ast.unparse(node)) if name not in self.bound}

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> None:
        outer = set(self.bound)
        for generator in node.generators:
            self.visit(generator.iter)
            self.visit(generator.target)
            for condition in generator.ifs:
                self.visit(condition)
        for part in ([node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]):
            self.visit(part)
        self.bound = outer  # the comprehension's variables do not leak out

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension


def reads_from_outside(source: str) -> set[str]:
    """Names a cell reads that it has not bound itself when it reads them (what it needs from elsewhere)."""
    try:
        tree = ast.parse(strip_ipython(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    walker = _ReadsBeforeBinding()
    for stmt in tree.body:
        walker.visit(stmt)
    return walker.reads
