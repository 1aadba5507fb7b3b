"""The worker: the only process that runs student (or reference) code.

Started by `autograder.sandbox.client.WorkerProcess`: forked by the fork server, or as a new interpreter
`python -m autograder.entrypoints worker CONFIG` (AUTOGRADER_FORK_SERVER=0).
It confines itself (see isolation.py), then serves requests from the judge over a pipe: load the
extracted definitions, get attributes, call functions, and so on. Results go back as plain data; any
other object stays here and the judge receives a handle to it.
"""
from __future__ import annotations

import builtins
import contextlib
import faulthandler
import importlib
import io
import json
import linecache
import operator
import os
import random
import sys
import sysconfig
import traceback
import types

from typing import Any, Callable

import torch

from autograder.sandbox import standins
from autograder.sandbox.changes import Watch
from autograder.seeding import seed_torch
from autograder.sandbox.isolation import Confinement, confine
from autograder.sandbox.owned import owned_channel
from autograder.sandbox.protocol import (
    STACK_SIGNAL, Handle, read_message, unpack_sources, write_message,
)
from autograder.sandbox.values import Decoder, ValueEncoder

MODULE_NAME = "submission"
MAX_MESSAGE_CHARS = 2000
MAX_REPLY_ITEMS = 1_000_000  # values in one reply (a courtesy to the student: the judge bounds what it reads itself)


def exception_classes(exc: BaseException) -> list[str]:
    """Dotted names of the classes of an exception's type, most derived first (the judge gives a test cell the
    exception as the first of them it has: a student's subclass of ValueError is caught as a ValueError)."""
    names = []
    for cls in type(exc).__mro__[:32]:
        try:
            names.append(safe_str(f"{cls.__module__}.{cls.__qualname__}", 200))
        except BaseException:  # noqa: BLE001 - a class student code made unprintable: left out
            continue
    return names


def safe_str(obj, limit: int = MAX_MESSAGE_CHARS) -> str:
    """str() of an object that student code controls: may raise, may be huge."""
    try:
        text = str(obj)
    except BaseException:  # noqa: BLE001 - anything student code raises
        text = f"<{type(obj).__name__} that cannot be printed>"
    if not isinstance(text, str):
        text = "<unprintable>"
    return text if len(text) <= limit else text[:limit] + " ..."


def student_traceback(exc: BaseException) -> list[str]:
    """Frames of the student's own cells only (the worker's and libraries' frames say nothing to them)."""
    lines = []
    for (raw, _), frame in zip(traceback.walk_tb(exc.__traceback__), traceback.extract_tb(exc.__traceback__)):
        if frame.filename.startswith("<cell "):
            cell = frame.filename[6:-1]
            code = (frame.line or "").strip()
            name = getattr(raw.f_code, "co_qualname", frame.name)  # Value.__add__, not __add__ (Python 3.11+)
            lines.append(f"cell {cell}, line {frame.lineno}, in {name}: {code}"[:300])
    return lines[-8:]


