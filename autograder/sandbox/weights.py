"""Loading the grader's weights into a student's module, in the student's worker (assignments' worker helpers
call `load_state`).

Guarantees: nothing is loaded unless every tensor finds its place; a tensor goes
- to the parameter or buffer of the same name (the documented attribute names), else
- when the names differ but the module holds the same tensors in the same order with the same shapes (blocks
  added as `block0`, `block1` into an nn.Sequential, a differently named attribute), to the tensor at the same
  position ("by structure"), with a note naming the first pairs, else
- for an embedding table with more rows than the grader's (a segment table sized by the vocabulary), into its
  first rows, the others left as they are, with a note: the rows an input in range reads are the grader's.
Everything else is a problem, named, and the caller reports it.
"""
from __future__ import annotations

import torch
import torch.nn as nn


def load_state(module: nn.Module, state: dict) -> dict:
    """Copy `state` (name -> tensor) into `module`: {"problems": [...], "notes": [...]} (see the module's doc)."""
    own = module.state_dict()
    if set(state) - set(own) and _same_structure(own, state):
        return _load_by_structure(module, own, state)
    problems, rows = [], {}
    for name, value in state.items():
        if name not in own:
            problems.append(f"it has no parameter {name}")
        elif tuple(own[name].shape) != tuple(value.shape):
            if _extra_rows(module, name, own[name], value):
                rows[name] = value
            else:
                problems.append(f"{name} has shape {tuple(own[name].shape)} instead of {tuple(value.shape)}")
    if problems:
        return {"problems": problems, "notes": []}
    module.load_state_dict({k: v for k, v in state.items() if k not in rows}, strict=False)
    return {"problems": [], "notes": [_copy_rows(own[name], value, name) for name, value in rows.items()]}


def _same_structure(own: dict, state: dict) -> bool:
    """The same number of tensors, with the same shapes, in the same order."""
    return len(own) == len(state) and all(tuple(a.shape) == tuple(b.shape) for a, b in zip(own.values(), state.values()))


def _load_by_structure(module: nn.Module, own: dict, state: dict) -> dict:
    renamed = {mine: value for mine, value in zip(own, state.values())}
    module.load_state_dict(renamed, strict=False)
    pairs = [(theirs, mine) for mine, theirs in zip(own, state) if mine != theirs]
    shown = ", ".join(f"{theirs} -> your {mine}" for theirs, mine in pairs[:2])
    more = f" and {len(pairs) - 2} more" if len(pairs) > 2 else ""
    return {"problems": [], "notes": [f"your parameters do not have the documented names, so the grader loaded its "
                                      f"weights by position and shape: {shown}{more}"]}


def _extra_rows(module: nn.Module, name: str, mine: torch.Tensor, theirs: torch.Tensor) -> bool:
    """An nn.Embedding's weight with more rows than the grader's and the same width."""
    owner_name, _, leaf = name.rpartition(".")
    try:
        owner = module.get_submodule(owner_name) if owner_name else module
    except AttributeError:
        return False
    return (isinstance(owner, nn.Embedding) and leaf == "weight" and mine.dim() == theirs.dim() == 2
            and mine.shape[1] == theirs.shape[1] and mine.shape[0] > theirs.shape[0])


def _copy_rows(mine: torch.Tensor, theirs: torch.Tensor, name: str) -> str:
    with torch.no_grad():
        mine[: theirs.shape[0]].copy_(theirs)
    return (f"{name} has {mine.shape[0]} rows where {theirs.shape[0]} are used; the grader loaded its "
            f"{theirs.shape[0]} rows into the first ones")
