"""Hidden checks of part 4: attention_bias(attention_mask, dtype=torch.float32), EncoderLayer(config)
(forward(hidden, bias)) and Encoder(config) (forward(hidden, attention_mask=None)).

The layer gets inputs the judge computed (hidden states and the correct additive bias), so its checks do not
depend on the student's attention_bias. Identical weights are loaded into the student's and the reference's
layers; when the outputs differ, the judge computes the usual mistakes with the same weights (scaling, pre-norm,
ReLU or tanh-GELU, heads split without the transpose, the bias ignored) and names the one that matches. The
encoder is checked with stand-in layers (fixed maps that record what they get), so that it is graded on its own:
the layers chained in order, each given the bias of the 1 = real-token mask.
"""
import math

import torch

from _common import (
    LAYER_NAMES, NO_GRAPH, additive_bias, build, config, gradients_right, layer_forward, layer_state, load,
    remote_config, same_gradient, tensor_out, wrong_gradients,
)
from autograder.testing import Fail, StudentError, check, close, expect_identical, gen, keep, remote_attr, worker_helpers

PART = "4. Encoder layer and stack"

worker_helpers('''
class BiProbeLayer(nn.Module):
    """Stands in for EncoderLayer: hidden + tanh(hidden @ mix), mix seeded by the layer's creation order; records
    the hidden states and the bias it gets."""
    created = 0

    def __init__(self, config):
        super().__init__()
        E = config.hidden_size
        self.index = BiProbeLayer.created
        BiProbeLayer.created += 1
        g = torch.Generator().manual_seed(500 + self.index)
        self.register_buffer("mix", torch.randn(E, E, generator=g) / math.sqrt(E), persistent=False)
        self.calls = []

    def forward(self, hidden, bias=None, *args, **kwargs):
        self.calls.append({"hidden": hidden.detach().clone(),
                           "bias": bias.detach().clone() if isinstance(bias, torch.Tensor) else None})
        return hidden + torch.tanh(hidden @ self.mix)


def bi_probe_encoder(config):
    """The student's Encoder(config) built with the grader's probe layers."""
    BiProbeLayer.created = 0
    with bi_standing_in(EncoderLayer=BiProbeLayer):
        return submission.Encoder(config)


def bi_probe_records(encoder):
    """Per stand-in layer, in the order of encoder.layers: its creation index and the calls it got."""
    return [{"index": layer.index, "calls": layer.calls} for layer in encoder.layers]


def bi_attn_dropout_inputs(layer, hidden, bias):
    """What the layer gives its attn_dropout in train() mode, with attn_dropout replaced by a recording identity
    (rate 0: code that reads its p sees no dropout), restored after; eval() mode after."""
    class BiRecordingDropout(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = 0.0
            self.inputs = []

        def forward(self, x, *args, **kwargs):
            self.inputs.append(x.detach().clone() if isinstance(x, torch.Tensor) else None)
            return x

    with bi_submodule_in_train(layer, "attn_dropout", BiRecordingDropout()) as recorder:
        layer(hidden, bias)
    return recorder.inputs


def bi_train_pair(layer, first, second, bias, seed):
    """The layer in train() mode on two inputs, the random generators seeded alike before each call (the same
    dropout draws for inputs of one shape); eval() mode after."""
    from autograder.seeding import seed_torch

    layer.train()
    try:
        seed_torch(seed)
        a = layer(first, bias)
        seed_torch(seed)
        b = layer(second, bias)
    finally:
        layer.eval()
    return a, b
''')


def probe_mix(index, E):
    return torch.randn(E, E, generator=gen(500 + index)) / math.sqrt(E)


# -- attention_bias ----------------------------------------------------------------------------------------------

def masks():
    g = gen(401)
    mask = (torch.rand(4, 7, generator=g) > 0.4).long()
    mask[:, 0] = 1  # every row has a real token
    return [(mask, "a 0/1 long mask"), (mask.float(), "a 0/1 float mask")]


