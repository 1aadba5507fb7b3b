"""Loading the grader's weights into a student's module, in the student's worker (assignments' worker helpers
call `load_state`).

Guarantees: names that are one tensor (tied weights: an nn.Linear decoder whose `weight` IS the word embeddings'
`weight`, a `bias` that IS another module's) are matched as one, on either side: the module's aliases are found by
storage (the same memory, shape and strides), the state's by the same and by the `aliases` its maker names (a
state that crossed a process boundary has lost that identity: `aliases(module)` names them where it was made).
Nothing is loaded unless every tensor finds its place; a tensor (with its aliases) goes
- to the parameter or buffer of the same name (the documented attribute names), else
- to the one whose name is the same up to the numbering of its components (blocks added as `block0`, `block1`
  into an nn.Sequential for the documented `blocks.0`, `blocks.1`), else
- when exactly as many tensors are left on both sides with the same shapes in the same order (a differently named
  attribute), to the tensor at the same position; both "by structure", with a note naming the first pairs, else
- for an embedding table with more rows than the grader's (a segment table sized by the vocabulary), into its
  first rows, the others left as they are, with a note: the rows an input in range reads are the grader's.
Everything else is a problem, named, and the caller reports it; so are two tensors of the state with different
values, both named as the module names them, that go to one tensor of the module. Where one of the two was placed by
structure (a student's untied copy of a tied weight, trained or initialised apart), the one placed by name is kept,
with a note.
"""
from __future__ import annotations

import re

import torch
import torch.nn as nn


def load_state(module: nn.Module, state: dict, aliases=()) -> dict:
    """Copy `state` (name -> tensor) into `module`: {"problems": [...], "notes": [...]} (see the module's doc).
    `aliases`: groups of the state's names that are one tensor where the state was made (`aliases(module)`)."""
    own = module.state_dict()
    own_groups, their_groups = _groups(own), _groups(state, aliases)
    placed, renamed = _placed(own, own_groups, state, their_groups)
    problems: list[str] = []
    rows: dict[str, torch.Tensor] = {}
    values: dict[str, tuple[str, torch.Tensor]] = {}  # the module's name -> (the state's name, the value it gets)
    kept: list[str] = []  # one tensor of the module given two values: the one placed by name kept
    # the groups placed by a name first: where one tensor of the module gets two different values, the one whose
    # name it has wins over one placed by structure (an untied copy of a tied weight), with a note
    for theirs in sorted(their_groups, key=lambda t: _by_structure(t, renamed)):
        value = state[theirs[0]]
        if theirs not in placed:
            problems.append(f"it has no parameter {theirs[0]}")
            continue
        for mine in placed[theirs]:
            target = mine[0]
            if tuple(own[target].shape) != tuple(value.shape):
                if _extra_rows(module, target, own[target], value):
                    rows[target] = value
                else:
                    problems.append(f"{target} has shape {tuple(own[target].shape)} instead of {tuple(value.shape)}")
            elif target in values and not torch.equal(values[target][1], value):
                first = values[target][0]
                if _by_structure(theirs, renamed) and first not in renamed:
                    kept.append(f"{first} and {theirs[0]} are one tensor in it ({', '.join(mine)}), with different "
                                f"values in the weights given: it holds {first}'s")
                else:
                    problems.append(f"{first} and {theirs[0]} are one tensor in it ({', '.join(mine)}) but two with "
                                    "different values in the weights given")
            else:
                values[target] = (theirs[0], value)
    if problems:
        return {"problems": problems, "notes": []}
    module.load_state_dict({name: value for name, (_, value) in values.items()}, strict=False)
    notes = [_copy_rows(own[name], value, name) for name, value in rows.items()]
    return {"problems": [], "notes": ([_renaming_note(renamed)] if renamed else []) + kept + notes}


def _by_structure(group: tuple, renamed: dict) -> bool:
    """Whether the state's group was placed by structure (not by a name the module has)."""
    return group[0] in renamed


