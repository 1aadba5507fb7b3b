"""Hidden checks of part 3: Embeddings(config), forward(input_ids, token_type_ids=None).

Identical weights are loaded (by the documented attribute names) into the student's and the reference's modules
and the outputs compared; when they differ, the judge computes the usual mistakes with the same weights (position
ids from 1, no segment embedding, no LayerNorm) and names the one that matches. The configuration has 3 token
types, pad id 5 and, where it matters, a large LayerNorm eps, so that values read from a default instead of the
config show.
"""
import torch

from _common import build, config, embeddings_state, gradients_right, layer_norm, load, remote_config, tensor_out
from autograder.testing import Fail, StudentError, check, close, expect_identical, gen, remote_attr

PART = "3. BERT embeddings"
NAMES = "word, position, segment, norm"


def embeddings(side, **overrides):
    cfg = config(**overrides)
    return build(side, "Embeddings", remote_config(side, **overrides), what="Embeddings(config)"), cfg


def inputs(seed, B, T, cfg):
    g = gen(seed)
    ids = torch.randint(cfg["vocab_size"], (B, T), generator=g)
    types = torch.randint(cfg["type_vocab_size"], (B, T), generator=g)
    return ids, types


def pair(sub, ref, state, **overrides):
    """The student's and the reference's Embeddings with the same weights, in eval() mode (dropout 0 unless the
    overrides say otherwise: the value checks do not depend on how dropout is applied, the dropout check grades that)."""
    overrides = {"hidden_dropout_prob": 0.0, **overrides}
    student, cfg = embeddings(sub, **overrides)
    load(sub, student, state, "Embeddings", NAMES)
    reference, _ = embeddings(ref, **overrides)
    ref.helpers.bi_load(reference, state)
    student.eval()
    reference.eval()
    return student, reference, cfg


def only(state, keep):
    """The state with every embedding table but `keep` set to zero: the output then shows that table alone."""
    return {k: (v if k.startswith(keep) or not k.endswith(".weight") or k.startswith("norm") else torch.zeros_like(v))
            for k, v in state.items()}


def run(module, ids, types=None, what="Embeddings"):
    out = module(ids) if types is None else module(ids, types)
    return tensor_out(out, f"{what}.forward's output", (*ids.shape, config()["hidden_size"])).double()


def judge_embeddings(state, ids, types, eps, offset=0, segments=True, norm=True):
    """The embeddings computed in the judge, with switches for the usual mistakes."""
    T = ids.shape[1]
    x = state["word.weight"].double()[ids] + state["position.weight"].double()[offset:offset + T]
    if segments:
        x = x + state["segment.weight"].double()[types]
    return layer_norm(x, state["norm.weight"], state["norm.bias"], eps) if norm else x


def diagnose(got, state, ids, types, eps):
    if ids.shape[1] < state["position.weight"].shape[0] and close(got, judge_embeddings(state, ids, types, eps, offset=1)):
        return "the position ids are off by one: positions are 0, 1, ..., T-1 (torch.arange(T))"
    if close(got, judge_embeddings(state, ids, types, eps, segments=False)):
        return "the segment (token type) embedding is not added: word + position + segment(token_type_ids)"
    if close(got, judge_embeddings(state, ids, types, eps, norm=False)):
        return "the LayerNorm is missing: norm(word + position + segment), then dropout"
    if close(got, judge_embeddings(state, ids, types, 1e-5), atol=1e-4):
        return "the LayerNorm does not use the library's eps: nn.LayerNorm(E, eps=config.layer_norm_eps)"
    return "the output differs from LayerNorm(word[ids] + position[0..T-1] + segment[token_type_ids])"


