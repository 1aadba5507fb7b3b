"""Mutation analysis of an assignment's hidden tests (see autograder/mutants/__init__.py)."""
from __future__ import annotations

import ast
import dataclasses
import difflib
import inspect
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.corpus import Edits, definition_lines, make_notebook
from autograder.mutants.operators import OPERATORS, Mutation, mutations, reach_source
from autograder.notebook.markers import SOLUTION, cell_source, find_regions, is_test_cell, nbgrader_meta
from autograder.notebook.parts import definition_part, heading_parts
from autograder.status import PENDING, UNGRADED

PROBE_SOURCE = Path(__file__).with_name("probe.py")
DIVERGED, REACHED, UNDECIDED = "exit code 86", "exit code 87", "exit code 88"  # how a probe's worker ends
KILLED, SURVIVED, EQUIVALENT, NOT_GRADED = "killed", "survived", "probably equivalent", "not graded"


@dataclass
class Definition:
    """A top-level def or class of a solution cell, as the answer key has it."""

    name: str
    part: str
    source: str
    lines: set[int]  # 1-based lines of `source` inside solution regions: the lines a student writes
    forward: bool  # a class with a forward method (the probe compares instances with a reference twin)
    kind: str  # "def" or "class"
    # the parts whose checks use it (name it, or call a worker helper that reads it); a mutant losing points on
    # a check of any of them is killed, since those checks grade it as much as its own part's do
    used_in: tuple[str, ...] = ()

    def grades(self, part: str) -> bool:
        """Whether a check of `part` losing points kills a mutant of this definition: its own part, or a part
        whose checks use it."""
        return part == self.part or part in self.used_in


@dataclass
class Mutant:
    """One mutant: a single mutation of one graded definition of the answer key; `id` is stable across runs."""

    id: str
    definition: Definition
    mutation: Mutation

    @property
    def part(self) -> str:
        """The part the mutant's definition belongs to: the part it is scored in."""
        return self.definition.part

    @property
    def source(self) -> str:
        """The mutated definition's whole source."""
        return self.mutation.source

    def diff(self) -> str:
        """A unified diff from the reference's definition to the mutant's."""
        name = self.definition.name
        return "\n".join(difflib.unified_diff(self.definition.source.split("\n"), self.mutation.source.split("\n"),
                                              f"reference/{name}", f"mutant/{name}", n=1, lineterm=""))


@dataclass
class Outcome:
    """How a mutant fared: its verdict (KILLED, SURVIVED, EQUIVALENT or NOT_GRADED) and the checks that decided it."""

    mutant: Mutant
    verdict: str
    # checks of its part (or of a part whose checks use its definition) that it loses points on -> message
    lost: dict[str, str] = field(default_factory=dict)
    elsewhere: list[str] = field(default_factory=list)  # checks of other parts it loses points on
    note: str = ""  # how a survivor fared in the probes; why a mutant was not graded


@dataclass
class PartScore:
    """A part's mutants and their outcomes (a sample of the `generated` ones under --mutants-limit)."""

    part: str
    outcomes: list[Outcome]
    generated: int = 0  # mutants the operators made for this part (before --mutants-limit)

    def count(self, verdict: str) -> int:
        """How many of the part's outcomes have `verdict`."""
        return sum(1 for o in self.outcomes if o.verdict == verdict)

    @property
    def score(self) -> float | None:
        """Killed among the killed and the survivors (equivalent and not graded left out)."""
        counted = self.count(KILLED) + self.count(SURVIVED)
        return self.count(KILLED) / counted if counted else None


