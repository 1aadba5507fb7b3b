"""Mutation operators: one small, plausible mistake of deep-learning code at a time, as a text edit.

`mutations(source, lines)` parses one top-level definition (`def` or `class`) with `ast`, visits every node
whose lines are all in `lines` (the lines a student writes: the solution regions), and asks every operator of
OPERATORS what it would change there. A mutation is one or more edits of the definition's text: character spans
replaced by new text made from the original text of the nodes around them, so that a mutant differs from the
reference by exactly the mistake (its unified diff is one or two lines) and keeps every comment and the layout.
A mutation whose text does not parse, or parses to the reference's syntax tree, is dropped; two mutations that
parse to the same tree are one.

Operators (name: what it does):
    scale:        `x / sqrt(d)` -> `x`, `x / d`, `x * sqrt(d)`; `x * scale` -> `x`
    dim:          softmax / reductions / cat / split over another dim (`dim=-1` -> `dim=-2`, 1 -> 0, ...)
    transpose:    `.transpose(..)`, `.permute(..)`, `.T`, `.t()` removed; permute's adjacent axes swapped;
                  view / reshape with its last two sizes swapped
    mask:         mask inverted (`m` -> `~(m)`, `1 - m` -> `m`, `~m` -> `m`), masked value 0 instead of a large
                  negative, a broadcast mask indexed over the wrong axis (`m[:, None, None, :]` -> `m[:, None, :, None]`)
    dropout:      removed; always on (`training=True`); never on; moved before the softmax; moved onto the residual
    residual:     `x + f(x)` -> `f(x)`; `addend`: one term of a sum dropped (`a + b` -> `a`, `b`)
    layernorm:    a norm call removed; post-norm `norm(x + f(x))` -> pre-norm `x + f(norm(x))`; `nn.LayerNorm(..)`
                  -> `nn.Identity()`
    activation:   GELU / ReLU / tanh swapped for each other, the tanh-approximate GELU, a functional one removed
    detach:       `.detach()` after a submodule's call or a matrix product
    mode:         a `.train()` / `.eval()` call dropped or swapped for the other; `with torch.no_grad():` removed
    step_order:   `zero_grad()` / `backward()` / `step()` reordered (adjacent ones swapped, zero_grad moved last)
    off_by_one:   slice bounds and integer indices +-1, `range(..)` bounds +-1
    label:        `-100` -> `0`; `ignore_index=..` left out
    swap_args:    two adjacent positional arguments swapped; `a @ b` -> `b @ a`; `a - b` -> `b - a`
    reduction:    mean <-> sum (methods, torch functions, `reduction=`)
    compare:      `<` <-> `<=`, `>` <-> `>=`, `==` <-> `!=`, `is` <-> `is not`, `in` <-> `not in`
    constant:     an int k -> k + 1, a float f -> f / 2 (0.0 -> 1.0), True <-> False
    statement:    an in-place update, an assignment to an index or attribute, a re-binding or a call statement
                  removed (never inside a `while` loop, where it would mostly loop until the time limit)

Why `ast` and text edits, not mutmut, cosmic-ray or libcst: mutmut and cosmic-ray mutate a package's modules
on disk and run a test command per mutant; here a mutant is one definition of a notebook, graded in a batch by
the grader's own confined workers, so only their operator sets could be reused, and those are generic (`+` ->
`-`, `<` -> `<=`, constants) while the mistakes worth finding here are about axes, masks, scales, dropout,
normalisation, training modes and optimizer steps. libcst would give lossless rewriting of whole trees, but
every edit here is a span of the original text, which `ast`'s positions give with the standard library alone
(no dependency added to the grader).

One module past the package's 600 lines, on purpose: the operators are the methods of one visitor (`_Generator`),
each a few lines reading the same context (the node's lines, its loop and method, its text), so read best whole.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from autograder.notebook.extract import dotted

OPERATORS = ("scale", "dim", "transpose", "mask", "dropout", "residual", "addend", "layernorm", "activation",
             "detach", "mode", "step_order", "off_by_one", "label", "swap_args", "reduction", "compare",
             "constant", "statement")


@dataclass(frozen=True)
class Edit:
    """Replace the text between two offsets of a definition's text by `text`."""
    start: int  # character offsets in the definition's text
    end: int
    text: str


@dataclass(frozen=True)
class Mutation:
    """One small wrong change of a reference definition (an operator's edits), with the text it gives and the code
    that must run for it to matter."""
    operator: str
    description: str
    line: int  # 1-based line of the definition's text where the first edit starts
    edits: tuple[Edit, ...]
    source: str  # the definition's text with the edits applied
    anchor: tuple[int, int, str]  # (start, end, kind) of the code that must run for the mutation to matter:
    #                               kind "expr" (wrap the span) or "stmt" (insert a statement before the line)


@dataclass
class _Candidate:
    operator: str
    description: str
    edits: list[Edit]
    anchor: ast.AST