@check("attention_bias: 0 for real tokens, a huge negative bias for padding, shape (B, 1, 1, T)", points=1, part=PART)
def bias(sub, ref):
    for mask, what in masks():
        for dtype in (torch.float32, torch.float64):
            try:
                got = sub.attention_bias(mask, dtype)
            except StudentError as exc:
                raise Fail(f"attention_bias({what}, {dtype}): {exc.describe()}") from None
            got = tensor_out(got, f"attention_bias({what})")
            B, T = mask.shape
            if tuple(got.shape) != (B, 1, 1, T):
                raise Fail(f"attention_bias must return shape (B, 1, 1, T) = ({B}, 1, 1, {T}) (one row per sequence, "
                           f"broadcast over heads and queries), got {tuple(got.shape)}")
            if got.dtype != dtype:
                raise Fail(f"attention_bias({what}, dtype={dtype}) returned a bias of {got.dtype}: the bias must be of "
                           "the dtype asked for (the encoder adds it to scores of the hidden states' dtype): "
                           "torch.finfo(dtype).min, and the mask converted with .to(dtype)")
            row = got[:, 0, 0, :].double()
            real, pad = mask.bool(), ~mask.bool()
            if bool((row[real] <= -1e4).all()) and bool((row[pad] == 0).all()):
                raise Fail(f"attention_bias({what}) is inverted: the mask is 1 for REAL tokens (the library's convention, "
                           "the opposite of the previous assignment): bias 0 there, a huge negative number on padding")
            if torch.equal(row, mask.double()) or torch.equal(row, -mask.double()):
                raise Fail(f"attention_bias({what}) returns the 0/1 mask itself: turn it into an additive bias, 0 for real "
                           "tokens and a huge negative number (torch.finfo(dtype).min) for padding")
            if not bool((row[real] == 0).all()):
                raise Fail(f"attention_bias({what}) must be exactly 0 where the mask is 1 (real tokens)")
            if not bool((row[pad] <= -1e4).all()):
                raise Fail(f"attention_bias({what}) must be a huge negative number (torch.finfo(dtype).min) where the mask "
                           "is 0 (padding), so that the softmax gives padded keys a weight of 0")


# -- EncoderLayer ------------------------------------------------------------------------------------------------

def layer_pair(sub, ref, state, **overrides):
    """The student's and the reference's layers with the same weights, eval() mode, dropout rates 0 (the value checks
    do not depend on how dropout is applied: the config check grades that)."""
    overrides = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, **overrides}
    student = build(sub, "EncoderLayer", remote_config(sub, **overrides), what="EncoderLayer(config)")
    load(sub, student, state, "EncoderLayer", LAYER_NAMES)
    reference = build(ref, "EncoderLayer", remote_config(ref, **overrides))
    ref.helpers.bi_load(reference, state)
    student.eval()
    reference.eval()
    return student, reference


def layer_inputs(seed, B=3, T=6, E=16):
    g = gen(seed)
    hidden = 2 * torch.randn(B, T, E, generator=g) + 0.3
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, 4:] = 0
    mask[2, 2:] = 0
    return hidden, mask


def run_layer(layer, hidden, bias_, what="EncoderLayer"):
    return tensor_out(layer(hidden, bias_), f"{what}.forward's output", hidden.shape).double()


def attends_to_real_keys(out, layer, hidden, bias_):
    """Whether changing the hidden state of one real token (position 1 of sequence 1, which has 4 real tokens) changes
    the layer's eval() output at the other real positions of that sequence (0, 2, 3) by more than 1e-3. A layer
    that computes attention does: every query there gives that key a softmax weight above 0, and the key's value
    moves by about 3 standard deviations. A constant, or a map of each position on its own, does not."""
    moved = hidden.clone()
    moved[1, 1] += 3 * torch.randn(hidden.shape[-1], generator=gen(425))
    other = run_layer(layer, moved, bias_)
    return bool(((other[1, [0, 2, 3]] - out[1, [0, 2, 3]]).abs().max() > 1e-3).item())


