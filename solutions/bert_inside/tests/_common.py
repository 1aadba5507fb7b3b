"""Judge-side helpers shared by the hidden test files of this assignment (a helper module: its name starts with
`_`, so the build ships it with the tests and never looks in it for checks).

- A WordPiece vocabulary whose special tokens sit at unusual ids ([PAD] is not 0, [CLS] is not 101), so that a
  submission that hard-codes BERT-base's ids or assumes padding is 0 shows it.
- Small BertConfig settings (type_vocab_size 3, pad_token_id 5, intermediate size not 4E) for the same reason.
- Seeded weights in the notebook's attribute names, and `load`: the public load_weights (autograder.testing)
  bound to this assignment's worker helper. Values are compared with the public `close` at its default
  tolerance (rtol 1e-4, atol 1e-5); checks that need another one pass it.
- The judge's own BERT arithmetic (plain torch, float64) for naming the usual mistakes.
- WORKER_CODE: helper code that runs in the worker beside the student's definitions (registered once, by
  test_part1_nsp.py; all test files share the worker's helper namespace). It holds no expected values: tokenizer
  and config builders, weight loading, and probes with known maps standing in for other parts (the reference
  answers for them otherwise: depends_on), so that each part is graded on its own.
"""
import math
from functools import partial

import torch
import torch.nn.functional as F

from autograder.testing import Fail, StudentError, close, gen, keep, load_weights, normal

# -- vocabulary and tokenizer ----------------------------------------------------------------------------------

WORDS = ["good", "film", "the", "was", "bad", "plot", "i", "it", "loved", "boring", "story", "acting", "not", "great",
         "end", "a", "is", "and", "movie", "actors", "music", "scene", "dull", "fun", "very", ".", "!", "?"]
SPECIAL_IDS = {"[SEP]": 1, "[CLS]": 7, "[PAD]": 12, "[MASK]": 20, "[UNK]": 25}


def _vocabulary() -> list[str]:
    vocab = list(WORDS)
    for token, index in sorted(SPECIAL_IDS.items(), key=lambda kv: kv[1]):
        vocab.insert(index, token)
    return vocab


VOCAB = _vocabulary()
CLS, SEP, PAD, MASK, UNK = (SPECIAL_IDS[t] for t in ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]"))
WORD_IDS = [i for i, token in enumerate(VOCAB) if not token.startswith("[")]  # id 0 is the word "good"
PLAIN_WORDS = [w for w in WORDS if w.isalpha()]


def tokenizer(side):
    """A BERT tokenizer over VOCAB, built in the side's worker (kept there)."""
    return keep(side.helpers.bi_tokenizer, VOCAB)


# -- configurations --------------------------------------------------------------------------------------------

BASE_CONFIG = dict(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=40,
                   max_position_embeddings=24, type_vocab_size=3, pad_token_id=5, layer_norm_eps=1e-12,
                   hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, initializer_range=0.02,
                   hidden_act="gelu")


def config(**overrides) -> dict:
    return {**BASE_CONFIG, **overrides}


def remote_config(side, **overrides):
    """A transformers.BertConfig built in the side's worker."""
    return keep(side.helpers.bi_config, config(**overrides))


# -- small helpers ---------------------------------------------------------------------------------------------

def build(side, class_name, *args, what=None):
    """An instance of the side's class, kept in its worker; a stub or an exception becomes a Fail."""
    what = what or class_name
    try:
        return keep(getattr(side, class_name), *args)
    except StudentError as exc:
        if exc.stub:
            raise Fail(f"your {class_name} is not implemented yet (it raised NotImplementedError)") from None
        raise Fail(f"{what} raised {exc.type}: {exc.message}") from None


# Weights are copied in the worker by bi_load (WORKER_CODE below); every caller names the attributes.
load = partial(load_weights, helper="bi_load")


def tensor_out(value, what, shape=None):
    if not isinstance(value, torch.Tensor):
        raise Fail(f"{what} must be a tensor, got {type(value).__name__}")
    if shape is not None and tuple(value.shape) != tuple(shape):
        raise Fail(f"{what} has shape ({', '.join(map(str, value.shape))}), expected ({', '.join(map(str, shape))})")
    return value.detach()


