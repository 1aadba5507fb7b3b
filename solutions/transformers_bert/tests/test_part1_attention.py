"""Hidden checks of part 1: scaled_dot_product(q, k, v, attn_drop_rate=0.0, mask=None).

Values are compared with the reference on seeded inputs. When they differ, the check computes the
results of the usual mistakes here in the judge and names the one that matches, if any. Gradients are
compared with the reference's where the forward matches it, else with finite differences of the
student's own function (attention_gradients).
"""
import math

import torch

from _common import attention_problem, sums_alike
from autograder.testing import Fail, StudentError, check, close, expect_finite, expect_shape, gen, worker_helpers

PART = "1. Scaled dot-product attention"

# Helpers shared by every test file of this assignment (all helper code runs in one namespace in the
# worker, beside the student's definitions; it holds no expected values).
worker_helpers('''
import torch


def tb_load_state(module, state):
    """Copy `state` into the module's parameters and buffers: by name, else by position and shape; an embedding
    table with extra rows gets the state's rows first (autograder.sandbox.weights). Returns {"problems", "notes"};
    nothing is loaded when something does not fit."""
    from autograder.sandbox.weights import load_state
    return load_state(module, state)


def tb_grads(module, inputs, weight):
    """Backward of (module(*inputs) * weight).sum(); every parameter's gradient (None: it got none)."""
    module.zero_grad(set_to_none=True)
    out = module(*inputs)
    if isinstance(out, (tuple, list)):  # a block's (embedding, mask), a list accepted as everywhere else
        out = out[0]
    (out * weight).sum().backward()
    return {name: None if p.grad is None else p.grad.detach().clone() for name, p in module.named_parameters()}


def tb_sdp_seeded(q, k, v, mask):
    """This program's scaled_dot_product without dropout, torch's generator seeded first: randomness it draws
    anyway (dropout left on at rate 0) is the same draw on every call, so the calls are of one function."""
    from autograder.seeding import seed_torch
    seed_torch(0)
    return submission.scaled_dot_product(q, k, v, mask=mask, attn_drop_rate=0.0)


def tb_sdp_grads(q, k, v, mask, w_values, w_attention):
    """Gradients of (values * w_values).sum() + (attention * w_attention).sum() with respect to q, k and v (None:
    it got none), through this program's scaled_dot_product without dropout (called as tb_sdp_seeded calls it)."""
    leaves = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
    values, attention = tb_sdp_seeded(*leaves, mask)
    ((values * w_values).sum() + (attention * w_attention).sum()).backward()
    return [None if t.grad is None else t.grad.detach().clone() for t in leaves]
''')


def _qkv(seed, B=2, H=3, T=6, D=8):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(B, H, T, D, generator=g) for _ in range(3))


def _padding_mask(B, T, lengths):
    """(B, T) float mask, 1 = padding: sequence b has lengths[b] real tokens, then padding."""
    mask = torch.zeros(B, T)
    for b, n in enumerate(lengths):
        mask[b, n:] = 1
    return mask


def _sdp(sub, *args, **kwargs):
    """The student's (values, attention), checked to be a pair of tensors."""
    try:
        out = sub.scaled_dot_product(*args, **kwargs)
    except StudentError as exc:
        raise Fail(exc.describe()) from None
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise Fail("scaled_dot_product must return a tuple (values, attention)")
    values, attention = out
    for name, t in (("values", values), ("attention", attention)):
        if not isinstance(t, torch.Tensor):
            raise Fail(f"scaled_dot_product must return tensors; {name} is a {type(t).__name__}")
    return values.detach().double(), attention.detach().double()


def _softmax_weights(q, k, scale, dim=-1, mask=None, fill=float("-inf"), mask_queries=False):
    """Attention weights of a few plausible variants, computed in the judge."""
    logits = (q @ k.transpose(-2, -1)).double() / scale
    if mask is not None:
        where = mask.bool()[:, None, :, None] if mask_queries else mask.bool()[:, None, None, :]
        logits = logits.masked_fill(where, fill)
    return torch.softmax(logits, dim=dim)


