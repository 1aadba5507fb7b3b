"""otter's questions as this project's checks (autograder/importers/otter.py reads them from otter's notebook):
each case's points by otter's rules, a public case as a public test cell of the notebook where it can be one, the
rest as checks in tests/otter_tests.py compared with the reference (autograder/importers/cells.py), run after the
question's seeding as otter runs a test file; manual questions as manual checks."""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from autograder.importers.common import (
    ImportFailed, literal, notebook_names_tests_read, notebook_imports, notebook_names, parse, points_text, reads_function, statements,
    tests_header, top_level_bindings,
)
from autograder.importers.otter_lines import SEED_NAME, test_function
from autograder.importers.report import ImportReport
from autograder.notebook.extract import dotted
from autograder.notebook.markers import cell_source
from autograder.notebook.seedvar import cell_seeding as grading_cell_seeding

TESTS_FILE = "otter_tests.py"
SKIP_TAG = "skip-grading"


@dataclass
class Case:
    """One test case of an otter question: its code, whether it is hidden, its points where the case names them."""
    source: str
    hidden: bool
    points: float | None
    output: str | None = None  # the text/plain value the source notebook recorded for the case, if any
    ran: bool = False  # the source notebook ran the case (its execution count): no value recorded means None
    success: str = ""  # its TEST CONFIG's success_message: what a student reads when it passes
    failure: str = ""  # its failure_message: what a student reads first when it fails
    cell: dict | None = field(default=None, compare=False, repr=False)  # a public case's cell in the notebook
    loc: str = field(default="", compare=False)


@dataclass
class Question:
    """One otter question as read from its `# BEGIN QUESTION` configuration, with the test cases that follow it."""
    name: str
    points: object = None  # as configured: a number, a list of per-case points, {each: x}, or None
    manual: bool = False
    cases: list[Case] = field(default_factory=list)
    all_or_nothing: bool = False
    loc: str = ""  # the cell of its `# BEGIN QUESTION`


def public_test_source(case: Case) -> tuple[str | None, str]:
    """The case as a notebook test cell that grades as otter grades it, or None and why it cannot be one.
    otter passes a case when it does not fail and prints what the solution printed when otter assign ran it: a
    case without a value passes when it does not fail; one with a value, when the value equals the recorded one
    (None when the source notebook ran it and recorded none: IPython shows no None); an exception-based one (a
    test function and its call), when the function raises nothing."""
    tree = parse(case.source)
    if tree is None or not tree.body:
        return None, "not valid Python"
    if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print" for n in ast.walk(tree)):
        return None, ("it prints, and otter compares what it prints: it is graded as a check comparing what it prints "
                      "and its value with a correct notebook's")
    last = tree.body[-1]
    if not isinstance(last, ast.Expr) or test_function(tree) is not None:
        return case.source, ""
    if case.output is None and not case.ran:
        return None, ("its value is compared with a correct notebook's, and the source notebook recorded none (the "
                      "case was not run): run the source notebook, save it and import again, or end the case with "
                      "an assert")
    try:
        expected = None if case.output is None else recorded_literal(case.output)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        shown = " ".join(case.output.split())
        return None, (f"its value is compared with a correct notebook's, and the value the source notebook recorded "
                      f"(`{shown[:60]}{'...' if len(shown) > 60 else ''}`) is not one a test cell can write (a "
                      "Python or numpy literal): end the case with an assert to make it a public test cell")
    lines = case.source.split("\n")
    if last.col_offset or len(tree.body) > 1 and tree.body[-2].end_lineno >= last.lineno:
        return None, "its last expression shares a line with another statement"
    value = "\n".join(lines[last.lineno - 1:last.end_lineno])
    said = repr(case.failure + "\n") + " + " if case.failure else ""  # otter's failure_message, first
    return "\n".join(lines[:last.lineno - 1] + [
        f"_value = {value}", f"assert {equals(expected)}, {said}f\"this test gives {{_value!r}} where a correct "
        f"notebook gives {expected!r}\""]), ""


