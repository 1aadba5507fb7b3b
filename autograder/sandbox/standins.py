"""Stand-ins: parts of a submission that another part calls, answered by the reference through the judge.

When a check declared with `depends_on` is run again with the reference answering (docs/writing-
assignments.md), the student's worker replaces each named definition of the submission (and every other
global bound to the same object) by a stand-in from here. A call to a stand-in travels to the judge,
which asks the reference's worker and sends the answer back: the reference's code never runs in the
student's process.

- A function stand-in sends its arguments and returns the reference's result. A torch.Generator among
  the arguments travels by value, and its state advances here as it did in the reference's call.
- A class stand-in is an nn.Module built by the reference's worker, which sends back its parameters,
  buffers, plain attributes and module tree (ModuleList, Sequential, Linear... as themselves, the
  reference's own classes as empty modules of the same name): the stand-in holds them here under the same names (so state_dict loading,
  optimizers, .train() and .eval() act on them) and sends their current values with every forward.
- Gradients: when an input or a parameter requires grad, the call runs as a torch.autograd.Function whose
  backward asks the reference's worker to recompute the call from the same random state (the same dropout
  masks) and to return the gradients.

The other side, in the reference's worker, is `Answers`: forward, backward and describing a module.
"""
from __future__ import annotations

import types
from typing import Any, Callable

import torch
import torch.nn as nn

AskJudge = Callable[[str, dict], Any]  # (kind, payload) -> the judge's answer (decoded data, shaped by kind)


# -- tensors inside nested arguments --------------------------------------------------------------------

def tensors_in(obj) -> list[torch.Tensor]:
    """The tensors of a nested value (tuples, lists, dicts), in a fixed traversal order."""
    out: list[torch.Tensor] = []

    def keep(t):
        out.append(t)
        return t
    _map(obj, keep)
    return out


def replace_tensors(obj, new: list):
    """`obj` with its tensors replaced, in traversal order, by `new`."""
    it = iter(new)
    return _map(obj, lambda t: next(it))


def _map(obj, fn):
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, tuple):
        return tuple(_map(x, fn) for x in obj)
    if isinstance(obj, list):
        return [_map(x, fn) for x in obj]
    if isinstance(obj, dict):
        return {k: _map(v, fn) for k, v in obj.items()}
    return obj


def generators_in(obj) -> list[torch.Generator]:
    """The torch.Generators among a call's arguments (inside tuples, lists and dicts too), in order: their states
    travel with a stand-in's call and come back advanced."""
    out: list[torch.Generator] = []

    def visit(x):
        if isinstance(x, torch.Generator):
            out.append(x)
        elif isinstance(x, (tuple, list)):
            for y in x:
                visit(y)
        elif isinstance(x, dict):
            for y in x.values():
                visit(y)
    visit(obj)
    return out


# -- the student's side ---------------------------------------------------------------------------------

class _Call:
    """What one call to a stand-in is: its target, arguments and (for a module) parameters and mode."""

    def __init__(self, target, args, kwargs, params: dict | None, training: bool):
        self.target, self.args, self.kwargs, self.params, self.training = target, args, kwargs, params, training
        self.out_structure = None  # the output with its tensors, from the forward reply

    def payload(self) -> dict:
        return {"target": self.target, "args": list(self.args), "kwargs": dict(self.kwargs),
                "params": self.params, "training": self.training}


class _RemoteFunction(torch.autograd.Function):
    """A call answered by the judge, differentiable: backward asks for the gradients."""

    @staticmethod
    def forward(ctx, ask: AskJudge, call: _Call, *inputs):
        reply = ask("forward", call.payload())
        ctx.ask, ctx.call, ctx.rng = ask, call, reply["rng"]
        ctx.save_for_backward(*inputs)
        _advance_generators(call, reply)
        call.out_structure = reply["output"]
        outputs = tensors_in(reply["output"])
        ctx.mark_non_differentiable(*[t for t in outputs if not t.is_floating_point()])
        ctx.n_outputs = len(outputs)
        return tuple(outputs)

    @staticmethod
    def backward(ctx, *grad_outputs):
        inputs = ctx.saved_tensors
        needs = [bool(n) for n in ctx.needs_input_grad[2:]]
        payload = {**ctx.call.payload(), "rng": ctx.rng, "needs": needs,
                   "grad_outputs": [None if g is None else g.contiguous() for g in grad_outputs]}
        grads = ctx.ask("backward", payload)
        if not isinstance(grads, list) or len(grads) != len(inputs):
            raise RuntimeError("the reference's gradients could not be read")
        return (None, None, *[g if need else None for g, need in zip(grads, needs)])