def _diagnose_weights(attention, q, k):
    """A message naming the mistake the student's weights match, or a generic one."""
    B, H, T, D = q.shape
    if not torch.isfinite(attention).all():
        return "the attention weights contain NaN or inf"
    variants = [
        (math.sqrt(D), -2, "the softmax runs over the wrong axis: each row (one query) must sum to 1 over the "
                           "keys, i.e. softmax over the last axis"),
        (1.0, -1, "the logits are not scaled: divide q k^T by sqrt(D), D being the last dimension of q"),
        (float(D), -1, "the logits are divided by D instead of sqrt(D)"),
        (math.sqrt(H * D), -1, "the logits are divided by sqrt(H * D), the model width E: divide by sqrt(D), "
                               "the head dimension (the last dimension of q)"),
    ]
    for scale, dim, message in variants:
        if close(attention, _softmax_weights(q, k, scale, dim)):
            return message
    sums = attention.sum(-1)
    if sums_alike(sums) and not close(sums, torch.ones_like(sums)):
        factor = float(sums.flatten()[0])
        if any(close(attention / factor, _softmax_weights(q, k, scale)) for scale in (1.0, math.sqrt(D))):
            return (f"the weights are a softmax multiplied by {factor:.3g} afterwards (each row sums to {factor:.3g}): "
                    "scale the logits q k^T by 1 / sqrt(D) before the softmax, and leave its output as it is")
    if not torch.allclose(attention.sum(-1), torch.ones_like(attention.sum(-1)), atol=1e-4):
        return "the rows of the attention matrix do not sum to 1: apply the softmax over the last (key) axis"
    return "the attention weights differ from softmax(q k^T / sqrt(D)) over the keys"


def _ignores_queries(sub, q, k, v, attention, **kwargs):
    """True if the weights stay the same for other queries (uniform, identity or constant 'attention')."""
    other = torch.randn(q.shape, generator=torch.Generator().manual_seed(99))
    _, attention2 = _sdp(sub, other, k, v, **kwargs)
    return attention2.shape == attention.shape and torch.allclose(attention2, attention, atol=1e-6)


def _require_attention(sub, q, k, v, values, attention, what, **kwargs):
    """Fail unless (values, attention) is attention computed from q and k. Checks of one property (masking,
    bool masks, dropout) pass only on top of this: a function consistent with itself but computing nothing
    (zeros, NaN, (q, q), identity weights returning v) earns nothing."""
    problem = attention_problem(values, attention, v)
    if problem is None and _ignores_queries(sub, q, k, v, attention, **kwargs):
        problem = "the attention weights do not depend on the queries q: they must be softmax(q k^T / sqrt(D))"
    if problem:
        raise Fail(f"{what}: {problem}")


@check("attention: weights are softmax(q k^T / sqrt(D)) over the keys", points=1.5, part=PART)
def attention_weights(sub, ref):
    for seed, shape in ((11, (2, 3, 6, 8)), (12, (1, 2, 4, 16))):
        q, k, v = _qkv(seed, *shape)
        B, H, T, D = shape
        _, attention = _sdp(sub, q, k, v, attn_drop_rate=0.0)
        expect_shape(attention, (B, H, T, T), f"attention for q, k, v of shape ({B}, {H}, {T}, {D})")
        _, expected = ref.scaled_dot_product(q, k, v, attn_drop_rate=0.0)
        if not close(attention, expected):
            raise Fail(_diagnose_weights(attention, q, k) + f" (q, k, v of shape ({B}, {H}, {T}, {D}), no mask)")


@check("attention: values are the weights applied to v", points=1, part=PART)
def attention_values(sub, ref):
    q, k, v = _qkv(21, 2, 2, 5, 4)
    values, attention = _sdp(sub, q, k, v, attn_drop_rate=0.0)
    expect_shape(values, (2, 2, 5, 4), "values for q, k, v of shape (2, 2, 5, 4)")
    expect_shape(attention, (2, 2, 5, 5), "attention for q, k, v of shape (2, 2, 5, 4)")
    if not close(values, attention @ v.double()):  # the student's own weights: part of the weights check
        raise Fail("values must be the attention weights applied to v: attention @ v, shape (B, H, T, D)")
    # consistent garbage (zero weights and zero values, NaN, identity weights returning v) earns nothing
    _require_attention(sub, q, k, v, values, attention, "without a mask", attn_drop_rate=0.0)


