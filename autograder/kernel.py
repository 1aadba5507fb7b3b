"""Notebook test cells run in the judge with the meaning they have in the student's kernel.

A test cell (a notebook's own, or one `autograder import` converted) runs in the judge, where every verdict is
computed; student code stays in its worker. What holds, for every name the cell does not bind itself:
- a name one of the notebook's imports binds is that import, run in the judge; a built-in's name is the built-in,
  unless the assignment's own notebook defines it (`def sum(a, b)`); any other is the notebook's own definition, a
  proxy to the worker;
- an exception the student's code raises arrives as an instance of a class deriving from StudentError and from
  the most derived class of its type's MRO that the judge has (a built-in type always: `except ValueError`
  catches a student's ValueError, and an AssertionError is an AssertionError; `np.linalg.LinAlgError` too when
  the judge has numpy loaded), with the student's message;
- `next()` and `for` step through a student's generator one item per request, as it runs;
- the cell's own objects given to the student's code (a model and an optimizer it built, a tensor, a numpy array)
  travel as copies, and what the call does to them is written back (sandbox/changes.py): the student's
  `train_one_epoch(model, loader, optimizer)` trains the cell's model, `fill_(t)` fills the cell's tensor;
- a call runs under the cell's `with torch.no_grad():` and `with np.errstate(...)` as it would in the kernel;
- `type(x)` and `isinstance(x, C)` of a proxy answer with the judge's class of the same name when the judge has
  its module loaded (`type(series) == pd.Series`); plain data (numbers, strings, containers, tensors, numpy
  arrays) is the judge's own already;
- `del name` of a notebook name removes it from the student's module (the student's functions then meet a
  NameError, and so does the cell) until the cell binds it back to what it read or the check ends;
- test cells share their variables in notebook order: a cell that reads a name an earlier cell of its part binds
  runs after those cells, replayed in the same namespace, and after the earlier cells of other parts that bind a
  name it reads (their failures are theirs, not this cell's: a name they did not get to bind is reported as such).
What does not hold is named when the notebook is built (`cell_names.cell_caveats`): binding a notebook name to another
value changes the cell's name only, never what the student's functions call; IPython magics are not Python. Replayed cells run their calls again, so a cell that
changes the student's state (appends to a global) changes it once per replay.
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import operator
import sys
import types
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from autograder.cell_names import bound_at_top, cell_tree, shared_with
from autograder.notebook.extract import CACHED_SOURCE_CHARS, per_source
from autograder.notebook.markers import hidden_lines
from autograder.sandbox import (
    Handle, PROTOCOL_METHODS, Remote, StudentError, WorkerError, keep, proxy_class, remote_isinstance, remote_type,
)


class Imports(Protocol):
    """The notebook's import statements, run in the judge on first use (program.JudgeImports is one)."""

    namespace: dict

    def binds(self, name: str) -> bool:
        """Whether one of the notebook's imports binds `name`."""

    def resolve(self, name: str):
        """The object the import binding `name` gives, imported in the judge on first use; KeyError where there is
        none."""


# -- the student's exceptions as the types a test cell catches ---------------------------------------------

_TRANSLATED: dict[type, type[StudentError]] = {}


def judge_exception_class(dotted: str) -> type | None:
    """The judge's exception class of that dotted name, if its module is loaded here (never imported for it).
    Never one of the grader's own (a check's Fail or Pending, a worker error): a student's exception named so is
    only the student's."""
    module, _, name = dotted.rpartition(".")
    target = sys.modules.get(module)
    for part in name.split("."):
        target = getattr(target, part, None)
    if not (isinstance(target, type) and issubclass(target, BaseException)):
        return None
    return None if str(getattr(target, "__module__", "")).partition(".")[0] == "autograder" else target


def _translated(base: type) -> type[StudentError] | None:
    if base not in _TRANSLATED:
        try:
            _TRANSLATED[base] = type(base.__name__, (base, StudentError), {"__module__": "student"})
        except TypeError:  # a base whose layout cannot be combined with StudentError's
            return None
    return _TRANSLATED[base]


def as_kernel_exception(exc: StudentError) -> StudentError:
    """The student's exception as an instance of the judge's class for its type (and still a StudentError)."""
    for dotted in exc.mro or [f"builtins.{exc.type}"]:
        base = judge_exception_class(dotted)
        if base is None or base in (BaseException, Exception, object) or not issubclass(base, Exception):
            continue
        cls = _translated(base)
        if cls is not None:
            out = cls.__new__(cls)
            out.__dict__.update(vars(exc))
            out.args = (exc.message,) if exc.message else ()
            return out
    return exc