VARIANTS = [
    (dict(scale="hidden"), "the scores are scaled by sqrt(E), the hidden size: divide by sqrt(D), the HEAD dimension "
                           "(config.hidden_size // config.num_attention_heads)"),
    (dict(scale="none"), "the scores are not scaled: divide q k^T by sqrt(D), D the head dimension"),
    (dict(order="pre"), "this is a pre-norm layer (LayerNorm before each sub-layer); BERT's is post-norm: "
                        "x' = attn_norm(x + Dropout(attention)), then ffn_norm(x' + Dropout(FFN(x')))"),
    (dict(act="relu"), "the feed-forward network uses ReLU; BERT uses GELU (config.hidden_act = 'gelu')"),
    (dict(act="tanh"), "the feed-forward network uses the tanh approximation of GELU; the library's 'gelu' is the "
                       "exact (erf) one: F.gelu(x) or nn.GELU()"),
    (dict(split="view"), "the heads are split with a reshape to (B, H, T, D) without the transpose: view (B, T, H, D), "
                         "then transpose(1, 2)"),
    (dict(merge="view"), "the heads are merged with a reshape of (B, H, T, D) to (B, T, E) without the transpose: "
                         "transpose(1, 2) first, then reshape"),
    (dict(use_bias="ignore"), "the attention bias is not added to the scores: scores = q k^T / sqrt(D) + bias, before "
                              "the softmax"),
    (dict(softmax_dim=-2), "the softmax is taken over the wrong axis (dim -2, the queries): take it over the keys, "
                           "torch.softmax(scores, dim=-1), so that each query's weights sum to 1"),
    (dict(attn_residual="none"), "the attention block's residual is missing: x' = attn_norm(x + Dropout(attn_out("
                                 "context))), the layer's input x added before the LayerNorm"),
    (dict(ffn_residual="input"), "the feed-forward block's residual adds the layer's input x instead of the attention "
                                 "block's output x': ffn_norm(x' + Dropout(FFN(x')))"),
    (dict(ffn_residual="none"), "the feed-forward block's residual is missing: ffn_norm(x' + Dropout(FFN(x'))), x' added "
                                "before the LayerNorm"),
]

NORMS = [  # (the norm whose weights act after the attention, the one after the feed-forward network, message)
    ("ffn_norm", "attn_norm", "attn_norm and ffn_norm are swapped: attn_norm follows the attention, ffn_norm the "
                              "feed-forward network"),
    ("attn_norm", "attn_norm", "attn_norm is used for both LayerNorms (a LayerNorm reused): the feed-forward block "
                               "ends with its own, ffn_norm(x' + Dropout(FFN(x')))"),
    ("ffn_norm", "ffn_norm", "ffn_norm is used for both LayerNorms (a LayerNorm reused): the attention block ends "
                             "with its own, attn_norm(x + Dropout(attention))"),
]


def norms_as(state, attn, ffn):
    """`state` with the weights of its norm `attn` in attn_norm and those of `ffn` in ffn_norm."""
    out = dict(state)
    for part in ("weight", "bias"):
        out[f"attn_norm.{part}"], out[f"ffn_norm.{part}"] = state[f"{attn}.{part}"], state[f"{ffn}.{part}"]
    return out


def match_variant(got, state, hidden, bias_, H, eps):
    """(weights, variant, message, norms) of the usual mistake (NORMS, VARIANTS) whose eval() output `got` is, norms
    the (attn, ffn) pair of a NORMS mistake, else None; None when it is none of them."""
    candidates = [(norms_as(state, attn, ffn), {}, message, (attn, ffn)) for attn, ffn, message in NORMS] + \
                 [(state, variant, message, None) for variant, message in VARIANTS]
    for weights, variant, message, norms in candidates:
        if close(got, layer_forward(weights, hidden, bias_, H, eps, **variant)):
            return weights, variant, message, norms
    return None


def variant_gradients(state, norms, variant, hidden, bias_, H, eps):
    """The gradients (of each tensor of `state`, of the input) of the usual mistake's layer, computed in the judge as
    bi_grads computes the student's: the output weighted by the same seeded noise. A tensor the mistake never reads
    (a LayerNorm not used) gets zeros."""
    leaves = {k: v.double().clone().requires_grad_(True) for k, v in state.items()}
    x = hidden.double().clone().requires_grad_(True)
    weights = norms_as(leaves, *norms) if norms else leaves
    out = layer_forward(weights, x, bias_, H, eps, **variant)
    noise = torch.randn(out.shape, generator=torch.Generator().manual_seed(7)).double()
    (out * noise).sum().backward()
    return {k: torch.zeros_like(v) if v.grad is None else v.grad for k, v in leaves.items()}, x.grad


def known_variant(got, state, hidden, bias_, H, eps):
    """The usual mistake whose eval() output `got` is, as a function of the hidden dropout's stand-in factor; None
    when it is none of them."""
    match = match_variant(got, state, hidden, bias_, H, eps)
    if match is None:
        return None
    weights, variant, _, _ = match
    return lambda factor: layer_forward(weights, hidden, bias_, H, eps, hidden_factor=factor, **variant)


def diagnose_layer(got, state, hidden, bias_, cfg):
    match = match_variant(got, state, hidden, bias_, cfg["num_attention_heads"], cfg["layer_norm_eps"])
    if match is not None:
        return match[2]
    return ("the output differs from ffn_norm(x' + FFN(x')), x' = attn_norm(x + attn_out(softmax(q k^T / sqrt(D) + "
            "bias) v)), with the same weights")


