"""Loading the grader's weights into a student's module, in the student's worker (assignments' worker helpers
call `load_state`).

Guarantees: nothing is loaded unless every tensor finds its place; a tensor goes
- to the parameter or buffer of the same name (the documented attribute names), else
- to the one whose name is the same up to the numbering of its components (blocks added as `block0`, `block1`
  into an nn.Sequential for the documented `blocks.0`, `blocks.1`), else
- when exactly as many tensors are left on both sides with the same shapes in the same order (a differently named
  attribute), to the tensor at the same position; both "by structure", with a note naming the first pairs, else
- for an embedding table with more rows than the grader's (a segment table sized by the vocabulary), into its
  first rows, the others left as they are, with a note: the rows an input in range reads are the grader's.
Everything else is a problem, named, and the caller reports it.
"""
from __future__ import annotations

import re

import torch
import torch.nn as nn


def load_state(module: nn.Module, state: dict) -> dict:
    """Copy `state` (name -> tensor) into `module`: {"problems": [...], "notes": [...]} (see the module's doc)."""
    own = module.state_dict()
    renamed = _renamed(own, state)
    problems, rows = [], {}
    for name, value in state.items():
        mine = renamed.get(name, name)
        if mine not in own:
            problems.append(f"it has no parameter {name}")
        elif tuple(own[mine].shape) != tuple(value.shape):
            if _extra_rows(module, mine, own[mine], value):
                rows[mine] = value
            else:
                problems.append(f"{mine} has shape {tuple(own[mine].shape)} instead of {tuple(value.shape)}")
    if problems:
        return {"problems": problems, "notes": []}
    module.load_state_dict({renamed.get(k, k): v for k, v in state.items() if renamed.get(k, k) not in rows},
                           strict=False)
    notes = [_copy_rows(own[name], value, name) for name, value in rows.items()]
    return {"problems": [], "notes": ([_renaming_note(renamed)] if renamed else []) + notes}


def _canonical(name: str) -> str:
    """A name with each numbered component reduced to its number (`blocks.block0.attn` -> `blocks.0.attn`)."""
    return ".".join(re.sub(r"\D", "", part) if re.search(r"\d", part) else part for part in name.split("."))


def _renamed(own: dict, state: dict) -> dict:
    """{state's name: the module's name} for the state's tensors the module holds under another name: the same
    name up to the numbering of its components, else (for what is left) the same position and shape."""
    theirs = [n for n in state if n not in own]
    if not theirs:
        return {}
    mine = [n for n in own if n not in state]
    by_canonical = {_canonical(n): n for n in mine}
    renamed = {t: by_canonical[_canonical(t)] for t in theirs if _canonical(t) in by_canonical
               and tuple(own[by_canonical[_canonical(t)]].shape) == tuple(state[t].shape)}
    left_theirs = [t for t in theirs if t not in renamed]
    left_mine = [m for m in mine if m not in renamed.values()]
    if left_theirs and len(left_theirs) == len(left_mine) and all(
            tuple(own[m].shape) == tuple(state[t].shape) for t, m in zip(left_theirs, left_mine)):
        renamed.update(zip(left_theirs, left_mine))
    return renamed


def _renaming_note(renamed: dict) -> str:
    shown = ", ".join(f"{theirs} -> your {mine}" for theirs, mine in list(renamed.items())[:2])
    more = f" and {len(renamed) - 2} more" if len(renamed) > 2 else ""
    return (f"your parameters do not all have the documented names, so the grader matched its weights to yours by "
            f"structure: {shown}{more}")


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