def translating(value):
    """A proxy whose student exceptions arrive as kernel exceptions; plain data as it is."""
    if isinstance(value, Remote) and not isinstance(value, Translating):
        handle = object.__getattribute__(value, "_handle")
        return proxy_class(Translating, handle.type_name)(*(object.__getattribute__(value, slot)
                                                            for slot in Remote.__slots__))
    return value


class Translating(Remote):
    """A Remote whose calls, attributes, items and iteration raise a student's exceptions as kernel exceptions."""

    __slots__ = ()

    def __call__(self, *args, **kwargs):
        # the call works on the cell's objects as in a kernel: what it changes in them is written back (changes.py)
        """Call the object in its worker as a cell's call: under the cell's settings, its changes to the cell's
        objects written back."""
        return _translate(lambda: Remote._req(self, "call_updating", list(args), kwargs, False, _cell_settings()))

    def __getattr__(self, name):
        return _translate(Remote.__getattr__, self, name)

    def __getitem__(self, key):
        return _translate(Remote.__getitem__, self, key)

    def __len__(self):
        return _translate(Remote.__len__, self)

    def __iter__(self):
        if Remote._req(self, "has", "__next__"):  # an iterator (a generator): one item per request, as it runs
            return self
        return iter([translating(x) for x in _translate(Remote.__iter__, self)])

    def __next__(self):
        return _translate(lambda: Remote.__call__(Remote._req(self, "getpath", "__next__")))


def _translated_method(name: str):
    method = getattr(Remote, name)
    return lambda self, *args: _translate(method, self, *args)


for _name in PROTOCOL_METHODS:  # `a + b`, `-a`, `bool(a)`... raise the student's exceptions as a kernel would
    setattr(Translating, _name, _translated_method(_name))


def _cell_settings() -> dict:
    """The settings a kernel's call would run under, as the cell has them here (`with torch.no_grad():`,
    `with np.errstate(over="raise"):`): the worker runs the call under them."""
    import torch

    settings: dict = {"grad": torch.is_grad_enabled()}
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        settings["numpy_errors"] = numpy.geterr()
    return settings


def _translate(op, *args, **kwargs):
    try:
        return translating(op(*args, **kwargs))
    except StudentError as exc:
        raise as_kernel_exception(exc) from None


# -- type questions about proxies ----------------------------------------------------------------------------

def judge_class(proxy: Remote):
    """The judge's class named as the worker object's type, when the judge has imported its module."""
    info = remote_type(proxy)
    target = sys.modules.get(str(info.get("module")))  # never an import named by student data
    for part in str(info.get("name", "")).split("."):
        target = getattr(target, part, None)
    return target if isinstance(target, type) else None


def kernel_type(*args):
    """type() in a test cell: a proxy's type is the judge's class of that name where it has one (kernel.judge_class),
    else the proxy's own; type(name, bases, dict) as Python's."""
    if len(args) == 1 and isinstance(args[0], Remote):
        return judge_class(args[0]) or type(args[0])
    return type(*args)


def kernel_isinstance(obj, classes) -> bool:
    """isinstance() in a test cell: for a proxy, asked of the object in its worker (a class the judge has by name, or
    the student's own); for any other object, Python's."""
    if not isinstance(obj, Remote):
        return isinstance(obj, classes)
    classes = classes if isinstance(classes, tuple) else (classes,)
    return any(c in (object, Remote, Translating) or _remote_isinstance(obj, c) for c in classes)


def _remote_isinstance(obj: Remote, cls) -> bool:
    if isinstance(cls, Remote):  # the notebook's own class: asked of that class in the worker
        return bool(_translate(Remote.__instancecheck__, cls, obj))
    try:
        return remote_isinstance(obj, f"{cls.__module__}.{cls.__qualname__}")
    except StudentError:  # a class the worker cannot import by that name: not the object's class
        return False


# -- library calls on the student's objects -----------------------------------------------------------------

