"""Disguised copies of a notebook, one transformation at a time: what the benchmark (benchmarks/similarity.py) and
the tests measure the comparison against. Each transformation keeps what the code computes; it changes only what a
student hiding a copy would change.

    rename      every parameter, local variable and attribute of `self` renamed (formatting and comments kept)
    reformat    the code printed again by ast.unparse (spacing, quotes, parentheses, line breaks; comments gone)
    comments    comments removed, others added above statements, docstrings added or removed
    cells       cells split at their top-level statements, merged with the next code cell, moved down the notebook
    reorder     adjacent independent statements swapped, methods of a class and functions of a cell reordered
    dead_code   unused variables and no-op statements (pass, bare constants, ...) inserted in every function
    spellings   equivalent spellings swapped: a @ b / torch.matmul(a, b), x.mT / x.transpose(-2, -1), view /
                reshape, F.softmax(x) / x.softmax(), x.size(d) / x.shape[d], math.sqrt / ** 0.5, a > b / b < a,
                x = x + y / x += y
    all         every transformation above (ALL_STEPS: reformat comes with spellings)
    combined    (two notebooks) the solution cells of some parts from one, the rest from the other: `combine`

Only the student's solution cells change (code cells marked as solutions, else every code cell that is not a test);
a transformation that cannot parse a cell leaves it as it is.
"""
from __future__ import annotations

import ast
import copy
import io
import random
import tokenize

TRANSFORMATIONS = ["rename", "reformat", "comments", "cells", "reorder", "dead_code", "spellings", "all"]
ALL_STEPS = ["rename", "reorder", "dead_code", "spellings", "comments", "cells"]  # (spellings reformats; cells last:
#                                                                                   it drops the cells' metadata)
WORDS = ["alpha", "beta", "tmp", "val", "res", "out", "data", "buf", "item", "node", "acc", "aux", "cur", "tot",
         "foo", "bar", "baz", "qux", "zed", "my", "the", "new", "old", "x", "y", "z", "w", "h", "m", "n"]
COMMENT_WORDS = ["compute", "the", "result", "here", "we", "now", "apply", "step", "shape", "values", "next", "then",
                 "update", "first", "check", "tensor", "final", "loop", "keep", "this"]


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def _is_solution(cell) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.get("cell_type") == "code" and bool(meta.get("solution")) and not meta.get("grade")


def solution_indexes(nb) -> list[int]:
    """Indexes of a notebook's cells the student writes: those marked as nbgrader solutions, else every code cell
    that is not a test cell."""
    cells = nb.get("cells", [])
    marked = [i for i, c in enumerate(cells) if _is_solution(c)]
    if marked:
        return marked
    from autograder.notebook.extract import is_test_cell

    return [i for i, c in enumerate(cells) if c.get("cell_type") == "code" and not is_test_cell(c)]


def disguise_notebook(nb: dict, how: str, rng: random.Random) -> dict:
    """A copy of `nb` with its solution cells disguised by the transformation `how` (TRANSFORMATIONS)."""
    nb = copy.deepcopy(nb)
    steps = ALL_STEPS if how == "all" else [how]
    for step in steps:
        if step == "cells":
            _cells(nb, rng)
            continue
        for i in solution_indexes(nb):
            cell = nb["cells"][i]
            try:
                cell["source"] = CELL_TRANSFORMS[step](_source(cell), rng)
            except (SyntaxError, ValueError, tokenize.TokenError, IndentationError, RecursionError):
                pass  # a cell that does not parse is left as it is
    return nb


def combine(first: dict, second: dict, take_from_second: set[str]) -> dict:
    """A notebook with `first`'s cells, except the solution cells whose grade_id is in `take_from_second`, which
    are `second`'s (two sources combined part by part)."""
    theirs = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id"): c for c in second.get("cells", [])}
    nb = copy.deepcopy(first)
    for i, cell in enumerate(nb["cells"]):
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id in take_from_second and grade_id in theirs:
            nb["cells"][i] = copy.deepcopy(theirs[grade_id])
    return nb


# -- rename --------------------------------------------------------------------------------------------------

def _new_name(rng: random.Random, taken: set[str]) -> str:
    while True:
        name = f"{rng.choice(WORDS)}_{rng.choice(WORDS)}{rng.randint(0, 99)}"
        if name not in taken:
            taken.add(name)
            return name


def rename(source: str, rng: random.Random) -> str:
    """The `rename` transformation (module docstring). SyntaxError when `source` does not parse."""
    tree = ast.parse(source)
    taken = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    local_map: dict[str, str] = {}
    attr_map: dict[str, str] = {}
    for fn in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs, fn.args.vararg, fn.args.kwarg]:
            if a is not None and a.arg not in ("self", "cls"):
                local_map.setdefault(a.arg, _new_name(rng, taken))
        for n in ast.walk(fn):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                local_map.setdefault(n.id, _new_name(rng, taken))
            elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name) \
                    and n.value.id == "self":
                attr_map.setdefault(n.attr, _new_name(rng, taken))
    keywords = {(k.lineno, k.col_offset) for k in ast.walk(tree) if isinstance(k, ast.keyword) and k.arg}
    return _replace_names(source, local_map, attr_map, keywords)


