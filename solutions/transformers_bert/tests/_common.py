"""Judge-side helpers shared by the hidden test files of this assignment (a helper module: its name starts
with `_`, so the build ships it with the tests and never looks in it for checks).

Seeded weights in the notebook's documented state-dict names, the two qkv layouts the notebook allows,
and this assignment's bindings of the public helpers (autograder.testing): its tolerance and its worker
helper that loads weights.
"""
import math
from functools import partial

import torch

from autograder.testing import close as close_within
from autograder.testing import gen
from autograder.testing import load_weights as load_weights_with

# This assignment's tolerance: atol 1e-4, ten times the API's default (rtol stays at the default 1e-4), as it
# has always graded with. Checks that need another tolerance pass their own atol.
close = partial(close_within, atol=1e-4)

# Weights are copied in the worker by tb_load_state (registered by test_part1_attention.py).
load_weights = partial(load_weights_with, helper="tb_load_state")


# -- weights ---------------------------------------------------------------------------------------------

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


# -- substance: consistency checks only pay on top of a real computation -----------------------------------

def sums_alike(sums):
    """Every sum the same positive number: 1 for a softmax, another for a softmax scaled once more (the weights
    check grades that mistake; the checks of masking, dropout and values judge weights consistent with it)."""
    sums = sums.double()
    return bool(torch.isfinite(sums).all()) and sums.numel() > 0 and float(sums.flatten()[0]) > 1e-6 and \
        torch.allclose(sums, sums.flatten()[0].expand_as(sums), rtol=1e-4, atol=1e-6)


def attention_problem(values, attention, v):
    """Why (values, attention) from scaled_dot_product is not attention at all, or None: NaN, weights that are
    not a softmax (rows over the keys, or columns, summing to 1, or all to one other positive number: a softmax
    scaled again), or values that are not attention @ v."""
    if not all(isinstance(t, torch.Tensor) for t in (values, attention)):
        return "it does not return a tuple of tensors (values, attention)"
    if not (bool(torch.isfinite(values).all()) and bool(torch.isfinite(attention).all())):
        return "the values or attention weights contain NaN or inf"
    attention, values = attention.double(), values.double()
    if attention.dim() != 4 or bool((attention < 0).any()) or not (sums_alike(attention.sum(-1))
                                                                   or sums_alike(attention.sum(-2))):
        return "the attention weights are not softmax weights (non-negative, each row summing to 1 over the keys)"
    if values.shape != (*attention.shape[:-1], v.shape[-1]) or not close(values, attention @ v.double()):
        return "the values are not the attention weights applied to v (attention @ v)"
    return None


def own_attention_problem(sub):
    """Why the student's own scaled_dot_product cannot stand in for attention (raises, NaN, not a softmax of
    q k^T, weights that ignore the queries), or None. Part 2 accepts 'right given your own part 1' only then."""
    g = gen(97)
    q, k, v, q_other = (torch.randn(2, 2, 5, 4, generator=g) for _ in range(4))
    mask = torch.zeros(2, 5)
    mask[1, 3:] = 1
    try:
        values, attention = sub.scaled_dot_product(q, k, v, attn_drop_rate=0.0, mask=mask)
        _, attention_other = sub.scaled_dot_product(q_other, k, v, attn_drop_rate=0.0, mask=mask)
    except Exception:  # noqa: BLE001 - raises, or does not return a pair
        return "raises or does not return (values, attention)"
    problem = attention_problem(values, attention, v)
    if problem is None and close(attention_other, attention.double(), atol=1e-6):
        problem = "the attention weights do not depend on the queries"
    return problem


def output_problem(out, out_other, x):
    """Why a module's output is not a computation on its input, or None: NaN, the input itself, or an output
    that stays the same for another input (zeros, a constant). out_other is the output for another input."""
    if not isinstance(out, torch.Tensor) or not bool(torch.isfinite(out).all()):
        return "returns NaN or inf"
    if out.shape == x.shape and torch.allclose(out.double(), x.double(), atol=1e-6):
        return "returns its input unchanged"
    if isinstance(out_other, torch.Tensor) and out_other.shape == out.shape and torch.allclose(
            out.double(), out_other.double(), atol=1e-6):
        return "returns the same output for a different input"
    return None
