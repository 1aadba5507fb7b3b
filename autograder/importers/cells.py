"""Imported notebook test cells as checks, run in the judge with the meaning they have in the student's kernel.

The kernel meaning itself (the notebook's names and imports, the student's exceptions as their own types,
generators, type questions, `del name`, the variables of the earlier test cells of the same question) is
autograder/kernel.py's, as for a notebook's own test cells. This module adds what the two formats add:
- nbgrader (`notebook_cell`): a cell whose last statement is an expression with a number in [0, points] gets that
  many points (nbgrader's partial credit); any other value gives full points, an exception none; an assertion
  without a message is named by its line, unless the line is hidden;
- otter-grader (`reference_cell`): the cell runs twice, on the submission and on the reference, and passes when
  neither fails and the values of their last expressions are equal; an all_or_nothing question (`all_cases`) is
  one check over its cases, full points when every one passes; a case's `failure` message (otter's
  failure_message) comes first in what a student reads when it fails, its `success` message is what they read when
  it passes;
- a seeded question's cases run as otter runs the cases of a test file after seeding the cell that checks them
  (`seed`: otter's seeding of that cell, `np.random.seed(N)` and `random.seed(N)` for `generate: {seed: N}`, or
  the notebook's `# SEED` lines): each check runs the seeding in the program's module (SEEDING_HELPERS, shipped
  into both workers) and in the judge (where a case's own `np.random...` runs), then the question's cases before
  its own (`earlier`, otter's order, their failures ignored) in the same namespace, then its own; so case k draws
  what otter's k-th case draws, in the submission and in the reference alike. The judge's generators are as they
  were afterwards. Without `seed` a case runs alone, unseeded but for the grader's own seeding of every check.
  A case that draws both in the judge and through the notebook's code draws from two generators (two processes)
  where otter's kernel has one: sub and reference still draw alike, but the values may differ from otter's.
Not reproduced: nbgrader's zero for a cell that writes to stderr.
"""
from __future__ import annotations

import ast
import contextlib
import io
import random
import sys
from collections.abc import Sequence

from autograder.kernel import KernelNamespace, assertion_text, hidden_failure, run_test_cell
from autograder.sandbox import Remote, StudentError, remote_repr
from autograder.judge import instructors_mistake
from autograder.testing import Fail, check

# Shipped into both workers (autograder.testing.worker_helpers) by an assignment whose questions are seeded: the
# seeding runs in the student's module, where the notebook's functions draw.
SEEDING_HELPERS = '''
def run_seed_lines(source):
    exec(source, vars(submission))
'''


class ListedImports:
    """The notebook's import statements a tests file lists (IMPORTS), each run in the judge when a cell first uses a
    name it binds (program.JudgeImports does the same for a built notebook's reference)."""

    def __init__(self, statements: list[str]):
        self.statements = {name: s for s in statements for name in bound_names(s)}
        self.namespace: dict = {}

    def binds(self, name: str) -> bool:
        return name in self.statements

    def resolve(self, name: str):
        if name not in self.namespace and name in self.statements:
            try:
                exec(compile(self.statements.pop(name), "<notebook imports>", "exec"), self.namespace)
            except Exception:  # noqa: BLE001 - a module the judge lacks: the name is then the notebook's
                pass
        if name not in self.namespace:
            raise KeyError(name)
        return self.namespace[name]