def equals(expected) -> str:
    """The test's condition on `_value`: equal to the recorded value, by value (np.True_ and True, np.float64(1.5)
    and 1.5 alike); a recorded True or False only by a bool, numpy's or Python's (1 == True, but otter's printed
    output tells them apart)."""
    if expected is None:
        return "_value is None"
    if isinstance(expected, bool):
        return f"type(_value).__name__ in ('bool', 'bool_') and _value == {expected!r}"
    return f"_value == {expected!r}"


# numpy 2's reprs of its scalars (np.True_, np.float64(1.5)), as IPython records them for a case's value; read as the
# Python value they equal, which the test cell compares with `==` (as reference_cell compares values): a student's
# True passes where np.True_ was recorded, as it would where otter's doctest compared the printed text under numpy 1
_NUMPY_MODULES = {"np", "numpy"}
_NUMPY_BOOLS = {"True_": True, "False_": False}


class _NumpyScalars(ast.NodeTransformer):
    """`np.True_` -> True, `np.float64(1.5)` / `np.str_('a')` -> their argument, anywhere in a recorded value."""

    def visit_Attribute(self, node):
        if isinstance(node.value, ast.Name) and node.value.id in _NUMPY_MODULES and node.attr in _NUMPY_BOOLS:
            return ast.copy_location(ast.Constant(_NUMPY_BOOLS[node.attr]), node)
        return node

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in _NUMPY_MODULES \
                and re.fullmatch(r"(float|int|uint|complex)\d*|bool|str_|bytes_|longdouble|clongdouble", func.attr) \
                and len(node.args) == 1 and not node.keywords:
            return self.visit(node.args[0])
        return self.generic_visit(node)


def recorded_literal(text: str):
    """The value a case's recorded text/plain stands for: a Python literal, numpy scalars' reprs read as their values
    (ValueError or SyntaxError when it is neither)."""
    tree = _NumpyScalars().visit(ast.parse(text.strip(), mode="eval"))
    return ast.literal_eval(tree)


# -- points ----------------------------------------------------------------------------------------------

def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


def _configured(question: Question) -> tuple[float | None, list]:
    """(the question's total or None, each case's own points or None), as otter assign reads `points`: a list
    gives each case's points in order, `{each: x}` makes the total x per case. ImportFailed for anything else."""
    where, points, n = f"{question.loc}: question {question.name!r}", question.points, len(question.cases)
    given = [c.points for c in question.cases]
    if isinstance(points, dict):
        if set(points) - {"each"} or not _number(points.get("each", 1)):
            raise ImportFailed(f"{where}: `points: {points}` is not `{{each: POINTS}}` (a number >= 0 per test case)")
        points = points.get("each", 1) * n
    elif isinstance(points, list):
        if len(points) != n:
            raise ImportFailed(f"{where}: `points` lists {len(points)} value(s) for {n} test case(s) (otter "
                               "refuses this too)")
        points, given = None, list(points)
    if not (points is None or _number(points)) or any(p is not None and not _number(p) for p in given):
        bad = points if not (points is None or _number(points)) else next(p for p in given if not _number(p))
        raise ImportFailed(f"{where}: points {bad!r} is not a number >= 0 (a question's `points` is a number, a "
                           "list of one per test case, or {each: POINTS})")
    return points, given


def case_points(question: Question) -> list[float]:
    """otter's rule (TestFile.resolve_test_file_points): cases without points share what the question's total
    leaves; a question without a total is worth 1, shared when no case names points, else 0 each."""
    total, given = _configured(question)
    fixed, rest = sum(p for p in given if p is not None), sum(p is None for p in given)
    if total is not None:
        if fixed > total + 1e-9:
            raise ImportFailed(f"{question.loc}: question {question.name!r}: its test cases' points ({fixed:g}) "
                               f"exceed the question's ({total:g}) (otter refuses this too)")
        share = (total - fixed) / rest if rest else 0.0
    else:
        share = 1 / rest if rest and all(p in (0, None) for p in given) else 0.0
    return [float(p) if p is not None else share for p in given]