NO_GRAPH = "compute it with differentiable torch operations (no .detach(), .data, .numpy() or torch.no_grad())"


def outputs_of(value, what):
    """The floating tensors a forward returned (one, or a tuple's), in float64, for comparing two forwards."""
    values = value if isinstance(value, (tuple, list)) else [value]
    tensors = [v for v in values if isinstance(v, torch.Tensor) and v.is_floating_point()]
    if not tensors:
        raise Fail(f"{what} must return a tensor (or a tuple of tensors)")
    return [t.detach().double() for t in tensors]


def same_outputs(got, expected) -> bool:
    return len(got) == len(expected) and all(a.shape == b.shape and close(a, b) for a, b in zip(got, expected))


def mirror_weights(sub, ref, student, reference, what):
    """Load the student's module's own weights into the reference's module (by name, else by position and shape;
    the names the student's module ties to one tensor as one)."""
    result = ref.helpers.bi_load(reference, sub.helpers.bi_state(student), sub.helpers.bi_aliases(student))
    if result["problems"]:
        raise Fail(f"{what}'s parameters do not fit the documented attributes ({result['problems'][0]}), so its "
                   "gradients cannot be compared with the reference's: keep the attribute names of the notebook")


def student_gradients(sub, module, args, what, input_grad=False):
    """(each parameter's gradient, the first argument's or None) of backpropagating through the student's `module`;
    Fail unless every parameter (and the input with input_grad) gets a nonzero gradient."""
    try:
        grads, x_grad = sub.helpers.bi_grads(module, args, input_grad)
    except StudentError as exc:
        raise Fail(f"backpropagating through your {what} failed ({exc.type}: {exc.message}): {NO_GRAPH}") from None
    missing = [name for name, grad in grads.items() if grad is None or not bool(grad.abs().sum() > 0)]
    if missing or (input_grad and x_grad is None):
        shown = ", ".join(missing[:4]) + (" and more" if len(missing) > 4 else "") if missing else "its input"
        raise Fail(f"{what}: no gradient reaches {shown}: {NO_GRAPH}")
    return grads, x_grad


def same_gradient(got, expected, floor: float = 0.0) -> bool:
    """Equal up to float32 rounding of two ways to compute the same thing (0.1% of the gradient's size, and `floor`:
    a gradient that is zero in exact arithmetic, such as the key projection's bias under a softmax over the keys, is
    rounding noise of the model's other gradients); a term such as 1e-7 * sum(p * noise) added to an output
    computed without a graph is off by nearly 100%."""
    if expected is None:
        return False
    got, expected = got.double(), expected.double()
    if got.dim() == expected.dim() == 2 and got.shape[1] == expected.shape[1] and got.shape[0] > expected.shape[0]:
        # a table with more rows than the reference's (a sizes mistake, graded by the sizes checks): the rows the
        # reference has get its gradient, the others none (no input selects them)
        extra, got = got[expected.shape[0]:], got[:expected.shape[0]]
        if extra.norm() > floor + 1e-6:
            return False
    if got.shape != expected.shape:
        return False
    return bool((got - expected).norm() <= 1e-3 * expected.norm() + floor + 1e-6)


ROUNDING_FLOOR = 1e-4  # of the largest gradient's norm: far above float32 rounding, far below any real term


def rounding_floor(ref_grads) -> float:
    return ROUNDING_FLOOR * max((float(g.double().norm()) for g in ref_grads.values() if g is not None), default=0.0)


def wrong_gradients(grads, ref_grads, own_state, ref_state) -> list:
    """The student's parameters whose gradient is not the reference's for the same tensor: matched by name, else (an
    attribute named otherwise) by the reference's parameters holding the same values."""
    wrong = []
    for name, grad in grads.items():
        if name in ref_grads:
            candidates = [name]
        else:
            mine = own_state.get(name)
            candidates = [n for n, value in ref_state.items() if n in ref_grads and mine is not None
                          and value.shape == mine.shape and torch.equal(value, mine)]
        if not any(same_gradient(grad, ref_grads[n], rounding_floor(ref_grads)) for n in candidates):
            wrong.append(name)
    return wrong