@dataclass
class MutationReport:
    """What `verify --mutants` reports: each part's outcomes in the notebook's order, the definitions not mutated,
    and how the run was made (seconds, the per-part limit, the sample's seed)."""

    parts: list[PartScore]
    skipped: list[str] = field(default_factory=list)  # definitions no part grades, and why
    seconds: float = 0.0
    limit: int | None = None
    seed: int = 0

    @property
    def score(self) -> float | None:
        """Killed among the killed and the survivors of every part (0 to 1); None when no mutant was counted."""
        killed = sum(p.count(KILLED) for p in self.parts)
        counted = killed + sum(p.count(SURVIVED) for p in self.parts)
        return killed / counted if counted else None

    def lines(self, diffs: bool = True) -> list[str]:
        """The report as text lines: a line per part, the overall score, the definitions not mutated, then each
        survivor, probable equivalent and mutant not graded, with its diff unless `diffs` is False."""
        out = []
        for p in self.parts:
            sample = f" (a sample of {len(p.outcomes)} of {p.generated})" if len(p.outcomes) < p.generated else ""
            out.append(f"mutants {p.part}: {_percent(p.score)}: {p.count(KILLED)} killed, {p.count(SURVIVED)} "
                       f"survived, {p.count(EQUIVALENT)} probably equivalent, {p.count(NOT_GRADED)} not graded"
                       f"{sample}")
        total = sum(len(p.outcomes) for p in self.parts)
        out.append(f"mutants overall: {_percent(self.score)} of {total} mutants "
                   f"({sum(p.count(EQUIVALENT) for p in self.parts)} probably equivalent, "
                   f"{sum(p.count(NOT_GRADED) for p in self.parts)} not graded), graded in {self.seconds:.0f} s")
        out += [f"mutants: not mutated: {s}" for s in self.skipped]
        for p in self.parts:
            for o in p.outcomes:
                if o.verdict in (SURVIVED, EQUIVALENT, NOT_GRADED):
                    m = o.mutant
                    note = f" ({o.note})" if o.note else ""
                    out.append(f"{o.verdict.upper()} {m.id} [{m.mutation.operator}] {m.definition.name}: "
                               f"{m.mutation.description}{note}")
                    if diffs and o.verdict != NOT_GRADED:
                        out += ["    " + line for line in m.diff().split("\n")]
        return out

    def to_dict(self) -> dict:
        """The report as a JSON object: the scores and counts per part and every mutant with its verdict and diff."""
        return {"score": self.score, "seconds": round(self.seconds, 1), "limit": self.limit, "seed": self.seed,
                "skipped": self.skipped,
                "parts": [{"part": p.part, "score": p.score, "generated": p.generated,
                           **{v: p.count(v) for v in (KILLED, SURVIVED, EQUIVALENT, NOT_GRADED)},
                           "mutants": [{"id": o.mutant.id, "definition": o.mutant.definition.name,
                                        "operator": o.mutant.mutation.operator,
                                        "description": o.mutant.mutation.description, "verdict": o.verdict,
                                        "lost": o.lost, "elsewhere": o.elsewhere, "note": o.note,
                                        "diff": o.mutant.diff()} for o in p.outcomes]}
                          for p in self.parts]}


def _percent(score: float | None) -> str:
    return "no mutant counted" if score is None else f"{100 * score:.1f}%"


# -- what is graded, part by part ---------------------------------------------------------------------------

def _solution_text(cell) -> tuple[list[str], list[bool]]:
    """The cell's lines as the answer key has them (markers removed), each with whether a student writes it."""
    lines = cell_source(cell).split("\n")
    regions = find_regions(lines, "solution cell")
    markers = {r.begin for r in regions} | {r.end for r in regions}
    kept, inside = [], []
    for i, line in enumerate(lines):
        if i in markers:
            continue
        kept.append(line)
        inside.append(any(r.kind == SOLUTION and r.begin < i < r.end for r in regions))
    while kept and not kept[-1].strip():
        kept.pop()
        inside.pop()
    return kept, inside


def _helper_reads(helpers: list[str]) -> dict[str, set[str]]:
    """Worker helper function -> the names it reads (plain names and attributes, `submission.NAME` included)."""
    out: dict[str, set[str]] = {}
    for text in helpers:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out[node.name] = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
                    n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
    return out


def _cell_sources(fn) -> str:
    """The test-cell sources a check made from a notebook's test cell carries (the strings its function closes
    over: autograder/importers/cells.py), where the cell names the notebook's definitions as plain names."""
    cells = [c.cell_contents for c in (getattr(fn, "__closure__", None) or ())
             if isinstance(getattr(c, "cell_contents", None), str)]
    return "\n".join(cells)


def _names(name: str, cell_source: str) -> bool:
    """Whether test-cell code names `name` as a plain name (`x.name` is another name)."""
    return re.search(rf"(?<![\w.]){re.escape(name)}\b", cell_source) is not None