def _masked_from_unmasked(attention, mask):
    """What masking must do to a row of attention weights: zero the padded keys, renormalise the rest. Weights
    that are a softmax over the queries (each column sums to 1: the softmax check's mistake) are masked as that
    softmax does: a padded key's column, all large negative logits, becomes uniform over the queries. Rows that
    sum to another number than 1 (a softmax scaled again, the weights check's mistake) keep their sum."""
    pad = mask.bool()[:, None, None, :]
    if _columns_sum_to_one(attention) and not _columns_sum_to_one(attention.transpose(-1, -2)):
        return torch.where(pad, torch.full_like(attention, 1 / attention.shape[-2]), attention)
    kept = attention * ~pad
    return kept / kept.sum(-1, keepdim=True) * attention.sum(-1, keepdim=True)


def _columns_sum_to_one(attention):
    sums = attention.double().sum(-2)
    return bool(torch.isfinite(sums).all()) and torch.allclose(sums, torch.ones_like(sums), atol=1e-4)


def _check_mask(sub, ref, mask, what):
    """The masked weights against the student's own unmasked weights (zero the padded keys, renormalise),
    so a mistake in the scaling or the softmax is not graded again here."""
    B, T = mask.shape
    q, k, v = _qkv(31, B, 2, T, 4)
    values, attention = _sdp(sub, q, k, v, attn_drop_rate=0.0, mask=mask)
    expect_shape(attention, (B, 2, T, T), f"attention with a {what}")
    try:
        _, unmasked = _sdp(sub, q, k, v, attn_drop_rate=0.0)
    except Fail:  # mask=None fails (no `if mask is not None`): the no-mask checks' mistake; judged by the reference
        unmasked = torch.full_like(attention, float("nan"))
    expected = _masked_from_unmasked(unmasked, mask) if unmasked.shape == attention.shape else None
    _, reference = ref.scaled_dot_product(q, k, v, attn_drop_rate=0.0, mask=mask.float())
    if expected is not None and close(attention, expected) or close(attention, reference):
        if not close(values, attention @ v.double()):
            raise Fail(f"with a {what} the values differ from attention @ v")
        # masking weights that ignore q and k (e.g. uniform over the real keys) is not attention
        _require_attention(sub, q, k, v, values, attention, f"with a {what}", attn_drop_rate=0.0, mask=mask)
        return
    pad = mask.bool()[:, None, None, :].expand_as(attention)
    finite_rows = torch.isfinite(attention).all(-1, keepdim=True).expand_as(attention)
    padded = attention[pad & finite_rows]
    padded_weight = padded.abs().max().item() if padded.numel() else 0.0
    real_weight_zero = bool((attention[~pad & finite_rows] == 0).any())
    if padded_weight > 1e-6 and real_weight_zero:
        raise Fail(f"with a {what}, real tokens (0) get zero weight and padding (1) does not: the mask is "
                   "inverted; 1 = padding, must not be attended to")
    if not torch.isfinite(attention).all():
        raise Fail(f"with a {what} the attention weights contain NaN or inf")
    if close(attention, unmasked):
        raise Fail(f"with a {what} the attention weights ignore the mask: padded keys (1) must get weight 0")
    if close(attention, _softmax_weights(q, k, 2.0, mask=mask, fill=-1e9, mask_queries=True)):
        raise Fail(f"with a {what} the mask is applied to the queries (rows) instead of the keys (columns): "
                   "broadcast it as (B, 1, 1, T)")
    if padded_weight > 1e-6:
        raise Fail(f"with a {what}, keys marked as padding get a nonzero attention weight: give them a large "
                   "negative logit (e.g. -1e9) before the softmax")
    raise Fail(f"with a {what} the weights of the real keys are not the softmax over the real keys only")


@check("attention: padded keys get zero weight", points=2, part=PART)
def attention_mask(sub, ref):
    _check_mask(sub, ref, _padding_mask(3, 7, [7, 4, 2]), "0/1 float padding mask")
    mask = torch.zeros(2, 6)
    mask[0, 1] = mask[0, 4] = mask[1, 0] = 1  # padding need not be at the end
    _check_mask(sub, ref, mask, "0/1 float mask with padding in the middle")