def gradients_right(sub, ref, student, reference, args, what, input_grad=False):
    """Fail unless backpropagating through the student's `module` gives every parameter (and the first argument,
    with input_grad) the gradient backpropagating through the reference's module gives: both hold the same weights,
    in eval() with dropout off. A forward that is not the reference's (the output checks say how) has other
    gradients, and which ones are right is not known: it is judged on what can be, that a gradient reaches every
    parameter (and the input), so that one mistake in the forward costs the output checks, not this one too."""
    got = outputs_of(student(*args), f"{what}.forward")
    same = same_outputs(got, outputs_of(reference(*args), "reference"))
    if not same and same_outputs(got, outputs_of(student(*_other_input(args)), f"{what}.forward")):
        # a forward that ignores its input (a constant plus a term in every parameter) has gradients that say nothing
        raise Fail(f"{what} gives the same output for another input (the output checks say how it differs): gradients "
                   "are judged on a forward that computes its output from its input")
    grads, x_grad = student_gradients(sub, student, args, what, input_grad)
    if not same:
        return
    ref_grads, ref_x_grad = ref.helpers.bi_grads(reference, args, input_grad)
    wrong = wrong_gradients(grads, ref_grads, sub.helpers.bi_state(student), ref.helpers.bi_state(reference))
    if input_grad and not same_gradient(x_grad, ref_x_grad):
        wrong.append("its input")
    if wrong:
        shown = ", ".join(wrong[:4]) + (" and more" if len(wrong) > 4 else "")
        raise Fail(f"{what}: the output is right but the gradient of {shown} is not the reference's: part of the "
                   f"computation is cut from the graph or replaced by another term; {NO_GRAPH}")


def _other_input(args):
    """`args` with the first tensor changed (ids rolled along the sequence, hidden states rolled and rescaled): any
    forward that reads its input gives another output."""
    args, done = list(args), False
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor) and not done:
            rolled = a.roll(1, dims=-1)
            args[i] = rolled * 0.5 + 0.25 if a.is_floating_point() else rolled
            done = True
    return args


# -- seeded weights in the notebook's names --------------------------------------------------------------------

def embeddings_state(cfg: dict, seed: int, prefix: str = "") -> dict:
    r = normal(gen(seed))
    E = cfg["hidden_size"]
    return {f"{prefix}word.weight": r(cfg["vocab_size"], E), f"{prefix}position.weight": r(cfg["max_position_embeddings"], E),
            f"{prefix}segment.weight": r(cfg["type_vocab_size"], E),
            f"{prefix}norm.weight": 1 + r(E, s=0.2), f"{prefix}norm.bias": r(E, s=0.2)}


def layer_state(cfg: dict, seed: int, prefix: str = "") -> dict:
    """One EncoderLayer's weights (nonzero biases, norms away from 1 and 0)."""
    r = normal(gen(seed))
    E, I = cfg["hidden_size"], cfg["intermediate_size"]
    state = {}
    for name in ("query", "key", "value", "attn_out"):
        state[f"{prefix}{name}.weight"] = r(E, E) / math.sqrt(E)
        state[f"{prefix}{name}.bias"] = r(E, s=0.1)
    state.update({f"{prefix}ffn_in.weight": r(I, E) / math.sqrt(E), f"{prefix}ffn_in.bias": r(I, s=0.1),
                  f"{prefix}ffn_out.weight": r(E, I) / math.sqrt(I), f"{prefix}ffn_out.bias": r(E, s=0.1)})
    for name in ("attn_norm", "ffn_norm"):
        state[f"{prefix}{name}.weight"] = 1 + r(E, s=0.2)
        state[f"{prefix}{name}.bias"] = r(E, s=0.2)
    return state


LAYER_NAMES = "query, key, value, attn_out, attn_norm, ffn_in, ffn_out, ffn_norm"


