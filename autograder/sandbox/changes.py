"""What a student's call did to the judge's objects it was given, written back into them (a test cell's calls).

A test cell runs in the judge; the objects it passes to the notebook's functions travel as copies (tensors and
numpy arrays as data, other objects pickled: Pickled). In a kernel the student's code works on the cell's own
objects: it trains the cell's model, steps its optimizer, fills its tensor in place. For a test cell's call
(`call_updating`), the worker reports what the call changed in the copies and the judge writes it into the
originals, so that the cell reads afterwards what it would read in a kernel:
- a tensor or numpy array changed in place: its new values;
- an nn.Module: its parameters and buffers, its modules' train/eval modes, its parameters' requires_grad and .grad;
- an optimizer: its state and its parameters' values; a learning-rate scheduler (or another of torch's objects
  with a state_dict): its state, under the keys it has (a key it lacks would become an attribute: `step`);
a change is seen by value (a copy of each tensor, up to COMPARED_BYTES in all): `x.data.fill_(1)` and a numpy view's
write change no version counter.
What else a call does to a judge's object (an attribute of its own, an item appended to a list) stays in the copy.
Only data comes back: the judge loads it with torch's own load_state_dict and copy_, never runs the worker's code;
what does not fit the original (another shape, a malformed state, an object of the worker's, more tensor data than
four times the original's own state: one tensor sent under a thousand names would be copied a thousand times) is
left out, and the original keeps its values.
What is written holds until the check ends (`undone_after`): every object written into is then put back as it was,
so that an object the judge keeps across checks (a model in a module the tests import) never carries one
student's changes into another check or another student's grading.
"""
from __future__ import annotations

import contextlib
import copy
from typing import Any, Callable

import torch

from autograder.sandbox.protocol import BUNDLE


def has_state(obj) -> bool:
    """An object whose state a call's changes carry: a module, an optimizer, or another of torch's own objects
    with a state_dict (a learning-rate scheduler, a gradient scaler)."""
    if isinstance(obj, (torch.nn.Module, torch.optim.Optimizer)):
        return True
    return type(obj).__module__.startswith("torch.") and callable(getattr(obj, "state_dict", None)) \
        and callable(getattr(obj, "load_state_dict", None))


# -- in the worker: what a call changed ------------------------------------------------------------------------

COMPARED_BYTES = 64 << 20  # tensors up to this much in all are compared by value: `x.data.fill_(1)` and a numpy
# view's writes change no version counter; beyond it, by version and data pointer only


class Watch:
    """The judge's objects of one request, as the worker received them; `changes()` after the call."""

    def __init__(self, tensors: dict[str, torch.Tensor], objects: list):
        self.budget = COMPARED_BYTES
        self.tensors = {name: t for name, t in tensors.items() if name != BUNDLE}
        self.before = {name: self._token(t) for name, t in self.tensors.items()}
        self.objects = {i: obj for i, obj in enumerate(objects) if has_state(obj)}
        self.states = {i: _fingerprint(_state(obj, keep_vars=True), self._token) for i, obj in self.objects.items()}

    def _token(self, t: torch.Tensor) -> tuple:
        """What tells the tensor after the call from before: its values (a copy) while the budget lasts."""
        size = t.numel() * t.element_size()
        copy = None
        if size <= self.budget:
            self.budget -= size
            copy = t.detach().clone()
        return id(t), t._version, t.data_ptr(), copy

    def changes(self) -> dict:
        """What the call changed in the objects it was given: {"tensors": name -> new value, "objects": index -> new
        state}, only those that differ."""
        tensors = {name: t for name, t in self.tensors.items() if _differs(self.before[name], t)}
        objects = {}
        for i, obj in self.objects.items():
            if not _same(self.states[i], _fingerprint(_state(obj, keep_vars=True), None)):
                objects[i] = _state(obj)
        return {"tensors": tensors, "objects": objects}


def _differs(token: tuple, t: torch.Tensor) -> bool:
    identity, version, pointer, copy = token
    if identity != id(t) or version != t._version or pointer != t.data_ptr():
        return True
    return copy is not None and not (copy.shape == t.shape and torch.equal(copy, t.detach()))


