"""Hidden checks of part 2: MultiHeadAttention(embed_dim, n_heads, attn_drop_rate).

The student's module gets the same weights as the reference, in each of the two accepted qkv layouts
([all q | all k | all v], the notebook's, and per head [q | k | v], a permutation of qkv_proj's rows);
either must reproduce the reference. If neither does, but the module is right given the student's own
scaled_dot_product (part 1), it passes: part 1's mistakes are graded in part 1. Otherwise the judge
computes the usual wiring mistakes and names the one that matches.
"""
import itertools
import math

import torch

from _common import close, in_layout, load_weights, output_problem, own_attention_problem
from autograder.testing import Fail, StudentError, check, expect_identical, expect_shape, gen, keep

# The student's code checked here calls these parts; where they fail it, the reference answers for them
DEPENDS_ON = ["scaled_dot_product"]
PART = "2. Multi-head attention"
LAYOUTS = ("[all q | all k | all v]", "per head [q | k | v]")


def mha_state(E, seed):
    """Seeded weights for MultiHeadAttention(E, ...) with nonzero biases, in the [all q | all k | all v] layout."""
    g = torch.Generator().manual_seed(seed)
    return {
        "qkv_proj.weight": torch.randn(3 * E, E, generator=g) / math.sqrt(E),
        "qkv_proj.bias": 0.1 * torch.randn(3 * E, generator=g),
        "o_proj.weight": torch.randn(E, E, generator=g) / math.sqrt(E),
        "o_proj.bias": 0.1 * torch.randn(E, generator=g),
    }


def _build(sub, E, H, p):
    """The student's MultiHeadAttention(E, H, p), kept in the worker."""
    return keep(sub.MultiHeadAttention, E, H, p)


def _forward(module, x, mask):
    out = module(x, mask)
    if not isinstance(out, torch.Tensor):
        raise Fail(f"MultiHeadAttention.forward must return a tensor (B, T, E), got {type(out).__name__}")
    return out


# -- the judge's own multi-head attention and its usual mistakes ---------------------------------------

def _attention(q, k, v, mask=None, scale=None):
    logits = q @ k.transpose(-2, -1) / (math.sqrt(q.size(-1)) if scale is None else scale)
    if mask is not None:  # the notebook's -1e9: a row with every key masked (an inverted mask) stays uniform
        logits = logits.masked_fill(mask.bool()[:, None, None, :], -1e9)
    return torch.softmax(logits, dim=-1) @ v


def _split(qkv, E, H, layout, transpose=True):
    B, T, _ = qkv.shape
    D = E // H
    if layout == 0:
        parts = qkv.split(E, dim=-1)
    else:
        parts = qkv.view(B, T, H, 3 * D).split(D, dim=-1)
        parts = [p.reshape(B, T, E) for p in parts]
    if transpose:
        return [p.reshape(B, T, H, D).transpose(1, 2) for p in parts]
    return [p.reshape(B, H, T, D) for p in parts]  # the classic bug: a view without moving the head axis


def _merge(values, transpose=True):
    B, H, T, D = values.shape
    if transpose:
        return values.transpose(1, 2).reshape(B, T, H * D)
    return values.reshape(B, T, H * D)


def judge_mha(state, x, mask, E, H, layout=0, attention=None, split_transpose=True, merge_transpose=True,
              o_proj=True, scale=None):
    """MHA computed in the judge from a state dict given in `layout` (variants for diagnosis)."""
    x = x.double()
    w = {k: v.double() for k, v in state.items()}
    qkv = x @ w["qkv_proj.weight"].T + w["qkv_proj.bias"]
    q, k, v = _split(qkv, E, H, layout, split_transpose)
    if attention is None:
        values = _attention(q, k, v, mask, scale)
    else:
        values = attention(q, k, v, mask)
    merged = _merge(values, merge_transpose)
    return merged @ w["o_proj.weight"].T + w["o_proj.bias"] if o_proj else merged


def _student_attention(sub):
    """The student's own scaled_dot_product as a judge-side function (None if it fails)."""
    def attention(q, k, v, mask):
        out = sub.scaled_dot_product(q.float(), k.float(), v.float(), attn_drop_rate=0.0,
                                     mask=None if mask is None else mask.float())
        return out[0].double()
    return attention