def kernel_call(fn, *args, **kwargs):
    """Every call of a test cell (see _RemoteCalls). A library's function or class called with the student's
    objects (`torch.optim.SGD(model.parameters(), lr=0.1)`, `clip_grad_norm_(model.parameters(), 1.0)`) runs in
    the student's worker, on the objects themselves, as in the kernel: an optimizer built in the grader would hold
    copies of the parameters. Anything else runs here."""
    proxy = None if isinstance(fn, Remote) else _first_proxy(args, kwargs)
    path = library_path(fn) if proxy is not None else None
    if path is None:
        return fn(*args, **kwargs)
    if judges(path):  # a verdict is the judge's: the student's values come here, the expected ones never go there
        return fn(*_as_values(path, args), **dict(zip(kwargs, _as_values(path, tuple(kwargs.values())))))
    worker = object.__getattribute__(proxy, "_worker")
    try:
        return translating(worker.request("construct", path, list(args), kwargs, what=f"{path.replace(':', '.')}"))
    except StudentError as exc:
        if exc.type == "LookupError" and exc.message.startswith(NO_LIBRARY_CALLABLE):  # not there: here after all
            return fn(*args, **kwargs)
        raise as_kernel_exception(exc) from None


NO_LIBRARY_CALLABLE = "no such library callable in the worker"  # worker.op_construct's LookupError
# library functions that judge (compare, assert) rather than act on the student's objects: they run in the judge
_JUDGING_MODULES = ("unittest", "pytest")
_JUDGING_NAMES = frozenset({"allclose", "isclose", "array_equal", "array_equiv", "equal", "approx"})


def judges(path: str) -> bool:
    """Whether the library callable "module:qualname" judges: a testing module's (torch.testing, numpy.testing),
    unittest's or pytest's, an assert_* or a comparison (np.allclose, torch.equal). pandas' are not counted: a
    DataFrame cannot come to the judge, so its comparisons still run beside it in the worker."""
    module, _, qualname = path.partition(":")
    name = qualname.rpartition(".")[2]
    if module.partition(".")[0] == "pandas":
        return False
    return (module.partition(".")[0] in _JUDGING_MODULES or "testing" in module.split(".")
            or "_testing" in module.split(".") or name.startswith("assert") or name in _JUDGING_NAMES)


def _as_values(path: str, values: tuple) -> list:
    """`values` with each proxy (also in a list or tuple) brought here as the library's data: torch's functions get
    torch.as_tensor(x), others numpy.asarray(x), each computed in the worker from the student's object (what a
    fake makes of it is its own business: no expected value goes there)."""
    import torch

    convert: Callable | None = torch.as_tensor if path.startswith("torch") else None
    if convert is None:
        try:
            import numpy
            convert = numpy.asarray
        except ImportError:
            return list(values)

    def value(x):
        if isinstance(x, Remote):
            return kernel_call(convert, x)
        if type(x) in (list, tuple):
            return type(x)(value(item) for item in x)
        return x
    return [value(x) for x in values]


def _first_proxy(args, kwargs):
    for value in (*args, *kwargs.values()):
        for item in (value if type(value) in (list, tuple) else (value,)):
            if isinstance(item, Remote):
                return item
    return None


def library_path(fn) -> str | None:
    """"module:qualname" of a library's function or class the worker can import by that name; None for built-ins,
    a test cell's own definitions, bound methods and the grader's own code."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not (isinstance(module, str) and isinstance(qualname, str)) or "<" in qualname:
        return None
    if module.partition(".")[0] in ("builtins", "__main__", "autograder") or module not in sys.modules:
        return None
    found: object = sys.modules[module]
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return f"{module}:{qualname}" if found is fn else None


class _RemoteCalls(ast.NodeTransformer):
    """Every call `f(...)` of a cell becomes `__ag_call__(f, ...)` (kernel_call), but for the built-ins that read
    their caller's frame."""

    CALL_NAME = "__ag_call__"
    FRAME_READERS = frozenset({"super", "locals", "globals", "vars", "dir", "eval", "exec", "breakpoint",
                               "currentframe", "_getframe", CALL_NAME})

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if name in self.FRAME_READERS:
            return node
        call = ast.Call(func=ast.Name(self.CALL_NAME, ast.Load()), args=[func, *node.args], keywords=node.keywords)
        return ast.copy_location(call, node)


KERNEL_BUILTINS = {"type": kernel_type, "isinstance": kernel_isinstance, "__ag_call__": kernel_call}


# -- the student's module: names a cell deletes -----------------------------------------------------------------

class StudentGlobals:
    """The student's module's globals, in its worker: a name popped out and put back, within one check."""

    def __init__(self, sub):
        self._sub = sub
        self._popped: dict[str, Remote] = {}

    def _method(self, name: str) -> Remote:
        program = object.__getattribute__(self._sub, "_program")  # a program.ProgramProxy's program
        program.start()
        return Remote(program.worker, Handle(0, "module", f"__dict__.{name}"), "the notebook's globals")

    def hide(self, name: str) -> None:
        """Pop `name` from the student's module (a cell's `del name`), keeping its object to put back."""
        self._popped[name] = keep(self._method("pop"), name)

    def restore(self, name: str) -> None:
        """Put back the object `hide` popped as `name`; KeyError where it was not hidden."""
        self._method("__setitem__")(name, self._popped.pop(name))

    def restore_all(self) -> None:
        """Put back every hidden name; where the worker is gone, forget them (its module went with it)."""
        try:
            for name in list(self._popped):
                self.restore(name)
        except (WorkerError, StudentError):  # the worker is gone (or restarting): its module goes with it
            self._popped.clear()


