"""`autograder import otter NOTEBOOK --name NAME`: an otter-grader assignment notebook as solutions/<name>/.

otter's format (otter-assign v1): raw cells (or ```otter fenced markdown) `# BEGIN QUESTION` with a YAML
configuration (name, points, manual), `# BEGIN SOLUTION` / `# END SOLUTION` around solution cells, and
`# BEGIN TESTS` / `# END TESTS` around test cells, each a test case (hidden when its first line is `# HIDDEN`
or its TEST CONFIG says so) whose output otter compares with the solution's.
Converted to:
- solutions: a line ending in `# SOLUTION [NO PROMPT]`, and each `# BEGIN SOLUTION [NO PROMPT]` block,
  between this project's markers (students get the stub, not otter's `...` prompt); BEGIN PROMPT blocks
  dropped; markdown solution cells become written answers (YOUR ANSWER HERE);
- tests, worth the question's points (1 when not given) shared as otter shares them: a public case (students
  see it and run grader.check in otter) is a public test cell of the notebook where it stood, passing when it
  does not fail and, when it has a value, when the value equals the one the source notebook recorded for it (what
  otter compares with); a hidden case, or a public one that cannot be such a cell (a value without a recorded
  output, seeding lines to run first), is a check in tests/otter_tests.py run on the submission and on the
  reference in the grader, passing when their values are equal (autograder/importers/cells.py `reference_cell`);
  such a public case stays in the notebook as plain code and is named in IMPORT.md;
- manual questions: `manual` checks, pending in every total with their points; otter's PDF export markers
  (`<!-- BEGIN QUESTION -->`, `<!-- END QUESTION -->`) removed;
- ASSIGNMENT CONFIG `files:`: shipped with the notebook, beside the files the notebook names.
Anything else (# IGNORE blocks, unknown blocks) is named in IMPORT.md and left where `build` refuses it.
"""
from __future__ import annotations

import ast
import copy
import re
from dataclasses import dataclass, field
from pathlib import Path

from autograder.importers.common import (
    ImportFailed, literal, names_read, notebook_imports, notebook_names, parse, points_text, prepare, reads_function,
    tests_header, write_assignment,
)
from autograder.importers.report import ImportReport
from autograder.notebook.foreign import find_foreign
from autograder.notebook.markers import cell_source

TESTS_FILE = "otter_tests.py"
_BLOCK = re.compile(r"^\s*#\s+(BEGIN|END)\s+(QUESTION|SOLUTION|TESTS|PROMPT)\s*$", re.I)
_CONFIG = re.compile(r"^\s*#\s+ASSIGNMENT\s+CONFIG\s*$", re.I)
_TEST_CONFIG = (re.compile(r'^(?:.\s*=\s*)?"""?\s*#\s*BEGIN\s*TEST\s*CONFIG', re.I),
                re.compile(r'^"""?\s*#\s*END\s*TEST\s*CONFIG', re.I))
_SOLUTION_LINE = re.compile(r"^(\s*)(.*?)\s*# ?SOLUTION( NO PROMPT)?\s*$")
_SOLUTION_BLOCK = re.compile(r"^(\s*)# BEGIN SOLUTION( NO PROMPT)?\s*$")
_PROMPT = (re.compile(r'^\s*"""\s*# BEGIN PROMPT\s*$'), re.compile(r'^\s*"""\s*# END PROMPT\s*$'))
_EXPORT = re.compile(r"<!--\s*(BEGIN|END) QUESTION\s*-->", re.I)  # otter export's regexes (PDF filtering)
SKIP_TAG = "skip-grading"


@dataclass
class Case:
    source: str
    hidden: bool
    points: float | None
    output: str | None = None  # the text/plain value the source notebook recorded for the case, if any
    cell: dict | None = field(default=None, compare=False, repr=False)  # a public case's cell in the notebook
    loc: str = field(default="", compare=False)


@dataclass
class Question:
    name: str
    points: float | None = None
    manual: bool = False
    cases: list[Case] = field(default_factory=list)


@dataclass
class State:
    """Where the walk through the cells is: the question, and the block inside it."""
    question: Question | None = None
    block: str = ""  # "", "solution", "tests"
    questions: list[Question] = field(default_factory=list)
    cells: list = field(default_factory=list)  # the converted notebook's cells
    seed: list[str] = field(default_factory=list)  # the notebook's top-level seeding lines, in order
    files: list[str] = field(default_factory=list)  # ASSIGNMENT CONFIG `files:`
    export: str = ""  # where an open `<!-- BEGIN QUESTION -->` is ("" when none)


