"""Python code as a token stream that disguise does not change: what the fingerprints are taken from.

`definition_tokens(source)` parses the code with `ast` and, before emitting one token per syntax node:

- drops docstrings, comments and formatting (the tree has none of them), no-op statements (`pass` beside other
  statements, a bare constant or name, `...`), code that cannot run (`if False:`) and dead assignments (a local
  name bound and never read, again until none is left);
- renames by role, never by spelling: a parameter is `P`, another local `V`, an attribute of `self` `A`, a name
  the notebook defines `G`; library names (`torch`, `softmax`, `shape`) and builtins keep theirs, as they say what
  the code does and a disguise cannot rename them;
- writes equivalent spellings one way: `a @ b`, `torch.matmul(a, b)`, `a.matmul(b)`, `torch.bmm`, `a.mm(b)` are
  one matmul; `x.mT`, `x.transpose(-2, -1)`, `x.transpose(-1, -2)`, `torch.transpose(x, -2, -1)` one transpose
  of the last two axes; `torch.f(x, ...)`, `F.f(x, ...)`, `x.f(...)` one call of f on x; `view` / `reshape`;
  `x.size(d)` / `x.shape[d]`; `math.sqrt(x)` / `x ** 0.5`; `x += y` / `x = x + y`; `a > b` / `b < a`;
- orders independent statements canonically: within a block, a statement is placed after those it depends on
  (names read and written, a call's effects, control flow), and among those free to go first the one whose tokens
  sort first goes first; methods of a class and the functions of a notebook likewise (they are independent).

So two writings that differ only by the disguises of docs/similarity.md give the same tokens. Code that does not
parse falls back to Python's `tokenize` (names as `V`, literals by kind), and then to words: a token stream is
returned for any text. Every token keeps the line it came from, for the side-by-side pages.
"""
from __future__ import annotations

import ast
import builtins
import io
import re
import tokenize
from dataclasses import dataclass
from typing import Callable

MODULE_NAMES = {"torch", "nn", "F", "np", "numpy", "math", "functional", "pd", "random", "os", "sys", "re",
                "transformers", "optim", "data", "init", "scipy", "collections", "itertools", "functools"}
BUILTIN_NAMES = set(dir(builtins)) | {"self", "cls"}
MATMUL_CALLS = {"matmul", "mm", "bmm"}
SAME_CALL = {"view": "reshape", "contiguous": None, "clone": None}  # None: a no-op for what it computes
MAX_STATEMENT_CHARS = 200_000  # a statement longer than this is read as plain tokens (no one writes one this long)


@dataclass(frozen=True)
class Token:
    """One normalised token and the line of the source it came from."""

    text: str
    line: int  # 1-based line in the source given


def _is_noop(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, (ast.Constant, ast.Name)))


def _never_runs(stmt: ast.stmt) -> bool:
    return isinstance(stmt, (ast.If, ast.While)) and isinstance(stmt.test, ast.Constant) and not stmt.test.value \
        and not stmt.orelse


def _read_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


