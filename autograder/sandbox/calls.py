"""What crosses to a worker with a request, and the calls that come back from it while it runs.

A request's arguments are encoded as plain data (values.py); what is not plain data travels as something the
worker can use without the judge unpickling anything: a proxy as its handle, a function of the judge's as a
JudgeFunction the worker calls back (it runs here, never in the worker), anything else pickled, in one pickle per
request (Pickled). The calls coming back, a stand-in asking for the reference's answer or student code calling a
test's function, are answered with plain data, or an error student code meets as an exception."""
from __future__ import annotations

import functools
import itertools
import types
import weakref
from typing import Callable

from autograder.sandbox.faults import StudentError, WorkerError
from autograder.sandbox.protocol import Handle, JudgeFunction, Pickled, ProtocolError
from autograder.sandbox.remote import Remote
from autograder.sandbox.values import Decoder, ValueEncoder

# what a test passes to student code as a function it calls back (a lambda, a def of the cell, a bound method,
# math.sin, functools.partial)
JUDGE_FUNCTION_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, functools.partial)
_NONCES = itertools.count()


class Calls:
    """The judge's side of one worker's calls: the judge's functions passed to it during the current check (a
    JudgeFunction's id is its place in them), and whether one is running (it may not call into the worker it was
    called from: the worker waits for its answer, not for a request). `worker`: the worker whose proxies travel
    as handles (another worker's cannot)."""

    def __init__(self, worker: object):
        self._worker = weakref.ref(worker)  # (no cycle: a worker nobody holds is freed at once, as before)
        self.judge_functions: list[Callable] = []
        self.running_judge_function = False

    def encoder(self, pickled: list, sources: bool) -> ValueEncoder:
        """The encoder of a request's arguments; the judge's objects that go pickled are appended to `pickled`."""
        return ValueEncoder(on_unknown=functools.partial(self.encode_remote, pickled), by_value=True, sources=sources)

    def new_check(self) -> None:
        """Forget the judge's functions passed during the last check: a JudgeFunction's id is valid within one check."""
        self.judge_functions.clear()

    def judge_function_reply(self, callback: dict, tensors: dict) -> tuple[dict, dict]:
        """Run the judge's function student code called, on the plain data it passed: the reply with its value."""
        enc = None
        try:
            payload = Decoder(tensors, no_handles).decode(callback.get("payload"))
            number = payload.get("id") if isinstance(payload, dict) else None
            if not isinstance(number, int) or not 0 <= number < len(self.judge_functions):
                raise ValueError("no such function was passed to the notebook in this check")
            args, kwargs = payload.get("args", []), payload.get("kwargs", {})
            if not isinstance(args, list) or not isinstance(kwargs, dict):
                raise ValueError("malformed call")
            self.running_judge_function = True
            try:
                value = self.judge_functions[number](*args, **kwargs)
            finally:
                self.running_judge_function = False
            enc = ValueEncoder(on_unknown=_not_plain, by_value=True)
            reply = {"callback_ok": enc.encode(value)}
        except (ProtocolError, WorkerError) as exc:
            reply, enc = {"callback_error": f"the test's function could not be called: {exc}"}, None
        except Exception as exc:  # noqa: BLE001 - the test's function raised: student code meets it as an error
            reply, enc = {"callback_error": f"the test's function raised {type(exc).__name__}: {exc}"}, None
        return reply, enc.tensors if enc else {}

    def encode_remote(self, pickled: list, obj):
        """What an object the ValueEncoder does not know travels as: a function of the judge's is called back, a proxy
        is its handle, anything else goes pickled (its place in `pickled`, the request's objects that do)."""
        if isinstance(obj, JUDGE_FUNCTION_TYPES) and not isinstance(obj, Remote):
            self.judge_functions.append(obj)
            return JudgeFunction(len(self.judge_functions) - 1, getattr(obj, "__name__", "function"),
                                 next(_NONCES))
        if isinstance(obj, Remote):
            if object.__getattribute__(obj, "_worker") is not self._worker():
                raise TypeError("an object from one worker cannot be passed to another")
            return object.__getattribute__(obj, "_handle")
        for i, earlier in enumerate(pickled):
            if earlier is obj:
                return Pickled(i)
        pickled.append(obj)
        return Pickled(len(pickled) - 1)

    def pickled(self, objects: list):
        """The judge's objects that are not data (a test cell's `nn.MSELoss()`, a DataLoader, a model) as one pickle
        the worker unpickles, so that what they share stays shared (the worker's objects in them travel as their
        handles). One a class or function the worker cannot import by name makes (one a test cell defines) cannot
        go: TypeError."""
        import io
        import pickle

        import torch

        def persistent_id(x):
            if isinstance(x, Remote):
                handle = self.encode_remote([], x)
                return (handle.id, handle.path)
            return None

        def dumped(value) -> bytes:
            buf = io.BytesIO()
            pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
            pickler.persistent_id = persistent_id  # type: ignore[method-assign]
            pickler.dump(value)
            return buf.getvalue()

        try:
            data = dumped(objects)
        except Exception:  # noqa: BLE001 - unpicklable: a lambda inside, a test cell's own class, a lock...
            culprit = objects[0]
            for obj in objects:
                try:
                    dumped(obj)
                except Exception:  # noqa: BLE001 - (the same, one at a time, to name the object)
                    culprit = obj
                    break
            raise TypeError(f"cannot send a {type(culprit).__name__} to the worker") from None
        return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def standin_reply(callbacks: Callable[[str, dict], object], callback: dict, tensors: dict) -> tuple[dict, dict]:
    """The reply to a stand-in's call (kind, payload), answered by `callbacks`; what goes wrong goes back as an
    error, which the student's code meets as an exception (the check then fails like any other)."""
    try:
        payload = Decoder(tensors, no_handles).decode(callback.get("payload"))
        value = callbacks(str(callback.get("kind")), payload)
        enc = ValueEncoder(on_unknown=_not_plain, by_value=True)
        reply = {"callback_ok": enc.encode(value)}
    except StudentError as exc:
        reply, enc = {"callback_error": f"the reference could not answer: {exc.describe()}"}, None
    except (WorkerError, ProtocolError, TypeError, ValueError, AttributeError) as exc:
        reply, enc = {"callback_error": f"the reference could not answer: {exc}"}, None
    return reply, enc.tensors if enc else {}


def called_name(op: str, args: tuple) -> str | None:
    """The notebook's top-level name a request calls (a Remote looked up by name in the module), if any."""
    if op not in ("call", "call_updating") or not args or not isinstance(args[0], Remote):
        return None
    handle = object.__getattribute__(args[0], "_handle")
    return handle.path if handle.id == 0 and handle.path and "." not in handle.path else None


def no_handles(handle: Handle):
    """The decoder's answer to a handle where none may come: ProtocolError."""
    raise ProtocolError("unexpected object handle")


def _not_plain(obj):
    raise TypeError(f"a {type(obj).__name__} cannot be sent to another worker")