def _parts_reading(name: str, checks, helpers: list[str]) -> list[str]:
    """Parts of the checks that use `name`, in the checks' order, each once: a notebook test cell naming it, a
    hidden check whose code reads `sub.name` or calls a worker helper that reads it, or whose test cell (an
    imported otter or nbgrader test) names it."""
    readers = {helper for helper, names in _helper_reads(helpers).items() if name in names}
    found = []
    for c in checks:
        if c.fn is None:
            reads = _names(name, c.source or "")
        else:
            try:
                text = inspect.getsource(c.fn)
            except (OSError, TypeError):
                text = ""
            reads = re.search(rf"\.{re.escape(name)}\b", text) or any(
                re.search(rf"\.helpers\.{re.escape(h)}\b", text) for h in readers) or _names(
                name, _cell_sources(c.fn))
        if reads and c.part not in found:
            found.append(c.part)
    return found


def graded_definitions(source_notebook: Path, answer_key: Path, checks,
                       helpers: list[str] = ()) -> tuple[list[Definition], list[str]]:
    """The definitions with solution code, each with its part, and a note for each one left out.

    A definition belongs to the part of the checks that use it (a test cell naming it, a hidden check reading
    `sub.NAME` or calling a worker helper that reads it) when they are all in one part. Otherwise it belongs to
    the part the markdown heading above it names, else the part of the first test cell after it in the source
    notebook (nbgrader's order: a part's solution, then its tests), each when that part's checks use it or none
    do, else to the first part whose checks use it (autograder/notebook/parts.py, the rule `autograder build`
    follows too); `used_in` lists every part whose checks use it."""
    source = nbformat.read(source_notebook, as_version=4)
    key = {nbgrader_meta(c).get("grade_id"): cell_source(c) for c in nbformat.read(answer_key, as_version=4).cells
           if nbgrader_meta(c).get("grade_id")}
    parts = list(dict.fromkeys(c.part for c in checks if c.part))
    under = heading_parts(source.cells, parts)
    out: list[Definition] = []
    skipped: list[str] = []
    for index, cell in enumerate(source.cells):
        if cell.get("cell_type") != "code" or is_test_cell(cell):
            continue
        kept, inside = _solution_text(cell)
        if not any(inside):
            continue
        grade_id = nbgrader_meta(cell).get("grade_id")
        part = next((nbgrader_meta(c).get("part") for c in source.cells[index + 1:]
                     if c.get("cell_type") == "code" and is_test_cell(c) and nbgrader_meta(c).get("part")), None)
        if grade_id not in key or key[grade_id].rstrip("\n") != "\n".join(kept):
            skipped.append(f"cell {grade_id or index + 1}: the answer key's cell is not the source's without markers")
            continue
        try:
            tree = ast.parse("\n".join(kept))
        except SyntaxError as exc:
            skipped.append(f"cell {grade_id}: does not parse ({exc.msg}, line {exc.lineno})")
            continue
        for node in tree.body:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            span = definition_lines(kept, node.name)
            if span is None:
                continue
            start, end = span
            lines = {i - start + 1 for i in range(start, end) if inside[i]}
            if not lines:
                continue
            reading = [p for p in _parts_reading(node.name, checks, list(helpers)) if p]
            own = definition_part(reading, under[index], part, parts)
            if own is None:
                skipped.append(f"{node.name}: no check of any part grades it")
                continue
            forward = isinstance(node, ast.ClassDef) and any(
                isinstance(n, ast.FunctionDef) and n.name == "forward" for n in node.body)
            out.append(Definition(node.name, own, "\n".join(kept[start:end]), lines, forward,
                                  "class" if isinstance(node, ast.ClassDef) else "def", tuple(reading)))
    return out, skipped


# -- mutants ------------------------------------------------------------------------------------------------

def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")[:40] or "part"


def plan(definitions: list[Definition], part_order: list[str], limit: int | None = None,
         seed: int = 0) -> tuple[list[Mutant], dict[str, int]]:
    """Every mutant of every definition, ids stable whatever the limit; with `limit`, at most that many per part,
    drawn with a generator seeded by `seed` and the part's name, taking the operators in turn so that each
    operator is represented. Returns the mutants (in part and text order) and the count generated per part."""
    by_part: dict[str, list[Mutant]] = {}
    for d in definitions:
        number = re.match(r"\s*(\d+)", d.part)
        part_number = number.group(1) if number else (part_order.index(d.part) + 1 if d.part in part_order else 0)
        for n, mutation in enumerate(mutations(d.source, d.lines), start=1):
            mutant = Mutant(f"mutant-{part_number}-{_slug(d.name)}-{n:03d}", d, mutation)
            by_part.setdefault(d.part, []).append(mutant)
    generated = {part: len(ms) for part, ms in by_part.items()}
    chosen: list[Mutant] = []
    for part in sorted(by_part, key=lambda p: (part_order.index(p) if p in part_order else len(part_order), p)):
        ms = by_part[part]
        if limit is not None and len(ms) > limit:
            rng = random.Random(f"{seed}:{part}")
            queues = []
            for op in OPERATORS:
                queue = [m for m in ms if m.mutation.operator == op]
                rng.shuffle(queue)
                if queue:
                    queues.append(queue)
            picked: list[Mutant] = []
            while len(picked) < limit:
                for queue in queues:
                    if queue and len(picked) < limit:
                        picked.append(queue.pop(0))
            order = {m.id: i for i, m in enumerate(ms)}
            ms = sorted(picked, key=lambda m: order[m.id])
        chosen += ms
    return chosen, generated