class _Cleaner(ast.NodeTransformer):
    """Docstrings, no-ops, dead branches and dead assignments out; equivalent spellings one way."""

    def __init__(self):
        self.instance_names = {"self", "cls"}  # a method's first parameter, whatever it is called
        self.in_class = False

    def visit_ClassDef(self, node):
        saved, self.in_class = self.in_class, True
        self.generic_visit(node)
        self.in_class = saved
        return node

    def _body(self, body: list[ast.stmt], docstring_allowed: bool) -> list[ast.stmt]:
        if docstring_allowed and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]
        kept = [s for s in body if not _is_noop(s) and not _never_runs(s)]
        return kept or [ast.Pass()]

    def generic_visit(self, node):
        super().generic_visit(node)
        for field in ("body", "orelse", "finalbody"):
            value = getattr(node, field, None)
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                doc = field == "body" and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                                            ast.Module))
                setattr(node, field, self._body(value, doc))
        return node

    def visit_FunctionDef(self, node):
        saved_names, saved_class = set(self.instance_names), self.in_class
        args = node.args.posonlyargs + node.args.args
        if self.in_class and args:
            self.instance_names.add(args[0].arg)
        self.in_class = False
        self.generic_visit(node)
        self.instance_names, self.in_class = saved_names, saved_class
        _drop_dead_assignments(node)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_AugAssign(self, node):
        self.generic_visit(node)
        if isinstance(node.target, ast.Name):
            load = ast.Name(node.target.id, ast.Load())
            return ast.copy_location(ast.Assign([node.target], ast.BinOp(load, node.op, node.value)), node)
        return node

    def visit_Compare(self, node):
        self.generic_visit(node)
        flip = {ast.Gt: ast.Lt, ast.GtE: ast.LtE}
        if len(node.ops) == 1 and type(node.ops[0]) in flip:
            return ast.copy_location(ast.Compare(node.comparators[0], [flip[type(node.ops[0])]()], [node.left]), node)
        return node

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if node.attr == "mT" and isinstance(node.ctx, ast.Load):
            return ast.copy_location(_call("transpose_last2", [node.value]), node)
        return node

    def visit_Subscript(self, node):
        self.generic_visit(node)
        if isinstance(node.value, ast.Attribute) and node.value.attr == "shape" and isinstance(node.ctx, ast.Load):
            return ast.copy_location(_call("size", [node.value.value, node.slice]), node)
        return node

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Pow) and isinstance(node.right, ast.Constant) and node.right.value == 0.5:
            return ast.copy_location(_call("sqrt", [node.left]), node)
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        func, args = node.func, list(node.args)
        name, subject = None, None
        if isinstance(func, ast.Attribute) and not (isinstance(func.value, ast.Name)
                                                    and func.value.id in self.instance_names):
            # (a call of the object's own attribute, self.proj(x), is the student's name: the role A says it)
            root = _root_name(func.value)
            if root in MODULE_NAMES and args:  # torch.softmax(x, -1), F.relu(x), math.sqrt(x)
                name, subject, args = func.attr, args[0], args[1:]
            elif root not in MODULE_NAMES:  # x.softmax(-1)
                name, subject = func.attr, func.value
        if name is None:
            return node
        name = SAME_CALL.get(name, name)
        if name is None and not args and not node.keywords:
            return subject
        if name in MATMUL_CALLS and len(args) == 1 and not node.keywords:
            return ast.copy_location(ast.BinOp(subject, ast.MatMult(), args[0]), node)
        if name == "transpose" and len(args) == 2 and _last_two(args):
            return ast.copy_location(_call("transpose_last2", [subject]), node)
        return ast.copy_location(ast.Call(ast.Name(f"@{name}", ast.Load()), [subject, *args], node.keywords), node)


def _call(name: str, args: list[ast.expr]) -> ast.Call:
    return ast.Call(ast.Name(f"@{name}", ast.Load()), args, [])


def _last_two(args: list[ast.expr]) -> bool:
    values = {ast.unparse(a).replace(" ", "") for a in args}
    return values == {"-1", "-2"}


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _drop_dead_assignments(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
    """Assignments to a plain local name that nothing in the function reads, until none is left."""
    while True:
        read = _read_names(fn)
        for holder in [n for n in ast.walk(fn) if hasattr(n, "body")]:
            for field in ("body", "orelse", "finalbody"):
                stmts = getattr(holder, field, None)
                if not isinstance(stmts, list) or not stmts or not isinstance(stmts[0], ast.stmt):
                    continue
                kept = [s for s in stmts if not _dead(s, read)]
                if len(kept) != len(stmts):
                    setattr(holder, field, kept or [ast.Pass()])
                    break
            else:
                continue
            break
        else:
            return


def _dead(stmt: ast.stmt, read: set[str]) -> bool:
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        names = [n for t in targets for n in ast.walk(t)]
        return all(isinstance(n, (ast.Name, ast.Tuple, ast.Store)) for n in names) and \
            not any(isinstance(n, ast.Name) and n.id in read for n in names)
    return False


class _Roles:
    """Who each name is: P (parameter), V (local), G (defined by the notebook), or itself (library, builtin)."""

    def __init__(self, notebook_names: set[str]):
        self.notebook_names = notebook_names

    def of(self, name: str, params: set[str], locals_: set[str]) -> str:
        if name.startswith("@"):
            return name[1:]
        if name in params:
            return "P"
        if name in locals_:
            return "V"
        if name in self.notebook_names:
            return "G"
        if name in BUILTIN_NAMES or name in MODULE_NAMES:
            return name
        return "V"  # a global the notebook binds elsewhere, or an unknown name: a disguise may rename it


def _scope(fn: ast.AST) -> tuple[set[str], set[str]]:
    params: set[str] = set()
    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = fn.args
        params = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x is not None}
    stored = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}
    stored |= {n.arg for n in ast.walk(fn) if isinstance(n, ast.arg)}
    return params, stored - params