def _replace_names(source: str, local_map: dict[str, str], attr_map: dict[str, str],
                   keywords: set[tuple[int, int]]) -> str:
    """The names replaced, token by token (a call's keyword `f(mask=...)` keeps its name: it is the callee's)."""
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    edits = []
    for i, tok in enumerate(tokens):
        if tok.type != tokenize.NAME:
            continue
        before = tokens[i - 1].string if i else ""
        if before == ".":
            if i >= 2 and tokens[i - 2].string == "self" and tok.string in attr_map:
                edits.append((tok.start, tok.end, attr_map[tok.string]))
        elif tok.string in local_map and tok.start not in keywords:
            edits.append((tok.start, tok.end, local_map[tok.string]))
    lines = source.split("\n")
    for (row, col), (_, end), new in sorted(edits, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[end:]
    return "\n".join(lines)


# -- reformat, comments -------------------------------------------------------------------------------------

def reformat(source: str, rng: random.Random) -> str:
    """The `reformat` transformation: the code as ast.unparse prints it, blank lines between statements doubled half
    the time. SyntaxError when `source` does not parse."""
    text = ast.unparse(ast.parse(source))
    return text.replace("\n\n", "\n\n\n") if rng.random() < 0.5 else text


def _without_comments(source: str) -> str:
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    lines = source.split("\n")
    for tok in sorted((t for t in tokens if t.type == tokenize.COMMENT), key=lambda t: t.start, reverse=True):
        row, col = tok.start
        lines[row - 1] = lines[row - 1][:col].rstrip()
    return "\n".join(lines)


def comments(source: str, rng: random.Random) -> str:
    """The `comments` transformation (module docstring). SyntaxError when `source` does not parse."""
    tree = ast.parse(source)
    starts = {n.lineno: n.col_offset for n in ast.walk(tree) if isinstance(n, ast.stmt)}
    defs = {n.body[0].lineno: n.body[0].col_offset for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not ast.get_docstring(n)}
    out = []
    for number, line in enumerate(_without_comments(source).split("\n"), start=1):
        if number in defs:
            words = " ".join(rng.choice(COMMENT_WORDS) for _ in range(rng.randint(3, 8)))
            out.append(" " * defs[number] + f'"""{words.capitalize()}."""')
        if number in starts and rng.random() < 0.5:
            words = " ".join(rng.choice(COMMENT_WORDS) for _ in range(rng.randint(2, 7)))
            out.append(" " * starts[number] + f"# {words}")
        out.append(line)
    return "\n".join(out)


# -- reorder ------------------------------------------------------------------------------------------------

def _names(node: ast.AST, ctx) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


def _swappable(a: ast.stmt, b: ast.stmt) -> bool:
    if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
            isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return True
    if not (isinstance(a, ast.Assign) and isinstance(b, ast.Assign)):
        return False
    wa, wb = _names(a, ast.Store), _names(b, ast.Store)
    simple = all(isinstance(t, ast.Name) for t in [*a.targets, *b.targets])
    return simple and not (wa & _names(b, ast.Load)) and not (wb & _names(a, ast.Load)) and not (wa & wb)


def reorder(source: str, rng: random.Random) -> str:
    """Adjacent independent statements swapped in place (their lines exchanged; the lines stay as written)."""
    tree = ast.parse(source)
    lines = source.split("\n")
    used: set[int] = set()
    swaps = []
    for holder in ast.walk(tree):
        body = getattr(holder, "body", None)
        if not isinstance(body, list):
            continue
        for a, b in zip(body, body[1:]):
            span = set(range(a.lineno, (b.end_lineno or b.lineno) + 1))
            if _swappable(a, b) and not (span & used) and a.end_lineno and a.end_lineno < b.lineno \
                    and not getattr(b, "decorator_list", None) and not getattr(a, "decorator_list", None):
                used |= span
                swaps.append((a.lineno, a.end_lineno, b.lineno, b.end_lineno))
    for a1, a2, b1, b2 in sorted(swaps, reverse=True):
        first, gap, second = lines[a1 - 1:a2], lines[a2:b1 - 1], lines[b1 - 1:b2]
        lines[a1 - 1:b2] = second + gap + first
    return "\n".join(lines)


# -- dead code ----------------------------------------------------------------------------------------------

def dead_code(source: str, rng: random.Random) -> str:
    """The `dead_code` transformation: a no-op before about 40% of the statements inside functions. SyntaxError when
    `source` does not parse."""
    tree = ast.parse(source)
    taken = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    before: dict[int, int] = {}
    for fn in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        for holder in ast.walk(fn):
            for stmt in getattr(holder, "body", []) if isinstance(getattr(holder, "body", None), list) else []:
                one_line = stmt.lineno == getattr(holder, "lineno", 0)  # `if x: return y`: no line to put it on
                if rng.random() < 0.4 and not getattr(stmt, "decorator_list", None) and not one_line:
                    before[stmt.lineno] = stmt.col_offset
    out = []
    for number, line in enumerate(source.split("\n"), start=1):
        if number in before:
            name = _new_name(rng, taken)
            filler = rng.choice([f"{name} = {rng.randint(0, 9)}", f"{name} = len([])", "pass", "None", "...",
                                 f"{name} = None", f"{rng.randint(0, 99)}", f"'{rng.choice(COMMENT_WORDS)}'"])
            out.append(" " * before[number] + filler)
        out.append(line)
    return "\n".join(out)


# -- equivalent spellings -----------------------------------------------------------------------------------

class _Spell(ast.NodeTransformer):
    def __init__(self, rng: random.Random):
        self.rng = rng

    def visit_Call(self, node):
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "torch" \
                and f.attr == "matmul" and len(node.args) == 2:
            return ast.BinOp(node.args[0], ast.MatMult(), node.args[1])
        if isinstance(f, ast.Attribute) and f.attr == "transpose" and len(node.args) == 2 and \
                {ast.unparse(a) for a in node.args} == {"-2", "-1"}:
            return ast.Attribute(f.value, "mT", ast.Load())
        if isinstance(f, ast.Attribute) and f.attr in ("view", "reshape") and ast.unparse(f.value) != "torch":
            f.attr = "reshape" if f.attr == "view" else "view"
            return node
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("F", "torch") \
                and f.attr in ("softmax", "relu", "sigmoid", "tanh", "log_softmax") and node.args:
            return ast.Call(ast.Attribute(node.args[0], f.attr, ast.Load()), node.args[1:], node.keywords)
        if isinstance(f, ast.Attribute) and f.attr == "size" and len(node.args) == 1 and not node.keywords:
            return ast.Subscript(ast.Attribute(f.value, "shape", ast.Load()), node.args[0], ast.Load())
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "math" \
                and f.attr == "sqrt" and len(node.args) == 1:
            return ast.BinOp(node.args[0], ast.Pow(), ast.Constant(0.5))
        return node

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.MatMult) and self.rng.random() < 0.5:
            return ast.Call(ast.Attribute(ast.Name("torch", ast.Load()), "matmul", ast.Load()), [node.left, node.right],
                            [])
        return node

    def visit_Compare(self, node):
        self.generic_visit(node)
        flip = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE}
        if len(node.ops) == 1 and type(node.ops[0]) in flip:
            return ast.Compare(node.comparators[0], [flip[type(node.ops[0])]()], [node.left])
        return node

    def visit_Assign(self, node):
        self.generic_visit(node)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.BinOp) \
                and isinstance(node.value.left, ast.Name) and node.value.left.id == node.targets[0].id:
            return ast.AugAssign(ast.Name(node.targets[0].id, ast.Store()), node.value.op, node.value.right)
        return node

    def visit_AugAssign(self, node):
        self.generic_visit(node)
        if isinstance(node.target, ast.Name):
            return ast.Assign([ast.Name(node.target.id, ast.Store())],
                              ast.BinOp(ast.Name(node.target.id, ast.Load()), node.op, node.value))
        return node


