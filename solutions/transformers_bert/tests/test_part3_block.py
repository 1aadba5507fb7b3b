"""Hidden checks of part 3: TransformerBlock(embed_dim, n_heads, attn_drop_rate, layer_drop_rate).

One check loads identical weights (by the documented attribute names) into the student's and the
reference's blocks and compares outputs. The others isolate the block's wiring from the student's
MultiHeadAttention: inside the worker, helpers swap the block's `attn` and `ffn` for fixed maps
(zero, or tanh(x W)) and its norms for identities, so the judge knows exactly what a correct block
returns: residuals, norm order, the feed-forward network and the dropout are each checked by value.
"""

import torch
import torch.nn.functional as F

from _common import block_weights, close, in_layout, load_weights, output_problem
from autograder.testing import Fail, StudentError, check, expect_shape, gen, keep, normal, worker_helpers

# The student's code checked here calls these parts; where they fail it, the reference answers for them
DEPENDS_ON = ["MultiHeadAttention"]
PART = "3. Transformer encoder block"

worker_helpers('''
import torch
import torch.nn as nn


def tb_block_grads(block, x, mask, weight):
    """Backward of (block((x, mask))[0] * weight).sum(): (each parameter's gradient, x's gradient); None: none."""
    x = x.detach().clone().requires_grad_(True)
    grads = tb_grads(block, [(x, mask)], weight)
    return grads, None if x.grad is None else x.grad.detach().clone()


def tb_input(args, kwargs):
    """The sub-layer's input however the block passes it: first positional, or by the documented name
    (`self.attn(embedding=x, mask=mask)`) or any other keyword but the mask."""
    if args:
        return args[0]
    named = [v for k, v in kwargs.items() if k != "mask"]
    return kwargs.get("embedding", kwargs.get("x", named[0] if named else None))


class TbZero(nn.Module):
    """Stands in for a sub-layer: returns zeros of the input's shape."""
    def forward(self, *args, **kwargs):
        return torch.zeros_like(tb_input(args, kwargs))


class TbFixed(nn.Module):
    """Stands in for a sub-layer: a fixed map tanh(x W) the judge can compute itself."""
    def __init__(self, weight):
        super().__init__()
        self.register_buffer("weight", weight)

    def forward(self, *args, **kwargs):
        return torch.tanh(tb_input(args, kwargs) @ self.weight)


class TbIdentity(nn.Module):
    """Stands in for a LayerNorm: the identity, remembering its last input (where the block's residual sum is)."""
    def forward(self, x):
        self.seen = x.detach().clone()
        return x


def tb_ffn_standin(ffn, first):
    """The feed-forward stand-in, in the notebook's structure: `first` in place of ffn's first module and identities
    for the others, under the same names, so a block that indexes ffn (self.ffn[0] .. self.ffn[3]) or iterates over
    it computes `first` alone."""
    from collections import OrderedDict
    names = list(ffn._modules) if isinstance(ffn, nn.Sequential) and len(ffn) else ["0"]
    return nn.Sequential(OrderedDict((name, first if i == 0 else nn.Identity()) for i, name in enumerate(names)))


def tb_probe_block(block, attn_weight=None, ffn_weight=None, identity_norms=True):
    """Swap the block's sub-layers for stand-ins (None: zeros); keep or drop its LayerNorms (identities that
    remember their input)."""
    block.attn = TbZero() if attn_weight is None else TbFixed(attn_weight)
    if ffn_weight != "keep":
        block.ffn = tb_ffn_standin(block.ffn, TbZero() if ffn_weight is None else TbFixed(ffn_weight))
    if identity_norms:
        block.norm1 = TbIdentity()
        block.norm2 = TbIdentity()
    return block


def tb_flow(block, x):
    """One forward of a probed block on (x, None), recording the first input of attn, of ffn's first module and of
    each norm, and each norm's first output: where the norms sit, whatever the residuals add."""
    seen = {}

    def record(name):
        def pre(module, args, kwargs):
            seen.setdefault(name + ".in", tb_input(args, kwargs).detach().clone())
        return pre

    def post(name):
        def hook(module, args, out):
            seen.setdefault(name + ".out", out.detach().clone())
        return hook

    hooks = [block.attn.register_forward_pre_hook(record("attn"), with_kwargs=True),
             block.ffn[0].register_forward_pre_hook(record("ffn"), with_kwargs=True)]
    for name in ("norm1", "norm2"):
        norm = getattr(block, name)
        hooks += [norm.register_forward_pre_hook(record(name), with_kwargs=True), norm.register_forward_hook(post(name))]
    try:
        seen["out"] = block((x, None))[0].detach().clone()
    finally:
        for hook in hooks:
            hook.remove()
    return seen


def tb_norm1_input(block, x):
    """One forward of a probed block on (x, None): (what norm1 got, None when it was not called; the output)."""
    block.norm1.seen = None
    out = block((x, None))
    return block.norm1.seen, out[0].detach().clone()


def tb_ffn_branch(block, x):
    """One forward of the block in its mode: what ffn's first Linear got, what its last Linear returned (both None
    when not called) and the block's output embedding."""
    linears = [m for m in block.ffn if isinstance(m, nn.Linear)]
    seen = {}

    def record_input(module, args):  # returns None: the input is left as it is
        seen.setdefault("input", args[0].detach().clone())

    def record_output(module, args, out):
        seen.setdefault("linear", out.detach().clone())

    hooks = [linears[0].register_forward_pre_hook(record_input), linears[-1].register_forward_hook(record_output)]
    try:
        out = block((x, None))
    finally:
        for hook in hooks:
            hook.remove()
    return seen.get("input"), seen.get("linear"), out[0].detach().clone()


def tb_describe_sequential(seq):
    """(type name, p, in_features, out_features) of each module of an nn.Sequential-like container."""
    return [(type(m).__name__, getattr(m, "p", None), getattr(m, "in_features", None),
             getattr(m, "out_features", None), getattr(m, "approximate", None)) for m in seq]
''')