def _same(before, after) -> bool:
    """Two fingerprints (_fingerprint) alike: the same structure, tensors unchanged (_differs)."""
    if isinstance(before, tuple) and before and before[0] == "tensor":
        return isinstance(after, tuple) and after[:1] == ("tensor",) and not _differs(before[1], after[2])
    if isinstance(before, tuple) and isinstance(after, tuple) and len(before) == len(after):
        return all(_same(a, b) for a, b in zip(before, after))
    return before == after


def _state(obj, keep_vars: bool = False) -> dict:
    if isinstance(obj, torch.optim.Optimizer):  # its parameters too: the model they belong to may not have come
        mine = [p for group in obj.param_groups for p in group["params"]]
        return {"state": obj.state_dict(), "params": mine if keep_vars else [p.detach() for p in mine]}
    if not isinstance(obj, torch.nn.Module):
        return {"state": obj.state_dict()}
    params = dict(obj.named_parameters())
    return {"state": obj.state_dict(keep_vars=keep_vars),
            "training": {name: m.training for name, m in obj.named_modules()},
            "requires_grad": {name: p.requires_grad for name, p in params.items()},
            "grads": {name: p.grad if keep_vars or p.grad is None else p.grad.detach() for name, p in params.items()}}


def _fingerprint(value, token) -> Any:
    """What tells a state before a call from the same state after it: tensors by `token` (before the call; after it,
    the tensor itself, compared by _same), everything else by value."""
    if isinstance(value, torch.Tensor):
        return ("tensor", token(value), None) if token is not None else ("tensor", None, value)
    if isinstance(value, dict):
        return ("dict", tuple((_fingerprint(k, token), _fingerprint(v, token)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_fingerprint(x, token) for x in value))
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return ("object", id(value))


# -- in the judge: the changes written into the originals ------------------------------------------------------

def write_back(reply: Any, sources: dict[str, Any], objects: list) -> Any:
    """The call's value, once the changes the worker reported are written into the judge's objects
    (`sources`: the request's tensors and arrays by key; `objects`: its pickled objects in order)."""
    if not (isinstance(reply, tuple) and len(reply) == 2 and isinstance(reply[1], dict)):
        return reply  # not a reply to call_updating: nothing to write
    value, changes = reply
    for name, new in _items(changes.get("tensors")):
        if isinstance(name, str) and isinstance(new, torch.Tensor) and name in sources:
            _write_tensor(sources[name], new)
    for index, state in _items(changes.get("objects")):
        if type(index) is int and 0 <= index < len(objects) and isinstance(state, dict) and has_state(objects[index]):
            _load(objects[index], state)
    return value


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def _items(mapping) -> list:
    return list(mapping.items()) if isinstance(mapping, dict) else []


_UNDO: list[Callable[[], None]] = []  # how to put back each object written into since the check began
_REMEMBERED: set[int] = set()  # ... by id: each one once a check


@contextlib.contextmanager
def undone_after():
    """Put every object write_back changes inside the block back as it was when the block ends."""
    mark = len(_UNDO)
    try:
        yield
    finally:
        while len(_UNDO) > mark:
            try:
                _UNDO.pop()()
            except Exception:  # noqa: BLE001 - put back what can be; an object gone odd is the check's own
                pass
        if not _UNDO:
            _REMEMBERED.clear()


def _remember(original) -> None:
    """Note how to put `original` back, before its first change of the check."""
    if id(original) in _REMEMBERED:
        return
    try:
        if isinstance(original, torch.Tensor):
            before = original.detach().clone()
            _UNDO.append(lambda: _write_tensor(original, before, remember=False))
        elif isinstance(original, torch.nn.Module) or has_state(original):
            state = copy.deepcopy(_state(original))
            _UNDO.append(lambda: _load(original, state, remember=False))
        else:  # a numpy array
            array = original.copy()
            _UNDO.append(lambda: _write_tensor(original, torch.as_tensor(array), remember=False))
    except Exception:  # noqa: BLE001 - an original that cannot be copied is not written into
        raise ValueError("cannot keep a copy") from None
    _REMEMBERED.add(id(original))


def _write_tensor(original, new: torch.Tensor, remember: bool = True) -> None:
    try:
        if remember:
            _remember(original)
        if isinstance(original, torch.Tensor):
            if original.shape == new.shape:
                with torch.no_grad():
                    original.copy_(new)
        elif tuple(getattr(original, "shape", ())) == tuple(new.shape):  # a numpy array
            original[...] = new.numpy()
    except (RuntimeError, TypeError, ValueError):
        pass  # (a dtype the original cannot hold: it keeps its values)


def _load(original, state: dict, remember: bool = True) -> None:
    try:
        if not _fits(original, state):
            return
        if remember:
            _remember(original)
        if isinstance(original, torch.nn.Module):
            _load_module(original, state)
        elif isinstance(state.get("state"), dict):
            original.load_state_dict(_as_the_originals(original, state["state"]))
            if isinstance(original, torch.optim.Optimizer) and isinstance(state.get("params"), list):
                mine = [p for group in original.param_groups for p in group["params"]]
                for p, new in zip(mine, state["params"]):
                    if isinstance(new, torch.Tensor):
                        _write_tensor(p, new, remember)
    except (RuntimeError, TypeError, ValueError, KeyError, IndexError, AttributeError):
        pass  # a state that does not fit the original: it keeps what it had


def _fits(original, state: dict) -> bool:
    """Whether a state the worker sent may be loaded into `original`: plain data (no object of the worker's), and no
    more tensor data than four times the original's own state and a megabyte (one tensor sent under many names is
    counted as many: an optimizer's load_state_dict would copy each)."""
    try:
        own = _tensor_bytes(_state(original), 0)
        return _tensor_bytes(state, 0) <= 4 * own + (1 << 20)
    except ValueError:
        return False


def _tensor_bytes(value, depth: int) -> int:
    """The bytes of the tensors `value` holds, each occurrence counted; ValueError for anything but plain data."""
    if depth > 16:
        raise ValueError("nested too deeply")
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, dict):
        return sum(_tensor_bytes(k, depth + 1) + _tensor_bytes(v, depth + 1) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return sum(_tensor_bytes(x, depth + 1) for x in value)
    if value is None or type(value) in (bool, int, float, str):
        return 0
    raise ValueError(f"a {type(value).__name__} in a state")


def _as_the_originals(original, state: dict) -> dict:
    """A state for an optimizer or a scheduler with the original's own keys only (a scheduler's load_state_dict sets
    every key it gets as an attribute: `step` or `get_last_lr` must stay the scheduler's methods)."""
    mine = original.state_dict()
    if isinstance(original, torch.optim.Optimizer):
        groups = state.get("param_groups")
        if not (isinstance(groups, list) and len(groups) == len(mine["param_groups"])
                and all(isinstance(g, dict) and set(g) == set(m) for g, m in zip(groups, mine["param_groups"]))):
            raise ValueError("param_groups that are not the original's")
        return {"state": state.get("state") if isinstance(state.get("state"), dict) else {}, "param_groups": groups}
    return {key: value for key, value in state.items() if key in mine}


def _load_module(module: torch.nn.Module, state: dict) -> None:
    if isinstance(state.get("state"), dict):
        mine = module.state_dict()
        module.load_state_dict({k: v for k, v in state["state"].items() if k in mine and isinstance(v, torch.Tensor)
                                and v.shape == mine[k].shape}, strict=False)
    modes, flags, grads = (_dict(state.get(key)) for key in ("training", "requires_grad", "grads"))
    for name, m in module.named_modules():
        if isinstance(modes.get(name), bool):
            m.training = modes[name]
    for name, p in module.named_parameters():
        if isinstance(flags.get(name), bool):
            p.requires_grad_(flags[name])
        grad = grads.get(name, p.grad)
        if grad is None or isinstance(grad, torch.Tensor) and grad.shape == p.shape:
            p.grad = grad if grad is None or grad.dtype == p.dtype else None
