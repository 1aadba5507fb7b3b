"""Judge-side helpers shared by the hidden test files of this assignment (a helper module: its name starts
with `_`, so the build ships it with the tests and never looks in it for checks).

Seeded weights in the notebook's documented state-dict names, the two qkv layouts the notebook allows,
loading weights into a student's module, and the tolerance used to compare values with the judge's.
"""
import math

import torch

from autograder.testing import Fail, StudentError


def gen(seed):
    return torch.Generator().manual_seed(seed)


def close(a, b, atol=1e-4):
    """Same shape, finite, and equal to b within atol (compared in float64)."""
    return (isinstance(a, torch.Tensor) and a.shape == b.shape and bool(torch.isfinite(a).all())
            and torch.allclose(a.double(), b.double(), atol=atol, rtol=1e-4))


# -- weights ---------------------------------------------------------------------------------------------

def normal(g):
    """r(*shape, s=scale): scaled standard-normal draws from generator g, in call order."""
    return lambda *shape, s=1.0: s * torch.randn(*shape, generator=g)


def block_weights(r, E, prefix=""):
    """One TransformerBlock's state dict (nonzero biases, norms away from 1 and 0), drawn with r = normal(g)."""
    return {
        f"{prefix}attn.qkv_proj.weight": r(3 * E, E) / math.sqrt(E), f"{prefix}attn.qkv_proj.bias": r(3 * E, s=0.1),
        f"{prefix}attn.o_proj.weight": r(E, E) / math.sqrt(E), f"{prefix}attn.o_proj.bias": r(E, s=0.1),
        f"{prefix}norm1.weight": 1 + r(E, s=0.2), f"{prefix}norm1.bias": r(E, s=0.2),
        f"{prefix}norm2.weight": 1 + r(E, s=0.2), f"{prefix}norm2.bias": r(E, s=0.2),
        f"{prefix}ffn.0.weight": r(E, E) / math.sqrt(E), f"{prefix}ffn.0.bias": r(E, s=0.1),
        f"{prefix}ffn.2.weight": r(E, E) / math.sqrt(E), f"{prefix}ffn.2.bias": r(E, s=0.1),
    }


def per_head_rows(E, H):
    """Row order that turns qkv_proj's [all q | all k | all v] rows into per-head [q | k | v] rows."""
    D = E // H
    return torch.tensor([j * E + h * D + d for h in range(H) for j in range(3) for d in range(D)])


def in_layout(state, layout, E, H):
    """qkv_proj rows as given (layout 0: [all q | all k | all v]) or per head [q | k | v] (layout 1)."""
    if layout == 0:
        return dict(state)
    rows = per_head_rows(E, H)
    return {k: v[rows] if k.endswith("qkv_proj.weight") or k.endswith("qkv_proj.bias") else v
            for k, v in state.items()}


def load_weights(sub, module, state, what, names=""):
    """Copy state into the student's module (kept in the worker) by name; `names` lists the documented
    attribute names for the message when some do not fit."""
    try:
        problems = sub.helpers.tb_load_state(module, state)
    except StudentError as exc:
        raise Fail(f"the grader could not read the parameters of your {what}: {exc.message}") from None
    if problems:
        raise Fail(f"the grader could not load weights into your {what} by the documented attribute names"
                   + (f" ({names})" if names else "") + ": " + "; ".join(problems[:4]))