def block_state(E, seed, prefix=""):
    return block_weights(normal(gen(seed)), E, prefix)


def _block(sub, E, H, p_attn, p_layer):
    return keep(sub.TransformerBlock, E, H, p_attn, p_layer)


def _load(sub, module, state, what):
    load_weights(sub, module, state, what, "attn.qkv_proj, attn.o_proj, norm1, norm2, ffn.0, ffn.2")


def _probe(sub, block, **kwargs):
    try:
        sub.helpers.tb_probe_block(block, **kwargs)
    except StudentError as exc:
        raise Fail(f"the grader could not replace the sub-modules of your TransformerBlock: {exc.message}") from None


def _run(block, x, mask, what="TransformerBlock"):
    """The block's output embedding, with the returned tuple checked."""
    out = block((x, mask))
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise Fail(f"{what}.forward must return a tuple (embedding, mask), got {type(out).__name__}")
    y, mask_out = out
    if not isinstance(y, torch.Tensor):
        raise Fail(f"{what}.forward must return (embedding, mask) with a tensor embedding")
    expect_shape(y, x.shape, f"the embedding {what}.forward returns for an input of shape {tuple(x.shape)}")
    if mask is None and mask_out is not None or mask is not None and not (
            isinstance(mask_out, torch.Tensor) and torch.equal(mask_out, mask)):
        raise Fail(f"{what}.forward must return the mask it received, unchanged, as the second element")
    return y.double()


def _ln(x, state, name, E):
    return F.layer_norm(x, (E,), state[f"{name}.weight"].double(), state[f"{name}.bias"].double(), eps=1e-5)


def _ffn(x, state, act=F.gelu):
    h = act(x @ state["ffn.0.weight"].double().T + state["ffn.0.bias"].double())
    return h @ state["ffn.2.weight"].double().T + state["ffn.2.bias"].double()


RESIDUAL_CONSTANT = ("the attention residual is missing or adds a constant, not the block input: the first residual "
                     "is x + Dropout(MHA(x, mask)) with x the block's input embedding (a tensor of shape (B, T, E))")
NO_ATTN_RESIDUAL = ("the attention residual is missing: x' = norm1(x + Dropout(MHA(x, mask))) adds the block input x "
                    "to the attention's output")
NO_FFN_RESIDUAL = ("the feed-forward residual is missing: the block must return norm2(x' + FFN(x')), adding x' (norm1's "
                   "output) to the feed-forward output")


