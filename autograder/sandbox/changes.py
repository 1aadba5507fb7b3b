"""What a student's call did to the judge's objects it was given, written back into them (a test cell's calls).

A test cell runs in the judge; the objects it passes to the notebook's functions travel as copies (tensors and
numpy arrays as data, other objects pickled: Pickled). In a kernel the student's code works on the cell's own
objects: it trains the cell's model, steps its optimizer, fills its tensor in place. For a test cell's call
(`call_updating`), the worker reports what the call changed in the copies and the judge writes it into the
originals, so that the cell reads afterwards what it would read in a kernel:
- a tensor or numpy array changed in place: its new values;
- an nn.Module: its parameters and buffers, its modules' train/eval modes, its parameters' requires_grad and .grad;
- an optimizer: its state and its parameters' values; a learning-rate scheduler (or another of torch's objects
  with a state_dict): its state.
What else a call does to a judge's object (an attribute of its own, an item appended to a list) stays in the copy.
Only data comes back: the judge loads it with torch's own load_state_dict and copy_, never runs the worker's code;
what does not fit the original (another shape, a malformed state) is left out, and the original keeps its values.
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

class Watch:
    """The judge's objects of one request, as the worker received them; `changes()` after the call."""

    def __init__(self, tensors: dict[str, torch.Tensor], numpy_keys: set[str], objects: list):
        self.tensors = {name: t for name, t in tensors.items() if name != BUNDLE}
        self.versions = {name: t._version for name, t in self.tensors.items()}
        # a numpy array changed in place leaves its tensor's version as it was: its values are compared
        self.copies = {name: self.tensors[name].clone() for name in numpy_keys if name in self.tensors}
        self.objects = {i: obj for i, obj in enumerate(objects) if has_state(obj)}
        self.before = {i: _fingerprint(_state(obj, keep_vars=True)) for i, obj in self.objects.items()}

    def changes(self) -> dict:
        tensors = {name: t for name, t in self.tensors.items() if self._changed(name, t)}
        objects = {}
        for i, obj in self.objects.items():
            if _fingerprint(_state(obj, keep_vars=True)) != self.before[i]:
                objects[i] = _state(obj)
        return {"tensors": tensors, "objects": objects}

    def _changed(self, name: str, t: torch.Tensor) -> bool:
        if name in self.copies:
            return not torch.equal(t, self.copies[name])
        return t._version != self.versions[name]


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


def _fingerprint(value) -> Any:
    """What tells a state before a call from the same state after it: tensors by identity and version (an in-place
    change bumps it), everything else by value."""
    if isinstance(value, torch.Tensor):
        return ("tensor", id(value), value._version)
    if isinstance(value, dict):
        return ("dict", tuple((_fingerprint(k), _fingerprint(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_fingerprint(x) for x in value))
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
        if remember:
            _remember(original)
        if isinstance(original, torch.nn.Module):
            _load_module(original, state)
        elif isinstance(state.get("state"), dict):
            original.load_state_dict(state["state"])
            if isinstance(original, torch.optim.Optimizer) and isinstance(state.get("params"), list):
                mine = [p for group in original.param_groups for p in group["params"]]
                for p, new in zip(mine, state["params"]):
                    if isinstance(new, torch.Tensor):
                        _write_tensor(p, new, remember)
    except (RuntimeError, TypeError, ValueError, KeyError, IndexError, AttributeError):
        pass  # a state that does not fit the original: it keeps what it had


def _load_module(module: torch.nn.Module, state: dict) -> None:
    if isinstance(state.get("state"), dict):
        module.load_state_dict(state["state"], strict=False)
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
