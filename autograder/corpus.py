"""Corpora of submissions an assignment must grade as expected: `solutions/<name>/corpus/*.py`.

Each module of that folder may define two lists (instructor code, run in the judge like the tests):

    VARIANTS: list[Variant]  correct submissions written differently: every gradable point
    BUGS: list[Bug]          wrong submissions: points lost on the named checks, with the named message

Every item is the answer key edited: text replaced, top-level definitions rewritten, the solution cells
of some parts reset to the student notebook's stub, code cells added before or after the rest.
`autograder verify <name>` grades the whole corpus in one batch and reports every item whose outcome
differs from what it declares (see docs/writing-assignments.md).
"""
from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.errors import UserError
from autograder.status import FAILED, PARTIAL

CORPUS_DIR = "corpus"


class CorpusError(UserError, ValueError):
    """A corpus item or module the grader refuses: the message names it and says why."""
    pass


def _check_edits(kind: str, name: object, edits: "Edits") -> None:
    """A clear message for an item written with the wrong arguments (Variant's second positional argument is
    `definitions`, Bug's is `replace`), instead of a traceback at grading time."""
    if not isinstance(name, str) or not name:
        raise CorpusError(f"{kind}(...): the first argument is the item's name, a non-empty string; got {name!r}")
    where = f"{kind}({name!r})"
    for field_name in ("replace", "definitions"):
        value = getattr(edits, field_name)
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise CorpusError(f"{where}: {field_name} maps strings to strings")
    bad = [k for k in edits.definitions if not k.isidentifier()]
    if bad:
        raise CorpusError(f"{where}: definitions maps a def or class NAME to its new source; {bad[0][:40]!r} is not a "
                          "name. To replace text, write replace={old: new} (Variant(name, definitions, why, "
                          "replace=...), Bug(name, replace, expect, why, ...))")
    for field_name in ("stub", "prepend", "append"):
        if not all(isinstance(x, str) for x in getattr(edits, field_name)):
            raise CorpusError(f"{where}: {field_name} is a list of strings")


@dataclass
class Edits:
    """How an item differs from the answer key."""

    replace: dict[str, str] = field(default_factory=dict)  # old text -> new text, in every code cell
    definitions: dict[str, str] = field(default_factory=dict)  # name -> full new source of that def / class
    stub: list[str] = field(default_factory=list)  # grade_ids of solution cells reset to the student's stub
    prepend: list[str] = field(default_factory=list)  # code cells added before the first cell
    append: list[str] = field(default_factory=list)  # code cells added after the last cell


@dataclass
class Variant(Edits):
    """A correct submission: it must get every point that can be graded."""

    name: str = ""
    why: str = ""  # what is different about it

    def __init__(self, name: str, definitions: dict | None = None, why: str = "", replace: dict | None = None,
                 stub: list | None = None, prepend: list | None = None, append: list | None = None):
        super().__init__(dict(replace or {}), dict(definitions or {}), list(stub or []), list(prepend or []),
                         list(append or []))
        self.name, self.why = name, why
        _check_edits("Variant", name, self)


@dataclass
class Bug(Edits):
    """A wrong submission: it loses points on every check of `expect`, with a message containing the
    given text; with `confined_to` (a part, or the start of one, e.g. "2."), on no check of another part; with
    `only`, on no check but those of `expect` and `others`."""

    name: str = ""
    expect: dict[str, str] = field(default_factory=dict)  # check name -> substring of its message
    why: str = ""  # what a student did
    others: set[str] = field(default_factory=set)  # further checks it may cost (for the record)
    confined_to: str | None = None
    only: bool = False  # it loses points on no check but those of `expect` and `others` (one aspect, one check)

    def __init__(self, name: str, replace: dict | None = None, expect: dict | None = None, why: str = "",
                 others: set | None = None, definitions: dict | None = None, stub: list | None = None,
                 prepend: list | None = None, append: list | None = None, confined_to: str | None = None,
                 only: bool = False):
        super().__init__(dict(replace or {}), dict(definitions or {}), list(stub or []), list(prepend or []),
                         list(append or []))
        if expect is not None and not isinstance(expect, dict):
            raise CorpusError(f"Bug({name!r}): expect maps a check name to a text its message must contain "
                              f"(a dict), not a {type(expect).__name__}")
        self.name, self.expect, self.why = name, dict(expect or {}), why
        self.others, self.confined_to, self.only = set(others or ()), confined_to, only
        _check_edits("Bug", name, self)
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in self.expect.items()):
            raise CorpusError(f"Bug({name!r}): expect maps a check name to a text its message must contain")


@dataclass
class Corpus:
    """An assignment's corpus: its VARIANTS and BUGS from all its modules together."""
    variants: list[Variant]
    bugs: list[Bug]

    def __len__(self) -> int:
        return len(self.variants) + len(self.bugs)

    def items(self) -> list[tuple[str, Variant | Bug]]:
        """(submission id, item): ids are `variant-<name>` and `bug-<name>`."""
        return [(f"variant-{v.name}", v) for v in self.variants] + [(f"bug-{b.name}", b) for b in self.bugs]