def matches_with_own_attention(sub, got, state, x, mask, E, H, layout):
    """Right given the student's own scaled_dot_product? (part 1 mistakes are not graded again here). Only
    if that scaled_dot_product computes attention at all: with one that returns (v, ...) or a constant, a
    module that skips the attention would match it."""
    try:
        if not close(got, judge_mha(state, x, mask, E, H, layout, attention=_student_attention(sub))):
            return False
    except Exception:  # noqa: BLE001 - the student's part 1 fails or returns something unusable
        return False
    return own_attention_problem(sub) is None


def diagnose(got_by_layout, state_a, x, mask, E, H):
    """The one usual mistake whose output the student's matches (in either layout); none when several match (the
    checks' sizes keep them apart: D != H, so dividing by sqrt(D) twice is not dividing by sqrt(E))."""
    D = E // H
    variants = [
        (dict(o_proj=False), "the output is the concatenated heads without o_proj: apply self.o_proj last"),
        (dict(split_transpose=False), "the heads are split with a view (B, H, T, D) straight from (B, T, E): "
                                      "view as (B, T, H, D), then transpose to (B, H, T, D)"),
        (dict(merge_transpose=False), "the heads are merged with a view (B, T, E) straight from (B, H, T, D): "
                                      "transpose back to (B, T, H, D) first, then reshape to (B, T, E)"),
        (dict(split_transpose=False, merge_transpose=False),
         "the heads are split and merged with views that do not move the head axis: (B, T, E) -> "
         "(B, T, H, D) -> transpose(1, 2) -> (B, H, T, D), and back the same way"),
        (dict(scale=math.sqrt(E)), "the attention logits are divided by sqrt(E) (the model width) instead of "
                                   "sqrt(D) (the head dimension E / H)"),
        (dict(scale=float(D)), "the attention logits are divided by D instead of sqrt(D): scaled_dot_product "
                               "divides by sqrt(D) already, so do not scale q or k before calling it"),
    ]
    if mask is not None:
        variants.append((dict(mask=None), "the mask does not reach the attention: pass it on to "
                                          "scaled_dot_product"))
        variants.append((dict(mask=1 - mask), "the mask reaching the attention is inverted: pass it on as it is "
                                              "(1 = padding, must not be attended to; 0 = real token)"))
    matches = set()
    for kwargs, message in variants:
        for layout, got in enumerate(got_by_layout):
            kw = dict(kwargs)
            m = kw.pop("mask", mask)
            if close(got, judge_mha(in_layout(state_a, layout, E, H), x, m, E, H, layout, **kw)):
                matches.add(message)
    if len(matches) == 1:
        return matches.pop()
    return ("the output differs from the reference's with the same weights in both accepted qkv layouts "
            f"({LAYOUTS[0]} and {LAYOUTS[1]}): check how you split qkv_proj's output into q, k, v and heads, "
            "and how you merge the heads back")


def check_outputs(sub, ref, E, H, x, mask, seed):
    """Student's eval() output with the reference's weights, in either layout, against the reference."""
    B, T, _ = x.shape
    state = mha_state(E, seed)
    reference = keep(ref.MultiHeadAttention, E, H, 0.0)
    ref.helpers.tb_load_state(reference, state)
    reference.eval()
    expected = reference(x, mask)
    module = _build(sub, E, H, 0.0)
    module.eval()
    got_by_layout = []
    for layout in (0, 1):
        load_weights(sub, module, in_layout(state, layout, E, H), f"MultiHeadAttention({E}, {H}, 0.0)")
        got = _forward(module, x, mask)
        expect_shape(got, (B, T, E), f"MultiHeadAttention({E}, {H}, 0.0) output for an input of shape ({B}, {T}, {E})")
        if close(got, expected):
            return
        if matches_with_own_attention(sub, got, in_layout(state, layout, E, H), x, mask, E, H, layout):
            return
        got_by_layout.append(got)
    raise Fail(f"MultiHeadAttention({E}, {H}, 0.0) in eval(), {'with' if mask is not None else 'without'} a "
               f"padding mask: " + diagnose(got_by_layout, state, x, mask, E, H))


@check("MHA: output matches the reference with the same weights", points=3, part=PART, depends_on=DEPENDS_ON)
def mha_output(sub, ref):
    g = torch.Generator().manual_seed(201)
    # D = E / H is never H here, so sqrt(D) * sqrt(D) = D is never sqrt(E): dividing by sqrt(D) twice and dividing by
    # sqrt(E) give different outputs (with H = 1, D = E and sqrt(E) is the right scale)
    for E, H, B, T in ((24, 4, 2, 5), (12, 3, 3, 4), (8, 1, 1, 3)):
        check_outputs(sub, ref, E, H, torch.randn(B, T, E, generator=g), None, seed=E * 10 + H)