class _Emitter:
    """One token per node, in a canonical order of independent statements."""

    def __init__(self, roles: _Roles):
        self.roles = roles
        self.params: set[str] = set()
        self.locals: set[str] = set()
        self.self_name = "self"
        self.in_class = False

    def tokens(self, node: ast.AST) -> list[Token]:
        out: list[Token] = []
        self._emit(node, out, getattr(node, "lineno", 1))
        return out

    def _emit(self, node: ast.AST, out: list[Token], line: int) -> None:
        line = getattr(node, "lineno", line)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            saved = self.params, self.locals, self.self_name
            params, locals_ = _scope(node)
            self.params, self.locals = self.params | params, (self.locals | locals_) - params
            args = node.args.posonlyargs + node.args.args
            if args and (self.in_class or args[0].arg in ("self", "cls")):
                self.self_name = args[0].arg
            in_class, self.in_class = self.in_class, False
            out.append(Token(f"def/{len(args)}", line))
            for d in node.args.defaults:
                self._emit(d, out, line)
            self._block(node.body, out, line)
            out.append(Token("enddef", line))
            self.params, self.locals, self.self_name = saved
            self.in_class = in_class
            return
        if isinstance(node, ast.ClassDef):
            out.append(Token("class", line))
            for b in node.bases:
                self._emit(b, out, line)
            in_class, self.in_class = self.in_class, True
            self._block(node.body, out, line)
            self.in_class = in_class
            out.append(Token("endclass", line))
            return
        if isinstance(node, ast.Name):
            out.append(Token(self.roles.of(node.id, self.params, self.locals), line))
            return
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == self.self_name:
                out.append(Token("A", line))
                return
            self._emit(node.value, out, line)
            out.append(Token(f".{node.attr}", line))
            return
        if isinstance(node, ast.Constant):
            value = node.value
            text = "S" if isinstance(value, (str, bytes)) else repr(value)
            out.append(Token(text, line))
            return
        if isinstance(node, ast.arg):
            return
        if isinstance(node, ast.keyword):
            out.append(Token(f"{node.arg}=", line))
            self._emit(node.value, out, line)
            return
        out.append(Token(type(node).__name__, line))
        if isinstance(node, ast.Call):
            self._emit(node.func, out, line)
            for a in node.args:
                self._emit(a, out, line)
            for k in sorted(node.keywords, key=lambda k: k.arg or ""):
                self._emit(k, out, line)
            return
        for field, value in ast.iter_fields(node):
            if field in ("ctx", "type_comment"):
                continue
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                self._block(value, out, line)
            elif isinstance(value, list):
                for v in value:
                    if isinstance(v, ast.AST):
                        self._emit(v, out, line)
            elif isinstance(value, ast.AST):
                self._emit(value, out, line)

    def _block(self, body: list[ast.stmt], out: list[Token], line: int) -> None:
        emitted = [self.tokens_of(s, line) for s in body]
        for index in canonical_order(body, [" ".join(t.text for t in toks) for toks in emitted]):
            out += emitted[index]

    def tokens_of(self, stmt: ast.stmt, line: int) -> list[Token]:
        out: list[Token] = []
        self._emit(stmt, out, line)
        return out


_BARRIERS = (ast.Return, ast.Raise, ast.Break, ast.Continue, ast.Global, ast.Nonlocal, ast.Import, ast.ImportFrom)


