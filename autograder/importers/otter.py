"""`autograder import otter NOTEBOOK --name NAME`: an otter-grader assignment notebook as solutions/<name>/.

otter's format (otter-assign v1): raw cells (or ```otter fenced markdown) `# BEGIN QUESTION` with a YAML
configuration (name, points, manual, all_or_nothing), `# BEGIN SOLUTION` / `# END SOLUTION` around solution
cells, and `# BEGIN TESTS` / `# END TESTS` around test cells, each a test case (hidden when its first line is
`# HIDDEN` or its TEST CONFIG says so) whose output otter compares with the solution's. otter's older format
(v0 and jassign: ```-fenced `BEGIN QUESTION` in markdown, `# TEST` cells) is first rewritten in this one, as
otter's own converter does (otter_v0.py); what the markers inside a cell mean is otter_lines.py's.
Converted to:
- solutions: between this project's markers, students getting otter's prompt (`x = ...` for an assignment line,
  `...` at the top level, a BEGIN PROMPT block's lines) or, inside a function, the stub (otter_lines.solution_code); markdown solution cells become written answers (YOUR ANSWER HERE); lines and cells otter
  ignores removed; seeding lines kept in both notebooks, run where they stand by the grader (otter_lines.py);
- tests, worth what otter's rules give each case (a question's `points` as a total, a list of per-case points,
  or `{each: x}`; 1 in all when not given): a public case (students see it and run grader.check in otter) is a
  public test cell of the notebook where it stood, passing when it does not fail and, when it has a value, when
  the value equals the one the source notebook recorded for it (what otter compares with); a hidden case, or a
  public one that cannot be such a cell (a value without a recorded output, random draws the grader seeds first),
  is a check in tests/otter_tests.py run on the submission and on the reference in the grader, passing when
  their values are equal (autograder/importers/cells.py `reference_cell`), a seeded question's cases each after
  the question's seeding and the cases before it, as otter runs a test file in one seeded cell (question_seeding);
  such a public case stays in the notebook as plain code and is named in IMPORT.md. A case's success_message is
  what a student reads when it passes, its failure_message comes first when it fails. An `all_or_nothing` question is one check over all its cases
  (cells.py `all_cases`), its public cases test cells worth 0 that students run;
- manual questions: `manual` checks, pending in every total with their points (0 when not given, as otter
  counts them); a question with neither tests nor `manual` gets no check, as otter grades nothing for it; otter's
  PDF export markers (`<!-- BEGIN QUESTION -->`, `<!-- END QUESTION -->`) removed;
- ASSIGNMENT CONFIG `files:` (its `config_file:` read too): shipped with the notebook, beside the files the
  notebook names; its `seed: {variable, autograder_value, student_value}`: assignment.toml's [seed] (the student
  notebook gets student_value, grading autograder_value: autograder/notebook/seedvar.py).
A `points` value otter refuses or would misread, a question without a name, an unbalanced IGNORE block: one line
naming the cell and the question, nothing written. Anything else left (unknown blocks, markers outside the blocks
that give them meaning) is named in IMPORT.md and left where `build` refuses it.
This module reads otter's notebook (the walk through its cells, its configuration, solutions and seeding); the
questions become checks in otter_checks.py (points, public test cells, the tests file).
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path

from autograder.importers.common import ImportFailed, nothing_to_import, prepare, write_assignment
from autograder.importers.otter_checks import TESTS_FILE, Case, Question, checks_source
from autograder.importers.otter_lines import (
    SEED_NAME, called, case_lines, ignored_cell, relabeled, seeding, solution_code, without_ignored, yaml_config,
)
from autograder.importers.otter_v0 import is_markdown_solution, is_v0, to_v1
from autograder.importers.report import ImportReport
from autograder.notebook.foreign import find_foreign
from autograder.notebook.markers import cell_source

_BLOCK = re.compile(r"^\s*#\s+(BEGIN|END)\s+(QUESTION|SOLUTION|TESTS|PROMPT)\s*$", re.I)
_CONFIG = re.compile(r"^\s*#\s+ASSIGNMENT\s+CONFIG\s*$", re.I)
_EXPORT = re.compile(r"<!--\s*(BEGIN|END) QUESTION\s*-->", re.I)  # otter export's regexes (PDF filtering)
INCLUDE_TAG = "otter_include"  # a markdown cell of a solution block otter keeps in the student notebook


@dataclass
class State:
    """Where the walk through the cells is: the question, and the block inside it."""
    question: Question | None = None
    block: str = ""  # "", "solution", "tests"
    questions: list[Question] = field(default_factory=list)
    cells: list = field(default_factory=list)  # the converted notebook's cells
    seed: list[str] = field(default_factory=list)  # the notebook's top-level seeding lines, in order
    files: list[str] = field(default_factory=list)  # ASSIGNMENT CONFIG `files:`
    settings: list[str] = field(default_factory=list)  # lines for assignment.toml (ASSIGNMENT CONFIG `seed:`)
    solutions: int = 0  # solution cells and written answers converted
    generate_seed: int | None = None  # ASSIGNMENT CONFIG `generate: {seed: N}`: otter seeds every cell with it
    generate_loc: str = ""  # the cell of that ASSIGNMENT CONFIG
    cells_seed: int | None = None  # [seed] cells: otter's seed of every cell when grading, the check cells' too
    seed_variable: bool = False  # ASSIGNMENT CONFIG `seed: {variable, ...}`: otter sets the variable instead
    export: str = ""  # where an open `<!-- BEGIN QUESTION -->` is ("" when none)
    all_solutions: bool = False  # solution markers count in every cell (v0; strip_solutions_from_all_cells)
    folder: Path = Path(".")  # the notebook's folder (an ASSIGNMENT CONFIG's config_file is read from it)
    ids: bool = False  # the notebook's format gives cells ids (nbformat 4.5 and later)


def unfence(cell):
    """otter's ```otter fenced markdown configuration as the raw cell it stands for."""
    lines = cell_source(cell).strip().split("\n")
    if cell.get("cell_type") == "markdown" and len(lines) > 1 and lines[0].strip() == "```otter" \
            and lines[-1].strip() == "```":
        return {"cell_type": "raw", "metadata": {}, "source": "\n".join(lines[1:-1])}
    return cell