def additive_bias(mask: torch.Tensor) -> torch.Tensor:
    """The correct (B, 1, 1, T) bias of a 1 = real-token mask, computed in the judge."""
    return (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min


# -- the judge's BERT arithmetic (float64), with switches for the usual mistakes --------------------------------

def layer_norm(x, weight, bias, eps):
    return F.layer_norm(x, (x.shape[-1],), weight.double(), bias.double(), eps=eps)


def linear(x, state, name):
    return x @ state[f"{name}.weight"].double().T + state[f"{name}.bias"].double()


def layer_forward(state, x, bias, H, eps, scale="head", act="gelu", order="post", split="transpose",
                  use_bias="add", merge="transpose", softmax_dim=-1, attn_residual="input", ffn_residual="attn",
                  hidden_factor=1.0):
    """An encoder layer computed in the judge. Variants: scale "head" | "hidden" | "none"; act "gelu" | "tanh" |
    "relu"; order "post" | "pre"; split/merge "transpose" | "view" (heads without the transpose); use_bias "add" |
    "ignore"; softmax_dim -1 (over the keys) | -2 (over the queries); attn_residual "input" | "none" (the attention
    block's residual left out); ffn_residual "attn" (x', the attention block's output) | "input" (the layer's input)
    | "none"; hidden_factor scales each sub-layer's output where the hidden dropout acts (the fixed stand-in of
    bi_with_fixed_dropout). A LayerNorm used twice is a state whose two norms hold the same weights."""
    x = x.double()
    B, T, E = x.shape
    D = E // H

    def heads(t):
        return t.view(B, T, H, D).transpose(1, 2) if split == "transpose" else t.reshape(B, H, T, D)

    def attention(h):
        q, k, v = (heads(linear(h, state, n)) for n in ("query", "key", "value"))
        s = {"head": math.sqrt(D), "hidden": math.sqrt(E), "none": 1.0}[scale]
        scores = q @ k.transpose(-2, -1) / s
        if use_bias == "add":
            scores = scores + bias.double()
        context = torch.softmax(scores, dim=softmax_dim) @ v  # (B, H, T, D)
        context = context.transpose(1, 2).reshape(B, T, E) if merge == "transpose" else context.reshape(B, T, E)
        return hidden_factor * linear(context, state, "attn_out")

    activation = {"gelu": F.gelu, "tanh": lambda t: F.gelu(t, approximate="tanh"), "relu": F.relu}[act]

    def ffn(h):
        return hidden_factor * linear(activation(linear(h, state, "ffn_in")), state, "ffn_out")

    def norm(t, name):
        return layer_norm(t, state[f"{name}.weight"], state[f"{name}.bias"], eps)

    if order == "pre":
        h = x + attention(norm(x, "attn_norm"))
        return h + ffn(norm(h, "ffn_norm"))
    h = norm((x if attn_residual == "input" else 0) + attention(x), "attn_norm")
    residual = {"attn": h, "input": x, "none": 0}[ffn_residual]
    return norm(residual + ffn(h), "ffn_norm")


# -- code that runs in the worker -------------------------------------------------------------------------------

WORKER_CODE = r'''
import contextlib
import math
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F


def bi_generator(seed):
    return torch.Generator().manual_seed(seed)


def bi_grads(module, args, input_grad=False):
    """Backward of every floating output of module(*args), each weighted by fixed seeded noise: (each parameter's
    gradient or None, the first argument's gradient with input_grad, else None). Dropout is the caller's affair."""
    args = list(args)
    if input_grad:
        args[0] = args[0].detach().clone().requires_grad_(True)
    module.zero_grad(set_to_none=True)
    out = module(*args)
    outs = [t for t in (out if isinstance(out, (tuple, list)) else [out])
            if isinstance(t, torch.Tensor) and t.is_floating_point()]
    g = torch.Generator().manual_seed(7)
    sum((t * torch.randn(t.shape, generator=g)).sum() for t in outs).backward()
    grads = {name: None if p.grad is None else p.grad.detach().clone() for name, p in module.named_parameters()}
    return grads, (args[0].grad.detach().clone() if input_grad and args[0].grad is not None else None)


def bi_with_fixed_dropout(layer, hidden, bias, factor):
    """The layer's output in train() with its `dropout` replaced by a fixed scaling (a deterministic stand-in for
    dropout), restored after."""
    class BiScale(nn.Module):
        def __init__(self, factor):
            super().__init__()
            self.factor = factor
            self.p = 0.0  # code reading the rate sees no dropout

        def forward(self, x):
            return x * self.factor

    with bi_submodule_in_train(layer, "dropout", BiScale(factor)):
        return layer(hidden, bias)


@contextlib.contextmanager
def bi_submodule_in_train(layer, name, module):
    """While the block runs: the layer in train() mode with its submodule `name` replaced by `module`; after, the
    layer's own submodule back (or none, if it had none) and eval() mode."""
    saved = layer._modules.get(name)
    setattr(layer, name, module)
    layer.train()
    try:
        yield module
    finally:
        layer.eval()
        if saved is None:
            delattr(layer, name)
        else:
            setattr(layer, name, saved)


def bi_config(settings):
    import transformers
    return transformers.BertConfig(**settings)


def bi_tokenizer(vocab):
    """A BERT WordPiece tokenizer over `vocab` (special tokens wherever the list puts them)."""
    import transformers
    path = os.path.join(tempfile.mkdtemp(prefix="bi-vocab-"), "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    return transformers.BertTokenizerFast(path)


def bi_token_ids(tokenizer, text):
    return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))


def bi_load(module, state, aliases=()):
    """Copy `state` into the module's parameters and buffers: by name, else by position and shape; an embedding
    table with extra rows gets the state's rows first; names that are one tensor (`aliases`, a tied decoder's) are
    matched as one (autograder.sandbox.weights). Returns {"problems", "notes"}; nothing is loaded when something
    does not fit."""
    from autograder.sandbox.weights import load_state
    return load_state(module, state, aliases)


def bi_aliases(module):
    """The groups of the module's state_dict names that are one tensor (a decoder tied to the word embeddings, a
    bias tied to the head's): what bi_load must be told of a state made in this worker."""
    from autograder.sandbox.weights import aliases
    return aliases(module)


def bi_state(module):
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


@contextlib.contextmanager
def bi_standing_in(**stand_ins):
    """While the block runs, the submission's names refer to the grader's stand-ins (a part built on other parts
    is graded with the grader's versions of those, so that each part is graded on its own)."""
    missing = object()
    saved = {name: getattr(submission, name, missing) for name in stand_ins}
    for name, value in stand_ins.items():
        setattr(submission, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is missing:
                delattr(submission, name)
            else:
                setattr(submission, name, value)


def bi_load_library_weights(model, hf_state):
    """The student's load_bert_weights; then the model's state_dict."""
    submission.load_bert_weights(model, hf_state)
    return bi_state(model)


def bi_load_refused(config, hf_state):
    """The names of the exception's classes (its MRO) when the student's load_bert_weights refuses a state_dict
    that does not fit; [] when it accepts it."""
    model = submission.Bert(config)
    try:
        submission.load_bert_weights(model, hf_state)
    except Exception as exc:  # noqa: BLE001 - any exception is a refusal; its type is checked by the judge
        return [cls.__name__ for cls in type(exc).__mro__]
    return []


# Recording stand-ins with fixed maps the judge computes itself: the wiring of Bert (part 5) and of the
# pre-training model (part 6) is checked through them.
class BiProbeEmbeddings(nn.Module):
    """Records its inputs; returns tanh(word[ids] + 0.5 * (segment + 1)) (not BERT's formula: a known map)."""
    def __init__(self, config):
        super().__init__()
        self.word = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.segment = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.calls = []

    def forward(self, input_ids, token_type_ids=None):
        self.calls.append({"ids": input_ids.detach().clone(),
                           "types": None if token_type_ids is None else token_type_ids.detach().clone()})
        types = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids
        return torch.tanh(self.word.weight[input_ids] + 0.5 * (types[..., None].float() + 1))


def _probe_mix(E):
    return torch.randn(E, E, generator=torch.Generator().manual_seed(77)) / math.sqrt(E)


class BiProbeEncoderLayer(nn.Module):
    """The probe encoder's one layer, for a Bert that runs `self.encoder.layers` itself: the same map, and the mask
    its additive bias stands for (0 = a real token) recorded as the encoder's call."""
    def __init__(self, E, calls):
        super().__init__()
        self.register_buffer("mix", _probe_mix(E), persistent=False)
        self.calls = calls

    def forward(self, hidden, bias=None, *args, **kwargs):
        mask = None if bias is None else (bias.detach().reshape(hidden.shape[0], -1)[:, -hidden.shape[1]:] == 0).long()
        self.calls.append({"mask": mask, "extra": len(args) + len(kwargs)})
        return torch.tanh(hidden @ self.mix)


class BiProbeEncoder(nn.Module):
    """Records the mask it gets; returns tanh(hidden @ W) with a fixed W (one layer's worth, known to the judge). Its
    `layers` (the notebook's attribute) hold one layer doing the same."""
    def __init__(self, config):
        super().__init__()
        E = config.hidden_size
        self.register_buffer("mix", _probe_mix(E), persistent=False)
        self.calls = []
        self.layers = nn.ModuleList([BiProbeEncoderLayer(E, self.calls)])

    def forward(self, hidden, attention_mask=None, *args, **kwargs):
        self.calls.append({"mask": None if attention_mask is None else attention_mask.detach().clone(),
                           "extra": len(args) + len(kwargs)})
        return torch.tanh(hidden @ self.mix)


def bi_adopting(probe, own):
    """The stand-in `probe` with what the student's own class `own` adds of its own: its methods and class
    attributes (a get_input_embeddings the rest of the student's code calls), never what the stand-in does itself
    (forward, __init__, nn.Module's own). Correct code around a stand-in then runs as it does around the class."""
    if not isinstance(own, type) or probe is own:
        return probe
    extras = {}
    for klass in reversed(own.__mro__):  # the student's bases first, their class last
        if klass in nn.Module.__mro__:
            continue
        extras.update({name: value for name, value in vars(klass).items()
                       if not name.startswith("__") and not hasattr(probe, name)})
    if not extras:
        return probe
    return type(probe.__name__, (probe,), {**extras, "__module__": probe.__module__})


def bi_probe_bert(config):
    with bi_standing_in(Embeddings=bi_adopting(BiProbeEmbeddings, getattr(submission, "Embeddings", None)),
                        Encoder=bi_adopting(BiProbeEncoder, getattr(submission, "Encoder", None))):
        return submission.Bert(config)


def bi_probe_calls(model):
    return {"embeddings": model.embeddings.calls, "encoder": model.encoder.calls}


class BiProbeBert(nn.Module):
    """Stands in for Bert in part 6: embeddings.word is the word embedding; forward returns known maps of it:
    sequence = tanh(word[ids] + 0.25 * segment), pooled = tanh(2 * sequence[:, 0] + 0.5)."""
    def __init__(self, config):
        super().__init__()
        self.config = config  # as the notebook's Bert sets it
        self.embeddings = nn.Module()
        self.embeddings.word = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.calls = []

    def forward(self, input_ids, token_type_ids=None, attention_mask=None):
        self.calls.append({"types": token_type_ids is not None, "mask": attention_mask is not None})
        types = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids
        sequence = torch.tanh(self.embeddings.word(input_ids) + 0.25 * types[..., None].float())
        pooled = torch.tanh(2 * sequence[:, 0] + 0.5)
        return sequence, pooled


def bi_pretraining_model(config):
    """The student's BertForPretraining(config) around the grader's BiProbeBert."""
    torch.manual_seed(0)
    with bi_standing_in(Bert=bi_adopting(BiProbeBert, getattr(submission, "Bert", None))):
        return submission.BertForPretraining(config)


def bi_tied(model, input_ids, row, delta):
    """MLM logits before and after adding `delta` to row `row` of the word embedding (not in input_ids)."""
    model.eval()
    with torch.no_grad():
        before = model(input_ids)[0].detach().clone()
        model.bert.embeddings.word.weight[row] += delta
        after = model(input_ids)[0].detach().clone()
        model.bert.embeddings.word.weight[row] -= delta
    return before, after


class BiCountingSGD(torch.optim.SGD):
    """SGD that counts its steps (the training loops of parts 6 and 7)."""
    def __init__(self, params, lr):
        super().__init__(params, lr=lr)
        self.steps = 0

    def step(self, closure=None):
        self.steps += 1
        return super().step(closure)
'''
