"""Proxies for objects that live in a worker: attribute access, calls, indexing, iteration, operators (`a + b`,
`2 * a`, `-a`, `a < b`), conversions (`float(a)`, `str(a)`, f-strings), truth, `in` and `isinstance(x, sub.Value)`
are requests to the worker, answered by the object with Python's own rules; what comes back is plain data or another
proxy. `==` and hashing are the identity of the worker's object (never its own __eq__, which could say anything)."""
from __future__ import annotations

from typing import Any, Protocol

from autograder.sandbox.protocol import Handle


class Requester(Protocol):
    """What a proxy needs of its worker (client.WorkerProcess is one): a request, answered with data."""

    def request(self, op: str, *args: Any, what: str = ..., child_label: str | None = ...) -> Any:
        """Send request `op` with `args` to the worker and return its answer, decoded (data, or a Remote labelled
        `child_label`); `what` names the request in messages about a failure."""


HELPERS_LABEL = "grader helpers"  # the label of the assignment's worker helpers (program.Program)


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
        """Call the object in its worker with these arguments; the result is data or another Remote."""
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

    # -- Python's protocols, answered by the object in its worker ---------------------------------------------
    def __eq__(self, other):
        """The same object of the same worker (handles are one per object within a check): `a.b in a.params()`
        and sets of them work as on the objects themselves; never the student's own __eq__, which could say
        anything."""
        if not isinstance(other, Remote):
            return NotImplemented
        return (object.__getattribute__(self, "_worker") is object.__getattribute__(other, "_worker")
                and object.__getattribute__(self, "_handle") == object.__getattribute__(other, "_handle"))

    def __ne__(self, other):
        same = self.__eq__(other)
        return same if same is NotImplemented else not same

    def __hash__(self):
        return hash((id(object.__getattribute__(self, "_worker")), object.__getattribute__(self, "_handle")))

    def __bool__(self):
        return self._req("unop", "bool")

    def __contains__(self, item):
        return self._req("unop", "contains", item)

    def __str__(self):
        return self._shown("str")

    def __format__(self, spec):
        return self._shown("format", spec)

    def _shown(self, how: str, *args) -> str:
        """str() or format() of the object, as its own __str__ gives it; the proxy's repr where that cannot be had
        (a message that quotes it is still written)."""
        answers = getattr(object.__getattribute__(self, "_worker"), "can_answer", None)
        if answers is not None and not answers():  # a worker that is gone is never started again for a message's sake
            return repr(self)
        try:
            text = self._req("unop", how, *args)
        except Exception:  # noqa: BLE001 - its __str__ raising or hanging, the worker dying: the placeholder
            return repr(self)
        return text if isinstance(text, str) else repr(self)

    def _ag_repr(self) -> str:
        """repr() of the object itself, as its own __repr__ gives it (a DataFrame's table), or the proxy's."""
        return self._shown("repr")

    def __float__(self):
        return self._req("unop", "float")

    def __int__(self):
        return self._req("unop", "int")

    def __index__(self):
        return self._req("unop", "index")

    def __complex__(self):
        return self._req("unop", "complex")

    def __round__(self, *ndigits):
        return self._req("unop", "round", *ndigits)

    def __instancecheck__(self, instance):
        """isinstance(x, sub.Value): asked of the class in the worker."""
        return self._req("instance_of", instance)

    def __subclasscheck__(self, subclass):
        return self._req("subclass_of", subclass)


def _operator(name: str, reflected: bool = False, unary: bool = False):
    if unary:
        return lambda self: self._req("unop", name)
    return lambda self, other: self._req("binop", name, other, reflected)


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and_", "or_", "xor", "lshift",
              "rshift"):
    setattr(Remote, f"__{_name.rstrip('_')}__", _operator(_name))
    setattr(Remote, f"__r{_name.rstrip('_')}__", _operator(_name, reflected=True))
for _name in ("lt", "le", "gt", "ge"):  # Python itself swaps a comparison whose left side declines
    setattr(Remote, f"__{_name}__", _operator(_name))
for _name in ("neg", "pos", "abs", "invert"):
    setattr(Remote, f"__{_name}__", _operator(_name, unary=True))

# the protocol methods above, for Translating (autograder.kernel) to wrap
PROTOCOL_METHODS = ("__bool__", "__contains__", "__float__", "__int__", "__index__", "__complex__", "__round__",
                    "__instancecheck__", "__subclasscheck__",
                    *(f"__{n}__" for n in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and",
                                            "or", "xor", "lshift", "rshift")),
                    *(f"__r{n}__" for n in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and",
                                             "or", "xor", "lshift", "rshift")),
                    "__lt__", "__le__", "__gt__", "__ge__", "__neg__", "__pos__", "__abs__", "__invert__")


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
    """The type of the object in its worker, as op_type describes it: {"name", "module", "mro"}."""
    return obj._req("type")


def remote_items(obj: Remote) -> list:
    """The object in its worker iterated to a list (at most 100000 items), each item data or a Remote."""
    return obj._req("items")


def remote_repr(value) -> str:
    """repr() of a value, a proxy's being its object's own (what IPython prints for it, as otter compares it)."""
    return Remote._ag_repr(value) if isinstance(value, Remote) else repr(value)
