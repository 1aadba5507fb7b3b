"""Hidden checks of part 5: SmallBERT(n_layers, vocab_size, embed_dim, n_heads, attn_drop_rate, layer_drop_rate).

Structure (embedding with V + 1 rows, an nn.Sequential of n_layers separate TransformerBlocks, no
parameter shared between them, a Linear(E, V) head), logits against the reference with identical
weights, and the data flow through the model with the student's blocks swapped for fixed stand-ins
inside the worker (so parts 1 to 3 are not graded again here): positional encoding added, blocks
chained in order, the mask handed to every block.
"""
import math

import torch

from _common import block_weights, close, in_layout, load_weights, output_problem
from autograder.testing import (
    Fail, StudentError, check, expect_identical, expect_shape, gen, keep, normal, remote_attr, remote_isinstance, worker_helpers,
)

# The student's code checked here calls these parts; where they fail it, the reference answers for them
DEPENDS_ON = ["TransformerBlock"]
PART = "5. Small BERT"

worker_helpers('''
import torch
import torch.nn as nn


def tb_block_arguments(n_layers, V, E, H, attn_drop_rate, layer_drop_rate):
    """The arguments SmallBERT(...) builds each TransformerBlock with, by the documented parameter names (a list
    of dicts; None for a call that does not fit TransformerBlock(embed_dim, n_heads, attn_drop_rate,
    layer_drop_rate))."""
    import inspect

    def documented(embed_dim, n_heads, attn_drop_rate, layer_drop_rate):
        pass

    # Recorded by the class's own __init__, the global name left alone: a block written with the old-style
    # super(TransformerBlock, self).__init__() looks that name up and needs it to be the class
    cls, calls, depth = submission.TransformerBlock, [], [0]
    if not isinstance(cls, type):
        return calls
    init = cls.__dict__.get("__init__")

    def recording(self, *args, **kwargs):
        if depth[0] == 0:  # the outermost call: a subclass's super().__init__ is the same block
            try:
                calls.append(dict(inspect.signature(documented).bind(*args, **kwargs).arguments))
            except TypeError:
                calls.append(None)
        depth[0] += 1
        try:
            if init is not None:
                return init(self, *args, **kwargs)
            return super(cls, self).__init__(*args, **kwargs)
        finally:
            depth[0] -= 1

    cls.__init__ = recording
    try:
        submission.SmallBERT(n_layers, V, E, H, attn_drop_rate, layer_drop_rate)
    finally:
        if init is None:
            del cls.__init__
        else:
            cls.__init__ = init
    return calls


class TbRecordingBlock(nn.Module):
    """Stands in for a TransformerBlock: (x, mask) -> (x + tanh(x W), mask); remembers the inputs and masks it
    got."""
    def __init__(self, weight):
        super().__init__()
        self.register_buffer("weight", weight)
        self.masks, self.inputs = [], []

    def forward(self, inputs):
        x, mask = inputs
        self.masks.append(None if mask is None else mask.detach().clone())
        self.inputs.append(x.detach().clone())
        return x + torch.tanh(x @ self.weight), mask


def tb_shared_blocks(model):
    """How the model's blocks share state: None when they are separate modules with parameters of their own,
    else (i, j, 'module') for blocks[i] and blocks[j] being one module object, or (i, j, 'parameters') for
    separate modules holding a parameter in common (the same tensor, or views of one storage)."""
    blocks = list(model.blocks)
    for j, block in enumerate(blocks):
        for i in range(j):
            if blocks[i] is block:
                return i, j, "module"
    owner = {}
    for j, block in enumerate(blocks):
        for p in block.parameters():
            keys = {("id", id(p))}
            if p.numel() > 0:
                keys.add(("storage", p.untyped_storage().data_ptr()))
            for key in keys:
                if owner.get(key, j) != j:
                    return owner[key], j, "parameters"
            for key in keys:
                owner.setdefault(key, j)
    return None


def tb_probe_bert(model, weights):
    """Replace the model's blocks by recording stand-ins (none: an empty nn.Sequential)."""
    model.blocks = nn.Sequential(*[TbRecordingBlock(w) for w in weights])
    return model


def tb_recorded_masks(model):
    return [list(block.masks) for block in model.blocks]


def tb_first_block_input(model):
    """What the first stand-in block got first (None: no block ran)."""
    blocks = list(model.blocks)
    return blocks[0].inputs[0] if blocks and blocks[0].inputs else None
''')