def _advance_generators(call: _Call, reply: dict) -> None:
    for generator, state in zip(generators_in([call.args, call.kwargs]), reply.get("generators", [])):
        generator.set_state(state)


def call_remote(ask: AskJudge, target, args, kwargs, params: dict | None = None, training: bool = False):
    """Call `target` (a name, or a module token) in the reference's worker; differentiable if needed."""
    call = _Call(target, args, kwargs, params, training)
    inputs = tensors_in([list(args), dict(kwargs), params or {}])
    if torch.is_grad_enabled() and any(t.requires_grad for t in inputs):
        outputs = _RemoteFunction.apply(ask, call, *inputs)
        return replace_tensors(call.out_structure, list(outputs))
    reply = ask("forward", call.payload())
    _advance_generators(call, reply)
    return reply["output"]


def function_standin(ask: AskJudge, name: str, original) -> Callable:
    """A function that stands in for the submission's function `name`: each call is answered by the reference's
    worker through `ask` (name, doc and module as the original's)."""
    def standin(*args, **kwargs):
        return call_remote(ask, name, args, kwargs)

    standin.__name__ = standin.__qualname__ = name
    standin.__doc__ = getattr(original, "__doc__", None)
    standin.__module__ = "submission"
    return standin


class StandInModule(nn.Module):
    """Base of class stand-ins; `_ag_name` and `_ag_ask` are set on each subclass."""

    _ag_name = ""
    _ag_ask: AskJudge | None = None

    def __init__(self, *args, **kwargs):
        super().__init__()
        ask = type(self)._ag_ask
        assert ask is not None  # set on every subclass (class_standin); the base is never built
        built = ask("construct", {"name": type(self)._ag_name, "args": list(args), "kwargs": dict(kwargs)})
        object.__setattr__(self, "_ag_token", built["token"])
        for name, value in built["attributes"].items():
            setattr(self, name, value)
        for path, kind in built.get("modules", {}).items():
            owner, leaf = self._owner(path)
            owner.add_module(leaf, _empty_module(kind))
        for name, value in built["tensors"].items():
            owner, leaf = self._owner(name)
            if name in built["parameters"]:
                owner.register_parameter(leaf, nn.Parameter(value, requires_grad=built["parameters"][name]))
            else:
                owner.register_buffer(leaf, value)
        self.train(built["training"])

    def _owner(self, dotted: str) -> tuple[nn.Module, str]:
        """The submodule holding `dotted`'s last name (a plain one is created where the tree has none)."""
        module: nn.Module = self
        path = dotted.split(".")
        for name in path[:-1]:
            child = module._modules.get(name)
            if child is None:
                child = nn.Module()
                module.add_module(name, child)
            module = child
        return module, path[-1]

    def forward(self, *args, **kwargs):
        """The reference's forward pass, run in its worker on these arguments with this module's own parameters,
        buffers and training mode."""
        tensors: dict[str, torch.Tensor] = dict(self.named_parameters())
        tensors.update(self.named_buffers())
        ask = type(self)._ag_ask
        assert ask is not None  # set on every subclass (class_standin); the base is never built
        return call_remote(ask, self._ag_token, args, kwargs, tensors, self.training)


_PLAIN = (int, float, bool, str, type(None))
_reference_classes: dict[str, type[nn.Module]] = {}


def _plain_attributes(module: nn.Module) -> dict:
    """A module's public settings that travel by value (`in_features`, `eps`, `normalized_shape`, `p`)."""
    def plain(v) -> bool:
        return isinstance(v, _PLAIN) or (isinstance(v, tuple) and all(isinstance(x, _PLAIN) for x in v))
    return {k: v for k, v in vars(module).items() if not k.startswith("_") and k != "training" and plain(v)}


def _module_kind(module: nn.Module) -> dict:
    """How a submodule of the reference is rebuilt in a stand-in: a torch.nn class as itself (ModuleList,
    Sequential, Linear, LayerNorm...), the reference's own classes as empty modules of the same name."""
    cls = type(module)
    native = getattr(nn, cls.__name__, None) is cls
    return {"class": cls.__name__, "native": native, "attributes": _plain_attributes(module)}