def require_layer(got, state, hidden, bias_, cfg, what):
    """Fail unless the eval() output (dropout rates 0) is BERT's layer or one of the usual mistakes (the output check
    names them): a property of the layer is credited only on a layer that computes one. Returns the mistake's
    message ("" for BERT's layer)."""
    H, eps = cfg["num_attention_heads"], cfg["layer_norm_eps"]
    if close(got, layer_forward(state, hidden, bias_, H, eps)):
        return ""
    match = match_variant(got, state, hidden, bias_, H, eps)
    if match is None:
        raise Fail("EncoderLayer in eval() with identical weights does not compute an encoder layer's output (the output "
                   f"check says how it differs): {what} can be checked only on a layer whose output matches")
    return match[2]


def likely(mistake):
    return f" (the output check names a likely mistake: {mistake})" if mistake else ""


@check("encoder layer: output matches the reference with the same weights and bias", points=1.5, part=PART)
def layer_output(sub, ref):
    cfg = config(num_attention_heads=2)  # heads of 8 features: (H, D) and (D, H) splits differ
    state = layer_state(cfg, 411)
    student, reference = layer_pair(sub, ref, state, num_attention_heads=2)
    hidden, mask = layer_inputs(412)
    bias_ = additive_bias(mask)  # the judge's bias: this check does not depend on the student's attention_bias
    got = run_layer(student, hidden, bias_)
    if not close(got, run_layer(reference, hidden, bias_)):
        raise Fail("EncoderLayer in eval(), identical weights, the correct bias: " + diagnose_layer(got, state, hidden, bias_, cfg))