def _effects(stmt: ast.stmt) -> tuple[set[str], set[str], bool]:
    """(names read, names written, is a barrier), in one walk. A call on `x.f(...)` may change x: it writes x;
    attributes of `self` count as names of their own (`self.w`)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return set(), {stmt.name}, False  # a definition: independent of its neighbours (read when called)
    reads, writes = set(), set()
    barrier = isinstance(stmt, _BARRIERS) or (isinstance(stmt, ast.Expr) and not isinstance(stmt.value, ast.Call))
    for n in ast.walk(stmt):
        if isinstance(n, ast.Name):
            (writes if isinstance(n.ctx, (ast.Store, ast.Del)) else reads).add(n.id)
        elif isinstance(n, ast.Attribute):
            if isinstance(n.value, ast.Name):
                key = f"{n.value.id}.{n.attr}"
                (writes if isinstance(n.ctx, (ast.Store, ast.Del)) else reads).add(key)
                if isinstance(n.ctx, ast.Store):
                    writes.add(n.value.id + ".*")
        elif isinstance(n, ast.Call):
            target = n.func.value if isinstance(n.func, ast.Attribute) else None
            root = _root_name(target) if target is not None else None
            if root is not None and root not in MODULE_NAMES:
                writes.add(root)
            for a in n.args:
                if isinstance(a, ast.Name):  # an argument may be changed in place (nn.init.xavier_uniform_(w))
                    writes.add(a.id)
        elif isinstance(n, ast.Subscript):
            if isinstance(n.ctx, ast.Store):
                root = _root_name(n.value)
                if root:
                    writes.add(root)
        elif isinstance(n, (ast.Return, ast.Raise, ast.Break, ast.Continue, ast.Yield, ast.YieldFrom, ast.Await)):
            barrier = True
    return reads | {w for w in writes if w.endswith(".*")}, writes, barrier


def _depends(later: tuple, earlier: tuple) -> bool:
    r2, w2, b2 = later
    r1, w1, b1 = earlier
    if b1 or b2:
        return True
    star1 = {w[:-2] for w in w1 if w.endswith(".*")}
    touches = {x.split(".")[0] for x in r2 | w2}
    return bool(w1 & (r2 | w2) or r1 & w2 or star1 & touches)


def canonical_order(body: list[ast.stmt], keys: list[str]) -> list[int]:
    """The statements' indexes in a canonical order: each after every earlier one it depends on; among those free
    to go, the one with the smallest key first. The same for any reordering that keeps the dependencies."""
    if len(body) < 2 or len(body) > 300:  # (quadratic: a block this long is left as written)
        return list(range(len(body)))
    effects = [_effects(s) for s in body]
    before = [{i for i in range(j) if _depends(effects[j], effects[i])} for j in range(len(body))]
    done: list[int] = []
    left = set(range(len(body)))
    while left:
        free = [j for j in left if not (before[j] & left)]
        j = min(free, key=lambda i: (keys[i], i))
        done.append(j)
        left.discard(j)
    return done


@dataclass
class Definition:
    """A top-level statement of student code, normalised: its name (a def or class; '' for other statements),
    the line it starts on in its cell, its source and tokens."""

    name: str
    source: str
    tokens: list[Token]
    cell: int = 0


def parse_cell(source: str) -> ast.Module | None:
    """A cell's syntax tree, its IPython syntax (magics, shell lines) taken out first; None when it does not parse."""
    from autograder.notebook.extract import strip_ipython

    try:
        tree = ast.parse(strip_ipython(source))
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    return tree


def definition_tokens(node: ast.stmt, notebook_names: set[str], source: str = "") -> list[Token]:
    """The tokens of one top-level statement (see the module's docstring); `source`, its text, is read as plain
    tokens where the tree is too deep to walk."""
    try:
        cleaned = _Cleaner().visit(ast.Module([node], []))
        return _Emitter(_Roles(notebook_names)).tokens(cleaned.body[0] if cleaned.body else ast.Pass())
    except RecursionError:
        return fallback_tokens(source, getattr(node, "lineno", 1))


_WORD = re.compile(r"\w+|[^\w\s]")