class KernelNamespace(dict):
    """Globals of a test cell: the notebook's names on demand; `del` and re-binding reach the student's module."""

    def __init__(self, sub, imports: Imports, base: dict | None = None, interface=None):
        super().__init__({"__name__": "__main__", **KERNEL_BUILTINS, **(base or {})})
        self._sub, self._imports, self._globals = sub, imports, StudentGlobals(sub)
        self._interface = interface  # the reference: a built-in's name it binds itself is the notebook's
        self._given: dict = {}  # notebook name -> the object the cell received for it
        self._hidden: set[str] = set()  # notebook names removed from the student's module
        self.unbound: dict[str, str] = {}  # a name earlier cells of the part did not get to bind -> why

    def __missing__(self, key):
        if key in self.unbound:
            raise AssertionError(self.unbound[key])
        if key in self._hidden or (hasattr(builtins, key) and not self._notebook_builtin(key)):
            raise KeyError(key)  # Python then looks in builtins, or raises NameError as a kernel would
        try:
            value = self._imports.resolve(key)
        except KeyError:
            value = translating(getattr(self._sub, key))  # MissingName: "your notebook does not define ..."
        self._given[key] = value
        dict.__setitem__(self, key, value)
        return value

    def _notebook_builtin(self, key: str) -> bool:
        """A built-in's name the assignment's own notebook defines (`def sum(a, b)`) is the notebook's, as in a
        kernel; a submission that alone redefines `len` changes nothing a test cell reads."""
        return self._interface is not None and self._interface.binds_at_top(key)

    def __delitem__(self, key):
        received = key in self._given and dict.get(self, key) is self._given[key]
        notebook_name = received or (key not in self and key not in self._hidden and self._sub.defines(key))
        if key in self:
            dict.__delitem__(self, key)
        elif not notebook_name:
            raise KeyError(key)
        if notebook_name and key not in self._imports.namespace:
            self._globals.hide(key)
            self._hidden.add(key)

    def __setitem__(self, key, value):
        if key in self._hidden and value is self._given.get(key):
            self._globals.restore(key)
            self._hidden.discard(key)
        dict.__setitem__(self, key, value)

    def import_used(self, names: Iterable[str]) -> None:
        """Run the imports the cell uses first (`names`: every name it mentions, in order): `type(x) == pd.Series`
        then finds pandas' classes loaded, whichever of the two names the cell reads first (and whatever ran in this
        process before)."""
        for name in names:
            if self._imports.binds(name) and name not in self:
                self[name]  # __missing__ runs the import

    def restore(self) -> None:
        """After a check: put back what the cell deleted from the student's module and forget its hidden names."""
        self._globals.restore_all()
        self._hidden.clear()


# -- running cells ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _CompiledCell:
    names: tuple[str, ...]  # every name the cell mentions as written, in order (import_used)
    body: types.CodeType  # every statement but a last expression
    last: types.CodeType | None  # the last statement when it is an expression: the value the cell shows


def _compile_cell(source: str, filename: str) -> _CompiledCell:
    tree = ast.parse(source, filename)
    names = tuple(dict.fromkeys(n.id for n in ast.walk(tree) if isinstance(n, ast.Name)))  # before the rewrite
    tree = ast.fix_missing_locations(_RemoteCalls().visit(tree))
    last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    body = ast.Module(body=tree.body[:-1] if last is not None else list(tree.body), type_ignores=[])
    shown = compile(ast.Expression(last.value), filename, "eval") if last is not None else None
    return _CompiledCell(names, compile(body, filename, "exec"), shown)


_compiled_cell = functools.lru_cache(maxsize=1024)(_compile_cell)


def run_cell(source: str, filename: str, namespace: dict):
    """Run the cell; the value of its last statement when that is an expression (None otherwise)."""
    cell = (_compile_cell if len(source) > CACHED_SOURCE_CHARS else _compiled_cell)(source, filename)
    if isinstance(namespace, KernelNamespace):
        namespace.import_used(cell.names)
    elif _RemoteCalls.CALL_NAME not in namespace:
        namespace[_RemoteCalls.CALL_NAME] = kernel_call  # (a namespace of the caller's own: the cell's calls need it)
    exec(cell.body, namespace)
    return None if cell.last is None else eval(cell.last, namespace)