# -- solutions -------------------------------------------------------------------------------------------

def solution_cell(cell, state: State, report: ImportReport, loc: str, in_block: bool):
    """A solution cell with this project's markers: code between them, a markdown one a written answer (in a
    SOLUTION block, or v0's `**SOLUTION**` cell anywhere)."""
    label = state.question.name if state.question else "solution"
    grade_id = f"{label}_solution_{sum(1 for c in state.cells if c.get('metadata', {}).get('nbgrader')) + 1}"
    cell = copy.deepcopy(cell)
    if cell.get("cell_type") == "markdown":
        tags = cell["metadata"].get("tags", [])
        if in_block and INCLUDE_TAG in tags:  # otter keeps it in the student notebook: text, not an answer
            cell["metadata"]["tags"] = [t for t in tags if t != INCLUDE_TAG]
            report.convert(f"{loc}: markdown of {label}'s solution tagged {INCLUDE_TAG} -> kept as text for students")
        elif in_block or is_markdown_solution(cell):
            cell["source"] = relabeled(cell_source(cell))
            cell["metadata"]["nbgrader"] = {"solution": True, "grade": False, "grade_id": grade_id}
            state.solutions += 1
            report.convert(f"{loc}: written answer of {label} -> answer cell {grade_id!r} (YOUR ANSWER HERE)")
        return cell
    if cell.get("cell_type") != "code":
        return cell
    cell["source"] = solution_code(cell_source(cell))
    if "### BEGIN SOLUTION" in cell["source"]:
        cell["metadata"]["nbgrader"] = {"solution": True, "grade": False, "grade_id": grade_id}
        state.solutions += 1
        report.convert(f"{loc}: solution of {label} -> solution cell {grade_id!r}")
    return cell


# -- tests -----------------------------------------------------------------------------------------------

def read_case(cell, where: str) -> Case:
    """A test cell (its ignored lines already removed) as a case: an exception-based test without its call gets
    the call otter makes (otter_lines.called)."""
    source, hidden, config = case_lines(cell_source(cell), where)
    said = {key: str(config.get(f"{key}_message") or "").strip() for key in ("success", "failure")}
    return Case(called(source), hidden, config.get("points"), recorded_value(cell),
                cell.get("execution_count") is not None, loc=where, **said)


