"""Proxies for objects that live in a worker: attribute access, calls, indexing and iteration are
requests to the worker; what comes back is plain data or another proxy."""
from __future__ import annotations

from typing import Any, Protocol

from autograder.sandbox.protocol import Handle


class Requester(Protocol):
    """What a proxy needs of its worker (client.WorkerProcess is one): a request, answered with data."""

    def request(self, op: str, *args: Any, what: str = ..., child_label: str | None = ...) -> Any: ...


HELPERS_LABEL = "grader helpers"  # the label of the assignment's worker helpers (judge.Program)


def described(owner: str, label: str) -> str:
    """How messages name what a proxy stands for: "your scaled_dot_product"; a worker helper is the grader's own
    code run on the student's, never "your grader helpers.f"."""
    if label == HELPERS_LABEL or label.startswith(HELPERS_LABEL + "."):
        helper = label[len(HELPERS_LABEL) + 1:] or "code"
        return f"the grader's helper {helper} (run on {owner} code)"
    return f"{owner} {label}"


class Remote:
    """A proxy for an object in a worker. Attribute access, calls, indexing and iteration are remote
    requests; what comes back is plain data or another Remote."""

    __slots__ = ("_worker", "_handle", "_label", "_callables")

    def __init__(self, worker: Requester, handle: Handle, label: str, callables: frozenset = frozenset()):
        object.__setattr__(self, "_worker", worker)
        object.__setattr__(self, "_handle", handle)
        object.__setattr__(self, "_label", label)
        # attributes known to be functions, classes or modules: never plain data, so `obj.name` is a handle with
        # that path, looked up in the worker where it is used (one request less per call)
        object.__setattr__(self, "_callables", callables)

    def _req(self, op, *args, what=None):
        w = object.__getattribute__(self, "_worker")
        return w.request(op, self, *args, what=what or self._ag_what)

    @property
    def _ag_what(self) -> str:
        w = object.__getattribute__(self, "_worker")
        return described(w.spec.owner, object.__getattribute__(self, "_label"))

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        label = object.__getattribute__(self, "_label")
        child = f"{label}.{name}" if label else name
        w = object.__getattribute__(self, "_worker")
        if name in object.__getattribute__(self, "_callables"):
            return Remote(w, object.__getattribute__(self, "_handle").child(name), child)
        return w.request("getattr", self, name, what=described(w.spec.owner, child), child_label=child)

    def __setattr__(self, name, value):
        self._req("setattr", name, value)

    def __call__(self, *args, **kwargs):
        return self._req("call", list(args), kwargs, False)

    def __getitem__(self, key):
        return self._req("getitem", key)

    def __setitem__(self, key, value):
        self._req("setitem", key, value)

    def __len__(self):
        return self._req("len")

    def __iter__(self):
        return iter(self._req("items"))

    def __repr__(self):
        h = object.__getattribute__(self, "_handle")
        return f"<remote {h.type_name}: {object.__getattribute__(self, '_label')}>"


_NAMED: dict[tuple[type, str], type] = {}  # in order of last use: the least recently used name goes first
_MOST_NAMED = 512  # type names whose classes are kept (one submission's many names never crowd out the next's)


def proxy_class(base: type, type_name: str) -> type:
    """`base` (Remote or a subclass) under the name of the worker object's type (`function`, `generator`, the
    student's own class), so that what reads type(value).__name__ (Python's own messages, a check's) names what
    student code returned rather than the proxy."""
    name = type_name.rsplit(".", 1)[-1]
    if not name.isidentifier():
        return base
    key = (base, name)
    cls = _NAMED.pop(key, None) or type(name, (base,), {"__slots__": (), "__module__": "student", "__qualname__": name})
    _NAMED[key] = cls  # the most recently used, last
    while len(_NAMED) > _MOST_NAMED:
        del _NAMED[next(iter(_NAMED))]
    return cls


def keep(fn: Remote, *args, **kwargs) -> Remote:
    """Call a remote callable and keep the result in the worker (e.g. a loss to call .backward() on)."""
    return fn._req("call", list(args), kwargs, True)


def remote_isinstance(obj, dotted_type: str) -> bool:
    """isinstance() evaluated in the worker, e.g. remote_isinstance(model, "torch.nn.Module")."""
    return isinstance(obj, Remote) and bool(obj._req("isinstance", dotted_type))


def remote_attr(obj: Remote, path: str):
    """A dotted attribute path read in one step inside the worker, e.g. remote_attr(model, "w.grad")
    (reading `model.w` first would copy the tensor to the judge and lose its .grad)."""
    return obj._req("getpath", path)


def remote_type(obj: Remote) -> dict:
    return obj._req("type")


def remote_items(obj: Remote) -> list:
    return obj._req("items")