def mutant_notebooks(mutants: list[Mutant], answer_key: Path, folder: Path) -> dict[str, Path]:
    """The answer key with one definition replaced by its mutant, for each mutant: {id: notebook}."""
    return {m.id: make_notebook(folder / f"{m.id}.ipynb", answer_key,
                                Edits(definitions={m.definition.name: m.source}))
            for m in mutants}


def _renamed(source: str, kind: str, old: str, new: str) -> str:
    return re.sub(rf"^{kind} {re.escape(old)}\b", f"{kind} {new}", source, count=1)


def probe_source(mutant: Mutant) -> str:
    """The definition's replacement in the equivalence probe: the mutant and the reference under other names,
    the name bound to a wrapper that runs both on every call and compares them (probe.py)."""
    d = mutant.definition
    mine, ref = f"_ag_mutant_{d.name}", f"_ag_reference_{d.name}"
    parts = [_renamed(mutant.source, d.kind, d.name, mine), _renamed(d.source, d.kind, d.name, ref)]
    if d.kind == "def":
        parts.append(f"def {d.name}(*args, **kwargs):\n"
                     f"    return _ag_probe_call({mine}, {ref}, args, kwargs, {d.name!r})\n")
    else:
        parts.append(f"class {d.name}({mine}):\n"
                     f"    def __init__(self, *args, **kwargs):\n"
                     f"        _ag_construct(self, super().__init__, {ref}, args, kwargs, {d.name!r})\n\n"
                     f"    def forward(self, *args, **kwargs):\n"
                     f"        return _ag_probe_forward(self, super().forward, {ref}, args, kwargs, {d.name!r})\n")
    return "\n\n".join(p.rstrip("\n") for p in parts) + "\n"


def probe_notebooks(survivors: list[Mutant], answer_key: Path, folder: Path) -> dict[str, Path]:
    """The equivalence probe of each survivor, `<id>-same` (a class without a forward method has none)."""
    helper = PROBE_SOURCE.read_text(encoding="utf-8")
    return {f"{m.id}-same": make_notebook(folder / f"{m.id}-same.ipynb", answer_key,
                                          Edits(definitions={m.definition.name: probe_source(m)}, prepend=[helper]))
            for m in survivors if m.definition.kind == "def" or m.definition.forward}


def reach_notebooks(mutants: list[Mutant], answer_key: Path, folder: Path) -> tuple[dict[str, Path], dict[str, str]]:
    """The reach probes of `mutants`: the reference with `_ag_reach()` (which ends the worker) run just before the
    mutated code, one per place; {id: notebook} and {mutant id: its reach probe's id}."""
    helper = PROBE_SOURCE.read_text(encoding="utf-8")
    books: dict[str, Path] = {}
    reach_of: dict[str, str] = {}
    for m in mutants:
        d = m.definition
        start, end, kind = m.mutation.anchor
        reach_id = f"reach-{_slug(d.name)}-{start}-{end}-{kind}"
        reach_of[m.id] = reach_id
        if reach_id not in books:
            books[reach_id] = make_notebook(folder / f"{reach_id}.ipynb", answer_key,
                                            Edits(definitions={d.name: reach_source(d.source, m.mutation.anchor,
                                                                                    "_ag_reach()")},
                                                  prepend=[helper]))
    return books, reach_of


def without_substitution(release):
    """`release` with no check's `depends_on`: the probes are graded so. A check that a probe ends in its first
    run would otherwise run again with the reference standing in for the probed definition, and that second
    run, which never calls the probe, would replace the first run's verdict."""
    return dataclasses.replace(release, checks=[dataclasses.replace(c, depends_on=()) for c in release.checks])


# -- outcomes -----------------------------------------------------------------------------------------------