def bert_state(n_layers, V, E, seed):
    r = normal(gen(seed))
    state = {"embedding.weight": r(V + 1, E), "head.weight": r(V, E) / math.sqrt(E), "head.bias": r(V, s=0.1)}
    for i in range(n_layers):
        state.update(block_weights(r, E, prefix=f"blocks.{i}."))
    return state


def positional_encoding(T, E):
    """The notebook's (given) sinusoidal code for positions 0..T-1, computed the same way: (T, E)."""
    position = torch.arange(T, dtype=torch.float32).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, E, 2, dtype=torch.float32) * (-math.log(10000.0) / E))
    pe = torch.zeros(T, E)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term[: E // 2])
    return pe


SEPARATE_BLOCKS = ("the n_layers blocks must be separate modules (no parameters shared): build a new TransformerBlock "
                   "for each layer, e.g. nn.Sequential(*[TransformerBlock(...) for _ in range(n_layers)]); "
                   "[TransformerBlock(...)] * n_layers repeats one block")


def _sharing(sub, model, n_layers):
    """What the blocks of SmallBERT(n_layers, ...) share, said for the student; None when nothing."""
    shared = sub.helpers.tb_shared_blocks(model)
    if shared is None:
        return None
    i, j, how = shared
    said = "are the same module" if how == "module" else "share parameters"
    return f"SmallBERT(n_layers={n_layers}, ...).blocks[{i}] and blocks[{j}] {said}: {SEPARATE_BLOCKS}"


def _model(sub, n_layers, V, E, H, p):
    return keep(sub.SmallBERT, n_layers, V, E, H, p, p)


def _load(sub, model, state, what):
    load_weights(sub, model, state, what, "embedding, blocks.<i>.<block's names>, head")


def _logits(model, ids, mask, V, what="SmallBERT"):
    out = model(ids, mask)
    if not isinstance(out, torch.Tensor):
        raise Fail(f"{what}.forward must return the logits tensor (B, T, V), got {type(out).__name__}")
    expect_shape(out, (*ids.shape, V), f"{what} logits for token ids of shape {tuple(ids.shape)}")
    if not bool(torch.isfinite(out).all()):
        raise Fail(f"{what} logits for token ids of shape {tuple(ids.shape)} contain NaN or inf")
    return out.double()


def _ids(g, B, T, V, with_mask_id=True):
    ids = torch.randint(0, V, (B, T), generator=g)
    if with_mask_id:
        ids[0, 1] = V  # the [MASK] token
        ids[-1, -2] = V
    return ids


def _head(x, state):
    return x.double() @ state["head.weight"].double().T + state["head.bias"].double()


def _without_mask_row(model, state, ids, V):
    """(state, ids) fitted to a model whose embedding has V rows, no [MASK] row: the state without that row, the ids
    without the mask id. That slip is the shapes check's alone; the other checks grade the rest with the weights and
    ids it can take. Any other model: (state, ids) as they are."""
    weight = remote_attr(model, "embedding.weight")
    if not isinstance(weight, torch.Tensor) or tuple(weight.shape[:1]) != (V,):
        return state, ids
    ids = ids.clone()
    ids[ids == V] = 1  # a regular token in place of the mask id
    return {**state, "embedding.weight": state["embedding.weight"][:V]}, ids


def _computed_logits(model, V, what="SmallBERT"):
    """Logits in eval() for two batches of ids: the structure checks count only for a model that computes
    finite logits from its input (not NaN, not zeros or another constant). No [MASK] id among them: an embedding
    without its row is the shapes check's to grade."""
    model.eval()
    first = _logits(model, _ids(gen(501), 3, 9, V, with_mask_id=False), None, V, what)
    if torch.allclose(first, _logits(model, _ids(gen(503), 3, 9, V, with_mask_id=False), None, V, what), atol=1e-6):
        raise Fail(f"{what} in eval() gives the same logits for other token ids: compute them from the input")


@check("SmallBERT: embedding has V + 1 rows, head predicts V tokens", points=1, part=PART, depends_on=DEPENDS_ON)
def bert_shapes(sub, ref):
    V, E = 37, 24
    model = _model(sub, 2, V, E, 3, 0.1)
    emb = model.embedding.weight
    if not isinstance(emb, torch.Tensor) or tuple(emb.shape) != (V + 1, E):
        raise Fail(f"embedding must be nn.Embedding(vocab_size + 1, embed_dim): for V = {V}, E = {E} its weight "
                   f"should be ({V + 1}, {E}), got {tuple(getattr(emb, 'shape', ()))}; row V is the [MASK] token")
    head = model.head.weight
    if not isinstance(head, torch.Tensor) or tuple(head.shape) != (V, E):
        raise Fail(f"head must be nn.Linear(embed_dim, vocab_size): weight ({V}, {E}) for V = {V}, E = {E}, "
                   f"got {tuple(getattr(head, 'shape', ()))}")
    _computed_logits(model, V)


@check("SmallBERT: blocks is an nn.Sequential of n_layers TransformerBlocks", points=1, part=PART, depends_on=DEPENDS_ON)
def bert_blocks(sub, ref):
    model = _model(sub, 3, 20, 16, 2, 0.1)
    blocks = model.blocks
    if not remote_isinstance(blocks, "torch.nn.Sequential"):
        raise Fail("blocks must be an nn.Sequential of the n_layers TransformerBlocks")
    if len(blocks) != 3:
        raise Fail(f"SmallBERT(n_layers=3, ...).blocks holds {len(blocks)} modules instead of 3")
    for i in range(3):
        if not remote_isinstance(blocks[i], "submission.TransformerBlock"):
            raise Fail(f"blocks[{i}] is not a TransformerBlock")
    shared = _sharing(sub, model, 3)
    if shared:
        raise Fail(shared)
    if not remote_isinstance(model.pos_encoding, "submission.PositionalEncoding"):
        raise Fail("pos_encoding must be PositionalEncoding(embed_dim, layer_drop_rate)")
    _computed_logits(model, 20)  # the right structure counts when it computes logits
    wanted = {"embed_dim": 16, "n_heads": 2, "attn_drop_rate": 0.1, "layer_drop_rate": 0.3}
    calls = sub.helpers.tb_block_arguments(3, 20, 16, 2, 0.1, 0.3)
    for call in calls:
        if call is not None and {k: call.get(k) for k in wanted} != wanted:
            got = ", ".join(f"{k}={call.get(k)!r}" for k in wanted)
            raise Fail(f"SmallBERT(3, 20, 16, 2, attn_drop_rate=0.1, layer_drop_rate=0.3) builds its blocks as "
                       f"TransformerBlock({got}): pass embed_dim, n_heads, attn_drop_rate and layer_drop_rate in "
                       "this order")


def _diagnose(sub, model, got, ids, mask, state, V, E):
    """Which data-flow mistake the logits show, given the student's own blocks (same weights)."""
    emb = state["embedding.weight"][ids]
    x0 = emb + positional_encoding(ids.shape[1], E)
    blocks = model.blocks

    def through(x, m, which=None):
        out = (blocks if which is None else blocks[which])((x.float(), m))
        return _head(out[0].double(), state)

    if close(got, through(x0, mask)):
        # "right given your own blocks" only counts if the blocks compute something: with blocks that return
        # their input or a constant, a model that skips them would match
        other = (x0 + torch.randn(x0.shape, generator=gen(513))).float()
        problem = output_problem(blocks((x0.float(), mask))[0], blocks((other, mask))[0], x0)
        if problem is None:
            return None
        return (f"your blocks (TransformerBlock, with these weights) {problem}, so the model cannot be checked "
                "with them: see part 3")
    candidates = [
        (lambda: through(emb, mask), "the positional encoding is not added to the token embeddings"),
        (lambda: through(emb * math.sqrt(E) + positional_encoding(ids.shape[1], E), mask),
         "the token embeddings are multiplied by sqrt(E); the notebook's model adds the positional encoding to "
         "the embeddings as they are"),
        (lambda: through(x0, mask, 0), "only the first block is applied: run the input through all of self.blocks"),
        (lambda: through(x0, mask, -1), "each block gets the embeddings instead of the previous block's output"),
        (lambda: through(x0, None), "the mask does not reach the blocks: call self.blocks((x, mask))"),
        (lambda: _head(x0.double(), state), "the blocks are not applied"),
    ]
    for value, message in candidates:
        try:
            if close(got, value()):
                return message
        except (StudentError, IndexError, TypeError):
            pass
    return "the logits differ from head(blocks(pos_encoding(embedding(ids)), mask)) with the same weights"


@check("SmallBERT: logits match the reference with the same weights", points=1.5, part=PART, depends_on=DEPENDS_ON)
def bert_logits(sub, ref):
    n_layers, V, E, H, B, T = 2, 23, 16, 4, 3, 7
    g = gen(511)
    ids = _ids(g, B, T, V)
    mask = torch.zeros(B, T)
    mask[1, 5:] = 1
    mask[2, 3:] = 1
    model = _model(sub, n_layers, V, E, H, 0.2)
    model.eval()
    full = bert_state(n_layers, V, E, 512)
    state, ids = _without_mask_row(model, full, ids, V)
    reference = keep(ref.SmallBERT, n_layers, V, E, H, 0.2, 0.2)
    ref.helpers.tb_load_state(reference, full)
    reference.eval()
    expected = reference(ids, mask)
    # one block repeated (or blocks sharing parameters) cannot hold the n_layers blocks' own weights: loading
    # blocks.1.* overwrites blocks.0.*, and "right given your own blocks" must not excuse it
    shared = _sharing(sub, model, n_layers)
    message = None
    for layout in (0, 1):
        st = in_layout(state, layout, E, H)
        try:
            _load(sub, model, st, f"SmallBERT({n_layers}, {V}, {E}, {H}, 0.2, 0.2)")
        except Fail:
            if shared:  # one tensor for two blocks cannot take the two blocks' different weights
                raise Fail("SmallBERT in eval() with identical weights: the logits differ from the reference's; "
                           f"{shared}") from None
            raise
        got = _logits(model, ids, mask, V)
        if close(got, expected):
            return
        if shared:
            raise Fail(f"SmallBERT in eval() with identical weights: the logits differ from the reference's; {shared}")
        diagnosis = _diagnose(sub, model, got, ids, mask, st, V, E)
        if diagnosis is None:
            return  # right given the student's own blocks: parts 1 to 3 grade those
        message = message or diagnosis
    raise Fail(f"SmallBERT in eval() with identical weights: {message}")


def _probe(sub, model, weights):
    try:
        sub.helpers.tb_probe_bert(model, weights)
    except StudentError as exc:
        raise Fail(f"the grader could not replace the blocks of your SmallBERT: {exc.message}") from None


def _own_weights(model):
    """The student's embedding and head weights (read, not replaced: a wrong embedding size is graded by the
    shape check alone)."""
    state = {}
    for name in ("embedding.weight", "head.weight", "head.bias"):
        value = remote_attr(model, name)
        if not isinstance(value, torch.Tensor):
            raise Fail(f"SmallBERT has no {name}: use the documented attribute names (embedding, head)")
        state[name] = value.detach()
    return state


@check("SmallBERT: positional encoding added to the token embeddings", points=1, part=PART, depends_on=DEPENDS_ON)
def bert_positional(sub, ref):
    n_layers, V, E, H, B, T = 1, 19, 12, 2, 2, 9
    ids = _ids(gen(521), B, T, V, with_mask_id=False)
    model = _model(sub, n_layers, V, E, H, 0.1)
    state = _own_weights(model)
    _probe(sub, model, [torch.zeros(E, E)])  # one block returning its input: head(pos_encoding(embedding(ids)))
    model.eval()
    got = _logits(model, ids, None, V)
    emb = state["embedding.weight"][ids].double()
    pe = positional_encoding(T, E).double()
    if not close(got, _head(emb + pe, state)):
        if close(got, _head(emb, state)):
            raise Fail("the positional encoding is not added: x = self.pos_encoding(self.embedding(token_ids))")
        if close(got, _head(emb * math.sqrt(E) + pe, state)):
            raise Fail("the token embeddings are multiplied by sqrt(E); the notebook's model adds the positional "
                       "encoding to the embeddings as they are")
        raise Fail("with its blocks removed the model does not return head(pos_encoding(embedding(ids)))")
    _positional_dropout(sub)


def _positional_dropout(sub):
    """In train(), the positional encoding's dropout acts at layer_drop_rate: built as
    PositionalEncoding(embed_dim, layer_drop_rate), not with its default rate (0.1) or another one. With the blocks
    returning their input, what reaches the head is read back from the logits (the head's (V, E) weight, V > E,
    has full column rank), so it does not matter here whether and how the blocks are called."""
    V, E, H, B, T, p = 40, 16, 2, 4, 10, 0.5
    ids = _ids(gen(522), B, T, V, with_mask_id=False)
    model = keep(sub.SmallBERT, 1, V, E, H, 0.1, p)  # attn_drop_rate 0.1, layer_drop_rate 0.5
    state = _own_weights(model)
    x0 = state["embedding.weight"][ids].double() + positional_encoding(T, E).double()
    _probe(sub, model, [torch.zeros(E, E)])  # one block returning its input
    model.train()
    logits = _logits(model, ids, None, V) - state["head.bias"].double()
    x = torch.linalg.lstsq(state["head.weight"].double(), logits.reshape(-1, V).T).solution.T.reshape(B, T, E)
    dropped = x.abs() < 1e-4
    frac = dropped.double().mean().item()
    # 640 values, each dropped independently with p = 0.5: the dropped fraction has a standard deviation of 0.0198,
    # so [0.35, 0.65] is 7.6 standard deviations wide on each side (false failure < 1e-13); the default rate 0.1,
    # attn_drop_rate 0.1 and no dropout (0) are 20 or more standard deviations away.
    if frac < 0.35 or frac > 0.65:
        raise Fail(f"in train() SmallBERT(1, {V}, {E}, {H}, attn_drop_rate=0.1, layer_drop_rate=0.5) dropped "
                   f"{frac:.0%} of the embeddings, not about 50%: build the positional encoding as "
                   "PositionalEncoding(embed_dim, layer_drop_rate), whose dropout acts after adding the code")
    if not close(x[~dropped], 2 * x0[~dropped], atol=1e-3):
        raise Fail("in train() what reaches the head is not pos_encoding(embedding(ids)) after one dropout at "
                   "layer_drop_rate (kept values scaled by 1 / (1 - p)), with blocks that return their input")


@check("SmallBERT: blocks chained in order, each gets the mask", points=1, part=PART, depends_on=DEPENDS_ON)
def bert_chain(sub, ref):
    n_layers, V, E, H, B, T = 3, 17, 8, 2, 2, 6
    g = gen(531)
    ids = _ids(g, B, T, V, with_mask_id=False)
    mask = torch.zeros(B, T)
    mask[1, 4:] = 1
    weights = [torch.randn(E, E, generator=g) / 2 for _ in range(n_layers)]
    model = _model(sub, n_layers, V, E, H, 0.1)
    state = _own_weights(model)
    _probe(sub, model, weights)  # block i: (x, mask) -> (x + tanh(x W_i), mask)
    model.eval()
    got = _logits(model, ids, mask, V)
    masks = sub.helpers.tb_recorded_masks(model)
    first = sub.helpers.tb_first_block_input(model)
    step = lambda x, w: x + torch.tanh(x @ w)  # noqa: E731
    emb, pe = state["embedding.weight"][ids].double(), positional_encoding(T, E).double()
    # the embedding and positional encoding are graded by the other checks: any of these inputs will do, and so
    # does what the first block got (the positional encoding added twice, say, is the other checks' to grade)
    inputs = [emb + pe, emb, emb * math.sqrt(E) + pe]
    if isinstance(first, torch.Tensor) and tuple(first.shape) == (B, T, E) and bool(torch.isfinite(first).all()):
        inputs.append(first.double())
    chained = []
    for x0 in inputs:
        x = x0
        for w in weights:
            x = step(x, w.double())
        chained.append(_head(x, state))
    if not any(close(got, c) for c in chained):
        if any(close(got, _head(step(x0, weights[0].double()), state)) for x0 in inputs):
            raise Fail("only the first block is applied: the input must go through all n_layers blocks in order")
        if any(close(got, _head(step(x0, weights[-1].double()), state)) for x0 in inputs):
            raise Fail("each block gets the embeddings instead of the previous block's output: chain the blocks "
                       "(nn.Sequential does it: self.blocks((x, mask)))")
        raise Fail("with stand-in blocks the logits are not head(block_L(...block_1(x, mask)...))")
    if any(len(m) != 1 for m in masks):
        raise Fail("every block must be called exactly once per forward")
    for i, (m,) in enumerate(masks):
        if m is None or tuple(m.shape) != (B, T) or not torch.equal(m != 0, mask != 0):
            raise Fail(f"block {i} did not get the padding mask given to forward: pass (x, mask) to the blocks")


@check("SmallBERT: deterministic in eval(), dropout in train(), mask optional", points=1, part=PART, depends_on=DEPENDS_ON)
def bert_modes(sub, ref):
    V = 20
    model = _model(sub, 2, V, 16, 2, 0.3)
    ids = _ids(gen(541), 4, 10, V, with_mask_id=False)
    model.eval()
    first, second = _logits(model, ids, None, V), _logits(model, ids, None, V)
    expect_identical(first, second, "in eval() two calls with the same input gave different logits",
                     "the logits in eval()")
    if torch.allclose(first, _logits(model, _ids(gen(542), 4, 10, V, with_mask_id=False), None, V), atol=1e-6):
        raise Fail("in eval() the logits are the same for other token ids: they must be computed from the input")
    with_zeros = ids.clone()
    with_zeros[:, ::3] = 0  # id 0 is a regular token: mask=None means no padding, whatever the ids
    unmasked = _logits(model, with_zeros, None, V)
    # None must not be padding read off the ids; where it also differs from a mask of zeros for another reason (a
    # mask convention turned around), the logits and chaining checks grade how the mask is used
    if not torch.allclose(unmasked, _logits(model, with_zeros, torch.zeros(4, 10), V), atol=1e-5) and \
            torch.allclose(unmasked, _logits(model, with_zeros, (with_zeros == 0).float(), V), atol=1e-5):
        raise Fail("in eval() mask=None must mean no padding at all (the same logits as a mask of zeros), "
                   "whatever the token ids: id 0 is a regular token here, not padding")
    model.train()
    third, fourth = _logits(model, ids, None, V), _logits(model, ids, None, V)
    # Dropout with p = 0.3 on 4 x 10 x 16 values in each of several places: two identical train() outputs
    # would need identical dropout masks everywhere (probability far below 1e-100).
    if torch.equal(third, fourth):
        raise Fail("in train() with dropout rates 0.3 two calls gave identical logits: is dropout ever applied?")


@check("SmallBERT: gradients reach the embedding, every block and the head", points=0.5, part=PART,
       depends_on=DEPENDS_ON)
def bert_gradients(sub, ref):
    n_layers, V, E, H, B, T = 2, 11, 8, 2, 2, 6
    g = gen(521)
    ids = _ids(g, B, T, V)
    weight = torch.randn(B, T, V, generator=g)
    model = _model(sub, n_layers, V, E, H, 0.0)
    state, ids = _without_mask_row(model, bert_state(n_layers, V, E, 522), ids, V)
    try:
        _load(sub, model, state, f"SmallBERT({n_layers}, {V}, {E}, {H}, 0.0, 0.0)")
    except Fail:
        if _sharing(sub, model, n_layers) is None:
            raise
        # blocks sharing one tensor cannot take the blocks' different weights (the blocks' own checks charge that):
        # the gradients are followed through the model's own weights
    try:
        grads = sub.helpers.tb_grads(model, [ids, None], weight)
    except StudentError as exc:
        raise Fail(f"backpropagating through your SmallBERT failed ({exc.type}: {exc.message}): compute the logits "
                   "with differentiable torch operations (no .detach(), .data, .numpy() or torch.no_grad())") from None
    missing = [name for name, grad in grads.items() if grad is None or not bool(grad.abs().sum() > 0)]
    if missing:
        raise Fail(f"no gradient reaches {', '.join(missing[:4])}{' and more' if len(missing) > 4 else ''}: "
                   "keep the path from the embedding through the blocks to the head in the graph (no .detach(), "
                   ".data or torch.no_grad())")