@check("attention: a bool mask (True = padding) works like a 0/1 mask", points=1, part=PART)
def attention_bool_mask(sub, ref):
    mask = _padding_mask(3, 7, [7, 3, 5])
    q, k, v = _qkv(32, 3, 2, 7, 4)
    with_float = _sdp(sub, q, k, v, attn_drop_rate=0.0, mask=mask)
    try:
        with_bool = _sdp(sub, q, k, v, attn_drop_rate=0.0, mask=mask.bool())
    except Fail as exc:
        raise Fail(f"with a bool mask (True = padding): {exc}") from None
    for name, a, b in zip(("values", "attention"), with_bool, with_float):
        if not (a.shape == b.shape and torch.allclose(a, b, atol=1e-6, equal_nan=True)):
            raise Fail(f"a bool mask (True = padding) gives other {name} than the same mask as 0/1 floats: "
                       "the docstring allows both")
    # the same result both ways only counts if it is attention: (q, q), NaN or zeros are the same both ways too
    try:
        _require_attention(sub, q, k, v, *with_bool, "with a bool mask (True = padding)", attn_drop_rate=0.0,
                           mask=mask.bool())
    except Fail:
        # ... or a masking mistake (the weights zeroed after the softmax) on a function that is attention without a
        # mask, whose masked weights are finite and read the queries: how it masks is the masking check's
        if not (_attention_without_mask(sub, q, k, v) and bool(torch.isfinite(with_bool[1]).all())
                and not _ignores_queries(sub, q, k, v, with_bool[1], attn_drop_rate=0.0, mask=mask.bool())):
            raise


def _attention_without_mask(sub, q, k, v) -> bool:
    try:
        _require_attention(sub, q, k, v, *_sdp(sub, q, k, v, attn_drop_rate=0.0), "without a mask", attn_drop_rate=0.0)
    except Fail:
        return False
    return True


@check("attention: dropout on the weights at rate p, exact at rate 0", points=1, part=PART)
def attention_dropout(sub, ref):
    p = 0.25
    q, k, v = _qkv(41, 4, 4, 16, 8)
    _, exact = _sdp(sub, q, k, v)
    _, exact0 = _sdp(sub, q, k, v, attn_drop_rate=0.0)
    expect_finite(exact, "the attention weights with attn_drop_rate=0")
    # a softmax over the wrong axis (columns summing to 1) or scaled again is the softmax check's mistake, not
    # graded again here
    if (exact.shape != (4, 4, 16, 16) or not torch.equal(exact, exact0)
            or not (sums_alike(exact.sum(-1)) or _columns_sum_to_one(exact))):
        raise Fail("with attn_drop_rate=0 (the default) the attention must be exact: no dropout, rows summing to 1")
    if _ignores_queries(sub, q, k, v, exact):  # dropout on weights that are not attention earns nothing
        raise Fail("with attn_drop_rate=0 the attention weights do not depend on the queries q: they must be "
                   "softmax(q k^T / sqrt(D))")
    values, attention = _sdp(sub, q, k, v, attn_drop_rate=p)
    expect_shape(attention, (4, 4, 16, 16), "attention with attn_drop_rate=0.25")
    dropped = attention == 0
    frac = dropped.double().mean().item()
    # 4096 weights, each dropped independently with p = 0.25: the dropped fraction has a standard
    # deviation of 0.0068, so [0.17, 0.33] is more than 11 standard deviations wide on each side
    # (false failure < 1e-25); no dropout (0), or dropping with 1 - p (0.75), is far outside.
    if frac < 0.17 or frac > 0.33:
        if frac < 0.17 and values.shape == (4, 4, 16, 8) and not close(values, attention @ v.double(), atol=1e-4):
            raise Fail("with attn_drop_rate=0.25 the values are not the returned weights applied to v: return the "
                       "attention weights after dropout, the ones the values are computed from")
        raise Fail(f"with attn_drop_rate=0.25 about 25% of the attention weights should be dropped (set to 0); "
                   f"yours dropped {frac:.0%}")
    kept = ~dropped
    ratio = attention[kept] / exact[kept]
    if not torch.allclose(ratio, torch.full_like(ratio, 1 / (1 - p)), rtol=1e-3):
        raise Fail("the attention weights that dropout keeps must be scaled by 1 / (1 - p), as nn.Dropout and "
                   "F.dropout do")
    if not close(values, attention @ v.double(), atol=1e-4):
        raise Fail("with dropout, values must be computed from the weights after dropout (return those weights)")


NO_GRAPH = ("compute it with differentiable torch operations (no .detach(), .data, .item(), .numpy() or "
            "torch.no_grad())")