_DIM_FUNCS = {"softmax", "log_softmax", "sum", "mean", "argmax", "argmin", "max", "min", "cumsum", "logsumexp",
              "var", "std", "cat", "stack", "squeeze", "unsqueeze", "split", "chunk", "norm", "prod", "all", "any", "size"}
_TORCH_PREFIXES = {"torch", "F", "nn.functional", "torch.nn.functional", "functional"}
_ACTIVATIONS = {  # kind -> (functional replacement, module class)
    "gelu": ("torch.nn.functional.gelu", "GELU"),
    "relu": ("torch.relu", "ReLU"),
    "tanh": ("torch.tanh", "Tanh"),
}
_ACTIVATION_FUNCS = {"F.gelu": "gelu", "torch.nn.functional.gelu": "gelu", "nn.functional.gelu": "gelu",
                     "F.relu": "relu", "torch.relu": "relu", "torch.nn.functional.relu": "relu",
                     "nn.functional.relu": "relu", "torch.tanh": "tanh", "F.tanh": "tanh",
                     "torch.nn.functional.tanh": "tanh"}
_ACTIVATION_MODULES = {"GELU": "gelu", "ReLU": "relu", "Tanh": "tanh"}
_COMPARE_SWAPS = {ast.Lt: (ast.LtE, "<="), ast.LtE: (ast.Lt, "<"), ast.Gt: (ast.GtE, ">="), ast.GtE: (ast.Gt, ">"),
                  ast.Eq: (ast.NotEq, "!="), ast.NotEq: (ast.Eq, "=="), ast.Is: (ast.IsNot, "is not"),
                  ast.IsNot: (ast.Is, "is"), ast.In: (ast.NotIn, "not in"), ast.NotIn: (ast.In, "in")}
_COMPARE_TEXT = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
                 ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}
_NO_SWAP_CALLS = {"isinstance", "issubclass", "print", "getattr", "setattr", "hasattr", "super", "range", "zip",
                  "enumerate", "dict", "format",
                  "transpose", "swapaxes", "permute", "view", "reshape"}  # the last five: the transpose operator
_COMPOUND = (ast.BinOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.UnaryOp, ast.Lambda, ast.NamedExpr)