def recorded_value(cell) -> str | None:
    """The text/plain of the value the source notebook recorded for the cell (its execute_result), if any."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "execute_result":
            text = output.get("data", {}).get("text/plain")
            return "".join(text) if isinstance(text, list) else text
    return None


# -- the walk through the cells ------------------------------------------------------------------------------

def assignment_config(lines: list[str], state: State, loc: str, report: ImportReport) -> None:
    """The ASSIGNMENT CONFIG (and the `config_file:` it names): its `files`, and strip_solutions_from_all_cells."""
    config = yaml_config("\n".join(lines[1:]), loc)
    path = config.get("config_file")
    if isinstance(path, str) and (state.folder / path).is_file():
        config = {**yaml_config((state.folder / path).read_text(encoding="utf-8"), f"{loc}: {path}"), **config}
        report.convert(f"{loc}: ASSIGNMENT CONFIG's config_file {path} read")
    files = config.get("files") or []
    state.files += [str(f) for f in (files if isinstance(files, list) else [files])]
    if state.files:
        report.convert(f"{loc}: ASSIGNMENT CONFIG files: {', '.join(state.files)} -> shipped with the notebook")
    state.all_solutions = state.all_solutions or bool(config.get("strip_solutions_from_all_cells"))
    if config.get("seed") is not None:
        state.settings += seed_variable(config["seed"], loc, report)
        state.seed_variable = bool(state.settings)
    generate = config.get("generate")
    if isinstance(generate, dict) and generate.get("seed") is not None:
        value = generate["seed"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ImportFailed(f"{loc}: ASSIGNMENT CONFIG `generate: {{seed: {value}}}` is not an integer >= 0 (otter "
                               "refuses it too)")
        state.generate_seed, state.generate_loc = value, loc
    report.note("otter's ASSIGNMENT CONFIG is not imported but for its `files`, `seed` and `generate`'s `seed` "
                "(requirements, export and PDF settings)")


def seed_variable(seed, loc: str, report: ImportReport) -> list[str]:
    """otter's `seed: {variable, autograder_value, student_value}` as assignment.toml's [seed]: the student notebook
    sets the variable to student_value, and grading replaces the submission's top-level assignment of it with
    autograder_value (otter adds `variable = autograder_value` to every cell it grades)."""
    if not isinstance(seed, dict):
        raise ImportFailed(f"{loc}: ASSIGNMENT CONFIG `seed: {seed}` is not a mapping {{variable, autograder_value, "
                           "student_value}} (otter assign fails on it too; seeding numpy before each cell is "
                           "`generate: {seed: N}`)")
    variable, grading, student = seed.get("variable"), seed.get("autograder_value"), seed.get("student_value")
    if variable is None:
        report.note("ASSIGNMENT CONFIG `seed` without a `variable` does nothing in otter, nor here")
        return []
    if not isinstance(variable, str) or not variable.isidentifier() or not isinstance(grading, int):
        raise ImportFailed(f"{loc}: ASSIGNMENT CONFIG `seed`: `variable` must be a Python name and `autograder_value` "
                           f"an integer (got {variable!r}, {grading!r}; otter refuses this too)")
    lines = ["", "[seed]  # otter's seed variable (docs/writing-assignments.md, Seed variables)",
             f'variable = "{variable}"', f"grading = {grading}  # otter's autograder_value"]
    if isinstance(student, int):
        lines.append(f"student = {student}  # otter's student_value: the student notebook's `{variable} = ...`")
    report.convert(f"{loc}: ASSIGNMENT CONFIG seed -> [seed] in assignment.toml: students' notebook sets "
                   f"`{variable} = {student if isinstance(student, int) else '(as in the source)'}`, and grading "
                   f"replaces a submission's top-level assignment of `{variable}` with `{variable} = {grading}`")
    return lines


def block_cell(cell, state: State, loc: str, report: ImportReport) -> bool:
    """Handle otter's raw block and configuration cells; False for any other cell."""
    if cell.get("cell_type") != "raw":
        return False
    lines = cell_source(cell).split("\n")
    if _CONFIG.match(lines[0]):
        assignment_config(lines, state, loc, report)
        return True
    marker = _BLOCK.match(lines[0])
    if not marker:
        return False
    verb, kind = marker.group(1).upper(), marker.group(2).upper()
    if kind == "QUESTION" and verb == "BEGIN":
        state.question = question(yaml_config("\n".join(lines[1:]), loc), loc)
        state.questions.append(state.question)
    elif kind == "QUESTION":
        state.question = None
    elif kind in ("SOLUTION", "TESTS"):
        state.block = kind.lower() if verb == "BEGIN" else ""
    return True