def manual_points(question: Question) -> float:
    """A manual question's points: 0 when not given, as otter counts it (its points are set where it is graded)."""
    if question.points is None:
        return 0.0
    if not _number(question.points):
        raise ImportFailed(f"{question.loc}: question {question.name!r}: `points: {question.points}` of a manual "
                           "question is not a number >= 0")
    return float(question.points)


# -- what the seeding lines seed, and the tests that draw from it -----------------------------------------------

@dataclass
class Seeded:
    """The notebook's seeding lines and what they seed: generators (`np.random`, `torch`, `rng`) and the notebook
    functions and classes that draw from them, directly or through one another."""
    lines: str = ""
    roots: set[str] = field(default_factory=set)
    drawing: set[str] = field(default_factory=set)

    def draw(self, source: str) -> str | None:
        """What of `source` draws from a seeded generator (`np.random.rand`, a drawing function called), or None."""
        return _draws(parse(source), self.roots, self.drawing) if self.lines else None


# torch's global generator (seeded by torch.manual_seed) is drawn from by its sampling functions, tensors' in-place
# samplers, dropout, nn.init and the layers whose constructors initialise weights; not by torch.zeros or torch.tensor
_TORCH_DRAWS = re.compile(r"(^|\.)(rand|randn|randint|randperm|rand_like|randn_like|randint_like|bernoulli|multinomial|"
                          r"normal|poisson|uniform_|normal_|random_|bernoulli_|exponential_|geometric_|log_normal_|"
                          r"cauchy_|dropout\w*|Dropout\w*)$|(^|\.)nn\.init\.|(^|\.)nn\.[A-Z]\w*$")
_GLOBAL_SEEDERS = {"torch", "torch.random", "torch.cuda"}  # `torch.manual_seed(0)`: its root stands for the above


def _draws(tree, roots: set[str], drawing: set[str]) -> str | None:
    torch_seeded = bool(roots & _GLOBAL_SEEDERS)
    for node in ast.walk(tree or ast.Module([], [])):
        name = dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        method = f".{node.attr}" if isinstance(node, ast.Attribute) and name is None else None  # x.uniform_()
        if torch_seeded and (name or method) and _TORCH_DRAWS.search(name or method or ""):
            return name or method
        if name and any(name == r or name.startswith(r + ".") for r in roots - _GLOBAL_SEEDERS):
            return name
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in drawing:
            return f"{node.func.id}()"
    return None


# what otter's seeding of a cell seeds, as seeding lines (the generators public cases must not draw from)
_CELL_SEEDED = "np.random.seed(0)\nnumpy.random.seed(0)\nrandom.seed(0)"


def question_seeding(lines: str, cells: int | None) -> str:
    """What runs before a question's cases (cells.py): otter's seeding of the cell that checks the question ([seed]
    cells, `generate: {seed: N}`), else the notebook's seeding lines (without that seed otter seeds nothing there and
    refuses `# SEED` lines: they stand for the state the notebook left), else nothing, as otter."""
    return grading_cell_seeding({"cells": cells}) if cells is not None else lines