def _empty_module(kind) -> nn.Module:
    """A submodule for a stand-in's tree, without parameters (they are registered afterwards by name).

    torch.nn classes are made without running their __init__ (which would draw weights) so that code
    iterating, indexing or `len()`ing a ModuleList, or reading `layer.in_features`, sees what the reference
    has; the reference's own classes become empty modules of the same name (their computation stays with
    the reference)."""
    if not (isinstance(kind, dict) and isinstance(kind.get("class"), str) and kind["class"].isidentifier()):
        return nn.Module()
    name = kind["class"]
    found = getattr(nn, name, None) if kind.get("native") else None
    cls: type[nn.Module] = found if isinstance(found, type) and issubclass(found, nn.Module) else \
        _reference_classes.setdefault(name, type(name, (nn.Module,), {"__module__": "reference"}))
    module = cls.__new__(cls)
    nn.Module.__init__(module)
    for key, value in (kind.get("attributes") or {}).items():
        if isinstance(key, str) and not key.startswith("_"):
            setattr(module, key, value)
    return module


def class_standin(ask: AskJudge, name: str, original) -> type:
    """A subclass of StandInModule standing in for the submission's class `name`: its instances are answered by the
    reference's worker through `ask`."""
    return type(name, (StandInModule,), {"_ag_name": name, "_ag_ask": staticmethod(ask), "__module__": "submission",
                                         "__qualname__": name, "__doc__": getattr(original, "__doc__", None)})


ABSENT = object()  # what `substitute` records for a name the submission does not define: `restore` removes it


def substitute(module: types.ModuleType, names: list[tuple[str, str]], ask: AskJudge) -> dict[str, object]:
    """Replace each named definition of `module` (and every global bound to the same object) by a stand-in.
    `names`: (name, what the reference defines under it: "class", "function" or ""). A name the submission does
    not define, or binds to something that cannot be called (its cell was skipped: a syntax error), gets a stand-in
    of the reference's kind. Returns {global name: original, or ABSENT} for `restore`."""
    replaced: dict[str, object] = {}
    for name, kind in names:
        original = module.__dict__.get(name)
        if original is None or not callable(original):
            standin = _standin_of_kind(ask, name, kind)
            if standin is not None:
                replaced.setdefault(name, ABSENT if name not in module.__dict__ else original)
                module.__dict__[name] = standin
            continue
        if isinstance(original, type):
            if not issubclass(original, nn.Module):
                continue  # only modules can be stood in for: their state lives here, their computation there
            standin = class_standin(ask, name, original)
        else:
            standin = function_standin(ask, name, original)
        for key, value in list(module.__dict__.items()):
            if value is original:
                replaced.setdefault(key, original)
                module.__dict__[key] = standin
    return replaced


def _standin_of_kind(ask: AskJudge, name: str, kind: str) -> Callable | None:
    if kind == "class":  # an nn.Module in the reference, or its construction fails there and says so
        return class_standin(ask, name, None)
    return function_standin(ask, name, None) if kind == "function" else None


def restore(module: types.ModuleType, replaced: dict[str, object]) -> None:
    """Put back in `module` what stand-ins replaced (`replaced`: name -> original, ABSENT where the name was not
    bound)."""
    for name, original in replaced.items():
        if original is ABSENT:
            module.__dict__.pop(name, None)
        else:
            module.__dict__[name] = original


class NotRunAgain(BaseException):
    """Raised by a definition that made an earlier check time out (see `tripwire`); its argument names it. A
    BaseException: student code's `except Exception` goes on as if the call had hung, it does not go on. The judge
    knows it by its name (faults.TRIPPED) and ends the check with that check's message (faults.TrippedCall)."""


def tripwire(module: types.ModuleType, candidates: list) -> str | None:
    """Make the first of `candidates` (innermost frame first: [name, function], or [name, function, line, file]
    with the frame's place) that names a function of `module` (`name`, defined as `function`) or a method of one
    of its classes (`name.function`) raise NotRunAgain at once when called: one endless loop costs one time
    limit, not one per check. Code nested in a definition (a local class's `__str__`, a closure, a listcomp) is
    that definition's: the function, or the method whose code holds the frame's line, is replaced. Every
    global bound to the same function gets it too. Returns what it replaced ("name" or "name.function")."""
    for candidate in candidates:
        place = _candidate(candidate)
        if place is None:
            continue
        name, function, line, file = place
        target = module.__dict__.get(name)
        if isinstance(target, type):
            method = function if isinstance(vars(target).get(function), types.FunctionType) else \
                _method_holding(target, line, file)
            if method:
                label = f"{name}.{method}"
                setattr(target, method, _tripped(label))
                return label
        elif isinstance(target, types.FunctionType) and (target.__name__ == function
                                                         or _holds(target.__code__, line, file)):
            tripped = _tripped(name)
            for key, value in list(module.__dict__.items()):
                if value is target:
                    module.__dict__[key] = tripped
            return name
    return None