def _diagnose(sub, block, y, x, mask, state, E):
    """Name the wiring mistake y shows, given the student's own attention output (same weights)."""
    a = block.attn(x, mask).double()
    ln1 = lambda t: _ln(t, state, "norm1", E)  # noqa: E731
    ln2 = lambda t: _ln(t, state, "norm2", E)  # noqa: E731
    ffn = lambda t, act=F.gelu: _ffn(t, state, act)  # noqa: E731
    # "right given your own MultiHeadAttention" only counts if that attention computes something: with one
    # that returns zeros or its input, a block that skips the attention would match it
    attn_problem = output_problem(a, block.attn(x + torch.randn(x.shape, generator=gen(303)), mask), x)
    if attn_problem:
        return (f"the block's attention (your MultiHeadAttention, with these weights) {attn_problem}, so the "
                "block cannot be checked with it: see part 2")
    x = x.double()
    x1 = ln1(x + a)
    if close(y, ln2(x1 + ffn(x1))):
        return None
    candidates = []
    c1 = ln1(a)  # LayerNorm(E + a) == LayerNorm(a): a constant added instead of x vanishes in the norm
    candidates += [(ln2(c1 + ffn(c1)), RESIDUAL_CONSTANT),
                   (ln2(ffn(x1)), NO_FFN_RESIDUAL + " (or it adds a constant instead of x')")]
    candidates.append((ln2(x1 + ffn(x1, act=F.relu)), "the feed-forward network uses ReLU; it must use GELU"))
    x1a = ln1(x)
    candidates.append((ln2(x1a + ffn(x1a)), "the attention branch is missing: x' = norm1(x + Dropout(MHA(x, mask))) "
                                            "adds the attention's output to the block input"))
    candidates.append((ln2(x + ffn(x1)), "the feed-forward residual adds the block input; it must add x', "
                                         "the output of norm1 (x = norm2(x' + FFN(x')))"))
    x1s = _ln(x + a, state, "norm2", E)
    candidates.append((_ln(x1s + ffn(x1s), state, "norm1", E), "norm1 and norm2 are swapped: norm1 follows the "
                                                                 "attention, norm2 the feed-forward network"))
    x1p = x + block.attn(ln1(x).float(), mask).double()
    candidates.append((x1p + ffn(ln2(x1p)), "this is a pre-norm block (LayerNorm before each sub-layer); the "
                                           "notebook's block is post-norm: x' = norm1(x + Dropout(MHA(x))), "
                                           "then norm2(x' + FFN(x'))"))
    if mask is not None:
        x1n = ln1(x + block.attn(x.float(), None).double())
        candidates.append((ln2(x1n + ffn(x1n)), "the mask is not passed to self.attn"))
    for value, message in candidates:
        if close(y, value):
            return message
    return ("the block's output differs from norm2(x' + FFN(x')), x' = norm1(x + Dropout(MHA(x, mask))), with the "
            "same weights")


@check("block: output matches the reference with the same weights", points=1.5, part=PART, depends_on=DEPENDS_ON)
def block_output(sub, ref):
    E, H, B, T = 16, 4, 3, 6
    g = gen(301)
    x = 2 * torch.randn(B, T, E, generator=g) + 0.5
    mask = torch.zeros(B, T)
    mask[1, 4:] = 1
    mask[2, 1] = 1
    state = block_state(E, 302)
    reference = keep(ref.TransformerBlock, E, H, 0.3, 0.3)
    ref.helpers.tb_load_state(reference, state)
    reference.eval()
    expected = reference((x, mask))[0]
    block = _block(sub, E, H, 0.3, 0.3)
    block.eval()
    message = None
    for layout in (0, 1):
        _load(sub, block, in_layout(state, layout, E, H), f"TransformerBlock({E}, {H}, 0.3, 0.3)")
        y = _run(block, x, mask)
        if close(y, expected):
            return
        diagnosis = _diagnose(sub, block, y, x, mask, in_layout(state, layout, E, H), E)
        if diagnosis is None:
            return  # right given the student's own MultiHeadAttention: part 2 grades that
        message = message or diagnosis
    raise Fail(f"TransformerBlock in eval(), identical weights: {message}")