def _call_name(node: ast.AST) -> str:
    """The last name of a call's function (`torch.softmax` -> softmax, `self.dropout` -> dropout)."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _int_value(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant)
            and type(node.operand.value) is int):
        return -node.operand.value
    return None


def _number(node: ast.AST) -> float | None:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value)
    if (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant)
            and type(node.operand.value) in (int, float)):
        return -float(node.operand.value)
    return None


def _is_large_negative(node: ast.AST) -> bool:
    value = _number(node)
    if value is not None:
        return value <= -1e4
    if isinstance(node, ast.Call) and dotted(node.func) == "float" and node.args:
        arg = node.args[0]
        return isinstance(arg, ast.Constant) and str(arg.value).strip().lower() in ("-inf", "-infinity")
    if isinstance(node, ast.Attribute) and node.attr == "min" and isinstance(node.value, ast.Call):
        return _call_name(node.value) == "finfo"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return dotted(node.operand) in ("math.inf", "torch.inf", "float('inf')", "np.inf")
    return False


def _is_dropout_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call) or not node.args:
        return False
    name = _call_name(node)
    if name[:1].isupper():  # nn.Dropout(p): building the module, not applying it
        return False
    return "dropout" in name.lower() or name.lower() in ("drop", "attn_drop", "drop_attn")


def _is_norm_call(node: ast.AST) -> bool:
    """A call of a normalisation module or function (self.norm1(x), self.LayerNorm(x), F.layer_norm(x, ..))."""
    if not isinstance(node, ast.Call) or len(node.args) < 1:
        return False
    func = node.func
    name = _call_name(node).lower()
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        return "norm" in name and "normal" not in name
    return name == "layer_norm"


def _is_softmax_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and _call_name(node) in ("softmax", "log_softmax") and bool(node.args)


class _Source:
    """The definition's text with offsets for ast positions (columns are UTF-8 byte offsets)."""

    def __init__(self, text: str):
        self.text = text
        self.lines = text.split("\n")
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line) + 1)

    def offset(self, lineno: int, col: int) -> int:
        line = self.lines[lineno - 1]
        return self.starts[lineno - 1] + len(line.encode("utf-8")[:col].decode("utf-8", "replace"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                self.offset(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]

    def seg(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.text[start:end]


class _Generator:
    def __init__(self, text: str, lines: set[int]):
        self.src = _Source(text)
        self.allowed = lines
        self.tree = ast.parse(text)
        self.parent: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
        self.found: list[_Candidate] = []

    # -- helpers ---------------------------------------------------------------------------------------

    def inside(self, node: ast.AST) -> bool:
        first = getattr(node, "lineno", None)
        last = getattr(node, "end_lineno", None)
        if first is None or last is None:
            return False
        return all(line in self.allowed for line in range(first, last + 1))

    def in_while(self, node: ast.AST) -> bool:
        while node in self.parent:
            node = self.parent[node]
            if isinstance(node, ast.While):
                return True
        return False

    def in_method(self, node: ast.AST, name: str) -> bool:
        while node in self.parent:
            node = self.parent[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return node.name == name
        return False

    def text(self, node: ast.AST, parens: bool = False) -> str:
        t = self.src.seg(node)
        if parens and isinstance(node, _COMPOUND):
            return f"({t})"
        return t

    def replace(self, node: ast.AST, text: str) -> Edit:
        start, end = self.src.span(node)
        return Edit(start, end, text)

    def as_operand(self, node: ast.AST, replacement: ast.AST) -> str:
        """The text of `replacement` to put where `node` is, in parentheses when it could bind differently."""
        t = self.src.seg(replacement)
        parent = self.parent.get(node)
        if isinstance(replacement, _COMPOUND) and isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare,
                                                                     ast.Attribute, ast.Subscript, ast.Await)):
            return f"({t})"
        if isinstance(replacement, _COMPOUND) and isinstance(parent, ast.Call) and node is parent.func:
            return f"({t})"
        return t

    def add(self, operator: str, description: str, edits: list[Edit], anchor: ast.AST) -> None:
        self.found.append(_Candidate(operator, description, edits, anchor))

    # -- the walk --------------------------------------------------------------------------------------

    def run(self) -> list[_Candidate]:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.stmt) and node is not self.tree.body[0] and self.inside(node):
                self.statement(node)
            if isinstance(node, ast.expr) and self.inside(node):
                self.expression(node)
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.For, ast.If, ast.With,
                                 ast.Try, ast.While, ast.ClassDef)):
                for field in ("body", "orelse", "finalbody"):
                    block = getattr(node, field, None)
                    if isinstance(block, list):
                        self.block(block)
        return self.found

    # expression operators
    def expression(self, node: ast.expr) -> None:
        if isinstance(node, ast.BinOp):
            self.scale(node)
            self.binop(node)
        if isinstance(node, ast.Call):
            self.call(node)
        if isinstance(node, ast.Attribute) and node.attr in ("T", "mT") and isinstance(node.ctx, ast.Load):
            self.add("transpose", f"`.{node.attr}` removed", [self.replace(node, self.as_operand(node, node.value))],
                     node)
        if isinstance(node, ast.Subscript):
            self.subscript(node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Invert, ast.Not)):
            op = "~" if isinstance(node.op, ast.Invert) else "not "
            self.add("mask", f"`{op}` removed (the mask or condition inverted)",
                     [self.replace(node, self.as_operand(node, node.operand))], node)
        if isinstance(node, ast.Compare):
            self.compare(node)
        if isinstance(node, ast.IfExp) and "training" in self.text(node.test):
            self.add("dropout", "the training-mode choice always takes its train() branch",
                     [self.replace(node, self.as_operand(node, node.body))], node)
            self.add("dropout", "the training-mode choice always takes its eval() branch",
                     [self.replace(node, self.as_operand(node, node.orelse))], node)
        self.constant(node)

    def scale(self, node: ast.BinOp) -> None:
        right = node.right
        is_sqrt = isinstance(right, ast.Call) and _call_name(right) == "sqrt" and (right.args or isinstance(
            right.func, ast.Attribute))
        is_pow_half = isinstance(right, ast.BinOp) and isinstance(right.op, ast.Pow) and _number(right.right) == 0.5
        if isinstance(node.op, ast.Div) and (is_sqrt or is_pow_half):
            left = self.as_operand(node, node.left)
            self.add("scale", f"the scale `/ {self.text(right)}` dropped", [self.replace(node, left)], node)
            assert isinstance(right, (ast.Call, ast.BinOp))
            inner = (right.args[0] if isinstance(right, ast.Call) and right.args else
                     right.func.value if isinstance(right, ast.Call) and isinstance(right.func, ast.Attribute)
                     else right.left if isinstance(right, ast.BinOp) else right)
            self.add("scale", f"divided by {self.text(inner)} instead of {self.text(right)}",
                     [self.replace(right, self.text(inner, parens=True))], node)
            self.add("scale", f"multiplied by {self.text(right)} instead of divided",
                     [self.replace(node, f"{self.text(node.left, parens=True)} * {self.text(right)}")], node)
        elif isinstance(node.op, ast.Mult):
            for side, other in ((node.right, node.left), (node.left, node.right)):
                if "scale" in self.text(side).lower() and isinstance(side, (ast.Name, ast.Attribute)):
                    self.add("scale", f"the scale `{self.text(side)}` dropped",
                             [self.replace(node, self.as_operand(node, other))], node)

    def binop(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.Add):
            self.addition(node)
        if isinstance(node.op, (ast.MatMult, ast.Sub)) and self.text(node.left) != self.text(node.right):
            if _number(node.left) is None and _number(node.right) is None:
                sym = "@" if isinstance(node.op, ast.MatMult) else "-"
                self.add("swap_args", f"`a {sym} b` -> `b {sym} a`",
                         [self.replace(node, f"{self.text(node.right, True)} {sym} {self.text(node.left, True)}")],
                         node)
        if isinstance(node.op, ast.Sub) and _number(node.left) == 1.0:  # 1 - mask
            self.add("mask", f"`{self.text(node)}` -> `{self.text(node.right)}` (inverted)",
                     [self.replace(node, self.as_operand(node, node.right))], node)
        if isinstance(node.op, ast.MatMult):
            self.add("detach", "`.detach()` on a matrix product",
                     [self.replace(node, f"({self.text(node)}).detach()")], node)

    def addition(self, node: ast.BinOp) -> None:
        if _number(node.left) is not None or _number(node.right) is not None:
            return
        if isinstance(node.left, ast.Constant) or isinstance(node.right, ast.Constant):
            return  # strings
        for dropped, kept in ((node.left, node.right), (node.right, node.left)):
            residual = (isinstance(dropped, ast.Name) and isinstance(kept, ast.Call)
                        and any(isinstance(n, ast.Name) and n.id == dropped.id for n in ast.walk(kept)))
            if residual:
                self.add("residual", f"the residual `{self.text(dropped)} +` removed",
                         [self.replace(node, self.as_operand(node, kept))], node)
            else:
                self.add("addend", f"the term `{self.text(dropped)}` of a sum dropped",
                         [self.replace(node, self.as_operand(node, kept))], node)
        for drop_side, other in ((node.right, node.left), (node.left, node.right)):
            if _is_dropout_call(drop_side):
                assert isinstance(drop_side, ast.Call)
                moved = self.with_first_arg(drop_side, self.text(other))
                new = (f"{moved} + {self.text(drop_side.args[0], True)}" if drop_side is node.right
                       else f"{self.text(drop_side.args[0], True)} + {moved}")
                self.add("dropout", "dropout moved onto the residual", [self.replace(node, new)], node)

    def with_first_arg(self, call: ast.Call, text: str) -> str:
        """The call's text with its first positional argument replaced by `text`."""
        start, end = self.src.span(call)
        a0, a1 = self.src.span(call.args[0])
        return self.src.text[start:a0] + text + self.src.text[a1:end]

    def call(self, node: ast.Call) -> None:
        name, full = _call_name(node), dotted(node.func) or ""
        self.dims(node, name, full)
        self.transposes(node, name)
        if name == "masked_fill" and len(node.args) == 2:
            cond, value = node.args
            self.add("mask", "the mask inverted in masked_fill", [self.replace(cond, f"~({self.text(cond)})")], node)
            if _is_large_negative(value) or _number(value) not in (None, 0.0):
                self.add("mask", f"masked positions filled with 0 instead of {self.text(value)}",
                         [self.replace(value, "0.0")], node)
        if name == "where" and len(node.args) == 3:
            cond = node.args[0]
            self.add("mask", "the condition of torch.where inverted", [self.replace(cond, f"~({self.text(cond)})")],
                     node)
        if _is_dropout_call(node):
            self.dropouts(node)
        if _is_norm_call(node):
            self.norms(node)
        if name == "LayerNorm" and "nn" in full:
            self.add("layernorm", f"`{self.text(node)}` -> `nn.Identity()`",
                     [self.replace(node, full.rsplit("LayerNorm", 1)[0] + "Identity()")], node)
        self.activations(node, name, full)
        if (isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "self" and not self.in_method(node, "__init__")
                and not _is_dropout_call(node)):
            self.add("detach", f"`.detach()` after `{self.text(node.func)}(..)`",
                     [self.replace(node, f"{self.text(node)}.detach()")], node)
        for kw in node.keywords:
            if kw.arg == "ignore_index":
                self.add("label", f"`ignore_index={self.text(kw.value)}` left out", [self.drop_keyword(node, kw)],
                         node)
            if kw.arg == "reduction" and isinstance(kw.value, ast.Constant) and kw.value.value in ("mean", "sum"):
                other = "sum" if kw.value.value == "mean" else "mean"
                self.add("reduction", f'reduction="{other}" instead of "{kw.value.value}"',
                         [self.replace(kw.value, f'"{other}"')], node)
        if name in ("mean", "sum") and (isinstance(node.func, ast.Attribute)):
            other = "sum" if name == "mean" else "mean"
            f0, f1 = self.src.span(node.func)
            self.add("reduction", f"`.{name}(..)` -> `.{other}(..)`", [Edit(f1 - len(name), f1, other)], node)
        if name == "range" and node.args and len(node.args) <= 2:
            stop = node.args[-1]
            for delta in ("- 1", "+ 1"):
                self.add("off_by_one", f"range(.., {self.text(stop)} {delta})",
                         [self.replace(stop, f"{self.text(stop, True)} {delta}")], node)
        self.swaps(node, full)

    def drop_keyword(self, call: ast.Call, kw: ast.keyword) -> Edit:
        """An edit removing `kw` (and the comma before or after it) from `call`."""
        items = sorted([*call.args, *call.keywords], key=lambda n: (n.lineno, n.col_offset))
        i = items.index(kw)
        start, end = self.src.span(kw)
        if i > 0:
            start = self.src.span(items[i - 1])[1]
        elif len(items) > 1:
            end = self.src.span(items[1])[0]
        return Edit(start, end, "")

    def dims(self, node: ast.Call, name: str, full: str) -> None:
        targets = [kw.value for kw in node.keywords if kw.arg in ("dim", "axis")]
        if name in _DIM_FUNCS and not targets and isinstance(node.func, ast.Attribute):  # not the builtins max, min
            owner = full.rsplit(".", 1)[0] if "." in full else ""
            index = 1 if owner in _TORCH_PREFIXES else 0
            if name in ("split", "chunk"):
                index += 1
            if len(node.args) > index:
                targets.append(node.args[index])
        for target in targets:
            value = _int_value(target)
            if value is None:
                continue
            new = {-1: -2, -2: -1, 0: 1, 1: 0}.get(value, value - 1)
            self.add("dim", f"{name} over dim {new} instead of {value}", [self.replace(target, str(new))], node)

    def transposes(self, node: ast.Call, name: str) -> None:
        if not isinstance(node.func, ast.Attribute):
            return
        receiver = node.func.value
        if name in ("transpose", "permute", "t", "swapaxes") and not (dotted(receiver) or "").startswith("torch"):
            self.add("transpose", f"`.{name}(..)` removed", [self.replace(node, self.as_operand(node, receiver))],
                     node)
        if name == "permute" and len(node.args) >= 2:
            for i in range(len(node.args) - 1):
                a, b = node.args[i], node.args[i + 1]
                self.add("transpose", f"permute with axes {i} and {i + 1} swapped",
                         [self.replace(a, self.text(b)), self.replace(b, self.text(a))], node)
        if name in ("view", "reshape") and len(node.args) >= 2 and not any(
                isinstance(a, ast.Starred) for a in node.args):
            for i in range(len(node.args) - 1):
                a, b = node.args[i], node.args[i + 1]
                if self.text(a) != self.text(b):
                    self.add("transpose", f"{name} with sizes {i + 1} and {i + 2} swapped",
                             [self.replace(a, self.text(b)), self.replace(b, self.text(a))], node)

    def dropouts(self, node: ast.Call) -> None:
        arg = node.args[0]
        self.add("dropout", f"dropout `{self.text(node.func)}` removed",
                 [self.replace(node, self.as_operand(node, arg))], node)
        functional = _call_name(node) == "dropout" and not (
            isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "self")
        if functional:
            training = next((kw for kw in node.keywords if kw.arg == "training"), None)
            if training is None:
                close = self.src.span(node)[1] - 1
                self.add("dropout", "dropout always on (training=True)", [Edit(close, close, ", training=True")], node)
            else:
                for value in ("True", "False"):
                    if self.text(training.value) != value:
                        self.add("dropout", f"dropout with training={value}", [self.replace(training.value, value)],
                                 node)
        else:
            self.add("dropout", "dropout always on, also in eval()",
                     [self.replace(node, f"torch.nn.functional.dropout({self.text(arg)}, "
                                         f"p={self.text(node.func)}.p, training=True)")], node)
        if _is_softmax_call(arg):
            assert isinstance(arg, ast.Call)
            inner = arg.args[0]
            moved = self.with_first_arg(node, self.text(inner))
            self.add("dropout", "dropout moved before the softmax",
                     [self.replace(node, self.with_first_arg(arg, moved))], node)
        elif isinstance(arg, ast.Name):
            softmax = self.binding_softmax(node, arg.id)
            if softmax is not None:
                inner = softmax.args[0]
                self.add("dropout", "dropout moved before the softmax",
                         [self.replace(inner, self.with_first_arg(node, self.text(inner))),
                          self.replace(node, arg.id)], node)

    def binding_softmax(self, node: ast.AST, name: str) -> ast.Call | None:
        """The softmax call last assigned to `name` before `node`, in the same function."""
        func = node
        while func in self.parent and not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            func = self.parent[func]
        best = None
        for n in ast.walk(func):
            if (isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                    and n.targets[0].id == name and _is_softmax_call(n.value) and self.inside(n.value)
                    and (n.lineno, n.col_offset) < (node.lineno, node.col_offset)):  # type: ignore[attr-defined]
                if best is None or n.lineno > best.lineno:
                    best = n
        return best.value if best is not None else None  # type: ignore[return-value]

    def norms(self, node: ast.Call) -> None:
        arg = node.args[0]
        self.add("layernorm", f"`{self.text(node.func)}` removed", [self.replace(node, self.as_operand(node, arg))],
                 node)
        if (isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add) and isinstance(arg.left, ast.Name)
                and len(node.args) == 1):
            x = arg.left
            uses = [n for n in ast.walk(arg.right) if isinstance(n, ast.Name) and n.id == x.id]
            if uses:
                r0, r1 = self.src.span(arg.right)
                text = self.src.text[r0:r1]
                for use in sorted(uses, key=lambda n: self.src.span(n)[0], reverse=True):
                    u0, u1 = self.src.span(use)
                    text = text[:u0 - r0] + f"{self.text(node.func)}({x.id})" + text[u1 - r0:]
                self.add("layernorm", f"pre-norm instead of post-norm: `{self.text(node.func)}` moved into the branch",
                         [self.replace(node, f"{x.id} + {text}")], node)

    def activations(self, node: ast.Call, name: str, full: str) -> None:
        kind = _ACTIVATION_FUNCS.get(full)
        if kind is None and name in _ACTIVATION_MODULES and not node.args:
            module_kind = _ACTIVATION_MODULES[name]
            prefix = full[: len(full) - len(name)]
            for other, (_, cls) in _ACTIVATIONS.items():
                if other != module_kind:
                    self.add("activation", f"nn.{cls}() instead of nn.{name}()",
                             [self.replace(node, f"{prefix}{cls}()")], node)
            if module_kind == "gelu":
                self.add("activation", "tanh-approximate GELU", [self.replace(node, f'{prefix}GELU(approximate="tanh")')],
                         node)
            return
        if kind is None or not node.args:
            return
        args = self.src.text[self.src.span(node.func)[1]:self.src.span(node)[1]]
        for other, (func, _) in _ACTIVATIONS.items():
            if other != kind:
                self.add("activation", f"{other} instead of {kind}", [self.replace(node, func + args)], node)
        if kind == "gelu" and not node.keywords:
            close = self.src.span(node)[1] - 1
            self.add("activation", "tanh-approximate GELU", [Edit(close, close, ', approximate="tanh"')], node)
        self.add("activation", f"{kind} removed", [self.replace(node, self.as_operand(node, node.args[0]))], node)

    def swaps(self, node: ast.Call, full: str) -> None:
        if full in _NO_SWAP_CALLS or _call_name(node) in _NO_SWAP_CALLS:
            return
        args = node.args
        for i in range(len(args) - 1):
            a, b = args[i], args[i + 1]
            if isinstance(a, ast.Starred) or isinstance(b, ast.Starred) or self.text(a) == self.text(b):
                continue
            self.add("swap_args", f"arguments {i + 1} and {i + 2} of {_call_name(node)}(..) swapped",
                     [self.replace(a, self.text(b)), self.replace(b, self.text(a))], node)

    def subscript(self, node: ast.Subscript) -> None:
        index = node.slice
        elements = index.elts if isinstance(index, ast.Tuple) else [index]
        nones = [e for e in elements if isinstance(e, ast.Constant) and e.value is None]
        full_slices = [e for e in elements if isinstance(e, ast.Slice) and e.lower is None and e.upper is None
                       and e.step is None]
        if nones and full_slices and isinstance(index, ast.Tuple):
            a, b = nones[-1], full_slices[-1]
            self.add("mask", "a broadcast index over another axis",
                     [self.replace(a, self.text(b)), self.replace(b, self.text(a))], node)
        for e in elements:
            if isinstance(e, ast.Slice):
                for bound in (e.lower, e.upper):
                    if bound is None:
                        continue
                    value = _int_value(bound)
                    if value is not None:
                        for new in (value + 1, value - 1):
                            self.add("off_by_one", f"slice bound {new} instead of {value}",
                                     [self.replace(bound, str(new))], node)
                    else:
                        for delta in ("+ 1", "- 1"):
                            self.add("off_by_one", f"slice bound `{self.text(bound)} {delta}`",
                                     [self.replace(bound, f"{self.text(bound, True)} {delta}")], node)
            else:
                value = _int_value(e)
                if value is not None and isinstance(node.ctx, ast.Load):
                    for new in (value + 1, value - 1):
                        if value >= 0 and new < 0:
                            continue
                        self.add("off_by_one", f"index {new} instead of {value}", [self.replace(e, str(new))], node)

    def compare(self, node: ast.Compare) -> None:
        pieces = [node.left, *node.comparators]
        for i, op in enumerate(node.ops):
            swap = _COMPARE_SWAPS.get(type(op))
            if swap is None:
                continue
            left_end = self.src.span(pieces[i])[1]
            right_start = self.src.span(pieces[i + 1])[0]
            between = self.src.text[left_end:right_start]
            old = _COMPARE_TEXT[type(op)]
            new_between = re.sub(r"\s*" + re.escape(old).replace(r"\ ", r"\s+") + r"\s*", f" {swap[1]} ", between,
                                 count=1)
            if new_between == between:
                continue
            self.add("compare", f"`{old}` -> `{swap[1]}`", [Edit(left_end, right_start, new_between)], node)

    def constant(self, node: ast.expr) -> None:
        parent = self.parent.get(node)
        if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.USub):
            return  # handled at the UnaryOp
        if isinstance(parent, (ast.Subscript, ast.Slice)) or (isinstance(parent, ast.Tuple)
                                                             and isinstance(self.parent.get(parent), ast.Subscript)):
            return  # indices: off_by_one
        if isinstance(parent, ast.keyword) and parent.arg in ("dim", "axis", "ignore_index"):
            return
        if isinstance(parent, ast.Call) and _call_name(parent) in _DIM_FUNCS | {"range"} and node is not parent.func:
            if _int_value(node) is not None:
                return  # dims and range bounds have their own operators
        if isinstance(parent, ast.Call) and _call_name(parent) in ("view", "reshape", "permute", "transpose"):
            return
        if isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Pow) and _number(node) == 0.5:
            return
        value = _number(node)
        if isinstance(node, ast.Constant) and type(node.value) is bool:
            self.add("constant", f"{not node.value} instead of {node.value}", [self.replace(node, str(not node.value))],
                     node)
            return
        if value is None:
            return
        if value == -100:
            self.add("label", "-100 -> 0", [self.replace(node, "0")], node)
            return
        if _is_large_negative(node):
            return  # masked_fill's value has its own mutation; elsewhere a large negative is a fill value too
        is_int = (isinstance(node, ast.Constant) and type(node.value) is int) or _int_value(node) is not None
        if is_int:
            new = str(int(value) + 1)
        else:
            new = repr(value / 2) if value != 0.0 else "1.0"
        self.add("constant", f"{new} instead of {self.text(node)}", [self.replace(node, new)], node)

    # statement operators
    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            name = _call_name(node.value)
            if name in ("train", "eval"):
                other = "eval" if name == "train" else "train"
                func = node.value.func
                f1 = self.src.span(func)[1]
                self.add("mode", f"`.{name}()` -> `.{other}()`", [Edit(f1 - len(name), f1, other)], node)
        if isinstance(node, ast.With) and len(node.items) == 1:
            ctx = node.items[0].context_expr
            if isinstance(ctx, ast.Call) and _call_name(ctx) in ("no_grad", "inference_mode"):
                w0 = self.src.offset(node.lineno, node.col_offset)
                colon = self.src.text.index(":", self.src.span(ctx)[1])
                self.add("mode", f"`with {self.text(ctx)}:` removed", [Edit(w0, colon, "if True")], node)

    def removable(self, node: ast.stmt, block: list[ast.stmt]) -> str | None:
        """Why removing `node` is a plausible mistake (a description), or None."""
        if self.in_while(node) or isinstance(node, ast.While):
            return None
        if isinstance(node, ast.AugAssign):
            return f"the update `{self.text(node).splitlines()[0]}` removed"
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            name = _call_name(node.value)
            if name in ("train", "eval"):
                return f"the `.{name}()` call removed"
            return f"the call `{self.text(node.value.func)}(..)` removed"
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, (ast.Subscript, ast.Attribute)) and not self.in_method(node, "__init__"):
                return f"the assignment to `{self.text(target)}` removed"
            if isinstance(target, ast.Attribute) and self.text(target.value) != "self":
                return f"the assignment to `{self.text(target)}` removed"
            if isinstance(target, ast.Name) and self.bound_before(node, target.id):
                return f"the re-binding of `{target.id}` removed"
        if isinstance(node, ast.Continue):
            return "`continue` removed"
        return None

    def bound_before(self, node: ast.stmt, name: str) -> bool:
        func = node
        while func in self.parent and not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            func = self.parent[func]
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(a.arg == name for a in [*func.args.args, *func.args.kwonlyargs, *func.args.posonlyargs]):
                return True
        for n in ast.walk(func):
            if n is node:
                continue
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) and n.lineno < node.lineno:
                return True
        return False

    def block(self, block: list[ast.stmt]) -> None:
        for node in block:
            if not self.inside(node):
                continue
            why = self.removable(node, block)
            if why is None:
                continue
            start, end = self.line_span(node)
            if len(block) == 1:
                indent = self.src.lines[node.lineno - 1][: node.col_offset]
                self.add("statement", why, [Edit(start, end, indent + "pass\n")], node)
            else:
                self.add("statement", why, [Edit(start, end, "")], node)
        self.step_order(block)

    def line_span(self, node: ast.stmt) -> tuple[int, int]:
        """Whole lines of a statement alone on its lines (with the newline); else just the statement."""
        start = self.src.starts[node.lineno - 1]
        end = self.src.starts[node.end_lineno]  # type: ignore[attr-defined]
        text_before = self.src.text[start:self.src.offset(node.lineno, node.col_offset)]
        s0, s1 = self.src.span(node)
        after = self.src.text[s1:end].strip()
        if text_before.strip() or (after and not after.startswith("#")):
            return s0, s1
        return start, end

    def step_order(self, block: list[ast.stmt]) -> None:
        def kind(stmt: ast.stmt) -> str | None:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                name = _call_name(stmt.value)
                if name in ("zero_grad", "backward", "step"):
                    return name
            return None

        kinds = [kind(s) for s in block]
        for i in range(len(block) - 1):
            a, b = block[i], block[i + 1]
            if kinds[i] and kinds[i + 1] and self.inside(a) and self.inside(b) and kinds[i] != kinds[i + 1]:
                ta, tb = self.text(a), self.text(b)
                (a0, a1), (b0, b1) = self.src.span(a), self.src.span(b)
                self.add("step_order", f"`{ta}` and `{tb}` swapped", [Edit(a0, a1, tb), Edit(b0, b1, ta)], a)
        for i, k in enumerate(kinds):
            if k == "zero_grad":
                j = i
                while j + 1 < len(block) and kinds[j + 1] in ("backward", "step"):
                    j += 1
                if j >= i + 2 and all(self.inside(s) for s in block[i:j + 1]):
                    texts = [self.text(s) for s in block[i + 1:j + 1]] + [self.text(block[i])]
                    edits = [Edit(*self.src.span(s), t) for s, t in zip(block[i:j + 1], texts)]
                    self.add("step_order", f"`{self.text(block[i])}` moved after the step", edits, block[i])