def _raised_as_a_stub(exc: NotImplementedError) -> bool:
    """A NotImplementedError of the notebook's own `raise NotImplementedError...` (a stub left as handed out), not
    one a library raised under the student's code (torch's for an operation it lacks, nn.Module's for a missing
    forward): the innermost frame is a cell's, on a line that names it."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return True
    last = frames[-1]
    return last.filename.startswith("<cell ") and "NotImplementedError" in (last.line or "")


# the operators a judge's proxy forwards (remote.Remote): the names its requests may carry
BINARY_OPERATORS = {name: getattr(operator, name) for name in (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and_", "or_", "xor", "lshift", "rshift",
    "lt", "le", "gt", "ge")}
UNARY_OPERATORS: dict[str, Callable[..., Any]] = {"neg": operator.neg, "pos": operator.pos, "abs": operator.abs, "invert": operator.invert,
                   "bool": bool, "float": float, "int": int, "index": operator.index, "complex": complex,
                   "str": str, "repr": repr, "format": format, "round": round, "contains": operator.contains}


def _cache_lines(filename: str, first: int, source: str) -> None:
    """The lines of one statement of a cell, put in place among the cell's others in linecache: a traceback
    through any statement of the cell quotes its line (a later statement never blanks an earlier one's)."""
    entry = linecache.cache.get(filename)
    lines = entry[2] if entry is not None and len(entry) > 2 else []  # the cell's list, filled in place
    own = source.splitlines(True)
    if own and not own[-1].endswith("\n"):
        own[-1] += "\n"
    start = first - 1
    lines += ["\n"] * max(0, start + len(own) - len(lines))
    lines[start:start + len(own)] = own
    # no mtime: linecache.checkcache never drops the entry, nor reads its size
    linecache.cache[filename] = (0, None, lines, filename)


def _refuse(obj):
    raise TypeError(f"a {type(obj).__name__} is not plain data")


class JudgeRefused(RuntimeError):
    """The judge could not answer a stand-in's call (the reference raised, or the call cannot be sent)."""


# -- type questions answered from the object's real type --------------------------------------------------------
# isinstance(obj, cls) asks obj.__class__, which a property can make anything, and a metaclass's __instancecheck__
# or __subclasscheck__, which the submission can write. The judge asks these questions to decide points, so they are
# answered from type(obj) and its MRO; a metaclass's check counts only when a library defines it (typing's
# protocols, abc's registrations, torch's), and then on the real type. Real subclasses keep Python's answer.

def _library_code(fn) -> bool:
    """Whether `fn` is C code or Python code from a file of the installed libraries or the standard library."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return not isinstance(fn, types.FunctionType)
    if code.co_filename.startswith("<frozen "):  # the standard library's frozen modules (abc): the module itself
        module = sys.modules.get(getattr(fn, "__module__", None) or "")
        spec = getattr(module, "__spec__", None)
        return spec is not None and spec.origin == "frozen" and fn.__globals__ is vars(module)
    path = os.path.realpath(code.co_filename)
    return os.path.isfile(path) and path.startswith(_LIBRARY_DIRS)


_LIBRARY_DIRS = tuple(sorted({os.path.join(os.path.realpath(p), "") for p in (
    sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"])} |
    {os.path.join(os.path.realpath(p), "") for p in sys.path if "site-packages" in p or "dist-packages" in p}))


def _library_metaclass(cls) -> bool:
    meta = type(cls)
    return meta is not type and all(_library_code(getattr(meta, name, None))
                                    for name in ("__instancecheck__", "__subclasscheck__"))


def _mro(t: type) -> tuple:
    """The class's real MRO (type's own slot: a metaclass may define `__mro__` too)."""
    return _TYPE_MRO.__get__(t, type)


_TYPE_MRO = type.__dict__["__mro__"]
_TYPE_DICT = type.__dict__["__dict__"]


def _is_class(cls) -> bool:
    return issubclass(type(cls), type)


def _in_mro(cls, t: type) -> bool:
    return any(k is cls for k in _mro(t))  # identity: a metaclass's __eq__ could say anything


def _lies_about_class(t: type) -> bool:
    """Whether instances of `t` answer `__class__` with something of their own (a property, a class attribute)."""
    return any("__class__" in _TYPE_DICT.__get__(k, type) for k in _mro(t)[:-1])


def real_isinstance(obj, cls) -> bool:
    """isinstance() that an object cannot lie to: its real type's MRO, by identity, decides; a library's ABC or
    protocol is asked only where the class has a library's metaclass. `cls` may be a tuple, as for isinstance()."""
    if isinstance(cls, tuple):
        return any(real_isinstance(obj, c) for c in cls)
    t = type(obj)
    if _in_mro(cls, t):
        return True
    if not _is_class(cls) or not _library_metaclass(cls):
        return False
    # a library's check (an ABC's registry, a protocol's members), asked of the real type when the object lies
    return issubclass(t, cls) if _lies_about_class(t) else isinstance(obj, cls)


def real_issubclass(sub, cls) -> bool:
    """issubclass() with the same rules as real_isinstance; TypeError where `sub` is not a class, as Python's."""
    if isinstance(cls, tuple):
        return any(real_issubclass(sub, c) for c in cls)
    if not _is_class(sub):
        raise TypeError("issubclass() arg 1 must be a class")
    if _in_mro(cls, sub):
        return True
    return _is_class(cls) and _library_metaclass(cls) and issubclass(sub, cls)