def _residual_problem(sub, E, H):
    """None if the block with zero sub-layers and identity norms is the identity map; else a message: which residual
    is missing when one sub-layer's stand-in output comes out alone."""
    g = gen(311)
    x = torch.randn(2, 5, E, generator=g) + 1.0
    x_other = torch.randn(2, 5, E, generator=g) - 1.0
    block = _block(sub, E, H, 0.0, 0.0)
    block.eval()
    _probe(sub, block)  # attention and feed-forward output zeros, norms are identities
    y, y_other = _run(block, x, None), _run(block, x_other, None)
    if close(y, x):
        return None
    if close(y, y_other):
        return _missing_residual(sub, block, x) or (
            "with both sub-layers returning zeros and identity norms the block's output does not depend on its "
            "input: a residual is missing or adds a constant instead of the sub-layer's input")
    return ("with both sub-layers returning zeros and identity norms the block must return its input unchanged: "
            "each residual adds the sub-layer's input to its output")


def _missing_residual(sub, block, x):
    """NO_ATTN_RESIDUAL or NO_FFN_RESIDUAL when, with one sub-layer a stand-in tanh(x W) and the other zeros, the
    block returns that sub-layer's output alone; else None."""
    w = torch.randn(x.shape[-1], x.shape[-1], generator=gen(313)) / 4
    for message, weights in ((NO_ATTN_RESIDUAL, {"attn_weight": w}), (NO_FFN_RESIDUAL, {"ffn_weight": w})):
        _probe(sub, block, **weights)
        if close(_run(block, x, None), torch.tanh(x @ w)):
            return message
    return None


@check("block: residuals add the block input", points=2, part=PART, depends_on=DEPENDS_ON)
def block_residuals(sub, ref):
    E, H, B, T = 16, 4, 2, 5
    problem = _residual_problem(sub, E, H)
    if problem:
        raise Fail(problem)
    g = gen(312)
    x = torch.randn(B, T, E, generator=g)
    wa, wf = torch.randn(E, E, generator=g) / 4, torch.randn(E, E, generator=g) / 4
    mask = torch.zeros(B, T)
    block = _block(sub, E, H, 0.0, 0.0)
    block.eval()
    _probe(sub, block, attn_weight=wa, ffn_weight=wf)  # attention: tanh(x wa), feed-forward: tanh(x wf)
    x1 = x + torch.tanh(x @ wa)
    y = _run(block, x, mask)
    if close(y, x1 + torch.tanh(x1 @ wf)):
        return
    if close(y, x + torch.tanh(x1 @ wf)):
        raise Fail("the feed-forward residual adds the block input; it must add x' = norm1(x + Dropout(MHA(x)))")
    if close(y, x1 + torch.tanh(x @ wf)):
        raise Fail("the feed-forward network gets the block input; it must get x' = norm1(x + Dropout(MHA(x)))")
    _probe(sub, block, attn_weight=wa)  # feed-forward: zeros
    if not close(_run(block, x, mask), x1):
        raise Fail("the attention residual must compute x + Dropout(MHA(x, mask)), x being the block's input")
    raise Fail("the feed-forward residual must compute x' + FFN(x'), x' being the output of the attention part")


@check("block: LayerNorm after each residual (post-norm)", points=1, part=PART, depends_on=DEPENDS_ON)
def block_post_norm(sub, ref):
    E, H, B, T = 16, 4, 2, 5
    g = gen(321)
    x = 3 * torch.randn(B, T, E, generator=g) + 1.0
    wa, wf = torch.randn(E, E, generator=g) / 4, torch.randn(E, E, generator=g) / 4
    state = block_state(E, 322)
    block = _block(sub, E, H, 0.0, 0.0)
    _load(sub, block, state, f"TransformerBlock({E}, {H}, 0.0, 0.0)")
    block.eval()
    _probe(sub, block, attn_weight=wa, ffn_weight=wf, identity_norms=False)
    y = _run(block, x, None)
    xd = x.double()
    A = lambda t: torch.tanh(t @ wa.double())  # noqa: E731
    Fn = lambda t: torch.tanh(t @ wf.double())  # noqa: E731
    ln1 = lambda t: _ln(t, state, "norm1", E)  # noqa: E731
    ln2 = lambda t: _ln(t, state, "norm2", E)  # noqa: E731
    x1 = ln1(xd + A(xd))
    if close(y, ln2(x1 + Fn(x1))):
        return
    p1 = xd + A(ln1(xd))
    if close(y, p1 + Fn(ln2(p1))) or close(y, ln2(p1 + Fn(ln2(p1)))):
        raise Fail("this is a pre-norm block (LayerNorm before each sub-layer); the notebook's block is post-norm: "
                   "x' = norm1(x + Dropout(MHA(x))), then norm2(x' + FFN(x'))")
    s1 = ln2(xd + A(xd))
    if close(y, ln1(s1 + Fn(s1))):
        raise Fail("norm1 and norm2 are swapped: norm1 follows the attention, norm2 the feed-forward network")
    if _post_norm_flow(sub.helpers.tb_flow(block, x), x):
        return  # the norms are where they belong; what the residuals add is the residual check's to grade
    raise Fail("with stand-in sub-layers the block does not compute norm2(x' + FFN(x')), x' = norm1(x + MHA(x))")


