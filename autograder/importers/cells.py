"""Imported notebook test cells, run in the judge with the meaning they have in the student's kernel.

nbgrader runs a test cell in the student's kernel. Here the cell runs in the judge, where every verdict is
computed (student code stays in its worker), and keeps its kernel meaning:
- a name the cell does not bind is the notebook's import, run in the judge, or else the notebook's own
  definition (a proxy to the worker); `next()` and `for` step through the student's generators one item at
  a time, and `type()` / `isinstance` of a proxy answer with the judge's class of the same name (pd.Series);
- an exception the student's code raises arrives as its built-in type (a class deriving from it and from
  StudentError), so `except ValueError` catches a student's ValueError; other types stay StudentError;
- `del name` of a notebook name removes it from the student's module until the cell binds it again to
  what it read (`squares = orig_squares`) or the check ends, so the student's functions meet a NameError;
- a cell whose last statement is an expression with a number in [0, points] gets that many points
  (nbgrader's partial credit); any other value gives full points, an exception none.
otter-grader's test cells compare outputs instead (`reference_cell`): the cell runs twice, on the submission and on
the reference, and passes when neither fails and the values of their last expressions are equal.
What does not hold (the importer reports the cells concerned): binding a notebook name to another value
changes the cell's name only, never what the student's functions call; variables of earlier test cells
are not there; nbgrader's zero for a cell that writes to stderr is not reproduced.
"""
from __future__ import annotations

import ast
import builtins
import sys

from autograder.notebook.markers import HIDDEN, find_regions
from autograder.sandbox.client import StudentError
from autograder.sandbox.remote import Remote, remote_isinstance, remote_type
from autograder.testing import check

# Shipped into the worker (autograder.testing.worker_helpers): hides and restores the student's globals.
WORKER_HELPERS = '''
_hidden = {}

def hide_global(name):
    _hidden[name] = vars(submission).pop(name)

def restore_global(name):
    vars(submission)[name] = _hidden.pop(name)

def restore_globals():
    vars(submission).update(_hidden)
    _hidden.clear()
'''

_TRANSLATED: dict[type, type] = {}


def as_builtin(exc: StudentError) -> StudentError:
    """The student's exception as an instance of its built-in type (and still a StudentError)."""
    base = getattr(builtins, exc.type, None)
    if not (isinstance(base, type) and issubclass(base, Exception)):
        return exc
    cls = _TRANSLATED.setdefault(base, type(base.__name__, (base, StudentError), {"__module__": "student"}))
    out = cls.__new__(cls)
    out.__dict__.update(vars(exc))
    out.args = (exc.message,) if exc.message else ()
    return out


def translating(value):
    """A proxy whose student exceptions arrive as built-in types; plain data as it is."""
    if type(value) is Remote:
        return Translating(*(object.__getattribute__(value, slot) for slot in Remote.__slots__))
    return value


class Translating(Remote):
    """A Remote whose calls, attributes, items and iteration raise a student's exceptions as built-in types."""

    __slots__ = ()

    def __call__(self, *args, **kwargs):
        return _translate(Remote.__call__, self, *args, **kwargs)

    def __getattr__(self, name):
        return _translate(Remote.__getattr__, self, name)

    def __getitem__(self, key):
        return _translate(Remote.__getitem__, self, key)

    def __iter__(self):
        if Remote._req(self, "has", "__next__"):  # an iterator (a generator): one item per request, as it runs
            return self
        return iter([translating(x) for x in _translate(Remote.__iter__, self)])

    def __next__(self):
        return _translate(lambda: Remote.__call__(Remote._req(self, "getpath", "__next__")))


def _translate(op, *args, **kwargs):
    try:
        return translating(op(*args, **kwargs))
    except StudentError as exc:
        raise as_builtin(exc) from None