@check("embeddings: sizes, padding index, LayerNorm eps and dropout rate come from the config", points=1, part=PART)
def sizes(sub, ref):
    cfg = config(layer_norm_eps=1e-7, hidden_dropout_prob=0.3)
    emb, _ = embeddings(sub, layer_norm_eps=1e-7, hidden_dropout_prob=0.3)
    E = cfg["hidden_size"]
    for name, shape, source in (("word", (cfg["vocab_size"], E), "config.vocab_size"),
                                ("position", (cfg["max_position_embeddings"], E), "config.max_position_embeddings"),
                                ("segment", (cfg["type_vocab_size"], E), "config.type_vocab_size")):
        try:
            got = tuple(remote_attr(emb, f"{name}.weight").shape)
        except Exception:  # noqa: BLE001 - no such attribute
            raise Fail(f"Embeddings must have an nn.Embedding attribute `{name}`") from None
        if got != shape:
            raise Fail(f"{name} must be nn.Embedding({source}, config.hidden_size): its weight has shape {got} for a "
                       f"config with {source.split('.')[1]} = {shape[0]}")
    try:
        padding = remote_attr(emb, "word.padding_idx")
    except Exception:  # noqa: BLE001 - not an nn.Embedding
        padding = None
    if padding != cfg["pad_token_id"]:
        raise Fail("word must be nn.Embedding(config.vocab_size, E, padding_idx=config.pad_token_id): its padding "
                   "row starts at 0 and gets no gradient")
    try:
        eps, normalized = remote_attr(emb, "norm.eps"), tuple(remote_attr(emb, "norm.normalized_shape"))
        p = remote_attr(emb, "dropout.p")
    except Exception:  # noqa: BLE001
        raise Fail("Embeddings must have `norm` (nn.LayerNorm) and `dropout` (nn.Dropout) attributes") from None
    if normalized != (E,):
        raise Fail("norm must be nn.LayerNorm(config.hidden_size, ...)")
    if abs(eps - cfg["layer_norm_eps"]) > 1e-15:
        raise Fail("norm must use the library's eps: nn.LayerNorm(E, eps=config.layer_norm_eps), not PyTorch's "
                   "default 1e-5")
    if abs(p - cfg["hidden_dropout_prob"]) > 1e-12:
        raise Fail("dropout must be nn.Dropout(config.hidden_dropout_prob)")


@check("embeddings: output matches the reference with the same weights", points=1.5, part=PART)
def output(sub, ref):
    state = embeddings_state(config(), 301)
    student, reference, cfg = pair(sub, ref, state)
    ids, types = inputs(302, 3, 10, cfg)
    got, expected = run(student, ids, types), run(reference, ids, types)
    if not close(got, expected):
        raise Fail("Embeddings in eval() with identical weights: " + diagnose(got, state, ids, types, cfg["layer_norm_eps"]))


@check("embeddings: position ids 0..T-1 for every length, up to max_position_embeddings", points=1, part=PART)
def positions(sub, ref):
    # word and segment tables are zero: the output is LayerNorm(position[p]) alone
    state = only(embeddings_state(config(), 311), "position")
    student, reference, cfg = pair(sub, ref, state)
    for T in (1, 7, cfg["max_position_embeddings"]):
        ids, types = inputs(312 + T, 2, T, cfg)
        try:
            got = run(student, ids, types)
        except StudentError as exc:  # e.g. an index out of range for positions 1..T
            raise Fail(f"Embeddings failed for sequences of length T = config.max_position_embeddings = {T} "
                       f"({exc.type}: {exc.message[:120]}): the position ids are 0..T-1") from None
        if close(got, run(reference, ids, types)):
            continue
        if T < cfg["max_position_embeddings"] and close(got, judge_embeddings(state, ids, types, cfg["layer_norm_eps"], offset=1)):
            raise Fail(f"Embeddings for sequences of length {T}: the position ids are off by one: positions are 0, 1, "
                       "..., T-1 (torch.arange(T))")
        raise Fail(f"Embeddings for sequences of length {T}, with only the position table non-zero: the output must be "
                   "LayerNorm(position[0..T-1]), the same for every sequence of the batch")