class _Normalize(ast.NodeTransformer):
    """Trees that differ only by a no-op statement compare equal: `x = x` and a `pass` among other statements
    are dropped."""

    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                kept = [s for s in block if not (isinstance(s, ast.Pass) or (
                    isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                    and isinstance(s.value, ast.Name) and s.targets[0].id == s.value.id))]
                setattr(node, field, kept or [ast.Pass()])
        return node


def _shape(tree: ast.AST) -> str:
    return ast.dump(_Normalize().visit(tree))


def _apply(text: str, edits: list[Edit]) -> str:
    for e in sorted(edits, key=lambda e: e.start, reverse=True):
        text = text[:e.start] + e.text + text[e.end:]
    return text


def _overlap(edits: list[Edit]) -> bool:
    spans = sorted((e.start, e.end) for e in edits)
    return any(b[0] < a[1] for a, b in zip(spans, spans[1:]))


def _anchor(gen: _Generator, node: ast.AST, edits: list[Edit]) -> tuple[int, int, str]:
    """Where reaching the mutated code can be observed: the smallest expression holding every edit (wrapped),
    or the statement holding them (a statement inserted before it)."""
    lo, hi = min(e.start for e in edits), max(e.end for e in edits)
    current: ast.AST | None = node
    while current is not None:
        if isinstance(current, ast.expr) and not isinstance(current, (ast.Slice, ast.Starred)):
            s0, s1 = gen.src.span(current)
            ctx = getattr(current, "ctx", ast.Load())
            if s0 <= lo and hi <= s1 and isinstance(ctx, ast.Load) and gen.inside(current):
                return s0, s1, "expr"
        if isinstance(current, ast.stmt):
            s0, s1 = gen.src.span(current)
            if s0 <= lo and hi <= s1 or isinstance(current, (ast.FunctionDef, ast.ClassDef)):
                break
        current = gen.parent.get(current)
    stmt = node
    while not isinstance(stmt, ast.stmt) and stmt in gen.parent:
        stmt = gen.parent[stmt]
    # an `elif` cannot have a statement before it: use the first statement of its body instead
    if isinstance(stmt, ast.If) and gen.src.lines[stmt.lineno - 1].lstrip().startswith("elif"):
        stmt = stmt.body[0]
    s0 = gen.src.starts[stmt.lineno - 1]  # type: ignore[attr-defined]
    return s0, s0, "stmt"