def _post_norm_flow(seen, x):
    """Whether a recorded forward (tb_flow) is post-norm whatever its residuals add: the attention gets the block
    input, the feed-forward network gets norm1's output, and the block returns norm2's output."""
    same = lambda a, b: isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and close(a, b)  # noqa: E731
    return (same(seen.get("attn.in"), x) and same(seen.get("ffn.in"), seen.get("norm1.out"))
            and same(seen.get("out"), seen.get("norm2.out")))


@check("block: feed-forward is Linear -> GELU -> Linear -> Dropout", points=1, part=PART, depends_on=DEPENDS_ON)
def block_ffn(sub, ref):
    E, H, B, T = 16, 4, 2, 5
    p = 0.3
    try:
        layers = sub.helpers.tb_describe_sequential(keep(sub.TransformerBlock, E, H, 0.1, p).ffn)
    except StudentError as exc:
        if exc.stub:
            raise Fail(exc.describe()) from None
        raise Fail(f"ffn must be an nn.Sequential(Linear(E, E), GELU(), Linear(E, E), Dropout(layer_drop_rate)): "
                   f"{exc.type}: {exc.message}") from None
    dropouts = [layer for layer in layers if layer[0] == "Dropout"]
    if not dropouts or layers[-1][0] != "Dropout" or abs((layers[-1][1] or 0) - p) > 1e-9:
        raise Fail("ffn must end with nn.Dropout(layer_drop_rate): TransformerBlock(16, 4, 0.1, 0.3).ffn has "
                   + ("no Dropout" if not dropouts else "no Dropout(0.3) as its last module"))
    g = gen(331)
    x = torch.randn(B, T, E, generator=g)
    state = block_state(E, 332)
    block = _block(sub, E, H, 0.0, 0.0)
    _load(sub, block, state, f"TransformerBlock({E}, {H}, 0.0, 0.0)")
    block.eval()
    _probe(sub, block, ffn_weight="keep")  # attention outputs zeros, identity norms: y = x + FFN(x)
    f = _run(block, x, None) - x.double()
    if not _is_ffn(f, x, state):
        # the residual around it may be what differs (the residual check grades that): read the network itself,
        # what its first Linear got and its last Linear returned
        x1, f, _ = sub.helpers.tb_ffn_branch(block, x)
        if x1 is None or f is None or not _is_ffn(f, x1, state):
            if x1 is not None and f is not None and close(f.double(), _ffn(x1.double(), state, F.relu)):
                raise Fail("the feed-forward network uses ReLU; the notebook's uses GELU (nn.GELU())")
            raise Fail("the feed-forward network does not compute Linear(E, E) -> GELU -> Linear(E, E) with ffn.0 "
                       "and ffn.2")
    _ffn_branch_dropout(sub, E, H, state)


def _is_ffn(f, x, state):
    """Whether f is Linear -> GELU -> Linear of x with the state's ffn weights (GELU exact or tanh-approximated)."""
    tanh_gelu = lambda t: F.gelu(t, approximate="tanh")  # noqa: E731 - nn.GELU(approximate="tanh") is fine too
    x = x.double()
    return close(f.double(), _ffn(x, state)) or close(f.double(), _ffn(x, state, tanh_gelu))


def _dropout_scale(d, f):
    """2 or 4 when d's nonzero values are f's scaled by that (dropped once or twice at p = 0.5), else None."""
    kept = d.abs() >= 1e-7
    for scale in (2, 4):
        if bool(kept.any()) and torch.allclose(d[kept], scale * f[kept], atol=1e-4, rtol=1e-4):
            return scale
    return None


