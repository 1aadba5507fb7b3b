"""IPython's own syntax in a code cell (`!pip install x`, `%time f()`, `%%time`, `obj?`, `files = !ls`), found
where IPython finds it: at the start of a logical line only.

Guarantee: `escapes(lines)` names the physical lines that IPython's input transformer
(`IPython.core.inputtransformer2.TransformerManager`) reads as an escape, and no other line. A line is an escape
when it starts a logical line (not inside brackets, a string, or after a backslash continuation) and its first
character after the indentation is one of IPython's escape characters (`! !! % %% ? ?? , ; /`), or it is a whole
help request (`torch.nn?`, `%time??`), or it assigns an escape (`out = !ls`, `t = %timeit -o f()`). An escape that
ends in a backslash takes the lines it continues onto with it, as IPython's does. So a line that black or a person
starts with an operator inside brackets (`!= b`, `% n`, `, c`, `/ d`) is Python, as it is in Jupyter.

How: the cell is read by Python's tokenizer one physical line at a time (tokenize asks for a line only once it has
given every token of the one before; true of 3.11's pure-Python tokenizer and of 3.12's and 3.13's C one). Before
a line goes to the tokenizer, the tokens so far tell whether it starts a logical line; an escape is then handed to
the tokenizer as `pass` (its continuation lines as blank lines), so that the shell text after it (`!echo "it's"`)
never throws the tokenizer off the Python that follows. A cell whose Python the tokenizer cannot read from some
line on (an unterminated string, an inconsistent dedent) has the lines after that point read by their first
character alone, as IPython reads a cell it cannot tokenize no better (such a cell is not Python either way); so has
a cell of more than MAX_TOKENIZED_CHARS up to its last possible escape (time bounded on a hostile notebook's).

Standard library only: the grading image has no IPython (docs/platforms.md); tests/test_ipython_escapes.py holds
this module to IPython's transformer where IPython is installed.
"""
from __future__ import annotations

import ast
import re
import tokenize
from dataclasses import dataclass

ESCAPE_CHARACTERS = "!%?,;/"  # IPython's ESCAPE_SINGLES; `!!`, `??` and `%%` start with one of them
_STARTS_WITH_ESCAPE = re.compile(r"^[ \t\f]*[!%?,;/]")
# IPython's help request at the end of a line (`_help_end_re`), when it is the whole line: `obj?`, `obj.attr??`
_HELP_LINE = re.compile(r"^[ \t\f]*%{0,2}(?!\d)[\w*]+(?:\.(?!\d)[\w*]+|\[-?[0-9]+\])*\?\??[ \t\f]*$")
# `target = !cmd` or `target = %magic`: IPython's MagicAssign and SystemAssign (the target is checked with ast)
_ASSIGNED_ESCAPE = re.compile(r"^([ \t\f]*)([^=#]*?[^=!<>+\-*/%&|^@:])=[ \t\f]*(?:%[A-Za-z_]|!)")
# a quick look before any tokenizing: most cells have no line that could be an escape
_MAYBE = re.compile(r"^[ \t\f]*[!%?,;/]|\?[ \t\f]*$|=[ \t\f]*(?:%[A-Za-z_]|!)", re.M)


@dataclass(frozen=True)
class Escape:
    """One escape (a magic, a shell line, a help request) of a cell: where it is and its text."""

    first: int  # 0-based index of its first physical line
    last: int  # 0-based index of its last (the same line unless it ends in backslashes)
    indent: str
    text: str  # the escape as written, its continuation lines joined


def _candidate(line: str) -> bool:
    """Whether the line is IPython syntax when it starts a logical line (never valid Python there)."""
    if _STARTS_WITH_ESCAPE.match(line) or _HELP_LINE.match(line):
        return True
    m = _ASSIGNED_ESCAPE.match(line)
    if not m:
        return False
    try:
        tree = ast.parse(m.group(2).strip() + " = None")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return len(tree.body) == 1 and isinstance(tree.body[0], (ast.Assign, ast.AnnAssign))


def _continued_to(lines: list[str], start: int) -> int:
    """The last line of an escape that starts at `start`: IPython joins lines ending in a backslash."""
    end = start
    while end + 1 < len(lines) and lines[end].endswith("\\"):
        end += 1
    return end