@check("embeddings: segment embeddings from token_type_ids, all 0 when None", points=1, part=PART)
def token_types(sub, ref):
    # word and position tables are zero: the output is LayerNorm(segment[token_type_ids]) alone
    state = only(embeddings_state(config(), 321), "segment")
    student, reference, cfg = pair(sub, ref, state)
    ids, types = inputs(322, 3, 8, cfg)
    default = run(student, ids)
    if not close(default, run(student, ids, torch.zeros_like(ids))):
        raise Fail("token_type_ids=None must mean segment 0 for every token (torch.zeros_like(input_ids))")
    got = run(student, ids, types)
    if close(got, default):
        raise Fail("the output does not change with token_type_ids: add the segment embedding, segment(token_type_ids)")
    if not close(got, run(reference, ids, types)):
        raise Fail("with only the segment table non-zero, the output must be LayerNorm(segment[token_type_ids]) (token "
                   "types 0, 1 and 2)")


@check("embeddings: LayerNorm with the config's eps", points=1, part=PART)
def layer_norm_eps(sub, ref):
    # position and segment tables are zero: the output is LayerNorm(word[ids]) with eps 0.5
    state = only(embeddings_state(config(), 331), "word")
    student, reference, cfg = pair(sub, ref, state, layer_norm_eps=0.5)
    ids, types = inputs(332, 3, 8, cfg)
    got = run(student, ids, types)
    if close(got, run(reference, ids, types)):
        return
    if close(got, judge_embeddings(state, ids, types, 1e-5)) or close(got, judge_embeddings(state, ids, types, 1e-12)):
        raise Fail("with config.layer_norm_eps = 0.5 the LayerNorm uses another eps: nn.LayerNorm(E, "
                   "eps=config.layer_norm_eps)")
    if close(got, judge_embeddings(state, ids, types, 0.5, norm=False)):
        raise Fail("the LayerNorm is missing: norm(word + position + segment), then dropout")
    raise Fail("with only the word table non-zero and config.layer_norm_eps = 0.5, the output must be "
               "norm(word[input_ids]) with the LayerNorm's own weight and bias")


@check("embeddings: dropout after the LayerNorm, in train() only", points=1, part=PART)
def dropout(sub, ref):
    state = embeddings_state(config(), 341)
    student, reference, cfg = pair(sub, ref, state, hidden_dropout_prob=0.5)
    ids, types = inputs(342, 8, 20, cfg)
    exact = run(student, ids, types)
    expect_identical(exact, run(student, ids, types), "in eval() mode two calls with the same input must give identical "
                     "outputs (no dropout)", "the embeddings' output in eval()")
    # dropout is judged on an output computed from the input: dropout of anything else (a constant) drops the same
    # share. Whether that output is the right one is the output checks' to say.
    other_ids, _ = inputs(343, 8, 20, cfg)
    if close(exact, run(student, other_ids, types)):
        raise Fail("in eval() the output is the same for other input_ids: compute the embeddings from the input, "
                   "then dropout")
    student.train()
    noisy = run(student, ids, types)
    dropped = noisy == 0
    frac = dropped.double().mean().item()
    # 2,560 values, each dropped with p = 0.5: the dropped fraction has sd 0.0099; [0.4, 0.6] is 10 sd wide on
    # each side (false failure < 1e-22). The LayerNorm's outputs are never exactly 0 otherwise.
    if frac < 0.4 or frac > 0.6:
        raise Fail(f"in train() with config.hidden_dropout_prob = 0.5 about half of the outputs should be exactly 0 "
                   f"(dropout after the LayerNorm); {frac:.0%} were" + (": dropout must come after the LayerNorm, or "
                                                                          "it is missing" if frac < 0.05 else ""))
    if not torch.allclose(noisy[~dropped], 2 * exact[~dropped], atol=1e-5, rtol=1e-4):
        raise Fail("in train() the kept outputs must be the eval() outputs scaled by 1 / (1 - p): dropout is the last "
                   "step, after the LayerNorm")


@check("embeddings: gradients reach the word, position and segment tables and the LayerNorm", points=0.5, part=PART)
def gradients(sub, ref):
    state = embeddings_state(config(), 341)
    student, reference, cfg = pair(sub, ref, state)
    ids, types = inputs(342, 3, 8, cfg)
    types[0] = 0
    types[1] = 1  # both segments used: each row of the segment table gets a gradient
    gradients_right(sub, ref, student, reference, [ids, types], "Embeddings")