def question(config: dict, loc: str) -> Question:
    """A Question from the configuration of its `# BEGIN QUESTION` cell; ImportFailed, naming `loc`, where it has no
    name."""
    name = config.get("name")
    if not isinstance(name, (str, int)) or not str(name).strip():
        raise ImportFailed(f"{loc}: a question without a `name` (otter refuses it too)")
    return Question(str(name), config.get("points"), bool(config.get("manual")), loc=loc,
                    all_or_nothing=bool(config.get("all_or_nothing")))


def without_ignored_lines(cell, loc: str, report: ImportReport):
    """The cell without the lines otter removes from both notebooks (`# IGNORE`, IGNORE blocks), a copy where any are
    removed (noted in `report`), else the cell itself."""
    source = cell_source(cell)
    if "IGNORE" not in source.upper():
        return cell
    kept, removed = without_ignored(source, loc)
    if not removed:
        return cell
    cell = copy.deepcopy(cell)
    cell["source"] = kept
    report.convert(f"{loc}: {removed} line(s) otter ignores (`# IGNORE`, `# BEGIN IGNORE` ... `# END IGNORE`) "
                   "removed, as otter removes them from both notebooks")
    return cell


def source_cells(nb, report: ImportReport, source: Path) -> list[tuple[int, dict]]:
    """(the source's cell number, cell) in otter's v1 format: a v0 notebook rewritten first (otter_v0.py)."""
    if not is_v0(nb):
        return list(enumerate(nb.cells, 1))
    report.convert(f"{source.name}: otter's older format (v0 / jassign: ```-fenced BEGIN QUESTION, `# TEST` cells) "
                   "-> read as otter's current one, as `python -m otter.assign.v0.convert` rewrites it")
    return to_v1(list(enumerate(nb.cells, 1)))


def convert(nb, where: str, report: ImportReport) -> tuple[dict, list[Question], str, State]:
    """The notebook with this project's markers, its questions, its seeding lines (one source), and the walk's state
    (its config's files and settings)."""
    state = State(all_solutions=is_v0(nb), folder=Path(where).parent, ids=nb.get("nbformat_minor", 0) >= 5)
    for number, cell in source_cells(nb, report, Path(where)):
        loc = f"cell {number}"
        cell = unfence(cell)
        if ignored_cell(cell):
            report.convert(f"{loc}: dropped, as otter drops a cell whose first line is `# ignore`")
            continue
        cell = without_ignored_lines(cell, loc, report)
        if block_cell(cell, state, loc, report):
            continue
        if state.block == "tests" and state.question and cell.get("cell_type") == "code":
            test_cell(cell, state, loc)
            continue
        cell = without_export_markers(cell, state, loc, report)
        if cell is None:
            continue
        before, cell = seed_cells(cell, loc, report, state)
        state.cells += before
        if cell is None:
            continue
        in_block = state.block == "solution" and state.question is not None
        if in_block or state.all_solutions:
            cell = solution_cell(cell, state, report, loc, in_block)
        refuse_leftovers(cell, loc, report)
        state.cells.append(cell)
    if state.export:
        report.refuse(state.export, "'<!-- BEGIN QUESTION -->'", "no `<!-- END QUESTION -->` closes it (removed)")
    state.settings += cell_seeding(state, report)
    out = copy.deepcopy(nb)
    out.cells = state.cells
    return out, state.questions, "\n".join(state.seed), state


def test_cell(cell, state: State, loc: str) -> None:
    """Add a test cell's case to the current question; a public case keeps a copy of the cell for its place in the
    notebook."""
    case = read_case(cell, loc)
    state.question.cases.append(case)
    if not case.hidden:  # its place in the notebook, filled once the question's points are known
        case.cell = copy.deepcopy(cell)
        state.cells.append(case.cell)