def _ffn_branch_dropout(sub, E, H, state):
    """In train(), the feed-forward branch is dropped once, by ffn's own final Dropout(layer_drop_rate), before its
    residual: no second dropout on it (self.dropout belongs to the attention branch). Read from what ffn's Linear
    layers get and return, so a mistake of the attention branch (graded by the next check) does not count here."""
    B, T, p = 4, 8, 0.5
    block = _block(sub, E, H, 0.0, p)
    _load(sub, block, state, f"TransformerBlock({E}, {H}, 0.0, {p})")
    _probe(sub, block, ffn_weight="keep")  # attention outputs zeros, identity norms: y = x' + Dropout(FFN(x'))
    block.train()
    try:
        x1, f, y = sub.helpers.tb_ffn_branch(block, torch.randn(B, T, E, generator=gen(333)))
    except StudentError as exc:
        raise Fail(f"a forward of TransformerBlock({E}, {H}, 0.0, {p}) in train() failed: {exc.type}: "
                   f"{exc.message}") from None
    if x1 is None or f is None:
        raise Fail("in train() the block's forward did not run self.ffn: x = norm2(x' + self.ffn(x'))")
    f = f.double()  # the last Linear's output before the Dropout
    # the branch's output: after its residual, or alone where the residual is missing (the residual check's mistake)
    d = next((d for d in ((y - x1).double(), y.double()) if _dropout_scale(d, f) is not None), (y - x1).double())
    dropped = d.abs() < 1e-7
    scale = _dropout_scale(d, f)
    if scale != 2:  # 1 / (1 - p)
        if scale == 4:
            raise Fail("in train() the feed-forward branch is dropped twice (its kept values are scaled by 4 = "
                       "1 / (1 - p)^2 with p = 0.5): ffn already ends with nn.Dropout(layer_drop_rate); do not apply "
                       "self.dropout to its output again")
        raise Fail("in train() the feed-forward branch must go through ffn's nn.Dropout(layer_drop_rate) once before "
                   "its residual (kept values scaled by 1 / (1 - p))")
    frac = dropped.double().mean().item()
    # 512 values, each dropped independently with p = 0.5: the dropped fraction has a standard deviation of 0.022,
    # so [0.3, 0.7] is 9 standard deviations wide on each side (false failure < 1e-18).
    if frac < 0.3 or frac > 0.7:
        raise Fail(f"in train() with layer_drop_rate=0.5 about half of the feed-forward branch's output should be "
                   f"dropped before its residual; {frac:.0%} was: apply ffn's own final nn.Dropout to it, once")


@check("block: dropout on the attention branch in train() only", points=1, part=PART, depends_on=DEPENDS_ON)
def block_dropout(sub, ref):
    E, H, B, T = 16, 4, 4, 8
    g = gen(341)
    x = torch.randn(B, T, E, generator=g)
    wa = torch.randn(E, E, generator=g)
    a = torch.tanh(x @ wa).double()
    block = _block(sub, E, H, 0.0, 0.5)  # attn_drop_rate 0: only the block's own dropout may act
    _probe(sub, block, attn_weight=wa)  # attention: tanh(x wa), feed-forward zeros, identity norms
    block.eval()
    if not bool(torch.isfinite(_run(block, x, None)).all()):  # the branch read inside counts only then
        raise Fail("with a stand-in attention, a zero feed-forward network and identity norms the block in eval() "
                   "returns NaN or inf")
    if not torch.equal(_run(block, x, None), _run(block, x, None)):
        raise Fail("in eval() two forwards of the block give different outputs: a dropout acts in eval() (F.dropout(x, "
                   "p) needs training=self.training; an nn.Dropout follows the block's mode)")
    branch = _attention_branch(sub, block, x, a)
    if branch is None:
        raise Fail("with a stand-in attention, a zero feed-forward network and identity norms the attention branch "
                   "in eval() is not MHA(x) (read from the block's output and from what norm1 gets), so its dropout "
                   "cannot be checked: see the residual check (and no dropout may act in eval())")
    block.train()
    d = branch()
    dropped = d.abs() < 1e-7
    frac = dropped.double().mean().item()
    # 512 values, each dropped independently with p = 0.5: the dropped fraction has a standard deviation
    # of 0.022, so [0.3, 0.7] is 9 standard deviations wide on each side (false failure < 1e-18).
    if frac < 0.3 or frac > 0.7:
        raise Fail("in train() with layer_drop_rate=0.5 about half of the attention branch's output should be "
                   f"dropped before the residual (self.dropout = nn.Dropout(layer_drop_rate)); {frac:.0%} was")
    if not torch.allclose(d[~dropped], 2 * a[~dropped], atol=1e-4, rtol=1e-4):
        raise Fail("in train() the attention branch must go through nn.Dropout(layer_drop_rate) before the residual")


