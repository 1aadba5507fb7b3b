"""otter-grader's markers inside a cell, and what each means here (`autograder import otter`, otter.py).

- Ignored (otter's remove_ignored_lines and is_ignore_cell): a line ending in `# IGNORE` and each `# BEGIN IGNORE`
  ... `# END IGNORE` block are removed from every cell, test cells included (otter removes them from both notebooks,
  and its exception-based tests never run them); a cell whose first line is `# ignore` or `## ignore ##` (any case)
  is dropped. An END without a BEGIN, a BEGIN inside a block or left open is refused, as otter refuses it.
- Seeding (`np.random.seed(42) # SEED`): otter removes the line from solution cells of the student notebook (it
  hands out one outside them as it is) and requires `generate: {seed: N}`, with which its grader seeds random and
  numpy at the top of every cell of a submission (`[seed] cells = N` here: seedvar.py, whatever the submission
  contains). Here the line stays in both notebooks, as a statement the grader runs where it stands, in the submission and in the
  reference (`_seed = np.random.seed(42)`: the grader runs an assignment a check reads, never a bare call): in a
  cell of its own before a solution cell it began (a student's answer replaces the solution cell, not it), else
  where it stood (before the `# BEGIN SOLUTION` block it stood in). The tests file seeds each question's cases as
  otter seeds the cell that checks them (otter.question_seeding: [seed] cells, else these lines).
- Solutions: a line ending in `# SOLUTION [NO PROMPT]` and each `# BEGIN SOLUTION [NO PROMPT]` block go between
  this project's markers, with otter's prompt (`x = ...`, `...`, a BEGIN PROMPT block's lines) as `### PROMPT` lines
  where students get it (solution_code); a written answer's `**SOLUTION:**` label stays in the
  answer key as `**Solution:**` (capitals would read as another tool's marker).
- Test cases: hidden by a first line mentioning `hidden` or by a TEST CONFIG; an exception-based test (one test
  function, its call dropped as ignored) gets the call otter makes, each parameter the notebook's value of its name.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from autograder.importers.common import ImportFailed, parse
from autograder.notebook.extract import dotted
from autograder.notebook.foreign import find_foreign
from autograder.notebook.markers import cell_source

_IGNORE_CELL = re.compile(r"(##\s*ignore\s*##\s*|#\s*ignore\s*)", re.I)  # otter's, on a cell's first line
_BEGIN_IGNORE = re.compile(r"\s*#\s*BEGIN\s*IGNORE\s*", re.I)
_SEED = re.compile(r"^(\S.*?)\s*# SEED\s*$")  # a top-level seeding line
_SOLUTION_LINE = re.compile(r"^(\s*)(.*?)\s*# ?SOLUTION( NO PROMPT)?\s*$")
_SOLUTION_BLOCK = re.compile(r"^(\s*)# BEGIN SOLUTION( NO PROMPT)?\s*$")
_PROMPT = (re.compile(r'^\s*"""\s*# BEGIN PROMPT\s*$'), re.compile(r'^\s*"""\s*;?\s*# END PROMPT\s*$'))
_TEST_CONFIG = (re.compile(r'^(?:.\s*=\s*)?"""?\s*#\s*BEGIN\s*TEST\s*CONFIG', re.I),
                re.compile(r'^"""?\s*#\s*END\s*TEST\s*CONFIG', re.I))
_LABEL = re.compile(r"^(\s*(?:\*\*|__|<strong>)\s*)SOLUTION\b")  # a written answer's label, before its text
SEED_NAME = "_seed"  # what a seeding call is assigned to, so that the grader runs it where it stands