def bound_names(statement: str) -> list[str]:
    """The top-level names an import statement binds (`import a.b` binds `a`; `*` binds none here)."""
    names = []
    for node in ast.walk(ast.parse(statement)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names += [(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"]
    return names


def partial_credit(value, points: float) -> float:
    """nbgrader's rule: a number in [0, points] is the score; anything else is full credit."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or points <= 0:
        return 1.0
    return value / points if 0 <= value <= points else 1.0


def failed_assertion(exc: AssertionError, source: str, filename: str) -> AssertionError:
    """What a student reads of a failed assertion (kernel.assertion_text: "a hidden test failed" on a hidden line,
    whatever its message). A student's own AssertionError stays the student's ("your f raised ...")."""
    if isinstance(exc, StudentError):
        return exc
    return AssertionError(assertion_text(exc, filename, source) or "an assertion of this test failed")


def seeded(program, seed: str) -> None:
    """Run the question's seeding in `program`'s module (the workers have SEEDING_HELPERS)."""
    if seed:
        program.helpers.run_seed_lines(seed)


def notebook_cell(name: str, points: float, part: str, imports: list[str], source: str,
                  earlier: tuple[tuple[str, str], ...] = (), seed: str = "", cell: int = 0,
                  depends_on: list[str] | tuple[str, ...] = ()):
    """A check that runs an imported test cell (hidden regions marked as in a source notebook) as a kernel would,
    after the earlier cells of its part `earlier` ((name, source), notebook order) when it reads their variables;
    `cell`: its number in the source notebook, which the grader's messages about the cell's own code name;
    `depends_on`: as check()'s (the notebook's names of other parts it calls, stood in for by the reference's)."""
    filename = f"<test cell {name}, source notebook cell {cell}>" if cell else f"<test cell {name}>"

    def run(sub, ref):
        seeded(sub, seed)
        try:
            value = run_test_cell(source, filename, KernelNamespace(sub, ListedImports(imports), interface=ref),
                                  list(earlier))
        except AssertionError as exc:
            raise failed_assertion(exc, source, filename) from None
        except (StudentError, Fail):
            raise
        except Exception as exc:
            hidden = None if instructors_mistake(exc) else hidden_failure(exc, filename, source)
            if hidden:
                raise Fail(hidden) from None
            raise
        return partial_credit(value, points)

    run.__name__ = f"cell_{name}"
    return check(name, points, part, depends_on=tuple(depends_on))(run)


@contextlib.contextmanager
def judge_generators_kept():
    """random's and numpy's generators in the judge as they were before: a question's seeding reaches no other
    check (torch's needs nothing: the judge seeds it before every check)."""
    numpy = sys.modules.get("numpy")
    state, numpy_state = random.getstate(), numpy.random.get_state() if numpy is not None else None
    try:
        yield
    finally:
        random.setstate(state)
        if numpy_state is not None:
            numpy.random.set_state(numpy_state)


def evaluate(program, imports: list[str], source: str, filename: str, seed: str = "", interface=None,
             earlier: Sequence[tuple[str, str]] = ()):
    """The value of the cell's last expression (None if none), run in a kernel namespace of `program`; with `seed`,
    after the question's seeding and its cases before this one, `earlier` (name, source) (see above);
    `interface`: the reference, whose definitions of built-ins' names are the notebook's."""
    namespace = KernelNamespace(program, ListedImports(imports), interface=interface)
    if not seed:
        return run_test_cell(source, filename, namespace)
    with judge_generators_kept():
        seeded(program, seed)
        # in the judge as an earlier cell of the namespace: the case's own draws come from the judge's generators
        return run_test_cell(source, filename, namespace, [("seeding", seed), *earlier], replay_all=True)


def same(actual, expected) -> bool:
    """Equal values, as a printed output would be: numpy and torch values compared element by element; an object
    that stays in its worker (a DataFrame, a Series, an object of the notebook's own class) by the text it prints as,
    as otter compares it."""
    if isinstance(actual, Remote) or isinstance(expected, Remote):
        return remote_repr(actual) == remote_repr(expected)
    try:
        equal = actual == expected
        if hasattr(equal, "all"):  # an array or a tensor of comparisons
            return type(actual) is type(expected) and getattr(actual, "shape", None) == getattr(expected, "shape", None) \
                and bool(equal.all())
        return bool(equal)
    except Exception:  # noqa: BLE001 - values that cannot be compared are not the same
        return False


def compared(name: str, imports: list[str], source: str, hidden: bool, seed: str, failure: str = "",
             earlier: Sequence[tuple[str, str]] = ()):
    """Run a test case on the submission and on the reference (with `seed`, after the question's seeding and
    `earlier` cases, in each); AssertionError unless neither fails and the values of their last expressions are
    equal ("a hidden test failed", and nothing more, for a hidden case), after the case's own `failure` message
    when it has one."""
    compare = _compared(name, imports, source, hidden, seed, earlier)
    if not failure:
        return compare

    def run(sub, ref):
        try:
            compare(sub, ref)
        except AssertionError as exc:
            raise AssertionError(f"{failure}\n{exc}") from None
    return run


def _compared(name: str, imports: list[str], source: str, hidden: bool, seed: str,
              earlier: Sequence[tuple[str, str]]):
    filename = f"<test {name}>"

    def run(sub, ref):
        try:
            actual, printed = printing(evaluate, sub, imports, source, filename, seed, interface=ref, earlier=earlier)
        except AssertionError as exc:
            raise (AssertionError("a hidden test failed") if hidden else failed_assertion(exc, source, filename)) from None
        expected, expected_printed = printing(evaluate, ref, imports, source, filename, seed, interface=ref,
                                              earlier=earlier)
        if not same(actual, expected):
            raise AssertionError("a hidden test failed" if hidden else f"this test gives {remote_repr(actual)} where "
                                 f"a correct notebook gives {remote_repr(expected)}")
        if printed != expected_printed:  # otter compares what a case prints (`print(double(2))`) too
            raise AssertionError("a hidden test failed" if hidden else
                                 f"this test prints {printed!r} where a correct notebook prints {expected_printed!r}")
    return run


def printing(fn, *args, **kwargs) -> tuple:
    """(what `fn` returns, what the test's own code printed meanwhile, each line's trailing spaces dropped): the
    case's prints run here, in the judge; what the student's functions print in their worker is not part of it."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        value = fn(*args, **kwargs)
    return value, "\n".join(line.rstrip() for line in out.getvalue().rstrip().split("\n"))


def reference_cell(name: str, points: float, part: str, imports: list[str], source: str, hidden: bool = False,
                   seed: str = "", success: str = "", failure: str = "", earlier: Sequence[tuple[str, str]] = ()):
    """A check that runs a test cell on the submission and on the reference and compares the values; `seed`: the
    question's seeding, run first, then `earlier`, the question's cases before this one (name, source), as otter
    runs them (see above); `success` / `failure`: what a student reads when it passes / before why it failed
    (otter's success_message and failure_message)."""
    run = compared(name, imports, source, hidden, seed, failure, earlier)
    run.__name__ = f"test_{name}"
    return check(name, points, part, "after_published" if hidden else "visible", passed_message=success)(run)


def all_cases(name: str, points: float, part: str, imports: list[str], cases: list[tuple], seed: str = ""):
    """otter's all_or_nothing question as one check: each case (name, source, hidden[, success, failure]) runs as in
    reference_cell, in order, each after the seeding and the cases before it with `seed`; full points when every case
    passes, none otherwise (the first failing case says why, after its failure message). Its passing message: the
    cases' success messages. Visible after publication when a case is hidden (the score tells how the hidden cases
    went)."""
    cases = [(*case, "", "")[:5] for case in cases]
    sources = [(case, source) for case, source, *_ in cases]
    runs = [(case, compared(case, imports, source, hidden, seed, failure, sources[:number]))
            for number, (case, source, hidden, _, failure) in enumerate(cases)]
    code = "\n\n".join(source for _, source, *_ in cases)  # the cases' code (mutation analysis reads the closure)
    passed = "\n".join(success for *_, success, _ in cases if success)

    def run(sub, ref):
        if not code:
            return
        for case, compare in runs:
            try:
                compare(sub, ref)
            except AssertionError as exc:
                raise AssertionError(f"{case}: {exc}") from None

    run.__name__ = f"test_{name}"
    return check(name, points, part, "after_published" if any(hidden for _, _, hidden, *_ in cases) else "visible",
                 passed_message=passed)(run)