def _attention_branch(sub, block, x, a):
    """A function giving the attention branch's output of one forward of the probed block, or None: read from the
    block's output (y - x), else from what norm1 gets (after the residual, or alone where it is missing), whichever
    is MHA(x) in the block's current mode; the residuals are graded by their own check."""
    readings = (lambda: _run(block, x, None) - x.double(),
                lambda: _norm1_input(sub, block, x) - x.double(), lambda: _norm1_input(sub, block, x))
    for read in readings:
        try:
            if close(read(), a):
                return read
        except TypeError:  # norm1 was not called: nothing to read there
            continue
    return _minus_residual(sub, block, x, a)


def _minus_residual(sub, block, x, a):
    """The branch as what norm1 gets minus what the residual adds in eval(), whatever that is (a constant, 2 * x:
    the residual check's mistakes): in train() only a dropout acting on MHA(x) itself then reads as MHA(x) with half
    its values zeroed and the rest doubled. None when norm1 is not called or its input is not deterministic in
    eval()."""
    try:
        first, second = _norm1_input(sub, block, x), _norm1_input(sub, block, x)
    except TypeError:
        return None
    if not torch.equal(first, second):
        return None
    residual = first - a
    rounding = 1e-6 * (1 + residual.abs())  # float32's, at the residual's size: a dropped value reads as 0 within it

    def branch():
        d = _norm1_input(sub, block, x) - residual
        return torch.where(d.abs() < rounding, torch.zeros_like(d), d)

    return branch


def _norm1_input(sub, block, x):
    seen, _ = sub.helpers.tb_norm1_input(block, x)
    if seen is None:
        raise TypeError("norm1 was not called")
    return seen.double()


NO_GRAPH = "compute it with differentiable torch operations (no .detach(), .data, .numpy() or torch.no_grad())"


@check("block: gradients reach every parameter and the input as through the reference", points=0.5, part=PART,
       depends_on=DEPENDS_ON)
def block_gradients(sub, ref):
    E, H, B, T = 8, 2, 2, 5
    g = gen(311)
    x, weight = torch.randn(B, T, E, generator=g), torch.randn(B, T, E, generator=g)
    mask = torch.zeros(B, T)
    mask[1, 3:] = 1
    state = block_state(E, 312)
    reference = keep(ref.TransformerBlock, E, H, 0.0, 0.0)
    ref.helpers.tb_load_state(reference, state)
    expected_out = reference((x, mask))[0]
    expected = ref.helpers.tb_block_grads(reference, x, mask, weight)[1]
    block = _block(sub, E, H, 0.0, 0.0)
    what = f"TransformerBlock({E}, {H}, 0.0, 0.0)"
    for layout in (0, 1):
        _load(sub, block, in_layout(state, layout, E, H), what)
        try:
            grads, x_grad = sub.helpers.tb_block_grads(block, x, mask, weight)
        except StudentError as exc:
            raise Fail(f"backpropagating through your {what} failed ({exc.type}: {exc.message}): {NO_GRAPH}") from None
        missing = [name for name, grad in grads.items() if grad is None or not bool(grad.abs().sum() > 0)]
        if missing or x_grad is None:
            raise Fail(f"no gradient reaches {', '.join(missing) or 'the block input'}: {NO_GRAPH}")
        if close(_run(block, x, mask), expected_out):
            if close(x_grad, expected):
                return
            raise Fail(f"{what}: the output is right but the gradient with respect to the input is not: part of the "
                       f"computation is cut from the graph; {NO_GRAPH}")
    # the forward differs (the output check says how): the gradients reaching every parameter is what counts here