def yaml_config(text: str, where: str) -> dict:
    """otter's YAML configuration (a question's, a test case's, the assignment's) as a mapping, or ImportFailed."""
    import yaml  # PyYAML: otter's configurations are YAML

    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ImportFailed(f"{where}: not valid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(data, dict):
        raise ImportFailed(f"{where}: the configuration is not a YAML mapping")
    return data


# -- ignored lines and cells ---------------------------------------------------------------------------------

def ignored_cell(cell) -> bool:
    """otter's is_ignore_cell: the cell's first line is `# ignore` or `## ignore ##` (any case)."""
    return bool(_IGNORE_CELL.match(cell_source(cell).split("\n", 1)[0]))


def without_ignored(source: str, where: str) -> tuple[str, int]:
    """The source without otter's ignored lines and blocks, and how many lines went; ImportFailed where otter
    refuses the blocks (an END without a BEGIN, a BEGIN inside a block, a block left open)."""
    out, block, removed = [], False, 0
    for number, line in enumerate(source.split("\n"), 1):
        end = line.rstrip()
        if end.endswith("# END IGNORE"):
            if not block:
                raise ImportFailed(f"{where}, line {number}: `# END IGNORE` without `# BEGIN IGNORE` (otter refuses "
                                   "it too)")
            block = False
        elif end.endswith("# IGNORE") or block:
            pass
        elif _BEGIN_IGNORE.match(line):
            block = True
        else:
            out.append(line)
            continue
        removed += 1
    if block:
        raise ImportFailed(f"{where}: `# BEGIN IGNORE` without `# END IGNORE` (otter refuses it too)")
    return "\n".join(out), removed


# -- seeding lines -------------------------------------------------------------------------------------------

def seed_statement(code: str) -> str:
    """A seeding line as a statement the grader runs where it stands: a call (or calls) assigned to SEED_NAME, which
    the tests file reads; an assignment (`rng = np.random.default_rng(0)`) as it is, run when something uses it."""
    tree = parse(code)
    if tree is None or not tree.body or not all(isinstance(n, ast.Expr) for n in tree.body):
        return code
    values = [ast.get_source_segment(code, n.value) for n in tree.body]
    return f"{SEED_NAME} = {values[0] if len(values) == 1 else '(' + ', '.join(values) + ')'}"


@dataclass
class Seeding:
    """A cell's otter seeding lines."""
    source: str  # the cell without the markers and its leading seeding lines, the others made statements the
    #              grader runs (seed_statement)
    leading: list[str] = field(default_factory=list)  # the seeding lines before any code (`apart`), made statements
    lines: list[str] = field(default_factory=list)  # the top-level seeding statements, as written
    indented: list[str] = field(default_factory=list)  # seeding lines inside a block: left as code


def seeding(source: str, apart: bool = False) -> Seeding:
    """The cell's seeding lines, as seed_statement makes them: with `apart`, those before any code go to `leading`
    (for a cell of their own before a solution cell, which a student's answer does not replace); any other top-level
    one stays where it stands (before the top-level `# BEGIN SOLUTION` block it stood in, which students do not
    get); an indented one loses its marker only."""
    out, found, block = [], Seeding(""), None  # block: where the open top-level solution block began in `out`
    for line in source.split("\n"):
        top = _SEED.match(line)
        if top is None:
            if line.rstrip().endswith("# SEED"):
                found.indented.append(line.strip())
                line = re.sub(r"\s*# SEED\s*$", "", line)
            if _SOLUTION_BLOCK.match(line) and not line[:1].isspace():
                block = len(out)
            elif line.rstrip() == "# END SOLUTION":
                block = None
            out.append(line)
            continue
        found.lines.append(top.group(1))
        if apart and all(not kept.strip() or kept.lstrip().startswith("#") for kept in out):
            found.leading.append(seed_statement(top.group(1)))
        elif block is None:
            out.append(seed_statement(top.group(1)))
        else:
            out.insert(block, seed_statement(top.group(1)))
            block += 1
    found.source = "\n".join(out)
    return found


# -- solutions ------------------------------------------------------------------------------------------------

def solution_code(source: str) -> str:
    """otter's solution lines and blocks between this project's markers, each with what otter hands students in its
    place as `### PROMPT` lines (markers.py), where a stub would not serve them better:
    - `x = expr # SOLUTION` (any assignment: augmented, annotated, tuple targets) -> `x = ...`, as otter's
      solution_assignment_regex makes it, at any indentation;
    - any other `# SOLUTION` line, a `# BEGIN SOLUTION` block -> otter's `...` at the top level (a stub's raise would
      stop "Run all" there); inside a block (a function's body) this project's stub, which says "not implemented"
      where `...` would return None silently;
    - `# SOLUTION NO PROMPT` lines and `# BEGIN SOLUTION NO PROMPT` blocks -> nothing (otter removes them) at the top
      level or in a cell with a prompt block; the stub inside a block (an empty body is a syntax error);
    - `\"\"\" # BEGIN PROMPT` blocks -> their lines, for students only (otter shows them in place)."""
    lines = source.split("\n")
    has_prompt = any(_PROMPT[0].match(line) for line in lines)
    out, prompt, block = [], None, None  # prompt: the open PROMPT block's lines; block: the open block's prompt
    for line in lines:
        if prompt is not None:
            if _PROMPT[1].match(line):
                indent = line[: len(line) - len(line.lstrip())]
                out += [f"{indent}### BEGIN SOLUTION", *(_prompt_line(p) for p in prompt), f"{indent}### END SOLUTION"]
                prompt = None
            else:
                prompt.append(line)
            continue
        if _PROMPT[0].match(line):
            prompt = []
            continue
        begin, single = _SOLUTION_BLOCK.match(line), _SOLUTION_LINE.match(line)
        if begin:
            indent = begin.group(1)
            out.append(f"{indent}### BEGIN SOLUTION")
            block = _stub(indent, None, bool(begin.group(2)), has_prompt)
        elif line.strip() == "# END SOLUTION":
            out += [*(block or []), f"{line[: len(line) - len(line.lstrip())]}### END SOLUTION"]
            block = None
        elif single and single.group(2):
            indent, code = single.group(1), single.group(2)
            out += [f"{indent}### BEGIN SOLUTION", *(_stub(indent, code, bool(single.group(3)), has_prompt) or []),
                    f"{indent}{code}", f"{indent}### END SOLUTION"]
        else:
            out.append(line)
    return "\n".join(out)


def _prompt_line(line: str) -> str:
    indent = line[: len(line) - len(line.lstrip())]
    return f"{indent}### PROMPT {line.strip()}" if line.strip() else f"{indent}### PROMPT"


def _stub(indent: str, code: str | None, no_prompt: bool, has_prompt: bool) -> list[str] | None:
    """The `### PROMPT` lines of a solution line (`code`) or block (None): what otter hands out in its place, or None
    for this project's stub (see solution_code)."""
    if no_prompt:
        return [f"{indent}### PROMPT"] if not indent or has_prompt else None
    target = assigned(code) if code is not None else None
    if target is not None:
        return [f"{indent}### PROMPT {target} ..."]
    return [f"{indent}### PROMPT ..."] if not indent else None


def assigned(code: str) -> str | None:
    """The left-hand side of an assignment line, with its operator (`m100 =`, `a, b =`, `x: int =`, `n +=`), as
    otter keeps it; None for any other line."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], (ast.Assign, ast.AugAssign, ast.AnnAssign)) \
            or tree.body[0].value is None or tree.body[0].value.lineno != 1:
        return None
    return code.encode()[: tree.body[0].value.col_offset].decode().rstrip()  # col_offset counts UTF-8 bytes


def relabeled(source: str) -> str:
    """A written answer with otter's `**SOLUTION:**` label (alone on its line or before the text) as
    `**Solution:**`: the answer key keeps the label, which in capitals would read as another tool's marker."""
    lines = source.split("\n")
    for marker in find_foreign(lines, "markdown"):
        if marker.marker in ("SOLUTION", "SOLUTIONS"):
            lines[marker.line] = lines[marker.line].replace("SOLUTION", "Solution", 1)
    return "\n".join(_LABEL.sub(r"\1Solution", line) for line in lines)


# -- test cases -----------------------------------------------------------------------------------------------

def case_lines(source: str, where: str) -> tuple[str, bool, dict]:
    """(the case's code, hidden, its TEST CONFIG): otter's read_test."""
    lines = source.split("\n")
    hidden = bool(lines and lines[0].lstrip().startswith("#") and re.search(r"\bhidden\b", lines[0], re.I))
    config, start = {}, 1 if hidden else 0
    if lines and _TEST_CONFIG[0].match(lines[0]):
        end = next((i for i, line in enumerate(lines) if i and _TEST_CONFIG[1].match(line)), len(lines) - 1)
        config, start = yaml_config("\n".join(lines[1:end]), where), end + 1
    return "\n".join(lines[start:]).strip("\n"), bool(config.get("hidden", hidden)), config


def test_function(tree) -> ast.FunctionDef | None:
    """The test function of otter's exception-based test: a `def`, then at most a call of it."""
    body = tree.body if tree is not None else []
    if not body or not isinstance(body[0], ast.FunctionDef) or len(body) > 2:
        return None
    if len(body) == 2 and not (isinstance(body[1], ast.Expr) and isinstance(body[1].value, ast.Call)
                               and dotted(body[1].value.func) == body[0].name):
        return None
    return body[0]


def called(source: str) -> str:
    """An exception-based test without its call (dropped as ignored) with the call otter makes: each parameter
    gets the notebook's value of that name (`env`, the notebook's namespace)."""
    tree = parse(source)
    fn = test_function(tree)
    if fn is None or len(tree.body) != 1:
        return source
    args = [("globals()" if a.arg == "env" else a.arg) for a in fn.args.posonlyargs + fn.args.args]
    args += [f"{a.arg}={'globals()' if a.arg == 'env' else a.arg}" for a in fn.args.kwonlyargs]
    return f"{source}\n\n{fn.name}({', '.join(args)})"