def run_earlier(cells: list[tuple[str, str]], namespace: KernelNamespace) -> None:
    """Replay the earlier test cells of the part, (name, source) in notebook order, as a kernel ran them: one that
    fails stops there, and the names it did not get to bind say so when this cell reads them."""
    for name, source in cells:
        try:
            run_cell(source, f"<test cell {name}>", namespace)
        except WorkerError:
            raise
        except Exception as exc:  # noqa: BLE001 - the earlier cell's own failure, graded by its own check
            why = f"the earlier test cell {name!r} did not finish ({type(exc).__name__}), so "
            for variable in sorted(bound_at_top(source) - set(namespace)):
                namespace.unbound.setdefault(variable, why + f"`{variable}` is not set")


def run_test_cell(source: str, filename: str, namespace: KernelNamespace,
                  earlier: Sequence[tuple[str, str]] = (), replay_all: bool = False):
    """Run a test cell after the earlier cells of its part it shares variables with (`replay_all`: after every
    one of them, as their random draws move the generators it draws from); the student's module is whole again
    afterwards, whatever the cell deleted. The value of its last expression (or None)."""
    cells = list(earlier) if replay_all else shared_with(source, list(earlier))
    with modules_kept(any(patches_modules(s) for s in [source, *(c for _, c in cells)])):
        try:
            run_earlier(cells, namespace)
            return run_cell(source, filename, namespace)
        finally:
            namespace.restore()


@per_source
def patches_modules(source: str) -> bool:
    """Whether the cell may change a module's attributes: it assigns or deletes an attribute (`np.linalg.solve =
    None`, nbgrader's way to forbid a function) or calls setattr/delattr. A syntax error: no (the cell fails)."""
    try:
        tree = cell_tree(source)
    except SyntaxError:
        return False
    return any((isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)))
               or (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                   and node.func.id in ("setattr", "delattr")) for node in ast.walk(tree))


@contextlib.contextmanager
def modules_kept(guard: bool):
    """With `guard`, every module of the judge has its attributes back afterwards: what one cell patches never
    reaches another check or another submission. Modules the cell imported stay, as do the attributes binding
    them to their packages (`numpy.linalg` on numpy)."""
    if not guard:
        yield
        return
    saved = [(module, dict(module.__dict__)) for module in list(sys.modules.values())
             if isinstance(module, types.ModuleType)]
    try:
        yield
    finally:
        for module, before in saved:
            _put_back(module.__dict__, before)


def _put_back(now: dict, before: dict) -> None:
    if list(now) == list(before) and all(map(operator.is_, now.values(), before.values())):
        return  # unchanged (the common case, checked at C speed)
    for key in [k for k in now if k not in before and not isinstance(now[k], types.ModuleType)]:
        del now[key]
    for key, value in before.items():
        if now.get(key, now) is not value:
            now[key] = value


def failing_line(exc: BaseException, filename: str, source: str) -> int:
    """The line (1-based) of the cell `source`, run as `filename`, that the exception passed through last (where the
    cell called what raised it); 0 when it did not come through the cell."""
    import traceback

    n_lines = source.count("\n") + 1
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename == filename and 0 < (frame.lineno or 0) <= n_lines:
            return frame.lineno or 0
    return 0


def assertion_text(exc: AssertionError, filename: str, source: str, show_line: bool = True) -> str:
    """What a student reads of an assertion the cell `source` (run as `filename`) failed: "a hidden test failed" on
    a hidden line, whatever its message (np.testing's would show the hidden values); else its message; else, with
    `show_line`, the line that failed; else nothing."""
    line = failing_line(exc, filename, source)
    if line and line in hidden_lines(source):
        return "a hidden test failed"
    if str(exc):
        return str(exc)
    return f"this assertion failed: {source.split(chr(10))[line - 1].strip()}" if line and show_line else ""


def hidden_failure(exc: BaseException, filename: str, source: str) -> str | None:
    """What a student reads of an error (not an assertion: assertion_text) that the cell `source` met on a hidden line:
    its type only ("a hidden test failed (RuntimeError)"), since its message may show the hidden values (torch's
    "size of tensor b (3)"); None when it did not come through a hidden line."""
    line = failing_line(exc, filename, source)
    return f"a hidden test failed ({type(exc).__name__})" if line and line in hidden_lines(source) else None