def without_export_markers(cell, state: State, loc: str, report: ImportReport):
    """The cell without otter's PDF export markers (None when nothing else was in it). Inside a `# BEGIN QUESTION`
    the question's configuration grades it (a manual one by hand); outside any, its points are not in the
    notebook (otter leaves them to Gradescope), which the report names."""
    source = cell_source(cell)
    if cell.get("cell_type") == "code" or not _EXPORT.search(source):
        return cell
    for match in _EXPORT.finditer(source):
        verb, q = match.group(1).upper(), state.question
        if verb == "BEGIN":
            state.export = loc
            if q is None:
                report.refuse(loc, "'<!-- BEGIN QUESTION -->'", "a question otter exports for grading by hand, "
                              "outside any `# BEGIN QUESTION` configuration, so its points are not in the notebook: "
                              "the marker is removed; add the question as a manual check with its points in "
                              f"tests/{TESTS_FILE}: `qN = manual('qN', POINTS, 'qN', 'written answer')`")
            else:
                graded = "graded by hand: a manual check" if q.manual else "graded by its tests"
                report.convert(f"{loc}: otter's PDF export marker of {q.name} removed ({graded})")
        else:
            state.export = ""
    cell = copy.deepcopy(cell)
    cell["source"] = _EXPORT.sub("", source).strip("\n")
    return cell if cell["source"].strip() else None


def seed_cells(cell, loc: str, report: ImportReport, state: State) -> tuple[list, dict | None]:
    """otter's `# SEED` lines (otter_lines.seeding): (a cell of its own for those a solution cell begins with, else
    none; the cell, None when nothing else was in it). Each top-level one joins the notebook's seeding lines
    (question_seeding)."""
    source = cell_source(cell)
    if cell.get("cell_type") != "code" or "# SEED" not in source:
        return [], cell
    found = seeding(source, apart=state.all_solutions or state.block == "solution" and state.question is not None)
    cell = copy.deepcopy(cell)
    cell["source"], before = found.source, [seed_cell(found.leading, state.ids)] if found.leading else []
    state.seed += found.lines
    if found.lines:
        report.convert(f"{loc}: otter's seeding line(s) {'; '.join(found.lines)} -> kept in both notebooks "
                       f"({'in a cell of their own before the solution' if before else 'where they stand'}), run "
                       "there by the grader in the submission and in the reference")
    if found.indented:
        report.convert(f"{loc}: otter's seeding line(s) inside a block ({'; '.join(found.indented)}) -> left as "
                       "code, without the marker")
    return before, cell if cell["source"].strip() else None


_LITERAL_SEED = re.compile(r"^(?:np|numpy)\.random\.seed\((\d+)\)$|^random\.seed\((\d+)\)$")


def cell_seeding(state: State, report: ImportReport) -> list[str]:
    """assignment.toml's `[seed] cells = N`: grading seeds random's and numpy's generators with N at the top of every
    code cell, whatever the submission contains, as otter's grader does with `generate: {seed: N}` (its
    GradingPreprocessor.add_seeds) when no seed variable is configured. `# SEED` lines make otter assign require that
    seed; without one (otter refuses the notebook) a seeding line `np.random.seed(N)` gives it."""
    if state.seed_variable:
        if state.generate_seed is not None or state.seed:
            report.note("with a seed variable, otter's grader sets the variable at the top of each cell instead of "
                        "seeding numpy and random there: so does the grader here ([seed] in assignment.toml)")
        return []
    value, said = state.generate_seed, f"{state.generate_loc}: ASSIGNMENT CONFIG `generate: {{seed: {state.generate_seed}}}`"
    if value is None:
        found = [m for m in (_LITERAL_SEED.match(line.strip()) for line in state.seed) if m]
        if not found:
            if state.seed:
                report.note("otter assign requires `generate: {seed: N}` with `# SEED` lines, to seed each cell of a "
                            "submission when grading; without it, and with no `np.random.seed(N)` line to take N "
                            "from, the grader runs only the seeding lines a submission keeps (add `[seed] cells = N` "
                            "to assignment.toml to seed every cell)")
            return []
        value, said = int(found[0].group(1) or found[0].group(2)), f"the seeding line `{found[0].group(0)}`"
        report.note("otter assign requires `generate: {seed: N}` with `# SEED` lines (it refuses this notebook "
                    f"without one): the grader seeds each cell with {value}, taken from the first seeding line")
    state.cells_seed = value
    report.convert(f"{said} -> [seed] cells = {value} in assignment.toml: grading "
                   f"runs `random.seed({value})` and `np.random.seed({value})` at the top of every code cell of each "
                   "submission and of the reference, as otter's grader does, whatever seeding lines the submission "
                   "keeps; and once before each question's test cases, which then run in otter's order, as otter "
                   "seeds the cell that checks a question")
    return ["", "[seed]  # otter's seeding of every cell when grading (docs/writing-assignments.md, Seed variables)",
            f"cells = {value}"]