def aliases(module_or_state) -> list[list[str]]:
    """The groups of names of a module's state_dict (or of a state) that are one tensor, each of two or more names
    in state_dict order: what `load_state` needs to be told of a state made in another process."""
    state = module_or_state.state_dict() if isinstance(module_or_state, nn.Module) else module_or_state
    return [list(group) for group in _groups(state) if len(group) > 1]


def _storage(t) -> tuple | None:
    """What makes two tensors one: the same memory seen with the same shape and strides (None: no memory to share,
    or not a tensor)."""
    if not isinstance(t, torch.Tensor) or t.numel() == 0 or t.is_sparse:
        return None
    try:
        return (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride(), t.dtype, str(t.device))
    except (RuntimeError, NotImplementedError):  # a tensor without storage (meta, functional): one of its own
        return None


def _groups(state: dict, named=()) -> list[tuple[str, ...]]:
    """The state's names grouped by the tensor they are (by storage, and by the `named` groups), in order."""
    leader: dict[str, str] = {}  # name -> the first name of its group
    by_storage: dict[tuple, str] = {}
    for name, value in state.items():
        key = _storage(value)
        leader[name] = by_storage.setdefault(key, name) if key is not None else name
    for group in named or ():
        present = [n for n in group if isinstance(n, str) and n in leader]
        for name in present[1:]:
            old, new = leader[name], leader[present[0]]
            if old != new:
                first, second = sorted((old, new), key=list(state).index)
                leader.update({n: first for n, lead in leader.items() if lead == second})
    members: dict[str, list[str]] = {}
    for name in state:
        members.setdefault(leader[name], []).append(name)
    return [tuple(names) for names in members.values()]


def _canonical(name: str) -> str:
    """A name with each numbered component reduced to its number (`blocks.block0.attn` -> `blocks.0.attn`)."""
    return ".".join(re.sub(r"\D", "", part) if re.search(r"\d", part) else part for part in name.split("."))


def _placed(own: dict, own_groups: list, state: dict, their_groups: list) -> tuple[dict, dict]:
    """({state's group: the module's groups it goes to}, {state's name: the module's name} for those placed by
    structure): by a name they share (every module group holding one of the names), else the same name up to the
    numbering of its components, else (for what is left) the same position and shape."""
    group_of = {name: group for group in own_groups for name in group}
    placed: dict[tuple, list[tuple]] = {}
    for theirs in their_groups:
        shared = list(dict.fromkeys(group_of[n] for n in theirs if n in group_of))
        if shared:
            placed[theirs] = shared
    named = {g for groups in placed.values() for g in groups}  # reached by a name the state gives
    taken = set(named)
    left_mine = [g for g in own_groups if g not in taken]
    by_canonical = {_canonical(n): g for g in left_mine for n in g}
    renamed: dict[str, str] = {}
    for theirs in (t for t in their_groups if t not in placed):
        for name in theirs:
            same = by_canonical.get(_canonical(name))
            if same is not None and same not in taken and tuple(own[same[0]].shape) == tuple(state[name].shape):
                placed[theirs], renamed[theirs[0]] = [same], same[0]
                taken.add(same)
                break
    left_theirs = [t for t in their_groups if t not in placed]
    # what the state does not name: a group it reached by one name may still take another tensor of the state by a
    # name it lacks (an untied copy of a tied weight, equal at initialisation; two different values are a problem)
    left_mine = [g for g in own_groups if g not in taken or (g in named and any(n not in state for n in g))]
    if left_theirs and len(left_theirs) == len(left_mine) and all(
            tuple(own[m[0]].shape) == tuple(state[t[0]].shape) for t, m in zip(left_theirs, left_mine)):
        for theirs, mine in zip(left_theirs, left_mine):  # (named by the module's name the state lacks)
            placed[theirs], renamed[theirs[0]] = [mine], next((n for n in mine if n not in state), mine[0])
    return placed, renamed


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