# -- the gradients of the student's own function, by finite differences ------------------------------------------
#
# When the forward differs from the reference's, its gradients cannot be compared with the reference's: they are
# compared with the derivatives of the student's own function. L = (values * w_values).sum() +
# (attention * w_attention).sum() (what tb_sdp_grads backpropagates) is differentiated along FD_DIRECTIONS seeded
# random directions d (entries N(0, 1)) for each of q, k and v, by central differences,
#     (L(x + h d) - L(x - h d)) / 2h   against   <grad_x L, d>   (autograd's directional derivative),
# calling the student's scaled_dot_product (tb_sdp_seeded: no dropout, torch's generator seeded before every call,
# so randomness it draws anyway is one draw) with float64 inputs where it backpropagates them, else float32. L is
# summed in the judge in float64; <grad_x L, d> is taken along the perturbation the function actually got,
# (x+ - x-) / 2, so rounding the perturbed inputs to float32 costs nothing.
#
# Tolerances. A direction passes when |autograd - central difference| <= rtol * (the largest central difference of
# that input) + FD_NOISE * u * S / h, where S = sum |terms of L| and u is the unit roundoff of the arithmetic the
# student's function does. Two errors, for inputs of unit scale:
# - truncation: h^2 / 6 * (third derivative of L), relative to the derivative about h^2 (2e-5 measured at h = 1e-3
#   for the unscaled logits, 2e-7 at h = 1e-4); rtol covers it with room for sharper smooth functions;
# - rounding: L computed with unit roundoff u errs by a few u * S, so the difference quotient errs by about
#   u * S / h; FD_NOISE = 16 of these (measured: under 0.5 of them, float32 inside, every style, 40-200 draws).
# u is measured, never read off dtypes (a .float() inside may be cast back to float64), by _arithmetic:
# - values and weights returned for float64 inputs that are all bfloat16 or all float16 numbers (exactly): not
#   judged (passes). A step above their resolution is too coarse for any derivative, and below it the function is
#   flat between its roundings: no tolerance tells its gradients from a cut;
# - float32 inputs only, or outputs that are all float32 numbers: float32, h = 1e-3, rtol = 1e-2 (FLOAT32_STEP;
#   measured worst 1.7e-3 for float32 arithmetic);
# - float64 (h = 1e-4, rtol = 1e-3: FLOAT64_STEP) only on evidence: for each input, L(x + p d) != L(x - p d) and the
#   second difference |L(x + p d) - 2 L(x) + L(x - p d)| <= FD_FLOAT64_LEVEL * S, p = 1e-6 (FD_PROBE). Exact
#   arithmetic leaves about p^2 * L'' there (1e-12 of S), float64 rounding about 1e-16 of S, a float32 step anywhere
#   (float32 logits cast back, a softmax with dtype=float32) about 1e-8 of S, 100 times the level (all three below
#   it by chance: under 1e-5). Taking float32 for float64 only makes the check more lenient.
# A path cut from the graph (a .detach(), .data or .item() on one term) drops a whole term of the derivative, tens of
# percent of it (in float64 anything above 0.1% of it is found). Masked keys (a -inf or -1e9 logit, filled or added)
# get weight exactly 0 in every call: no derivative, no noise. A direction that disagrees is tried again with h / 10
# (allowing 10 times the rounding): a kink of a non-smooth function (relu, abs, clamp) lying between x - h d and
# x + h d is not a cut path.
FD_DIRECTIONS = 3
FD_NOISE = 16
FD_PROBE = 1e-6
FD_FLOAT64_LEVEL = 1e-10
FLOAT64_STEP = (1e-4, 1e-3, 2.0 ** -53)  # h, rtol, u
FLOAT32_STEP = (1e-3, 1e-2, 2.0 ** -24)


def _not_attention(values, attention, v):
    """Why (values, attention) does not have the form of attention, or None: weights of shape (B, H, T, T), finite and
    non-negative, and values of shape (B, H, T, D) that are those weights applied to v (attention @ v: each value row
    a non-negative combination of the rows of v). Nothing a correct scaled_dot_product can miss at rate 0; nor does it
    ask the rows to sum to 1: a wrong normalisation (softmax over the queries, dropout left on) is a forward mistake
    that the other checks grade, with a gradient flow that is attention's."""
    B, H, T, D = v.shape
    if tuple(attention.shape) != (B, H, T, T) or tuple(values.shape) != (B, H, T, D):
        return (f"for q, k, v of shape ({B}, {H}, {T}, {D}) the values must have shape ({B}, {H}, {T}, {D}) and the "
                f"attention weights ({B}, {H}, {T}, {T})")
    if not (bool(torch.isfinite(values).all()) and bool(torch.isfinite(attention).all())):
        return "the values or attention weights contain NaN or inf"
    if bool((attention < 0).any()):
        return "some attention weights are negative (weights from a softmax are >= 0)"
    if not close(values, attention @ v.double()):
        return "the values are not the attention weights applied to v (attention @ v)"
    return None