def yaml_config(text: str, where: str) -> dict:
    import yaml  # PyYAML: otter's configurations are YAML

    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ImportFailed(f"{where}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ImportFailed(f"{where}: the configuration is not a YAML mapping")
    return data


def unfence(cell):
    """otter's ```otter fenced markdown configuration as the raw cell it stands for."""
    lines = cell_source(cell).strip().split("\n")
    if cell.get("cell_type") == "markdown" and len(lines) > 1 and lines[0].strip() == "```otter" \
            and lines[-1].strip() == "```":
        return {"cell_type": "raw", "metadata": {}, "source": "\n".join(lines[1:-1])}
    return cell


# -- solutions -------------------------------------------------------------------------------------------

def solution_code(source: str) -> str:
    """otter's solution lines and blocks between this project's markers; prompts dropped."""
    out, in_prompt = [], False
    for line in source.split("\n"):
        if _PROMPT[0].match(line) or in_prompt:
            in_prompt = not _PROMPT[1].match(line)
            continue
        block, single = _SOLUTION_BLOCK.match(line), _SOLUTION_LINE.match(line)
        if block:
            out.append(f"{block.group(1)}### BEGIN SOLUTION")
        elif line.strip() == "# END SOLUTION":
            out.append(f"{line[: len(line) - len(line.lstrip())]}### END SOLUTION")
        elif single and single.group(2):
            indent = single.group(1)
            out += [f"{indent}### BEGIN SOLUTION", f"{indent}{single.group(2)}", f"{indent}### END SOLUTION"]
        else:
            out.append(line)
    return "\n".join(out)


def solution_cell(cell, question: Question, count: int, report: ImportReport, loc: str):
    cell = copy.deepcopy(cell)
    grade_id = f"{question.name}_solution_{count}"
    if cell.get("cell_type") == "markdown":
        cell["metadata"]["nbgrader"] = {"solution": True, "grade": False, "grade_id": grade_id}
        report.convert(f"{loc}: written answer of {question.name} -> answer cell {grade_id!r} (YOUR ANSWER HERE)")
        return cell
    cell["source"] = solution_code(cell_source(cell))
    if "### BEGIN SOLUTION" in cell["source"]:
        cell["metadata"]["nbgrader"] = {"solution": True, "grade": False, "grade_id": grade_id}
        report.convert(f"{loc}: solution of {question.name} -> solution cell {grade_id!r}")
    return cell


# -- tests -----------------------------------------------------------------------------------------------

def read_case(cell, where: str) -> Case:
    lines = cell_source(cell).split("\n")
    hidden = bool(lines and lines[0].lstrip().startswith("#") and re.search(r"\bhidden\b", lines[0], re.I))
    config, start = {}, 1 if hidden else 0
    if lines and _TEST_CONFIG[0].match(lines[0]):
        end = next((i for i, line in enumerate(lines) if i and _TEST_CONFIG[1].match(line)), len(lines) - 1)
        config, start = yaml_config("\n".join(lines[1:end]), where), end + 1
    return Case("\n".join(lines[start:]).strip("\n"), bool(config.get("hidden", hidden)), config.get("points"),
                recorded_value(cell), loc=where)


def recorded_value(cell) -> str | None:
    """The text/plain of the value the source notebook recorded for the cell (its execute_result), if any."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "execute_result":
            text = output.get("data", {}).get("text/plain")
            return "".join(text) if isinstance(text, list) else text
    return None


def public_test_source(case: Case) -> tuple[str | None, str]:
    """The case as a notebook test cell that grades as otter grades it, or None and why it cannot be one.
    otter passes a case when it does not fail and prints what the solution printed when otter assign ran it: a
    case without a value passes when it does not fail; one with a value, when the value equals the recorded one."""
    tree = parse(case.source)
    if tree is None or not tree.body:
        return None, "not valid Python"
    last = tree.body[-1]
    if not isinstance(last, ast.Expr):
        return case.source, ""
    try:
        expected = ast.literal_eval((case.output or "").strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None, ("its value is compared with a correct notebook's, and the source notebook recorded none "
                      "as a Python literal to show students: run the source notebook, save it and import again, "
                      "or end the case with an assert")
    lines = case.source.split("\n")
    if last.col_offset or len(tree.body) > 1 and tree.body[-2].end_lineno >= last.lineno:
        return None, "its last expression shares a line with another statement"
    value = "\n".join(lines[last.lineno - 1:last.end_lineno])
    return "\n".join(lines[:last.lineno - 1] + [
        f"_value = {value}", f"assert _value == {expected!r}, f\"this test gives {{_value!r}} where a correct notebook "
        f"gives {expected!r}\""]), ""


def case_points(question: Question) -> list[float]:
    """otter's rule (TestFile.resolve_test_file_points): cases without points share what the question's
    points leave; a question without points is worth 1, shared when no case names points, else 0 each."""
    given = [c.points for c in question.cases]
    rest = sum(p is None for p in given)
    if question.points is not None:
        share = (float(question.points) - sum(p for p in given if p is not None)) / rest if rest else 0.0
    else:
        share = 1 / rest if rest and all(p in (0, None) for p in given) else 0.0
    return [float(p) if p is not None else share for p in given]


# -- the walk through the cells ------------------------------------------------------------------------------

def block_cell(cell, state: State, loc: str, report: ImportReport) -> bool:
    """Handle otter's raw block and configuration cells; False for any other cell."""
    if cell.get("cell_type") != "raw":
        return False
    lines = cell_source(cell).split("\n")
    if _CONFIG.match(lines[0]):
        files = yaml_config("\n".join(lines[1:]), loc).get("files") or []
        state.files += [str(f) for f in (files if isinstance(files, list) else [files])]
        if state.files:
            report.convert(f"{loc}: ASSIGNMENT CONFIG files: {', '.join(state.files)} -> shipped with the notebook")
        report.note("otter's ASSIGNMENT CONFIG is not imported but for its `files` (requirements, export and PDF "
                    "settings)")
        return True
    marker = _BLOCK.match(lines[0])
    if not marker:
        return False
    verb, kind = marker.group(1).upper(), marker.group(2).upper()
    if kind == "QUESTION" and verb == "BEGIN":
        config = yaml_config("\n".join(lines[1:]), loc)
        state.question = Question(str(config.get("name")), config.get("points"), bool(config.get("manual")))
        state.questions.append(state.question)
    elif kind == "QUESTION":
        state.question = None
    elif kind in ("SOLUTION", "TESTS"):
        state.block = kind.lower() if verb == "BEGIN" else ""
    return True


def convert(nb, where: str, report: ImportReport) -> tuple[dict, list[Question], str]:
    """The notebook with this project's markers, its questions, and its seeding lines (one source)."""
    state = State()
    for index, cell in enumerate(nb.cells):
        loc = f"cell {index + 1}"
        cell = unfence(cell)
        if block_cell(cell, state, loc, report):
            continue
        if state.block == "tests" and state.question and cell.get("cell_type") == "code":
            case = read_case(cell, loc)
            state.question.cases.append(case)
            if not case.hidden:  # its place in the notebook, filled once the question's points are known
                case.cell = copy.deepcopy(cell)
                state.cells.append(case.cell)
            continue
        cell = without_export_markers(cell, state, loc, report)
        if cell is None:
            continue
        cell = seed_free(cell, loc, report, state.seed)
        if state.block == "solution" and state.question:
            count = sum(1 for c in state.cells if c.get("metadata", {}).get("nbgrader")) + 1
            cell = solution_cell(cell, state.question, count, report, loc)
        refuse_leftovers(cell, loc, report)
        state.cells.append(cell)
    if state.export:
        report.refuse(state.export, "'<!-- BEGIN QUESTION -->'", "no `<!-- END QUESTION -->` closes it (removed)")
    out = copy.deepcopy(nb)
    out.cells = state.cells
    return out, state.questions, "\n".join(state.seed), state.files


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


_SEED_LINE = re.compile(r"^(\S.*?)\s*# SEED\s*$")


def seed_free(cell, loc: str, report: ImportReport, seed: list[str]):
    """otter's `# SEED` lines: the code stays (students run it in order), the marker goes, and each top-level one
    joins `seed`, which the grader runs in the student's module (and the reference's) before each test."""
    source = cell_source(cell)
    if cell.get("cell_type") != "code" or "# SEED" not in source:
        return cell
    cell = copy.deepcopy(cell)
    found = [m.group(1) for m in map(_SEED_LINE.match, source.split("\n")) if m]
    seed += found
    cell["source"] = re.sub(r"\s*# SEED\s*$", "", source, flags=re.M)
    report.convert(f"{loc}: otter's seeding line(s) {'; '.join(found) or '(indented: left as code)'} -> run before "
                   "each test, in the submission and in the reference")
    return cell


# -- writing ------------------------------------------------------------------------------------------------

def checks_source(questions: list[Question], nb, report: ImportReport, seed: str = "") -> str:
    cases = {id(c.cell) for q in questions for c in q.cases}  # their code runs in the grader, not in the notebook
    code = [cell_source(c) for c in nb.cells if c.get("cell_type") == "code" and id(c) not in cases]
    lines = tests_header("Checks imported from otter-grader (autograder import otter): each test case runs on the "
                         "submission\nand on the reference in the grader, and passes when their values are equal\n"
                         "(autograder/importers/cells.py); a manual question is a manual check (pending).",
                         "reference_cell", notebook_imports(code), seed)
    for q in questions:
        lines += question_checks(q, report, bool(seed))
    reads = names_read([c.source for q in questions for c in q.cases], notebook_names(code))
    return "\n".join(lines + reads_function(reads)) + "\n"


def question_checks(q: Question, report: ImportReport, seeded: bool = False) -> list[str]:
    variable = re.sub(r"\W", "_", q.name)
    if q.manual or not q.cases:
        points = 1.0 if q.points is None else float(q.points)
        why = "manual question" if q.manual else "question without tests"
        report.convert(f"{q.name}: {why} ({points_text(points)}) -> manual check {q.name!r} (pending)")
        return ["", f"{variable} = manual({q.name!r}, {points:g}, {q.name!r}, {why!r})"]
    out, public = [], 0
    for number, (case, points) in enumerate(zip(q.cases, case_points(q)), 1):
        name = f"{q.name} {'hidden ' if case.hidden else ''}test {number}"
        if public_cell(case, name, points, q.name, seeded, report):
            public += 1
            continue
        out += ["", f"{variable}_{number} = reference_cell({name!r}, {points!r}, {q.name!r}, IMPORTS, "
                    f"{literal(case.source)}, hidden={case.hidden}{', seed=SEED' if seeded else ''})"]
    report.convert(f"{q.name}: {len(q.cases)} test case(s) ({points_text(sum(case_points(q)))}) -> {public} public "
                   f"test cell(s) in the notebook, {len(q.cases) - public} check(s) compared with the reference")
    return out


def public_cell(case: Case, name: str, points: float, part: str, seeded: bool, report: ImportReport) -> bool:
    """Make a public case's notebook cell its public test cell (True), or plain code students read, its check
    then compared with the reference and the case named as not converted (False). False for a hidden case."""
    if case.cell is None:
        return False
    source, why = public_test_source(case)
    if seeded:
        source, why = None, ("the grader runs the notebook's seeding lines before it, which a test cell cannot do")
    cell = case.cell
    cell["outputs"], cell["execution_count"] = [], None
    if source is None:
        cell["source"] = case.source
        cell["metadata"]["tags"] = sorted(set(cell["metadata"].get("tags", [])) | {SKIP_TAG})
        report.refuse(case.loc, f"public test {name!r}", f"{why}; students see its code, but `autograder check` "
                      "does not run it (it is graded as a check compared with the reference)")
        return False
    cell["source"] = source
    cell["metadata"]["nbgrader"] = {"grade": True, "solution": False, "locked": True, "grade_id": name,
                                    "points": points, "part": part, "schema_version": 3}
    report.convert(f"{case.loc}: public test {name!r} ({points_text(points)}) -> public test cell")
    return True



def refuse_leftovers(cell, loc: str, report: ImportReport) -> None:
    """Markers the conversion did not consume: named, and left for `build` to refuse."""
    for marker in find_foreign(cell_source(cell).split("\n"), cell.get("cell_type", "")):
        report.refuse(loc, repr(marker.text.strip()), f"a marker of {marker.style.name} this import does not "
                      "convert; `autograder build` refuses it until it is rewritten")


def import_assignment(source: Path, name: str, solutions: Path, force: bool = False) -> list[ImportReport]:
    import nbformat

    if not source.is_file():
        raise ImportFailed(f"{source}: an otter import takes the assignment notebook itself")
    report = ImportReport("otter", source, solutions / name)
    notebook, questions, seed, files = convert(nbformat.read(source, as_version=4), str(source), report)
    tests = checks_source(questions, notebook, report, seed)
    notes(report)
    prepare(report.target, force)
    write_assignment(report, notebook, tests, source.stem, TESTS_FILE, files)
    return [report]


def notes(report: ImportReport) -> None:
    report.note("otter compares printed outputs; here the values are compared, so `np.True_` and `True` are the same "
                "(otter 7 under numpy 2 prints `np.True_` where `True` was recorded and fails correct notebooks)")
    report.note("a test's printed output (print calls) is not compared, only the value of its last expression")
    report.note("otter's prompts (`...` in place of a solution line, BEGIN PROMPT blocks) are not shown: students get "
                "this project's stub, `# TODO: your code here` and `raise NotImplementedError()`")
    report.note("otter's grader.check cells in student notebooks are not needed: the public test cells stand where "
                "the public cases stood (students run them, or `autograder check`); a grader.check cell is an ordinary "
                "cell the grader does not run")