def seed_cell(statements: list[str], ids: bool):
    """A cell of seeding statements (an id when the notebook's format has them)."""
    from nbformat import v4

    cell = v4.new_code_cell("\n".join(["# the grader runs this seeding line here: keep it",
                                       *statements]))
    if not ids:
        cell.pop("id", None)
    return cell


def refuse_leftovers(cell, loc: str, report: ImportReport) -> None:
    """Markers the conversion did not consume: named, and left for `build` to refuse. A solution marker left over
    stands outside a question's solution cells, where otter itself hands the line out as written: said so."""
    for marker in find_foreign(cell_source(cell).split("\n"), cell.get("cell_type", "")):
        if "SOLUTION" in marker.marker.split():
            why = ("a solution marker outside the raw `# BEGIN SOLUTION` / `# END SOLUTION` cells of a question, where "
                   "otter itself hands the line to students as written: put the cell between its question's "
                   "`# BEGIN SOLUTION` and `# END SOLUTION` raw cells and import again (or remove the marker)")
        else:
            why = (f"a marker of {marker.style.name} this import does not convert here; `autograder build` refuses it "
                   "until it is rewritten")
        report.refuse(loc, repr(marker.text.strip()), why)


SOURCE_NOTEBOOK = ("give the notebook `otter assign` reads (with its `# ASSIGNMENT CONFIG` cell and `# BEGIN QUESTION` "
                   "cells), not what it writes (dist/autograder, dist/student, the autograder zip)")


def import_assignment(source: Path, name: str, solutions: Path, force: bool = False) -> list[ImportReport]:
    """Convert the otter assignment notebook `source` into solutions/`name` (replaced only with `force`); returns its
    report. ImportFailed, naming the source, for anything that cannot be converted."""
    import nbformat

    if not source.is_file():
        raise ImportFailed(f"{source}: an otter import takes the assignment notebook itself: {SOURCE_NOTEBOOK}")
    report = ImportReport("otter", source, solutions / name)
    try:
        nb = nbformat.read(source, as_version=4)
    except Exception as exc:  # noqa: BLE001 - not JSON, not UTF-8 (a zip), not a notebook: one line, never a traceback
        raise ImportFailed(f"{source}: not a notebook ({type(exc).__name__}): {SOURCE_NOTEBOOK}") from None
    try:
        notebook, questions, seed, state = convert(nb, str(source), report)
        tests = checks_source(questions, notebook, report, seed, state.cells_seed)
    except ImportFailed as exc:
        raise ImportFailed(f"{source}: {exc}") from None
    if not questions and not state.solutions:
        error = nothing_to_import(nb, source, "otter", "otter question (`# BEGIN QUESTION`) or solution")
        if "it looks like" not in str(error):  # (a notebook otter assign wrote has no questions left in it)
            error.args = (f"{error}: {SOURCE_NOTEBOOK}",)
        raise error
    notes(report, bool(seed))
    prepare(report.target, force)
    write_assignment(report, notebook, tests, source.stem, TESTS_FILE, state.files, "\n".join(state.settings))
    return [report]


def notes(report: ImportReport, seeded_notebook: bool) -> None:
    """Note in the report where grading differs from otter's (values compared, not printed text; prompts and
    grader.check cells; seeding where the notebook seeds)."""
    report.note("otter compares printed outputs; here the values are compared, so `np.True_` and `True` are the same "
                "(otter 7 under numpy 2 prints `np.True_` where `True` was recorded and fails correct notebooks)")
    report.note("what a test prints with its own print calls is compared with what it prints on a correct notebook, "
                "as otter compares it; what the notebook's functions print while they run is not (it stays in the "
                "student's process)")
    report.note("otter's prompts are kept where a stub's raise would stop \"Run all\" (`x = ...` for an assignment "
                "line, `...` at the top level, BEGIN PROMPT blocks); inside a function a solution is this project's stub, "
                "`# TODO: your code here` and `raise NotImplementedError()`, where otter's `...` would return None")
    report.note("otter's grader.check cells in student notebooks are not needed: the public test cells stand where "
                "the public cases stood (students run them, or `autograder check`); a grader.check cell is an ordinary "
                "cell the grader does not run")
    if seeded_notebook:
        report.note(f"students see the seeding lines (otter hands out those outside solution cells as they are, and "
                    f"removes those inside): the grader runs the line they keep (`{SEED_NAME} = ...`) where it stands; "
                    "otter's own seeding of every cell when grading is `[seed] cells` (assignment.toml)")