def _own_outputs(sub, inputs, mask, w_values, w_attention):
    """(values, attention) of the student's function at inputs = [q, k, v], as it returned them."""
    try:
        out = sub.helpers.tb_sdp_seeded(*inputs, mask)
    except StudentError as exc:
        raise Fail(f"your scaled_dot_product raised on slightly changed q, k and v ({exc.type}: "
                   f"{exc.message})") from None
    if not (isinstance(out, (tuple, list)) and len(out) == 2 and all(isinstance(t, torch.Tensor) for t in out)):
        raise Fail("scaled_dot_product must return a tuple of tensors (values, attention)")
    values, attention = (t.detach() for t in out)
    if values.shape != w_values.shape or attention.shape != w_attention.shape:
        raise Fail("scaled_dot_product returned values or attention weights of other shapes for slightly changed q, k "
                   "and v")
    return values, attention


def _own_loss(sub, inputs, mask, w_values, w_attention):
    """(L, S = sum of |terms of L|) of the student's function at inputs = [q, k, v], summed in float64."""
    values, attention = _own_outputs(sub, inputs, mask, w_values, w_attention)
    terms = torch.cat([(values.double() * w_values.double()).flatten(),
                       (attention.double() * w_attention.double()).flatten()])
    return terms.sum().item(), terms.abs().sum().item()


def _moved(inputs, i, direction, h):
    """inputs with input i moved by +h and by -h along direction, each in the input's dtype."""
    return [[(t.double() + sign * h * direction).to(t.dtype) if j == i else t for j, t in enumerate(inputs)]
            for sign in (1, -1)]


def _derivatives(sub, inputs, i, direction, grad, mask, w_values, w_attention, h, u):
    """Along `direction` for input i: (autograd's derivative of L, the central difference, the rounding allowance)."""
    plus, minus = _moved(inputs, i, direction, h)
    (l_plus, s_plus), (l_minus, s_minus) = (_own_loss(sub, x, mask, w_values, w_attention) for x in (plus, minus))
    autograd = (grad.double() * (plus[i].double() - minus[i].double())).sum().item() / (2 * h)
    return autograd, (l_plus - l_minus) / (2 * h), FD_NOISE * u * max(s_plus, s_minus) / h


def _all_of(dtype, tensors):
    """True when every entry of the tensors is a number of `dtype` (exactly)."""
    return all(torch.equal(t.double(), t.to(dtype).double()) for t in tensors)


def _arithmetic(sub, inputs, mask, w_values, w_attention, directions):
    """(h, rtol, u) for the student's function at inputs, or None where its arithmetic is too coarse (see above)."""
    outputs = _own_outputs(sub, inputs, mask, w_values, w_attention)
    if _all_of(torch.bfloat16, outputs) or _all_of(torch.float16, outputs):
        return None
    if inputs[0].dtype != torch.float64 or _all_of(torch.float32, outputs):
        return FLOAT32_STEP
    level, size = _own_loss(sub, inputs, mask, w_values, w_attention)
    for i in range(3):
        plus, minus = _moved(inputs, i, directions[i][0], FD_PROBE)
        (l_plus, _), (l_minus, _) = (_own_loss(sub, x, mask, w_values, w_attention) for x in (plus, minus))
        if not (abs(l_plus - 2 * level + l_minus) <= FD_FLOAT64_LEVEL * size and l_plus != l_minus):
            return FLOAT32_STEP
    return FLOAT64_STEP


def _own_gradients(sub, q, k, v, mask, w_values, w_attention, got):
    """(inputs [q, k, v], mask, their gradients): float64 where the student's function backpropagates float64 inputs,
    else the float32 ones already computed (`got`)."""
    wide = [t.double() for t in (q, k, v)]
    try:
        grads = sub.helpers.tb_sdp_grads(*wide, mask.double(), w_values.double(), w_attention.double())
    except StudentError:
        return [q, k, v], mask, got
    if all(isinstance(g, torch.Tensor) and g.shape == x.shape and bool(torch.isfinite(g).all())
           for g, x in zip(grads, wide)):
        return wide, mask.double(), grads
    return [q, k, v], mask, got