@check("encoder layer: padded keys change nothing at the real positions", points=1, part=PART)
def layer_padding(sub, ref):
    cfg = config()
    student = build(sub, "EncoderLayer", remote_config(sub, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
                    what="EncoderLayer(config)")
    load(sub, student, layer_state(cfg, 421), "EncoderLayer", LAYER_NAMES)
    student.eval()
    hidden, mask = layer_inputs(422)
    changed = hidden.clone()
    changed[mask == 0] = 50 * torch.randn(int((mask == 0).sum()), 16, generator=gen(423))
    bias_ = additive_bias(mask)
    a, b = run_layer(student, hidden, bias_), run_layer(student, changed, bias_)
    mistake = require_layer(a, layer_state(cfg, 421), hidden, bias_, cfg, "what padding does")
    real = mask.bool()
    if not close(a[real], b[real], atol=1e-4):
        raise Fail("changing the hidden states at padded positions changed the outputs at real positions: add the bias "
                   "(0 for real keys, huge and negative for padded ones) to the attention scores before the softmax" + likely(mistake))
    # and the real keys do count: a layer whose output ignores its input changes nothing either
    if not attends_to_real_keys(a, student, hidden, bias_):
        raise Fail("changing the hidden state of a REAL token (not padding) did not change the outputs at the other real "
                   "positions of its sequence: every query must attend to the real keys (softmax(q k^T / sqrt(D) + "
                   "bias) v), only the padded ones must get no weight")
    # in train() too: dropout on the scores (before the softmax) zeroes some of the padded keys' huge negative
    # bias, and they get weight; on the weights (after it) their zeros stay zeros
    student = build(sub, "EncoderLayer", remote_config(sub, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.5),
                    what="EncoderLayer(config)")
    load(sub, student, layer_state(cfg, 421), "EncoderLayer", LAYER_NAMES)
    a, b = (tensor_out(t, "EncoderLayer.forward's output", hidden.shape).double()
            for t in sub.helpers.bi_train_pair(student, hidden, changed, bias_, 424))
    if not close(a[real], b[real], atol=1e-4):
        raise Fail("in train() mode (attention dropout 0.5, the same random draws for both inputs), changing the hidden "
                   "states at padded positions changed the outputs at real positions: apply attn_dropout to the "
                   "attention weights after the softmax; dropout on the scores lets padded keys through")


@check("encoder layer: intermediate size, heads, dropout rates and eps from the config; dropout in train() only",
       points=1, part=PART)
def layer_config(sub, ref):
    cfg = config(intermediate_size=24, num_attention_heads=2, hidden_dropout_prob=0.2,
                 attention_probs_dropout_prob=0.3, layer_norm_eps=1e-7)
    layer = build(sub, "EncoderLayer", remote_config(sub, **{k: cfg[k] for k in (
        "intermediate_size", "num_attention_heads", "hidden_dropout_prob", "attention_probs_dropout_prob",
        "layer_norm_eps")}), what="EncoderLayer(config)")
    E = cfg["hidden_size"]
    expected = {"ffn_in.weight": (24, E), "ffn_out.weight": (E, 24), "query.weight": (E, E), "attn_out.weight": (E, E)}
    for name, shape in expected.items():
        try:
            got = tuple(remote_attr(layer, name).shape)
        except Exception:  # noqa: BLE001 - the attribute is missing
            raise Fail(f"EncoderLayer must have the attribute {name.split('.')[0]} ({LAYER_NAMES})") from None
        if got != shape:
            raise Fail(f"{name.split('.')[0]} must be nn.Linear with a weight of shape {shape} for a config with hidden "
                       f"size {E} and intermediate_size 24: read the sizes from the config (not 4 * E)")
    checks = (("attn_dropout.p", 0.3, "attn_dropout must be nn.Dropout(config.attention_probs_dropout_prob)"),
              ("dropout.p", 0.2, "dropout must be nn.Dropout(config.hidden_dropout_prob)"),
              ("attn_norm.eps", 1e-7, "attn_norm must be nn.LayerNorm(E, eps=config.layer_norm_eps)"),
              ("ffn_norm.eps", 1e-7, "ffn_norm must be nn.LayerNorm(E, eps=config.layer_norm_eps)"))
    for path, value, message in checks:
        try:
            got = remote_attr(layer, path)
        except Exception:  # noqa: BLE001
            raise Fail(message) from None
        if not isinstance(got, float) or abs(got - value) > 1e-12:
            raise Fail(message)
    # the sizes, rates and eps are the config's: half of the points, whatever the forward computes
    try:
        layer_dropout_behaviour(sub, ref, layer, cfg)
    except Fail as exc:
        raise Fail(f"{exc} (the sizes, dropout rates and eps from the config are right: half of this check's points)",
                   partial=max(exc.partial, 0.5)) from None


def layer_dropout_behaviour(sub, ref, layer, cfg):
    """The second half of the config check: dropout off in eval(), on in train(), nothing else differing."""
    load(sub, layer, layer_state(cfg, 431), "EncoderLayer", LAYER_NAMES)
    hidden, mask = layer_inputs(432)
    bias_ = additive_bias(mask)
    layer.eval()
    exact = run_layer(layer, hidden, bias_)
    expect_identical(exact, run_layer(layer, hidden, bias_), "in eval() mode two calls with the same input must give "
                     "identical outputs: use the nn.Dropout modules (they are off in eval()), not F.dropout(..., "
                     "training=True)", "the layer's output in eval()")
    # and the same as with dropout rates 0 (the same weights), computed on the batch in reverse order (each example
    # on its own, the same values): two calls alike could be one result replayed for the same input
    without, _ = layer_pair(sub, ref, layer_state(cfg, 431), intermediate_size=24, num_attention_heads=2,
                            layer_norm_eps=1e-7)
    require_layer(run_layer(without, hidden, bias_), layer_state(cfg, 431), hidden, bias_, cfg, "its dropout")
    if not close(exact, run_layer(without, hidden.flip(0), bias_.flip(0)).flip(0)):
        raise Fail("in eval() mode the output depends on the dropout rates: dropout must be off in eval() (use the "
                   "nn.Dropout modules, not F.dropout(..., training=True))")
    if not attends_to_real_keys(exact, layer, hidden, bias_):
        raise Fail("in eval() mode the output does not change when the hidden state of a real token changes: the layer "
                   "must compute its output from its input (attention over the real tokens, then the feed-forward network)")
    layer.train()
    # 18 outputs of 16 features each go through dropout with p = 0.2 (and 0.3 on the weights): that none of them
    # changes has probability below 0.8^288 < 1e-27
    if torch.equal(exact, run_layer(layer, hidden, bias_)):
        raise Fail("in train() mode with dropout rates 0.2 and 0.3 the output is the eval() output: apply attn_dropout "
                   "to the attention weights and dropout to each sub-layer's output")
    # in train() with both rates 0, dropout keeps everything (scaled by 1 / (1 - 0) = 1): the output must be the eval()
    # output, exactly as arithmetic goes (no tolerance beyond float32 rounding: nothing random is left)
    without.train()
    try:
        trained = run_layer(without, hidden, bias_)
    finally:
        without.eval()
    if not close(trained, exact):
        raise Fail("in train() mode with both dropout rates 0 the output differs from the eval() output: in train() the "
                   "layer must compute what it computes in eval(), with dropout (the nn.Dropout modules) as the only "
                   "difference")


def same_draws_as_reference(sub, ref, state, hidden, bias_):
    """Whether the student's layer in train() (hidden dropout 0.5, attention dropout 0) gives the reference's output
    when both draw from the same seed: dropout at the reference's places, however it is applied. Code that applies
    it elsewhere draws the same masks on other values, and differs."""
    student, reference = layer_pair(sub, ref, state, num_attention_heads=2, hidden_dropout_prob=0.5)
    try:
        got, _ = sub.helpers.bi_train_pair(student, hidden, hidden, bias_, 445)
    except StudentError:
        return False
    expected, _ = ref.helpers.bi_train_pair(reference, hidden, hidden, bias_, 445)
    return isinstance(got, torch.Tensor) and got.shape == hidden.shape and close(got.double(), expected.double())


@check("encoder layer: attention dropout on the attention weights in train(), dropout on each sub-layer's output "
       "before its residual", points=0.5, part=PART)
def layer_dropout_places(sub, ref):
    # the attention dropout alone (hidden dropout 0): train() must differ from eval(). 3 x 2 x 6 x 6 weights at
    # p = 0.5: none dropped has probability 2^-216
    student = build(sub, "EncoderLayer", remote_config(sub, num_attention_heads=2, hidden_dropout_prob=0.0,
                                                       attention_probs_dropout_prob=0.5), what="EncoderLayer(config)")
    cfg = config(num_attention_heads=2)
    load(sub, student, layer_state(cfg, 441), "EncoderLayer", LAYER_NAMES)
    hidden, mask = layer_inputs(442)
    bias_ = additive_bias(mask)
    student.eval()
    exact = run_layer(student, hidden, bias_)
    student.train()
    if torch.equal(exact, run_layer(student, hidden, bias_)):
        raise Fail("with attention_probs_dropout_prob=0.5 and hidden_dropout_prob=0, the output in train() is the "
                   "eval() output: apply attention dropout (self.attn_dropout) to the attention weights in train()")
    # where the attention dropout acts: attn_dropout replaced by a recording identity must get the attention weights,
    # softmax over the keys of shape (..., T, T) (here (3, 2, 6, 6), or (3, 6, 6) per head), each row summing to 1.
    # The values and the context (weights @ v) end in (T, D) = (6, 8). A layer that never calls attn_dropout (PyTorch's
    # scaled_dot_product_attention with dropout_p=self.attn_dropout.p) applies it inside the attention: nothing to see.
    try:
        inputs = sub.helpers.bi_attn_dropout_inputs(student, hidden, bias_)
    except StudentError as exc:
        raise Fail(f"EncoderLayer with its attn_dropout replaced by a recording stand-in failed ({exc.type}: "
                   f"{exc.message})") from None
    T, D = hidden.shape[1], hidden.shape[2] // 2
    for x in inputs:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else None
        if shape is None or len(shape) < 2 or shape[-2:] != (T, T):
            seems = (" (the values or the context weights @ v, it seems)" if shape is not None and shape[-1:] == (D,)
                     else "")
            raise Fail("attn_dropout must act on the attention weights, softmax(q k^T / sqrt(D) + bias) of shape "
                       f"(B, H, T, T) = (3, 2, {T}, {T}) here, before they multiply the values; yours gets a tensor of "
                       f"shape {shape}{seems}: BERT drops attention probabilities, so that a query sometimes ignores "
                       "a whole key")
        # after a softmax: each row sums to 1 over the keys (or each column over the queries: a softmax over the
        # wrong axis, which the output check names, still has its dropout after it)
        if not any(close(x.double().sum(dim), torch.ones(shape[:dim] + shape[dim:][1:], dtype=torch.float64), atol=1e-4)
                   for dim in (-1, -2)):
            raise Fail("attn_dropout must act on the attention weights AFTER the softmax (each row sums to 1 over the "
                       "keys); the tensor yours gets does not sum to 1 over the keys")
    # the hidden dropout's places (attention dropout 0): `dropout` replaced by a fixed scaling x0.25, a
    # deterministic stand-in, must act on the attention block's output and on the feed-forward output, each before
    # its residual is added
    state = layer_state(cfg, 443)
    student, _ = layer_pair(sub, ref, state, num_attention_heads=2)
    try:
        out = sub.helpers.bi_with_fixed_dropout(student, hidden, bias_, 0.25)
    except StudentError as exc:
        raise Fail(f"EncoderLayer with its dropout replaced by a fixed scaling failed ({exc.type}: {exc.message})") \
            from None
    got = tensor_out(out, "EncoderLayer.forward's output", hidden.shape).double()
    eps = cfg["layer_norm_eps"]
    if close(got, layer_forward(state, hidden, bias_, 2, eps, hidden_factor=0.25)):
        return
    plain = run_layer(student, hidden, bias_)
    if not close(plain, layer_forward(state, hidden, bias_, 2, eps)):
        # the layer itself differs (the output check says how): when it is one of the usual mistakes, the judge
        # computes that layer with the stand-in (x0.25) at dropout's places; otherwise nothing here can be checked
        known = known_variant(plain, state, hidden, bias_, 2, eps)
        if known is None:
            raise Fail("EncoderLayer in eval() with identical weights does not compute the reference's output (the output "
                       "check says how): where its dropout acts can be checked only once the layer's output matches")
        if close(got, known(0.25)):
            return
        raise Fail("with dropout replaced by a fixed scaling (x0.25), the output is not the expected one: apply "
                   "self.dropout to the attention block's output (after attn_out) and to the feed-forward output, each "
                   "before its residual is added")
    if same_draws_as_reference(sub, ref, state, hidden, bias_):
        return  # dropout applied another way (F.dropout at self.dropout.p, a second nn.Dropout): the stand-in never ran
    raise Fail("with dropout replaced by a fixed scaling (x0.25), the output is not the expected one: apply "
               "self.dropout to the attention block's output (after attn_out) and to the feed-forward output, each "
               "before its residual is added")


@check("encoder layer: gradients reach every weight and the input as through the reference", points=0.5, part=PART)
def layer_gradients(sub, ref):
    cfg = config(num_attention_heads=2)
    state = layer_state(cfg, 451)
    student, reference = layer_pair(sub, ref, state, num_attention_heads=2)
    hidden, mask = layer_inputs(452)
    bias_ = additive_bias(mask)
    got = run_layer(student, hidden, bias_)
    match = None if close(got, run_layer(reference, hidden, bias_)) else \
        match_variant(got, state, hidden, bias_, 2, cfg["layer_norm_eps"])
    if match is None:  # the reference's layer (or no layer the judge knows: gradients_right says so)
        gradients_right(sub, ref, student, reference, [hidden, bias_], "EncoderLayer", input_grad=True)
        return
    # one of the usual mistakes (the output check names it): its gradients are known, computed in the judge
    _, variant, _, norms = match
    expected, x_expected = variant_gradients(state, norms, variant, hidden, bias_, 2, cfg["layer_norm_eps"])
    try:
        grads, x_grad = sub.helpers.bi_grads(student, [hidden, bias_], True)
    except StudentError as exc:
        raise Fail(f"backpropagating through your EncoderLayer failed ({exc.type}: {exc.message}): {NO_GRAPH}") from None
    own_state = sub.helpers.bi_state(student)
    grads = {k: torch.zeros_like(own_state[k]) if g is None and k in own_state else g for k, g in grads.items()}
    wrong = wrong_gradients(grads, expected, own_state, state)
    if x_grad is None or not same_gradient(x_grad, x_expected):
        wrong.append("its input")
    if wrong:
        shown = ", ".join(wrong[:4]) + (" and more" if len(wrong) > 4 else "")
        raise Fail(f"EncoderLayer: the gradient of {shown} is not the one its own computation gives (part of the "
                   f"computation is cut from the graph or replaced by another term): {NO_GRAPH}")


# -- Encoder -----------------------------------------------------------------------------------------------------

def bias_ok(bias_, mask, own):
    """The bias a layer got is the correct one for `mask` (or equal to the student's own attention_bias(mask), which
    the attention_bias check grades)."""
    if not isinstance(bias_, torch.Tensor):
        return False
    if own is not None and bias_.shape == own.shape and torch.equal(bias_, own):
        return True
    B, T = mask.shape
    if bias_.dim() != 4 or tuple(bias_.shape) not in ((B, 1, 1, T),):
        return False
    row = bias_[:, 0, 0, :].double()
    return bool((row[mask.bool()] == 0).all()) and bool((row[~mask.bool()] <= -1e4).all())


def none_means_no_padding(sub):
    """Whether the student's own EncoderLayer (eval(), dropout rates 0) gives with bias=None what it gives with an
    all-zero bias (the bias of a mask of ones): then an encoder may pass None for a mask of None, as the library's
    layers skip an absent mask. Each example is run on its own too (in reverse order) so that a replayed result
    cannot pass."""
    try:
        layer = keep(sub.EncoderLayer, remote_config(sub, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
        layer.eval()
        hidden, _ = layer_inputs(461)
        zeros = torch.zeros(hidden.shape[0], 1, 1, hidden.shape[1])
        with_none, with_zeros = layer(hidden, None), layer(hidden.flip(0), zeros)
    except StudentError:
        return False
    return all(isinstance(t, torch.Tensor) and tuple(t.shape) == tuple(hidden.shape) for t in (with_none, with_zeros)) \
        and close(with_none.double(), with_zeros.double().flip(0))


@check("encoder: layers chained in order, each given the bias of the 1 = real-token mask", points=1.5, part=PART)
def encoder(sub, ref):
    cfg = config(num_hidden_layers=3)
    try:
        model = sub.helpers.bi_probe_encoder(remote_config(sub, num_hidden_layers=3))
    except StudentError as exc:
        if exc.stub:
            raise Fail("your Encoder is not implemented yet (it raised NotImplementedError)") from None
        raise Fail(f"Encoder(config) raised {exc.type}: {exc.message}") from None
    hidden, mask = layer_inputs(441)
    none_ok = None  # whether the layers may get bias=None for a mask of None (asked once, when they do)
    for given, what in ((mask, "with an attention mask"), (None, "with attention_mask=None")):
        if given is None:
            model = sub.helpers.bi_probe_encoder(remote_config(sub, num_hidden_layers=3))
        got = tensor_out(model(hidden) if given is None else model(hidden, given), "Encoder.forward's output",
                         hidden.shape).double()
        try:
            records = sub.helpers.bi_probe_records(model)
        except StudentError as exc:
            if exc.unsent:  # what the layers were given (the bias, the hidden states) cannot be sent back
                raise Fail(f"what your Encoder passes to its layers {what} is no plain tensor the grader can take: "
                           f"{exc.message}") from None
            raise Fail("Encoder must keep its layers in `layers` (an nn.ModuleList of EncoderLayer(config))") from None
        if len(records) != cfg["num_hidden_layers"]:
            raise Fail(f"Encoder must hold config.num_hidden_layers EncoderLayers in `layers`; for a config with 3 it "
                       f"holds {len(records)}")
        if len({record["index"] for record in records}) < len(records):
            raise Fail("Encoder.layers holds the same EncoderLayer more than once (as `[EncoderLayer(config)] * n` "
                       "does: one module, its weights shared): build a new EncoderLayer(config) for each layer")
        effective = torch.ones_like(mask) if given is None else mask
        try:
            own = sub.attention_bias(effective, torch.float32)
        except StudentError:
            own = None
        x = hidden.double()
        for position, record in enumerate(records):
            if len(record["calls"]) != 1:
                raise Fail(f"{what}: every layer must run once per forward; layer {position} ran {len(record['calls'])} "
                           "times")
            call = record["calls"][0]
            if not close(call["hidden"], x):
                raise Fail(f"{what}: layer {position} did not get the previous layer's output"
                           + (" but the encoder's input: each layer must run on the output of the one before"
                              if close(call["hidden"], hidden) else ": run the layers in order, each on the previous output"))
            if given is None and call["bias"] is None and none_ok is None:
                none_ok = none_means_no_padding(sub)
            if not bias_ok(call["bias"], effective, own) and not (given is None and call["bias"] is None and none_ok):
                raise Fail(f"{what}: the layers must get the additive bias of the mask, attention_bias(attention_mask) of "
                           "shape (B, 1, 1, T): 0 for real tokens (mask 1), huge and negative for padding (mask 0)"
                           + ("; a mask of None means every token is real (your layers got None, and your "
                              "EncoderLayer does not give with bias=None what it gives with an all-zero bias)"
                              if given is None and call["bias"] is None else
                              "; a mask of None means every token is real" if given is None else ""))
            x = x + torch.tanh(x @ probe_mix(record["index"], cfg["hidden_size"]).double())
        if not close(got, x):
            raise Fail(f"{what}: the encoder must return the last layer's output")