_NUMPY_ERRORS = {"divide", "over", "under", "invalid"}
_NUMPY_ACTIONS = {"ignore", "warn", "raise", "print", "log"}


@contextlib.contextmanager
def _settings(context: dict):
    """torch's grad mode and numpy's floating-point error handling as a test cell's call had them in the judge."""
    with contextlib.ExitStack() as stack:
        if isinstance(context.get("grad"), bool):
            stack.enter_context(torch.set_grad_enabled(context["grad"]))
        errors = context.get("numpy_errors")
        if isinstance(errors, dict) and errors:
            import numpy

            stack.enter_context(numpy.errstate(**{k: v for k, v in errors.items()
                                                  if k in _NUMPY_ERRORS and v in _NUMPY_ACTIONS}))
        yield


class Worker:
    """Answers the judge's requests in a worker: holds the submission's module, the test helpers and every object
    handed out by number (0 the module, 1 the helpers). Each `op_NAME` answers the request "NAME" and returns (value,
    keep): `keep` sends a handle even where the value could go as data."""
    def __init__(self, out_stream, in_stream=None):
        self.out = out_stream
        self.inp = in_stream
        self.substituted: dict[str, object] = {}  # global name -> the submission's own object (see op_substitute)
        self.module = types.ModuleType(MODULE_NAME)
        sys.modules[MODULE_NAME] = self.module
        self.helpers = types.ModuleType("helpers")
        self.helpers.submission = self.module  # type: ignore[attr-defined]  # a module's attributes are its globals: the helper code's `submission`
        self.objects: dict[int, object] = {0: self.module, 1: self.helpers}
        self.kept: dict[int, int] = {}  # id() of an object handed out -> its handle's number (objects keeps it alive)
        self.next_id = 2
        self.stub_hit = False
        self._received: tuple[dict, Decoder] = ({}, Decoder({}, self._resolve))  # the request being answered
        self._number = None  # its number

    # -- encoding -------------------------------------------------------------------------------
    def _keep(self, obj) -> Handle:
        """A handle for `obj`: the same one each time the same object is handed out in a check, so that the judge
        can tell the same object from another (`a.b in a.parameters()`, a set of them)."""
        oid = self.kept.get(id(obj))
        if oid is None or self.objects.get(oid) is not obj:
            oid = self.next_id
            self.next_id += 1
            self.objects[oid] = obj
            self.kept[id(obj)] = oid
        return Handle(oid, safe_str(getattr(type(obj), "__qualname__", "object"), 100))

    def _resolve(self, handle: Handle):
        if handle.id not in self.objects:
            raise LookupError("this object is no longer available in the worker")
        target = self.objects[handle.id]
        for name in handle.path.split(".") if handle.path else ():
            target = getattr(target, name)
        return target

    def reply(self, value, keep: bool = False) -> None:
        """Send `value` as the answer to the request being handled: plain data encoded, anything else as a handle
        (always a handle with `keep`)."""
        enc = ValueEncoder(on_unknown=self._keep, snapshot=False, max_items=MAX_REPLY_ITEMS, autograd=True)
        data = enc.encode(self._keep(value) if keep else value)
        write_message(self.out, {"ok": data, "re": self._number}, enc.tensors)

    def reply_error(self, exc: BaseException, unsent: bool = False) -> None:
        """`unsent`: the call returned, but its value cannot be sent (the judge says so, not "raised")."""
        stub = isinstance(exc, NotImplementedError) and _raised_as_a_stub(exc)
        self.stub_hit = self.stub_hit or stub
        write_message(self.out, {"re": self._number, "error": {
            "type": safe_str(type(exc).__name__, 100),
            "mro": exception_classes(exc),
            "message": safe_str(exc),
            "traceback": [] if unsent else student_traceback(exc),
            "stub": stub,
            "unsent": unsent,
        }})

    # -- requests -------------------------------------------------------------------------------
    def handle(self, header: dict, tensors: dict) -> None:
        """Answer one request (`header["op"]`, arguments decoded from `tensors`): `load` as load() does, any other
        with exactly one reply or error, whatever student code raises (SystemExit included)."""
        op = header.get("op")
        self._number = header.get("n")  # the reply names the request it answers (client.WorkerProcess.roundtrip)
        if op == "load":
            return self.load(unpack_sources(header["units"], tensors))
        try:
            # in the try: a handle's path is looked up here, and what it raises is the reply
            decoder = Decoder(tensors, self._resolve, build_configs=True, judge_function=self._judge_function,
                              unpickle=True)
            args = decoder.decode(header.get("args", []))
            self._received = (tensors, decoder)
            fn = getattr(self, f"op_{op}", None)
            if fn is None:
                raise ValueError(f"unknown request {op!r}")
            result, keep = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - everything student code raises is reported
            if isinstance(exc, SystemExit):
                exc = RuntimeError(f"called sys.exit({safe_str(exc.code, 100)})")
            return self.reply_error(exc)
        try:
            self.reply(result, keep)
        except BaseException as exc:  # noqa: BLE001 - a result that cannot be encoded (student code in __reduce__...)
            self.reply_error(TypeError(safe_str(exc)), unsent=True)

    def load(self, units: list[dict]) -> None:
        """Run each extracted statement on its own, so one failing definition leaves the rest.
        A progress message before each lets the judge tell which one hung or killed the process."""
        errors = []
        for i, unit in enumerate(units):
            write_message(self.out, {"progress": i})
            filename = f"<cell {unit['cell']}>"
            source = "\n" * (unit["line"] - 1) + unit["source"]
            _cache_lines(filename, unit["line"], unit["source"])
            try:
                exec(compile(source, filename, "exec"), self.module.__dict__)
            except BaseException as exc:  # noqa: BLE001 - a cell that fails to run is reported, the next one still runs
                if isinstance(exc, SystemExit):
                    exc = RuntimeError(f"called sys.exit({safe_str(exc.code, 100)})")
                errors.append({"unit": i, "type": type(exc).__name__, "message": safe_str(exc, 500),
                               "traceback": student_traceback(exc)})
        defined = {}
        for name, value in list(vars(self.module).items()):
            if not name.startswith("__"):
                defined[name] = "module" if isinstance(value, types.ModuleType) else \
                    "callable" if callable(value) else "value"
        write_message(self.out, {"ok": {"__dict__": [[k, v] for k, v in defined.items()]},
                                 "load_errors": errors})

    def op_seed(self, seed):
        """Seed Python's, torch's and numpy's generators with `seed` and clear the stub flag: each check starts from
        the same random state."""
        random.seed(seed)
        seed_torch(seed)
        try:
            import numpy

            numpy.random.seed(seed)
        except ImportError:
            pass
        self.stub_hit = False
        return None, False

    def op_end_check(self, seed):
        """Whether student code hit a stub during the check; then the state every check starts from: a clean
        one (see op_reset), seeded with `seed` (see op_seed)."""
        stub = self.stub_hit
        self.op_reset()
        self.op_seed(seed)
        return stub, False

    def op_getattr(self, target, name):
        return getattr(target, name), False

    def op_getpath(self, target, path):
        for name in path.split("."):
            target = getattr(target, name)
        return target, False

    def op_setattr(self, target, name, value):
        setattr(target, name, value)
        return None, False

    def op_getitem(self, target, key):
        return target[key], False

    def op_setitem(self, target, key, value):
        target[key] = value
        return None, False

    def op_call(self, target, args, kwargs, keep):
        return target(*args, **kwargs), bool(keep)

    def op_call_updating(self, target, args, kwargs, keep, context=None):
        """A test cell's call: as op_call, under the cell's settings (`context`: torch's grad mode, numpy's error
        handling, as a kernel's call runs under the `with` blocks of its cell), with what it changed in the judge's
        objects it was given (changes.py); returns (value, changes)."""
        tensors, decoder = self._received
        watch = Watch(tensors, decoder.bundle or [])
        with _settings(context if isinstance(context, dict) else {}):
            value = target(*args, **kwargs)
        return (value, watch.changes()), bool(keep)

    def op_len(self, target):
        return len(target), False

    def op_items(self, target):
        """Materialise an iterable as a list (its elements become data or handles)."""
        out = []
        for x in target:
            out.append(x)
            if len(out) > 100_000:
                raise ValueError("iterable has more than 100000 items")
        return out, False

    def op_isinstance(self, target, dotted):
        """isinstance() with a class named by its dotted path ("torch.nn.Module"); a plain name is the notebook's
        own class ("Value"), else a built-in one."""
        module_name, _, attr = dotted.rpartition(".")
        if module_name:
            cls = getattr(__import__(module_name, fromlist=[attr]), attr)
        else:
            cls = getattr(self.module, attr, None) or getattr(builtins, attr)
        return real_isinstance(target, cls), False

    def op_instance_of(self, cls, obj):
        """isinstance(obj, cls) with the class itself (a test's `isinstance(x, sub.Value)`)."""
        return real_isinstance(obj, cls), False

    def op_subclass_of(self, cls, other):
        return real_issubclass(other, cls), False

    def op_construct(self, path, args, kwargs):
        """A library's function or class, "module:qualname", called with the worker's objects (a test cell's
        `torch.optim.SGD(model.parameters(), lr=0.1)`: an optimizer over the parameters themselves)."""
        module_name, _, qualname = str(path).partition(":")
        try:
            target: Any = importlib.import_module(module_name)
            for part in qualname.split("."):
                target = getattr(target, part)
        except (ImportError, AttributeError):
            raise LookupError(f"no such library callable in the worker: {path}") from None
        return target(*args, **kwargs), False

    def op_binop(self, target, name, other, reflected):
        """An operator with Python's own rules (`a + b`, then b.__radd__...), the object on the left or, with
        `reflected`, on the right (`2 * a`)."""
        fn = BINARY_OPERATORS[name]
        return (fn(other, target) if reflected else fn(target, other)), False

    def op_unop(self, target, name, *args):
        """-a, abs(a), bool(a), float(a), str(a), format(a, spec), round(a, n), `x in a`..."""
        return UNARY_OPERATORS[name](target, *args), False

    def op_type(self, target):
        """What the judge needs of an object's type without a handle: its name, module and MRO as dotted names."""
        t = type(target)
        return {"name": t.__qualname__, "module": t.__module__,
                "mro": [f"{c.__module__}.{c.__qualname__}" for c in t.__mro__]}, False

    def op_has(self, target, name):
        return hasattr(target, name), False

    def op_reset(self):
        """Forget every object handed out and put back what stand-ins replaced (the judge does this after
        each check). Handles are numbered from 2 again, so a check's requests and replies do not depend on
        the checks before it (recording.py replays them)."""
        self.objects = {0: self.module, 1: self.helpers}
        self.kept = {}
        self.next_id = 2
        standins.restore(self.module, self.substituted)
        self.substituted = {}
        return None, False

    # -- parts answered by the reference (checks with depends_on; see standins.py) -------------------------
    def op_substitute(self, names):
        """Replace these definitions of the submission by stand-ins answered through the judge."""
        pairs = [(str(n[0]), str(n[1])) if isinstance(n, list) and len(n) == 2 else (str(n), "") for n in names]
        replaced = standins.substitute(self.module, pairs, self.ask_judge)
        for name, original in replaced.items():
            self.substituted.setdefault(name, original)
        return sorted(replaced), False

    def op_tripwire(self, hangs):
        """Definitions that made an earlier check time out raise at once from now on (standins.tripwire); each
        hang's candidates, innermost first. Returns what each one replaced (or None)."""
        return [standins.tripwire(self.module, list(candidates)) if isinstance(candidates, list) else None
                for candidates in hangs], False

    def ask_judge(self, kind: str, payload: dict):
        """A stand-in's call, answered by the reference's worker, or a call of a function of the judge's."""
        enc = ValueEncoder(on_unknown=_refuse, by_value=True, snapshot=False)
        try:
            data = enc.encode(payload)
        except TypeError as exc:
            to = "the test's function" if kind == "judge_function" else "the reference"
            raise JudgeRefused(f"this call cannot be sent to {to}: {exc}") from None
        write_message(self.out, {"callback": {"kind": kind, "payload": data}}, enc.tensors)
        header, tensors = read_message(self.inp)
        if "callback_error" in header:
            raise JudgeRefused(safe_str(header["callback_error"], 500))
        return Decoder(tensors, _refuse, build_configs=True).decode(header.get("callback_ok"))

    def _judge_function(self, function_id: int, name: str):
        """What student code receives for a function of the judge's: calling it asks the judge to run it."""
        ask = self.ask_judge

        def call(*args, **kwargs):
            return ask("judge_function", {"id": function_id, "args": list(args), "kwargs": kwargs})

        call.__name__ = call.__qualname__ = name
        return call

    def op_answer_forward(self, target, args, kwargs, params, training):
        """A stand-in's forward pass, run here on the reference's own definition (standins.answer_forward)."""
        return standins.answer_forward(target, args, kwargs, params, training), False

    def op_answer_backward(self, target, args, kwargs, params, training, rng, grad_outputs, needs):
        """A stand-in's backward pass, run here on the reference's own definition (standins.answer_backward)."""
        return standins.answer_backward(target, args, kwargs, params, training, rng, grad_outputs, needs), False

    def op_describe_module(self, module):
        """The shape of a module the judge must stand in for (standins.describe_module)."""
        return standins.describe_module(module), False

    def op_helpers(self, source):
        """Run the test's helper source in the helpers module, where `submission` is the submission's module."""
        exec(compile(source, "<helpers>", "exec"), self.helpers.__dict__)
        return None, False