def spellings(source: str, rng: random.Random) -> str:
    """The `spellings` transformation (module docstring); the code comes back as ast.unparse prints it."""
    tree = _Spell(rng).visit(ast.parse(source))
    return ast.unparse(ast.fix_missing_locations(tree))


# -- cells --------------------------------------------------------------------------------------------------

def _split(source: str) -> list[str]:
    tree = ast.parse(source)
    lines = source.split("\n")
    if len(tree.body) < 2:
        return [source]
    starts = [n.lineno - len(getattr(n, "decorator_list", [])) for n in tree.body]
    starts[0] = 1
    return ["\n".join(lines[a - 1:b - 1]).strip("\n") for a, b in zip(starts, [*starts[1:], len(lines) + 1])]


def _cells(nb: dict, rng: random.Random) -> None:
    """Split solution cells at their top-level statements, merge some pieces with the next piece, move some down."""
    cells = nb["cells"]
    solution = set(solution_indexes(nb))
    out, pieces = [], []
    for i, cell in enumerate(cells):
        if i not in solution:
            out.append(cell)
            continue
        try:
            texts = _split(_source(cell))
        except SyntaxError:
            texts = [_source(cell)]
        for text in texts:  # (a piece is a new cell: it has no nbgrader metadata)
            piece = {**copy.deepcopy(cell), "source": text, "metadata": {}}
            out.append(piece)
            pieces.append(piece)
    moved = [c for c in pieces if rng.random() < 0.3]
    out = [c for c in out if not any(c is m for m in moved)] + moved  # moved to the end of the notebook
    merged: list[dict] = []
    for cell in out:
        if merged and any(merged[-1] is p for p in pieces) and any(cell is p for p in pieces) and rng.random() < 0.5:
            merged[-1]["source"] = _source(merged[-1]) + "\n\n" + _source(cell)
        else:
            merged.append(cell)
    nb["cells"] = merged


CELL_TRANSFORMS = {"rename": rename, "reformat": reformat, "comments": comments, "reorder": reorder,
                   "dead_code": dead_code, "spellings": spellings}