def _cut_inputs(sub, q, k, v, mask, w_values, w_attention, got):
    """The inputs among q, k, v whose autograd gradient is not the derivative of the student's own function."""
    inputs, mask, grads = _own_gradients(sub, q, k, v, mask, w_values, w_attention, got)
    g = gen(53)
    directions = [[torch.randn(x.shape, generator=g, dtype=torch.float64) for _ in range(FD_DIRECTIONS)]
                  for x in inputs]
    arithmetic = _arithmetic(sub, inputs, mask, w_values, w_attention, directions)
    if arithmetic is None:
        return []
    h, rtol, u = arithmetic
    cut = []
    for i, name in enumerate("qkv"):
        found = [_derivatives(sub, inputs, i, d, grads[i], mask, w_values, w_attention, h, u) for d in directions[i]]
        scale = max(abs(fd) for _, fd, _ in found)
        for d, (autograd, fd, noise) in zip(directions[i], found):
            if abs(autograd - fd) <= rtol * scale + noise:
                continue
            autograd, fd, noise = _derivatives(sub, inputs, i, d, grads[i], mask, w_values, w_attention, h / 10, u)
            if abs(autograd - fd) > rtol * scale + noise:
                cut.append(name)
                break
    return cut


@check("attention: gradients reach q, k and v as they do through softmax(q k^T / sqrt(D)) v", points=0.5, part=PART)
def attention_gradients(sub, ref):
    """The gradients of the student's scaled_dot_product (no dropout, a padding mask) with respect to q, k and v.

    Some gradient must reach each of q, k and v. Where the forward equals the reference's, the gradients must equal
    the reference's. Where it differs (the other checks grade how), this point is for a correct gradient flow: the
    gradients must be the true derivatives of the student's own function (finite differences, above), so a wrong
    scaling or softmax axis keeps it and a path cut from the graph loses it, naming q, k or v.

    Decision: a differentiable function that is not attention at all (`return q * k * v, q @ k.transpose(-2, -1)`)
    does not get the point, though its gradients are its true ones: the check credits gradients that flow as they
    do through attention, and such a function has none to flow through. So the forward must also have the form of
    attention (_not_attention: non-negative weights, values = weights @ v), a separate condition, stated as such in
    its message, that no correct implementation can fail.
    """
    q, k, v = _qkv(51, 2, 2, 5, 4)
    mask = _padding_mask(2, 5, [5, 3])
    g = gen(52)
    w_values, w_attention = torch.randn(2, 2, 5, 4, generator=g), torch.randn(2, 2, 5, 5, generator=g)
    try:
        got = sub.helpers.tb_sdp_grads(q, k, v, mask, w_values, w_attention)
    except StudentError as exc:
        raise Fail(f"backpropagating through your scaled_dot_product failed ({exc.type}: {exc.message}): "
                   f"{NO_GRAPH}") from None
    missing = [name for name, grad in zip("qkv", got) if grad is None or not bool(grad.abs().sum() > 0)]
    if missing:
        raise Fail(f"no gradient reaches {', '.join(missing)}: {NO_GRAPH}")
    values, attention = _sdp(sub, q, k, v, mask=mask, attn_drop_rate=0.0)
    expected_values, expected_attention = ref.scaled_dot_product(q, k, v, mask=mask, attn_drop_rate=0.0)
    if not (close(values, expected_values) and close(attention, expected_attention)):
        # the forward differs (the other checks say how): its gradients are checked against its own derivatives
        problem = _not_attention(values, attention, v)
        if problem:
            raise Fail("gradients are credited here only for a function that computes attention, and your "
                       f"scaled_dot_product does not: {problem}. It must return (attention @ v, attention), the "
                       "attention weights softmax(q k^T / sqrt(D)) over the keys")
        cut = _cut_inputs(sub, q, k, v, mask, w_values, w_attention, got)
        if cut:
            raise Fail(f"the gradients with respect to {', '.join(cut)} are not the derivatives of what your "
                       "scaled_dot_product computes (compared with finite differences of your own function): part of "
                       f"the computation is cut from the graph; {NO_GRAPH}")
        return
    expected = ref.helpers.tb_sdp_grads(q, k, v, mask, w_values, w_attention)
    wrong = [name for name, a, b in zip("qkv", got, expected) if not close(a, b)]
    if wrong:
        raise Fail(f"the outputs are right but the gradients with respect to {', '.join(wrong)} are not: part of the "
                   f"computation is cut from the graph; {NO_GRAPH}")