def load_corpus(source: Path) -> Corpus:
    """The corpus of `solutions/<name>/` (empty when it has no corpus folder)."""
    from autograder.checkspecs import scoped_modules

    folder = Path(source) / CORPUS_DIR
    variants, bugs = [], []
    files = sorted(p for p in folder.glob("*.py") if not p.name.startswith("_")) if folder.is_dir() else []
    with scoped_modules({p.stem for p in folder.glob("*.py")} if folder.is_dir() else set()):
        sys.path.insert(0, str(folder))
        try:
            for path in files:
                spec = importlib.util.spec_from_file_location(path.stem, path)
                module = importlib.util.module_from_spec(spec)
                sys.modules[path.stem] = module
                spec.loader.exec_module(module)
                variants += list(getattr(module, "VARIANTS", []))
                bugs += list(getattr(module, "BUGS", []))
        finally:
            sys.path.remove(str(folder))
    names = [f"variant-{v.name}" for v in variants] + [f"bug-{b.name}" for b in bugs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise CorpusError(f"{folder}: corpus names must be unique; repeated: {dupes}")
    return Corpus(variants, bugs)


# -- notebooks ----------------------------------------------------------------------------------------

def replace_definition(source: str, name: str, new: str) -> str | None:
    """`source` with the top-level `def name` / `class name` (up to the next top-level statement or the
    end) replaced by `new`; None if the cell does not define `name`."""
    lines = source.split("\n")
    span = definition_lines(lines, name)
    if span is None:
        return None
    start, end = span
    return "\n".join(lines[:start] + new.rstrip("\n").split("\n") + lines[end:])


def definition_lines(lines: list[str], name: str) -> tuple[int, int] | None:
    """[start, end) of the top-level `def name` / `class name` among `lines`: up to the next top-level
    statement or the end, without the blank lines that separate it from what follows."""
    start = next((i for i, line in enumerate(lines) if re.match(rf"(def|class) {re.escape(name)}\b", line)), None)
    if start is None:
        return None
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or lines[end][0] in " \t#)"):
        end += 1
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return start, end


def _grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def make_notebook(path: Path, answer_key: Path, edits: Edits, student: Path | None = None) -> Path:
    """The answer key with `edits` applied, written to `path`. Every edit must apply (a stale corpus item
    fails loudly); `student` (the student notebook) is needed for `stub`."""
    nb = nbformat.read(answer_key, as_version=4)
    where = getattr(edits, "name", "") or str(path)
    if edits.stub:
        if student is None:
            raise CorpusError(f"{where}: resetting cells to the stub needs the student notebook")
        stubs = {_grade_id(c): c.source for c in nbformat.read(student, as_version=4).cells if _grade_id(c)}
        for grade_id in edits.stub:
            cells = [c for c in nb.cells if _grade_id(c) == grade_id]
            if not cells or grade_id not in stubs:
                raise CorpusError(f"{where}: no solution cell {grade_id!r} in the answer key and the student notebook")
            cells[0].source = stubs[grade_id]
    for old, new in edits.replace.items():
        hits = 0
        for cell in nb.cells:
            if cell.cell_type == "code" and old in cell.source:
                cell.source = cell.source.replace(old, new)
                hits += 1
        if not hits:
            raise CorpusError(f"{where}: {old[:60]!r} is not in the answer key")
    for name, new in edits.definitions.items():
        hits = 0
        for cell in nb.cells:
            if cell.cell_type == "code":
                changed = replace_definition(cell.source, name, new)
                if changed is not None:
                    cell.source = changed
                    hits += 1
        if hits != 1:
            raise CorpusError(f"{where}: {name} is defined {hits} times in the answer key (must be once)")
    nb.cells = ([nbformat.v4.new_code_cell(s) for s in edits.prepend] + nb.cells
                + [nbformat.v4.new_code_cell(s) for s in edits.append])
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


# -- outcomes -----------------------------------------------------------------------------------------

def loses(check) -> bool:
    """A graded check that did not get all its points, read from its status, not from score < max_score: a
    third of a point is rounded (0.333333). A check worth nothing loses nothing."""
    return check.status in (FAILED, PARTIAL) and check.max_score > 0


def lost_points(result) -> dict[str, str]:
    """check name -> message, for every graded check that did not get all its points."""
    return {c.name: c.message for c in result.checks if loses(c)}


def in_part(part: str, confined_to: str) -> bool:
    """Whether check part `part` lies in the part an item is confined to: the same name, or one that starts with it."""
    return part == confined_to or part.startswith(confined_to)


def problems(item: Variant | Bug, result, check_names: set[str]) -> list[str]:
    """What is wrong with `result`, the grade of corpus `item` (empty: as declared)."""
    kind = "variant" if isinstance(item, Variant) else "bug"
    label = f"{kind} {item.name}"
    if result.error:
        return [f"{label}: not graded: {result.error}"]
    lost = lost_points(result)
    if isinstance(item, Variant):
        return [f"{label} ({item.why}) loses points on {name}: {message.splitlines()[0] if message else ''}"
                for name, message in lost.items()]
    out = []
    for name, substring in item.expect.items():
        if name not in check_names:
            out.append(f"{label}: no check named {name!r}")
        elif name not in lost:
            out.append(f"{label} ({item.why}) does not lose points on {name!r}")
        elif substring not in lost[name]:
            out.append(f"{label}: the message of {name!r} lacks {substring!r}: {lost[name]!r}")
    if item.only:
        allowed = set(item.expect) | item.others
        out += [f"{label} ({item.why}) loses points on {name}, which it should not cost: "
                f"{lost[name].splitlines()[0] if lost[name] else ''}" for name in lost if name not in allowed]
    if item.confined_to is not None:
        parts = {c.name: c.part for c in result.checks}
        for name in lost:
            if not in_part(parts.get(name, ""), item.confined_to):
                out.append(f"{label} ({item.why}) loses points outside part {item.confined_to!r}: {name}: "
                           f"{lost[name].splitlines()[0] if lost[name] else ''}")
    return out


def points_lost_by_part(result) -> dict[str, float]:
    """part -> points lost (pending and ungraded checks left out)."""
    out: dict[str, float] = {}
    for c in result.checks:
        if loses(c):
            out[c.part] = round(out.get(c.part, 0.0) + c.max_score - c.score, 6)
    return out