class CappedOutput(io.TextIOBase):
    """sys.stdout / sys.stderr of a worker: what student code prints goes to the worker's log up to `limit`
    characters, and beyond that is dropped without a word. A print never fails (the log's file-size limit would
    otherwise make a student's own later print or progress bar raise "File too large")."""

    def __init__(self, stream, limit: int):
        self.stream, self.left = stream, limit

    def write(self, text: str) -> int:
        """Pass on what fits under the limit, drop the rest; always reports all of `text` written."""
        if self.left > 0:
            try:
                self.stream.write(text[:self.left])
            except (OSError, ValueError):  # the file-size limit, a closed stream: the rest is dropped
                self.left = 0
            self.left -= len(text)
        return len(text)

    def flush(self) -> None:
        """Flush the log; a failure ends the output (nothing more is written), it never raises."""
        try:
            self.stream.flush()
        except (OSError, ValueError):
            self.left = 0

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]  # the log's, as libraries that print expect
        return getattr(self.stream, "encoding", "utf-8")

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.stream.fileno()


def run_worker(config_json: str) -> None:
    """A worker's life: confine itself as `config_json` says, say it is ready, then answer requests until its
    input ends. Entered from the fork server (forkserver_loop._become_worker) or as
    `python -m autograder.entrypoints worker CONFIG` (AUTOGRADER_FORK_SERVER=0)."""
    sys.argv = ["autograder.sandbox.worker", config_json]  # student code sees its worker's own settings, nothing else
    config = json.loads(config_json)
    fd_in, fd_out = config["fd_in"], config["fd_out"]
    torch.set_num_threads(config.get("threads", 1))
    conf = Confinement(**config["confinement"])
    status = confine(conf)
    # the working directory (the assignment's shipped files) comes first on the path, as in a kernel started
    # beside the notebook: `from helpers import make_data` finds a shipped helpers.py
    sys.path.insert(0, os.getcwd())
    limit = conf.file_bytes // 2 if conf.file_bytes else 1 << 30  # half: room left for a crash's traceback
    sys.stdout, sys.stderr = CappedOutput(sys.stdout, limit), CappedOutput(sys.stderr, limit)
    inp, out = owned_channel(fd_in, fd_out)  # a process forked from this one exits when it touches them
    sys.stdin = open(os.devnull)
    # where the code is when a request hangs: the judge sends this signal before it kills the worker (client.Hang)
    faulthandler.register(STACK_SIGNAL, file=2, all_threads=True, chain=False)
    worker = Worker(out, inp)
    write_message(out, {"ready": status, "pid": os.getpid()})
    while True:
        try:
            header, tensors = read_message(inp)
        except EOFError:
            os._exit(0)
        worker.handle(header, tensors)