def seeded(seed: str, code: list[str], cells: int | None = None) -> Seeded:
    """The question seeding (question_seeding) and what it seeds."""
    out = Seeded(question_seeding(seed, cells))
    for node in statements([s for s in (seed, _CELL_SEEDED if cells is not None else "") if s]):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            name = dotted(node.value.func) or ""
            out.roots.add(name.rpartition(".")[0] or name)
        out.roots |= top_level_bindings(node)
    out.roots.discard("")
    definitions = [n for n in statements(code) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    changed = True
    while changed:
        found = {d.name for d in definitions if _draws(d, out.roots, out.drawing)}
        changed, out.drawing = bool(found - out.drawing), out.drawing | found
    return out


# -- writing ------------------------------------------------------------------------------------------------

def checks_source(questions: list[Question], nb, report: ImportReport, seed: str = "", cells: int | None = None) -> str:
    """The tests file; `seed`: the notebook's seeding lines; `cells`: [seed] cells (question_seeding)."""
    cases = {id(c.cell) for q in questions for c in q.cases}  # their code runs in the grader, not in the notebook
    code = [cell_source(c) for c in nb.cells if c.get("cell_type") == "code" and id(c) not in cases]
    runners = "all_cases, reference_cell" if any(q.all_or_nothing for q in questions) else "reference_cell"
    context = seeded(seed, code, cells)
    if context.lines:
        report.convert("each question's test cases -> run after " + ("otter's seeding of the cell that checks them "
                       f"(`[seed] cells = {cells}`)" if cells is not None else "the notebook's seeding lines") +
                       ", once, then in otter's order (a case after those before it), in the submission and in the "
                       "reference, as otter's grader runs a question's test file")
    lines = tests_header("Checks imported from otter-grader (autograder import otter): each test case runs on the "
                         "submission\nand on the reference in the grader, and passes when their values are equal\n"
                         "(autograder/importers/cells.py); a manual question is a manual check (pending).",
                         runners, notebook_imports(code), context.lines)
    for q in questions:
        lines += question_checks(q, report, context)
    reads = notebook_names_tests_read([c.source for q in questions for c in q.cases], notebook_names(code))
    reads |= {SEED_NAME} & notebook_names(code)  # the seeding calls: the grader runs them where they stand
    return "\n".join(lines + reads_function(reads)) + "\n"


def case_name(q: Question, case: Case, number: int) -> str:
    """The check name of a question's case: "<question> [hidden ]test <n>", `number` counted from 1 in the question."""
    return f"{q.name} {'hidden ' if case.hidden else ''}test {number}"


def question_checks(q: Question, report: ImportReport, context: Seeded) -> list[str]:
    """The lines of the tests module for one question: a check per case (or one for an all-or-nothing question), a
    manual check for a manual question without cases; each conversion and refusal noted in `report`."""
    variable = re.sub(r"\W", "_", q.name)
    if not q.cases:
        return manual_check(q, variable, report) if q.manual else no_check(q, report)
    if q.manual:
        report.note(f"{q.name} is a manual question with tests: its tests are converted; what otter exports of it for "
                    "grading by hand has its points where it is graded (Gradescope): add a `manual` check for them")
    points, seed = case_points(q), ", seed=SEED" if context.lines else ""
    if q.all_or_nothing:
        return all_or_nothing_checks(q, variable, points, report, context)
    out, public, replayed = [], 0, 0
    for number, (case, share) in enumerate(zip(q.cases, points), 1):
        name = case_name(q, case, number)
        if public_cell(case, name, share, q.name, context, report):
            public += 1
            continue
        replayed = number - 1 if seed else 0  # a seeded case runs after those before it (earlier_cases)
        said = "".join(f", {key}={value!r}" for key, value in (("success", case.success), ("failure", case.failure))
                       if value) + (f", earlier=_{variable}_cases[:{replayed}]" if replayed else "")
        messages(case, name, report)
        out += ["", f"{variable}_{number} = reference_cell({name!r}, {share!r}, {q.name!r}, IMPORTS, "
                    f"{literal(case.source)}, hidden={case.hidden}{seed}{said})"]
    out = earlier_cases(q, variable, replayed) + out
    report.convert(f"{q.name}: {len(q.cases)} test case(s) ({points_text(sum(points))}) -> {public} public "
                   f"test cell(s) in the notebook, {len(q.cases) - public} check(s) compared with the reference")
    return out


def earlier_cases(q: Question, variable: str, count: int) -> list[str]:
    """The question's first `count` cases (name, source) in otter's order: a seeded check runs those before its own
    after the seeding, as otter runs a test file's cases one after another in one seeded cell (cells.py)."""
    if not count:
        return []
    return ["", f"_{variable}_cases = [  # {q.name}'s cases in otter's order, replayed before a seeded case", *(
        f"    ({case_name(q, case, n)!r}, {literal(case.source)})," for n, case in enumerate(q.cases[:count], 1)), "]"]


def all_or_nothing_checks(q: Question, variable: str, points: list[float], report: ImportReport,
                          context: Seeded) -> list[str]:
    """otter's all_or_nothing: one check over every case, full points when all pass and none otherwise; the public
    cases stay public test cells worth 0, for students to run."""
    cases, public = [], 0
    for number, case in enumerate(q.cases, 1):
        name = case_name(q, case, number)
        public += public_cell(case, name, 0.0, q.name, context, report)
        said = f", {case.success!r}, {case.failure!r}" if case.success or case.failure else ""
        cases.append(f"    ({name!r}, {literal(case.source)}, {case.hidden}{said}),")
    total = sum(points)
    report.convert(f"{q.name}: all_or_nothing: {len(q.cases)} test case(s) -> one check {q.name!r} worth "
                   f"{points_text(total)} when every case passes, 0 otherwise; {public} public test cell(s) worth 0 in "
                   "the notebook (students run them)")
    return ["", f"{variable} = all_cases({q.name!r}, {total!r}, {q.name!r}, IMPORTS, [", *cases,
            f"]{', seed=SEED' if context.lines else ''})"]


def manual_check(q: Question, variable: str, report: ImportReport) -> list[str]:
    """The lines of a manual check for manual question `q` (worth 0 where otter gives it no points, and the report
    says so)."""
    points = manual_points(q)
    if q.points is None:
        report.convert(f"{q.name}: manual question without points -> manual check {q.name!r} worth 0 (pending), as "
                       f"otter counts it; give it points in tests/{TESTS_FILE}")
        report.note("a manual question without `points` is worth 0, as otter counts it (otter leaves its points to "
                    f"where it is graded by hand): give each one its points in tests/{TESTS_FILE}")
    else:
        report.convert(f"{q.name}: manual question ({points_text(points)}) -> manual check {q.name!r} (pending)")
    return ["", f"{variable} = manual({q.name!r}, {points:g}, {q.name!r}, 'manual question')"]


def no_check(q: Question, report: ImportReport) -> list[str]:
    """A question with neither tests nor `manual`: otter grades nothing for it, and neither does the import."""
    report.convert(f"{q.name}: no tests and not manual -> no check: otter grades nothing for it (its solution cells "
                   "are converted)")
    report.note(f"questions without tests and not manual get no check, as otter grades nothing for them: add tests, "
                f"or a `manual` check in tests/{TESTS_FILE}, to grade one")
    return []


def public_cell(case: Case, name: str, points: float, part: str, context: Seeded, report: ImportReport) -> bool:
    """Make a public case's notebook cell its public test cell (True), or plain code students read, its check
    then compared with the reference and the case named as not converted (False). False for a hidden case."""
    if case.cell is None:
        return False
    source, why = public_test_source(case)
    drawn = context.draw(case.source)
    if source is not None and drawn:
        source, why = None, (f"it draws random numbers (`{drawn}`), and the grader seeds the question's cases before it "
                             "(as otter seeds the cell that checks them), which a test cell cannot do")
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
                                    "points": points, "part": part, "schema_version": 3,
                                    **({"passed_message": case.success} if case.success else {})}
    report.convert(f"{case.loc}: public test {name!r} ({points_text(points)}) -> public test cell")
    messages(case, name, report, source)
    return True


def messages(case: Case, name: str, report: ImportReport, source: str | None = None) -> None:
    """otter's success_message and failure_message, shown as otter shows them (a check's message when it passes;
    first in what a student reads when it fails); a public test cell without a value to compare (an assert, a test
    function) cannot add a failure message to its own: named as not converted."""
    if case.success:
        report.convert(f"{case.loc}: success_message of {name!r} -> what a student reads when it passes")
    if case.failure and source is not None and repr(case.failure + "\n") not in source:
        report.refuse(case.loc, f"failure_message of {name!r}", "a public test cell without a value to compare (an "
                      "assert, a test function) fails with its own message: end the case with a value, or put the "
                      "message in its assert")
    elif case.failure:
        report.convert(f"{case.loc}: failure_message of {name!r} -> first in what a student reads when it fails")