def _counted(check, key_scores: dict[str, float]) -> bool:
    """A check the answer key gets full marks on, graded (not pending, not ungraded)."""
    return check.status not in (PENDING, UNGRADED) and key_scores.get(check.name, -1.0) >= check.max_score


def classify(mutants: list[Mutant], results: dict, key_result) -> list[Outcome]:
    """Killed (it loses points on a check of its part, or of a part whose checks use its definition) or survived,
    from the results of the first batch."""
    key_scores = {c.name: c.score for c in key_result.checks if c.status not in (PENDING, UNGRADED)}
    out = []
    for m in mutants:
        result = results[m.id]
        if result.error:
            out.append(Outcome(m, NOT_GRADED, note=result.error.splitlines()[0][:200]))
            continue
        lost = {c.name: c.message for c in result.checks if _counted(c, key_scores) and c.score < c.max_score}
        parts = {c.name: c.part for c in result.checks}
        mine = {name: msg for name, msg in lost.items() if m.definition.grades(parts[name])}
        elsewhere = sorted(name for name in lost if not m.definition.grades(parts[name]))
        out.append(Outcome(m, KILLED if mine else SURVIVED, mine, elsewhere,
                           "" if mine or not elsewhere else "it loses points in other parts only"))
    return out


def _add_note(outcome: Outcome, note: str) -> None:
    outcome.note = "; ".join(filter(None, [outcome.note, note]))


def settle_same(outcomes: list[Outcome], plain: dict, probes: dict) -> list[Outcome]:
    """Notes on the survivors from their equivalence probes. Returns the survivors that answered every call as
    the reference (and those without a probe): their reach probes decide."""
    undecided_ones = []
    for o in outcomes:
        if o.verdict != SURVIVED:
            continue
        same = probes.get(f"{o.mutant.id}-same")
        if same is None:
            undecided_ones.append(o)
            continue
        if same.error:
            _add_note(o, f"equivalence probe not graded: {same.error.splitlines()[0]}")
            continue
        before = {c.name: c.score for c in plain[o.mutant.id].checks}
        differs = [c.name for c in same.checks if DIVERGED in c.message]
        undecided = [c.name for c in same.checks if UNDECIDED in c.message]
        upset = [c.name for c in same.checks if c.score < before.get(c.name, 0.0)]
        if differs:
            _add_note(o, f"it answers a call of {differs[0]!r} differently from the reference")
        elif undecided:
            _add_note(o, f"the probe could not compare a call of {undecided[0]!r}")
        elif upset:
            _add_note(o, f"the probe changed what {upset[0]!r} saw: equivalence not established")
        else:
            undecided_ones.append(o)
    return undecided_ones


def settle_reach(candidates: list[Outcome], probes: dict, reach_of: dict[str, str], key_result) -> None:
    """The survivors `settle_same` left: probably equivalent when the checks run the mutated code (a mutant that
    answered every call of the checks as the reference); else survivors, noting that no check runs it."""
    key_scores = {c.name: c.score for c in key_result.checks}
    for o in candidates:
        reach = probes.get(reach_of.get(o.mutant.id, ""))
        if reach is None or reach.error:
            _add_note(o, "reach probe not graded" + (f": {reach.error.splitlines()[0]}" if reach else ""))
            continue
        if not any(REACHED in c.message or c.score < key_scores.get(c.name, 0.0) for c in reach.checks):
            _add_note(o, "no check runs the mutated code")
        elif o.mutant.definition.kind == "class" and not o.mutant.definition.forward:
            _add_note(o, "no equivalence probe for a class without forward()")
        else:
            o.verdict = EQUIVALENT
            o.note = "it answers every call of the checks as the reference does"


def report(outcomes: list[Outcome], generated: dict[str, int], part_order: list[str], skipped: list[str],
           seconds: float, limit: int | None, seed: int) -> MutationReport:
    """The MutationReport of the outcomes: grouped by part, parts in `part_order` (others after it, by name), with
    each part's count of mutants generated."""
    by_part: dict[str, list[Outcome]] = {}
    for o in outcomes:
        by_part.setdefault(o.mutant.part, []).append(o)
    parts = [PartScore(p, by_part.get(p, []), generated.get(p, 0))
             for p in sorted(set(by_part) | set(generated),
                             key=lambda p: (part_order.index(p) if p in part_order else len(part_order), p))]
    return MutationReport(parts, skipped, seconds, limit, seed)