class _Reader:
    """Hands the tokenizer one line at a time, an escape as `pass`, and records the escapes."""

    def __init__(self, lines: list[str], last_candidate: int):
        self.lines, self.last_candidate = lines, last_candidate
        self.next = 0  # index of the next line of the cell to read
        self.handed = 0  # lines handed to the tokenizer (an escape's continuation lines as blank ones)
        self.pending: list[str] = []
        self.found: list[Escape] = []
        self.depth = 0  # brackets open
        self.last_token: tokenize.TokenInfo | None = None

    def at_logical_start(self) -> bool:
        if self.handed == 0:
            return True
        token = self.last_token
        # the line before ended a logical line (NEWLINE), or was blank or a comment outside brackets (NL); a line
        # that ended inside a string or after a backslash gave neither as its last token
        return (token is not None and token.type in (tokenize.NEWLINE, tokenize.NL) and self.depth == 0
                and token.start[0] == self.handed)

    def readline(self) -> str:
        if not self.pending:
            self.pending = self._next_lines()
        if not self.pending:
            return ""
        self.handed += 1
        return self.pending.pop(0)

    def _next_lines(self) -> list[str]:
        index = self.next
        if index >= len(self.lines) or index > self.last_candidate:
            return []  # nothing past the last possible escape needs reading
        line = self.lines[index]
        if _candidate(line) and self.at_logical_start():
            end = _continued_to(self.lines, index)
            escape = _escape(self.lines, index, end)
            self.found.append(escape)
            self.next = end + 1
            return [escape.indent + "pass\n"] + ["\n"] * (end - index)  # every later line keeps its number
        self.next = index + 1
        return [line + "\n"]

    def saw(self, token: tokenize.TokenInfo) -> None:
        if token.type == tokenize.OP:
            if token.string in ("(", "[", "{"):
                self.depth += 1
            elif token.string in (")", "]", "}") and self.depth:
                self.depth -= 1
        self.last_token = token


def _escape(lines: list[str], first: int, last: int) -> Escape:
    line = lines[first]
    indent = line[: len(line) - len(line.lstrip(" \t\f"))]
    pieces = [line[len(indent):]] + lines[first + 1:last + 1]
    text = " ".join(p.rstrip()[:-1].rstrip() if i < len(pieces) - 1 else p.strip() for i, p in enumerate(pieces))
    return Escape(first, last, indent, text)


# Python's tokenizer reads about a megabyte a second: a cell longer than this (no student's writes one; a hostile
# notebook's may) is read by first character alone, as a cell the tokenizer cannot read, in bounded time
MAX_TOKENIZED_CHARS = 1_000_000


def escapes(lines: list[str]) -> list[Escape]:
    """The IPython escapes of a cell given as its physical lines (without their line ends), in order."""
    candidates = [i for i, line in enumerate(lines) if _candidate(line)]
    if not candidates:
        return []
    reader = _Reader(lines, candidates[-1])
    try:
        if sum(len(line) + 1 for line in lines[: candidates[-1] + 1]) > MAX_TOKENIZED_CHARS:
            raise ValueError("too long to tokenize")
        for token in tokenize.generate_tokens(reader.readline):
            reader.saw(token)
    except (tokenize.TokenError, SyntaxError, ValueError, RecursionError, MemoryError):
        # not Python from here on: the rest is read by first character alone (see the module's docstring)
        index = reader.next
        while index < len(lines):
            if _candidate(lines[index]):
                end = _continued_to(lines, index)
                reader.found.append(_escape(lines, index, end))
                index = end + 1
            else:
                index += 1
    return reader.found


def blanked(source: str, replacement: str = "pass") -> str:
    """The cell with each IPython escape replaced by `replacement` at its indentation (its continuation lines left
    blank), the rest unchanged, every line keeping its number. Lines are split as str.splitlines splits them and
    joined with newlines."""
    lines = source.splitlines()
    if not _MAYBE.search(source):
        return "\n".join(lines)
    for escape in escapes(lines):
        # an escape alone in a block must leave a statement there
        lines[escape.first] = escape.indent + (replacement or ("pass" if escape.indent else ""))
        for index in range(escape.first + 1, escape.last + 1):
            lines[index] = ""
    return "\n".join(lines)