def mutations(source: str, lines: set[int] | None = None) -> list[Mutation]:
    """Every distinct mutation of the definition `source` (a top-level def or class) touching only `lines`
    (1-based line numbers of `source`; None: every line), in the order of their place in the text."""
    gen = _Generator(source, set(range(1, source.count("\n") + 2)) if lines is None else lines)
    original = _shape(ast.parse(source))
    seen = {original}
    out = []
    for cand in gen.run():
        if not cand.edits or _overlap(cand.edits):
            continue
        text = _apply(source, cand.edits)
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        dump = _shape(tree)
        if dump in seen:
            continue
        seen.add(dump)
        first = min(e.start for e in cand.edits)
        line = source.count("\n", 0, first) + 1
        out.append(Mutation(cand.operator, cand.description, line, tuple(cand.edits), text,
                            _anchor(gen, cand.anchor, cand.edits)))
    out.sort(key=lambda m: (min(e.start for e in m.edits), OPERATORS.index(m.operator), m.description))
    return out


def reach_source(source: str, anchor: tuple[int, int, str], call: str) -> str:
    """`source` with `call` (an expression that never returns normally) run where the anchor says."""
    start, end, kind = anchor
    if kind == "expr":
        return source[:start] + f"({call} or {source[start:end]})" + source[end:]
    line = source[start:source.find("\n", start) if "\n" in source[start:] else len(source)]
    indent = line[: len(line) - len(line.lstrip())]
    return source[:start] + f"{indent}{call}\n" + source[start:]