class JudgeImports:
    """The notebook's import statements, each run in the judge when the cell first uses a name it binds."""

    def __init__(self, statements: list[str]):
        self.statements = {name: s for s in statements for name in bound_names(s)}
        self.namespace: dict = {}

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
    names = []
    for node in ast.walk(ast.parse(statement)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names += [(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"]
    return names


def judge_class(proxy: Remote):
    """The judge's class named as the worker object's type, when the judge has imported its module."""
    info = remote_type(proxy)
    target = sys.modules.get(str(info.get("module")))  # never an import named by student data
    for part in str(info.get("name", "")).split("."):
        target = getattr(target, part, None)
    return target if isinstance(target, type) else None


def kernel_type(*args):
    if len(args) == 1 and isinstance(args[0], Remote):
        return judge_class(args[0]) or type(args[0])
    return type(*args)


def kernel_isinstance(obj, classes) -> bool:
    if not isinstance(obj, Remote):
        return isinstance(obj, classes)
    classes = classes if isinstance(classes, tuple) else (classes,)
    return any(c in (object, Remote, Translating) or _remote_isinstance(obj, c) for c in classes)


def _remote_isinstance(obj: Remote, cls: type) -> bool:
    try:
        return remote_isinstance(obj, f"{cls.__module__}.{cls.__qualname__}")
    except StudentError:  # a class the worker cannot import by that name: not the object's class
        return False


KERNEL_BUILTINS = {"type": kernel_type, "isinstance": kernel_isinstance}


class KernelNamespace(dict):
    """Globals of a test cell: the notebook's names on demand; `del` and re-binding reach the student's module."""

    def __init__(self, sub, imports: JudgeImports):
        super().__init__(__name__="__main__", **KERNEL_BUILTINS)
        self._sub, self._imports = sub, imports
        self._given: dict = {}  # notebook name -> the object the cell received for it
        self._hidden: set[str] = set()  # notebook names removed from the student's module

    def __missing__(self, key):
        if key in self._hidden or hasattr(builtins, key):
            raise KeyError(key)  # Python then looks in builtins, or raises NameError as a kernel would
        try:
            value = self._imports.resolve(key)
        except KeyError:
            value = translating(getattr(self._sub, key))  # MissingName: "your notebook does not define ..."
        self._given[key] = value
        dict.__setitem__(self, key, value)
        return value

    def __delitem__(self, key):
        received = key in self._given and dict.get(self, key) is self._given[key]
        notebook_name = received or (key not in self and key not in self._hidden and self._sub.defines(key))
        if key in self:
            dict.__delitem__(self, key)
        elif not notebook_name:
            raise KeyError(key)
        if notebook_name and key not in self._imports.namespace:
            self._sub.helpers.hide_global(key)
            self._hidden.add(key)

    def __setitem__(self, key, value):
        if key in self._hidden and value is self._given.get(key):
            self._sub.helpers.restore_global(key)
            self._hidden.discard(key)
        dict.__setitem__(self, key, value)

    def import_used(self, tree) -> None:
        """Run the imports the cell uses first: `type(x) == pd.Series` then finds pandas' classes loaded,
        whichever of the two names the cell reads first (and whatever ran in this process before)."""
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in self._imports.statements and node.id not in self:
                self[node.id]  # __missing__ runs the import

    def restore(self) -> None:
        if self._hidden:
            self._sub.helpers.restore_globals()
            self._hidden.clear()


def hidden_lines(source: str) -> set[int]:
    """1-based numbers of the lines inside `### BEGIN HIDDEN TESTS` regions."""
    regions = find_regions(source.split("\n"), "test cell")
    return {i + 1 for r in regions if r.kind == HIDDEN for i in range(r.begin, r.end + 1)}


def run_cell(source: str, filename: str, namespace: dict):
    """Run the cell; the value of its last statement when that is an expression (None otherwise)."""
    tree = ast.parse(source, filename)
    if isinstance(namespace, KernelNamespace):
        namespace.import_used(tree)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, filename, "exec"), namespace)
    if last is None:
        return None
    return eval(compile(ast.Expression(last.value), filename, "eval"), namespace)


def partial_credit(value, points: float) -> float:
    """nbgrader's rule: a number in [0, points] is the score; anything else is full credit."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or points <= 0:
        return 1.0
    return value / points if 0 <= value <= points else 1.0


def failed_assertion(exc: AssertionError, source: str, filename: str) -> AssertionError:
    """An assertion without a message: which line failed, unless it is a hidden one."""
    import traceback

    if str(exc):
        return exc
    lines, hidden = source.split("\n"), hidden_lines(source)
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename == filename and 0 < frame.lineno <= len(lines):
            if frame.lineno in hidden:
                return AssertionError("a hidden test failed")
            return AssertionError(f"this assertion failed: {lines[frame.lineno - 1].strip()}")
    return AssertionError("an assertion of this test failed")


def notebook_cell(name: str, points: float, part: str, imports: list[str], source: str):
    """A check that runs an imported test cell (hidden regions marked as in a source notebook) as a kernel would."""
    filename = f"<test cell {name}>"

    def run(sub, ref):
        namespace = KernelNamespace(sub, JudgeImports(imports))
        try:
            value = run_cell(source, filename, namespace)
        except AssertionError as exc:
            raise failed_assertion(exc, source, filename) from None
        finally:
            namespace.restore()
        return partial_credit(value, points)

    run.__name__ = f"cell_{name}"
    return check(name, points, part)(run)


def evaluate(program, imports: list[str], source: str, filename: str):
    """The value of the cell's last expression (None if none), run in a kernel namespace of `program`."""
    namespace = KernelNamespace(program, JudgeImports(imports))
    try:
        return run_cell(source, filename, namespace)
    finally:
        namespace.restore()


def same(actual, expected) -> bool:
    """Equal values, as a printed output would be: numpy and torch values compared element by element."""
    try:
        equal = actual == expected
        if hasattr(equal, "all"):  # an array or a tensor of comparisons
            return type(actual) is type(expected) and getattr(actual, "shape", None) == getattr(expected, "shape", None) \
                and bool(equal.all())
        return bool(equal)
    except Exception:  # noqa: BLE001 - values that cannot be compared are not the same
        return False


def reference_cell(name: str, points: float, part: str, imports: list[str], source: str, hidden: bool = False):
    """A check that runs a test cell on the submission and on the reference and compares the values."""
    filename = f"<test {name}>"

    def run(sub, ref):
        try:
            actual = evaluate(sub, imports, source, filename)
        except AssertionError as exc:
            raise (AssertionError("a hidden test failed") if hidden else failed_assertion(exc, source, filename)) from None
        expected = evaluate(ref, imports, source, filename)
        if not same(actual, expected):
            raise AssertionError("a hidden test failed" if hidden else
                                 f"this test gives {actual!r} where a correct notebook gives {expected!r}")

    run.__name__ = f"test_{name}"
    return check(name, points, part, "after_published" if hidden else "visible")(run)