@check("MHA: the padding mask hides padded positions", points=2, part=PART, depends_on=DEPENDS_ON)
def mha_mask(sub, ref):
    g = torch.Generator().manual_seed(202)
    E, H, B, T = 24, 4, 3, 6
    x = torch.randn(B, T, E, generator=g)
    mask = torch.zeros(B, T)
    mask[1, 4:] = 1
    mask[2, 2:] = 1
    try:
        check_outputs(sub, ref, E, H, x, mask, seed=7)
    except Fail:
        # an output wrong with and without a mask is the output check's to grade: here only the mask's own work
        # counts, that padded positions change nothing at the real ones and that the mask changes the output
        if _right_without_mask(sub, ref, E, H, x) or not _hides_padding(sub, E, H, x, mask):
            raise


def _right_without_mask(sub, ref, E, H, x):
    try:
        check_outputs(sub, ref, E, H, x, None, seed=7)
    except Fail:
        return False
    return True


def _hides_padding(sub, E, H, x, mask):
    """With the reference's weights in eval(): new embeddings at the padded positions change nothing at the real
    ones, the output is a computation on the input, and the mask changes the rows that have padding."""
    padded = mask.bool()  # (B, T)
    x2 = x.clone()
    x2[padded] = torch.randn(int(padded.sum()), E, generator=torch.Generator().manual_seed(204))
    module = _build(sub, E, H, 0.0)
    module.eval()
    try:
        load_weights(sub, module, mha_state(E, 7), f"MultiHeadAttention({E}, {H}, 0.0)")
        out, out2, unmasked = _forward(module, x, mask), _forward(module, x2, mask), _forward(module, x, None)
        other = _forward(module, x2 + 1, mask)
    except (Fail, StudentError):
        return False
    if out.shape != x.shape or output_problem(out, other, x):
        return False
    rows = padded.any(dim=1)  # sequences with padding: the mask must change their real positions' output
    real = ~padded
    return close(out[real], out2[real]) and not close(out[rows][real[rows]], unmasked[rows][real[rows]])


def _own_attention_drops(sub):
    """Does the student's scaled_dot_product drop weights at attn_drop_rate=0.5?"""
    q, k, v = (torch.randn(2, 2, 8, 4, generator=torch.Generator().manual_seed(s)) for s in (1, 2, 3))
    try:
        _, attention = sub.scaled_dot_product(q, k, v, attn_drop_rate=0.5)
        return bool((attention == 0).any())
    except Exception:  # noqa: BLE001 - part 1 is broken: it decides nothing here
        return True


@check("MHA: attention dropout in train() only", points=1, part=PART, depends_on=DEPENDS_ON)
def mha_dropout(sub, ref):
    g = torch.Generator().manual_seed(203)
    E, H = 16, 4
    x = torch.randn(4, 8, E, generator=g)
    module = _build(sub, E, H, 0.5)
    load_weights(sub, module, mha_state(E, 3), f"MultiHeadAttention({E}, {H}, 0.5)")
    module.eval()
    first, second = _forward(module, x, None), _forward(module, x, None)
    # determinism and dropout only count for an output that is computed from the input
    problem = output_problem(first, _forward(module, torch.randn(4, 8, E, generator=g), None), x)
    if problem:
        raise Fail(f"MultiHeadAttention({E}, {H}, 0.5) in eval() {problem}, so its dropout cannot be checked")
    expect_identical(first, second, "in eval() two calls with the same input gave different outputs: apply attention "
                     "dropout only when self.training is True", f"MultiHeadAttention({E}, {H}, 0.5)'s output in eval()")
    module.train()
    third, fourth = _forward(module, x, None), _forward(module, x, None)
    # With p = 0.5 on 4 x 4 x 8 x 8 attention weights, two calls in train() give identical outputs only
    # if the same weights are dropped in both: probability 2^-1024.
    if torch.equal(third, fourth) or torch.allclose(third, first, atol=1e-6):
        if not _own_attention_drops(sub):
            # not a pass: a module that never passes the rate on would hide behind it (part 1 grades the rate)
            raise Fail("in train() mode with attn_drop_rate=0.5 the output is deterministic, and your "
                       "scaled_dot_product drops no weight at attn_drop_rate=0.5 (see part 1), so the module's "
                       "attention dropout cannot be checked")
        raise Fail("in train() mode with attn_drop_rate=0.5 the output is deterministic: pass attn_drop_rate "
                   "to scaled_dot_product while self.training is True")
    problem = _weight_dropout_problem(sub, module, E, H, 0.5)
    if problem:
        raise Fail(problem)


