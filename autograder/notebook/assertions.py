"""Assertions of a test cell labelled with where they are, for the instructor's eyes only (`autograder verify`).

A hidden assertion that fails tells a student nothing but that a hidden test failed. When it fails on the answer
key, the instructor needs its line: verify grades the key once more with each assertion's message prefixed by a
label naming its line, and reads the label back from the result. The source is edited in place (text
inserted on the assertion's own lines), so every line keeps its number and every statement its meaning.
"""
from __future__ import annotations

import ast
import re
_LABEL = re.compile(r"\[\[assert at line (\d+)\]\] ?(.*)", re.S)


def label_assertions(source: str) -> str | None:
    """`source` with the message of each `assert` prefixed by `[[assert at line N]]` (N: 1-based, the line of the
    assert statement), or None when it does not parse. Nothing else changes: not a line number, not what is asserted."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    lines = source.split("\n")
    edits = []  # (line index, character column, text to insert there)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        tag = repr(f"[[assert at line {node.lineno}]] ")
        if node.msg is None:  # after the whole statement: inside a parenthesised test it would assert a tuple
            edits.append(_at(lines, node.end_lineno, node.end_col_offset, f", {tag}"))
        else:
            edits.append(_at(lines, node.msg.end_lineno, node.msg.end_col_offset, ")"))
            edits.append(_at(lines, node.msg.lineno, node.msg.col_offset, f"{tag} + str("))
    for row, col, text in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        lines[row] = lines[row][:col] + text + lines[row][col:]
    return "\n".join(lines)


def _at(lines: list[str], lineno: int | None, byte_col: int | None, text: str) -> tuple[int, int, str]:
    """An edit at an AST position (ast counts columns in UTF-8 bytes)."""
    row = (lineno or 1) - 1
    col = len(lines[row].encode("utf-8")[:byte_col or 0].decode("utf-8", errors="ignore"))
    return row, col, text


def read_label(message: str) -> tuple[int, str] | None:
    """(line, the assertion's own message) from a message made by a labelled assertion, or None."""
    m = _LABEL.search(message)
    return (int(m.group(1)), m.group(2).strip()) if m else None