def _candidate(candidate) -> tuple[str, str, int, str] | None:
    """(name, function, line, file) of a tripwire candidate; line 0 and file "" when the place is not given."""
    if not isinstance(candidate, list) or len(candidate) not in (2, 4):
        return None
    name, function, *place = candidate
    line, file = place or (0, "")
    if not (isinstance(name, str) and isinstance(function, str) and type(line) is int and isinstance(file, str)):
        return None
    return name, function, line, file


def _method_holding(cls: type, line: int, file: str) -> str | None:
    """The name of the method of `cls` whose code (nested code included) holds `line` of `file`."""
    for key, value in vars(cls).items():
        if isinstance(value, types.FunctionType) and _holds(value.__code__, line, file):
            return key
    return None


def _holds(code: types.CodeType, line: int, file: str) -> bool:
    """Whether `code` or code nested in it is at `line` of `file`."""
    if not line or code.co_filename != file:
        return False
    if any(at == line for _, _, at in code.co_lines()):
        return True
    return any(isinstance(c, types.CodeType) and _holds(c, line, file) for c in code.co_consts)


def _tripped(label: str) -> Callable:
    def tripped(*args, **kwargs):
        raise NotRunAgain(label)

    tripped.__name__ = tripped.__qualname__ = label.rpartition(".")[2]
    tripped.__module__ = "submission"
    return tripped


# -- the reference's side -------------------------------------------------------------------------------

def _invoke(target, args, kwargs, params: dict | None, training: bool):
    if params is None:
        return target(*args, **kwargs)
    target.train(training)
    return torch.func.functional_call(target, params, tuple(args), dict(kwargs))


def answer_forward(target, args, kwargs, params, training) -> dict:
    """Run a call for a student's stand-in; with the random state it started from (for the backward) and the
    final state of every generator among the arguments."""
    rng = torch.get_rng_state()
    with torch.no_grad():
        output = _invoke(target, args, kwargs, params, training)
    return {"output": output, "rng": rng,
            "generators": [g.get_state() for g in generators_in([args, kwargs])]}


def answer_backward(target, args, kwargs, params, training, rng, grad_outputs, needs) -> list:
    """The gradients of the call's outputs (weighted by grad_outputs) with respect to each input tensor that
    `needs` one, recomputed from the random state the forward started from."""
    saved = torch.get_rng_state()
    torch.set_rng_state(rng)
    try:
        is_module = params is not None
        structure = [list(args), dict(kwargs), params or {}]
        leaves = [t.detach().requires_grad_(bool(need) and t.is_floating_point())
                  for t, need in zip(tensors_in(structure), needs)]
        args, kwargs, params = replace_tensors(structure, leaves)
        with torch.enable_grad():
            output = _invoke(target, args, kwargs, params if is_module else None, training)
        outs = tensors_in(output)
        pairs = [(o, g) for o, g in zip(outs, grad_outputs) if g is not None and o.requires_grad]
        wanted = [t for t in leaves if t.requires_grad]
        found = torch.autograd.grad([o for o, _ in pairs], wanted, [g for _, g in pairs], allow_unused=True) \
            if pairs and wanted else [None] * len(wanted)
        grads = iter(found)
        return [next(grads) if t.requires_grad else None for t in leaves]
    finally:
        torch.set_rng_state(saved)


def describe_module(module: nn.Module) -> dict:
    """What a class stand-in needs of a module built by the reference: parameters (and whether they train),
    buffers, plain attributes, mode."""
    parameters = dict(module.named_parameters())
    tensors = {name: t.detach() for name, t in parameters.items()}
    tensors.update({name: t.detach() for name, t in module.named_buffers()})
    attributes = {k: v for k, v in vars(module).items() if not k.startswith("_") and isinstance(v, _PLAIN)}
    modules = {name: _module_kind(sub) for name, sub in module.named_modules() if name}  # parents first
    return {"tensors": tensors, "parameters": {n: p.requires_grad for n, p in parameters.items()},
            "attributes": attributes, "training": module.training, "modules": modules}