def fallback_tokens(source: str, first_line: int = 1) -> list[Token]:
    """Tokens of code that does not parse: Python's tokenizer (names as V, literals by kind, comments dropped),
    then, where even that fails, words and symbols."""
    out: list[Token] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            line = tok.start[0] + first_line - 1
            if tok.type == tokenize.NAME:
                out.append(Token(tok.string if tok.string in BUILTIN_NAMES or tok.string in MODULE_NAMES
                                 or tok.string.isidentifier() and _is_keyword(tok.string) else "V", line))
            elif tok.type == tokenize.NUMBER:
                out.append(Token(tok.string, line))
            elif tok.type == tokenize.STRING:
                out.append(Token("S", line))
            elif tok.type == tokenize.OP:
                out.append(Token(tok.string, line))
        return out
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    for number, text in enumerate(source.split("\n"), start=first_line):
        out += [Token(w, number) for w in _WORD.findall(text)]
    return out


def _is_keyword(word: str) -> bool:
    import keyword

    return keyword.iskeyword(word)


def plain_statement(text: str) -> str:
    """A statement's text blind to trailing spaces and blank lines (what editors change)."""
    return "\n".join(line.rstrip() for line in text.split("\n")).strip("\n")


def cell_definitions(source: str, notebook_names: set[str], cell: int = 0,
                     skip: Callable[[str], bool] | None = None) -> list[Definition]:
    """The top-level statements of one code cell that can hold student work (defs, classes, other statements
    except imports), normalised; a statement whose text `skip` says is known already (as handed out, or read in
    another notebook) is left out unread: most of a notebook costs no normalising."""
    tree = parse_cell(source)
    if tree is None:
        return _chunk_definitions(source, notebook_names, cell, skip)
    lines = source.split("\n")
    out = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) or _is_noop(node):
            continue
        text = "\n".join(lines[node.lineno - 1:(node.end_lineno or node.lineno)])
        if skip is not None and skip(text):
            continue
        name = node.name if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else ""
        tokens = fallback_tokens(text, node.lineno) if len(text) > MAX_STATEMENT_CHARS \
            else definition_tokens(node, notebook_names, text)
        out.append(Definition(name, text, _relative(tokens, node.lineno), cell))
    return out


def _chunk_definitions(source: str, notebook_names: set[str], cell: int, skip) -> list[Definition]:
    """A cell that does not parse, read chunk by chunk (a chunk starts at each line at the left margin): the chunks
    that parse are normalised as usual, the others read as plain tokens. One broken line costs its chunk only."""
    lines = source.split("\n")
    starts = [i for i, line in enumerate(lines) if line[:1].strip() and not line.startswith(("#", ")", "]", "}"))]
    if not starts or len(starts) > 5000:
        return [Definition("", source, fallback_tokens(source), cell)] if source.strip() else []
    starts[0] = 0
    out = []
    for a, b in zip(starts, [*starts[1:], len(lines)]):
        chunk = "\n".join(lines[a:b])
        if not chunk.strip():
            continue
        if parse_cell(chunk) is not None:
            out += cell_definitions(chunk, notebook_names, cell, skip)
            continue
        good = _parsable_head(chunk)  # the lines before the error, where they parse on their own
        if good:
            out += cell_definitions("\n".join(lines[a:a + good]), notebook_names, cell, skip)
        rest = "\n".join(lines[a + good:b])
        out.append(Definition("", rest, fallback_tokens(rest, good + 1), cell))
    return out


def _parsable_head(chunk: str) -> int:
    """How many of the chunk's first lines parse on their own, stopping where the syntax error is (0: none)."""
    from autograder.notebook.extract import strip_ipython

    try:
        ast.parse(strip_ipython(chunk))
    except SyntaxError as exc:
        head = (exc.lineno or 1) - 1
        lowest = max(0, head - 20)  # (a few tries: each parses the head again)
        while head > lowest:
            if parse_cell("\n".join(chunk.split("\n")[:head])) is not None:
                return head
            head -= 1
    except (ValueError, MemoryError, RecursionError):
        pass
    return 0


def _relative(tokens: list[Token], first: int) -> list[Token]:
    """Lines relative to the definition's own source (1 = its first line)."""
    return [Token(t.text, max(1, t.line - first + 1)) for t in tokens]


def defined_names(sources: list[str]) -> set[str]:
    """Every function and class name the notebook's code cells define at top level."""
    found: set[str] = set()
    for source in sources:
        for match in re.finditer(r"^(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)", source, re.M):
            found.add(match.group(1))
    return found