def _uniform_attention_state(E, H, layout):
    """q = k = 0, so every attention row is uniform over the keys; v = the input; o_proj the identity; zero biases."""
    zeros = torch.zeros(E, E)
    state = {"qkv_proj.weight": torch.cat([zeros, zeros, torch.eye(E)]), "qkv_proj.bias": torch.zeros(3 * E),
             "o_proj.weight": torch.eye(E), "o_proj.bias": torch.zeros(E)}
    return in_layout(state, layout, E, H)


def _kept_key_means(x, p):
    """The output when dropout at rate p zeroes some of the uniform weights 1 / T and scales the others by
    1 / (1 - p): one row per subset of kept keys, (B, 2^T, E)."""
    T = x.shape[1]
    subsets = torch.tensor(list(itertools.product((0.0, 1.0), repeat=T)), dtype=torch.float64)  # (2^T, T)
    return subsets @ x.double() / (T * (1 - p))


def _heads(t, H, strided):
    """(..., E) -> (..., H, D): each head's features, contiguous, or every H-th one (a strided split, which the
    output check grades; the dropout is judged in the module's own grouping)."""
    D = t.shape[-1] // H
    return t.unflatten(-1, (D, H)).transpose(-1, -2) if strided else t.unflatten(-1, (H, D))


def _weight_dropout_problem(sub, module, E, H, p):
    """Why the module's train() output is not attention with dropped attention WEIGHTS, or None. With q = k = 0
    every weight is 1 / T and v = x, so with the weights dropped each head's output at each position is the sum of
    x over the keys its dropout kept, times 1 / (T (1 - p)): one subset of keys for all D features of the head,
    whatever the draw. Dropout on the values, the heads or the output zeroes single features instead: a head's
    D = 4 features all kept or all dropped has probability 1/8, for all 80 head outputs 8^-80 (< 1e-72)."""
    B, T = 4, 5
    x = torch.randn(B, T, E, generator=gen(205))
    for layout in (0, 1):
        load_weights(sub, module, _uniform_attention_state(E, H, layout), f"MultiHeadAttention({E}, {H}, {p})")
        module.eval()
        if close(_forward(module, x, None), x.mean(1, keepdim=True).expand(B, T, E)):
            break
    else:
        return None  # these weights do not give the documented wiring's output: the output checks say why
    module.train()
    got, means = _forward(module, x, None).double(), _kept_key_means(x, p)  # (B, T, E), (B, 2^T, E)
    for strided in (False, True):
        heads = _heads(got, H, strided)[:, :, None] - _heads(means, H, strided)[:, None]  # (B, T, 2^T, H, D)
        gap = heads.abs().amax(-1).amin(2)  # (B, T, H): the best subset's
        if bool((gap < 1e-4).all()):
            return None
    return (f"in train() with attn_drop_rate={p} the output is not attention with dropped attention weights: "
            "apply dropout to the attention weights (scaled_dot_product's attn_drop_rate, kept weights scaled by "
            "1 / (1 - p)), not to the values, the heads or the output")


@check("MHA: gradients reach qkv_proj and o_proj", points=1, part=PART, depends_on=DEPENDS_ON)
def mha_gradients(sub, ref):
    g = torch.Generator().manual_seed(204)
    E, H, B, T = 8, 2, 2, 5
    x, w = torch.randn(B, T, E, generator=g), torch.randn(B, T, E, generator=g)
    mask = torch.zeros(B, T)
    mask[1, 3:] = 1
    module = _build(sub, E, H, 0.0)
    load_weights(sub, module, mha_state(E, 5), f"MultiHeadAttention({E}, {H}, 0.0)")
    try:
        grads = sub.helpers.tb_grads(module, [x, mask], w)
    except StudentError as exc:
        raise Fail(f"backpropagating through your MultiHeadAttention failed: {exc.type}: {exc.message}") from None
    names = ("qkv_proj.weight", "qkv_proj.bias", "o_proj.weight", "o_proj.bias")
    missing = [n for n in names if not isinstance(grads.get(n), torch.Tensor)
               or not bool(torch.isfinite(grads[n]).all()) or not bool(grads[n].abs().sum() > 0)]
    if missing:
        unused = sorted({n.split(".")[0] for n in missing})
        raise Fail(f"no gradient reaches {', '.join(missing)}: the output must be computed from "
                   f"{' and '.join(unused)} (is it applied at all?) with differentiable torch operations (no "
                   ".detach(), .data, .numpy() or torch.no_grad())")
