"""Hidden checks of part 6: init_bert_weights(module, std=0.02), MLMHead(config, word_embeddings),
BertForPretraining(config), pretraining_loss(mlm_logits, nsp_logits, labels, next_sentence_label) and
pretraining_step(model, batch, optimizer).

BertForPretraining is built with the grader's stand-in for Bert (BiProbeBert: an embeddings.word table and known
maps for the sequence and pooled outputs), so part 6 is graded on its own. The heads get known weights by the
documented attribute names and their outputs are computed in the judge; the tying is checked by its effect (a
change of the word embedding changes the MLM logits of that token). The training step runs on a small stand-in
model with a counting SGD, so the judge knows the loss and the update one step must give.
"""
import math

import torch
import torch.nn.functional as F

from _common import (
    config, gradients_right, layer_norm, load, mirror_weights, outputs_of, remote_config, tensor_out,
)
from autograder.testing import Fail, StudentError, check, close, gen, keep, remote_attr, worker_helpers

PART = "6. Pre-training heads and loss"

worker_helpers('''
import functools


def bi_init_report(std):
    """A module with garbage in every parameter, after apply(init_bert_weights) (std None: the default)."""
    model = nn.Sequential(nn.Linear(64, 300), nn.Embedding(500, 64, padding_idx=3), nn.LayerNorm(64),
                          nn.Embedding(200, 64), nn.GELU())
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(5.0)
    torch.manual_seed(0)
    init = submission.init_bert_weights if std is None else functools.partial(submission.init_bert_weights, std=std)
    model.apply(init)
    return bi_state(model)


def bi_weight_spread(model):
    """The standard deviation of every nn.Linear and nn.Embedding weight of the model, taken together."""
    weights = [m.weight.detach().reshape(-1) for m in model.modules() if isinstance(m, (nn.Linear, nn.Embedding))]
    return float(torch.cat(weights).double().std()) if weights else None


def bi_mlm_head(config, word_weight):
    """The student's MLMHead around an nn.Embedding holding word_weight."""
    embedding = nn.Embedding(word_weight.shape[0], word_weight.shape[1])
    with torch.no_grad():
        embedding.weight.copy_(word_weight)
    return submission.MLMHead(config, embedding)


class BiToyPretrainer(nn.Module):
    """A small stand-in for BertForPretraining: records every call; (mlm_logits, nsp_logits) from three parameters."""
    def __init__(self, emb, w, b):
        super().__init__()
        self.emb = nn.Parameter(emb.clone())
        self.w = nn.Parameter(w.clone())
        self.b = nn.Parameter(b.clone())
        self.calls = []

    def forward(self, input_ids, token_type_ids=None, attention_mask=None):
        self.calls.append({"training": self.training, "ids": input_ids.detach().clone(),
                           "types": None if token_type_ids is None else token_type_ids.detach().clone(),
                           "mask": None if attention_mask is None else attention_mask.detach().clone()})
        types = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids
        h = torch.tanh(self.emb[input_ids] + 0.1 * types[..., None])  # (B, T, E)
        return h @ self.emb.T, h[:, 0] @ self.w.T + self.b  # (B, T, V), (B, 2)


def bi_own_loss_grads(emb, w, b, batch):
    """The gradients of the student's own pretraining_loss of BiToyPretrainer's outputs on the batch, at these
    parameters (None when that loss cannot be backpropagated): the step is judged on the loss the student wrote."""
    model = BiToyPretrainer(emb, w, b)
    try:
        mlm_logits, nsp_logits = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        loss = submission.pretraining_loss(mlm_logits, nsp_logits, batch["labels"], batch["next_sentence_label"])
        loss.backward()
    except Exception:  # noqa: BLE001 - a loss that cannot be backpropagated: only the correct loss's gradient counts
        return None
    # a parameter the loss does not reach has the gradient 0 (an NSP loss left out, say: that is the loss check's)
    return {n: torch.zeros_like(p) if p.grad is None else p.grad.detach().clone() for n, p in model.named_parameters()}


def bi_pretraining_steps(emb, w, b, batch, lr, modes):
    """The student's pretraining_step on BiToyPretrainer, once per mode (True: train()); what each call did."""
    model = BiToyPretrainer(emb, w, b)
    optimizer = BiCountingSGD(model.parameters(), lr)
    steps = []
    for mode in modes:
        model.train(mode)
        n_calls = len(model.calls)
        loss = submission.pretraining_step(model, dict(batch), optimizer)
        if isinstance(loss, torch.Tensor):
            loss = loss.detach()
        steps.append({"loss": loss, "calls": model.calls[n_calls:], "training_after": model.training,
                      "optimizer_steps": optimizer.steps,
                      "params": {n: p.detach().clone() for n, p in model.named_parameters()}})
    return steps
''')


def pretraining_model(sub, **overrides):
    try:
        return sub.helpers.bi_pretraining_model(remote_config(sub, **overrides))
    except StudentError as exc:
        if exc.stub:
            raise Fail("your BertForPretraining (or MLMHead) is not implemented yet (it raised NotImplementedError)") from None
        raise Fail(f"BertForPretraining(config) raised {exc.type}: {exc.message}") from None


def pretraining_inputs(seed, cfg, B=3, T=6):
    g = gen(seed)
    ids = torch.randint(cfg["vocab_size"], (B, T), generator=g)
    types = torch.randint(2, (B, T), generator=g)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[2, 4:] = 0
    return ids, types, mask


def two_outputs(out, B, T, V, what):
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise Fail(f"{what} must return a tuple (mlm_logits, nsp_logits)")
    mlm, nsp = out
    if isinstance(mlm, torch.Tensor) and tuple(mlm.shape) == (B, 2) and isinstance(nsp, torch.Tensor) and \
            tuple(nsp.shape) == (B, T, V):
        raise Fail(f"{what} returns (nsp_logits, mlm_logits): return (mlm_logits, nsp_logits)")
    return (tensor_out(mlm, f"{what}'s mlm_logits", (B, T, V)).double(),
            tensor_out(nsp, f"{what}'s nsp_logits", (B, 2)).double())


def mlm_transform(h, state, eps, prefix="", act=F.gelu, norm=True):
    x = act(h @ state[f"{prefix}dense.weight"].double().T + state[f"{prefix}dense.bias"].double())
    return layer_norm(x, state[f"{prefix}norm.weight"], state[f"{prefix}norm.bias"], eps) if norm else x


# -- init_bert_weights -------------------------------------------------------------------------------------------

@check("init_bert_weights: N(0, std) weights, zero biases, LayerNorm 1 and 0, padding row 0", points=1, part=PART)
def init_weights(sub, ref):
    for std in (None, 0.05):
        target = 0.02 if std is None else std
        what = "init_bert_weights" + ("" if std is None else f" with std={std}")
        try:
            state = sub.helpers.bi_init_report(std)
        except StudentError as exc:
            if exc.stub:
                raise Fail("your init_bert_weights is not implemented yet (it raised NotImplementedError)") from None
            raise Fail(f"model.apply({what}) raised {exc.type}: {exc.message}") from None
        for name, kind in (("0.weight", "nn.Linear"), ("1.weight", "nn.Embedding"), ("3.weight", "nn.Embedding")):
            w = state[name].double()
            if name == "1.weight":
                if not bool((w[3] == 0).all()):
                    raise Fail(f"{what}: the row padding_idx of an nn.Embedding must be 0 after the initialisation")
                w = torch.cat((w[:3], w[4:]))
            n = w.numel()
            # n >= 19,200 draws: the sample std has relative sd 1/sqrt(2n) <= 0.0051, so 5% is >= 9.8 sd; the mean has
            # sd target/sqrt(n), bounded at 6 sd (false failure < 1e-8 in all)
            if abs(w.mean().item()) > 6 * target / math.sqrt(n) or abs(w.std().item() / target - 1) > 0.05:
                raise Fail(f"{what}: {kind} weights must be drawn from N(0, std^2) with std = {target} (the argument); "
                           f"yours have mean {w.mean().item():.3g} and std {w.std().item():.3g}")
        if not bool((state["0.bias"] == 0).all()):
            raise Fail(f"{what}: nn.Linear biases must be set to 0")
        if not (bool((state["2.weight"] == 1).all()) and bool((state["2.bias"] == 0).all())):
            raise Fail(f"{what}: nn.LayerNorm weights must be set to 1 and biases to 0")


# -- the MLM head ------------------------------------------------------------------------------------------------

@check("MLM head: dense -> GELU -> LayerNorm, then the word embeddings as decoder, plus a bias", points=1, part=PART)
def mlm_head(sub, ref):
    cfg = config(layer_norm_eps=0.25)  # a large eps: LayerNorm(E) with PyTorch's default eps gives other values
    E, V = cfg["hidden_size"], cfg["vocab_size"]
    g = gen(601)
    word = torch.randn(V, E, generator=g)
    state = {"dense.weight": torch.randn(E, E, generator=g) / math.sqrt(E), "dense.bias": 0.2 * torch.randn(E, generator=g),
             "norm.weight": 1 + 0.2 * torch.randn(E, generator=g), "norm.bias": 0.2 * torch.randn(E, generator=g),
             "bias": torch.randn(V, generator=g)}
    try:
        head = keep(sub.helpers.bi_mlm_head, remote_config(sub, layer_norm_eps=0.25), word)
    except StudentError as exc:
        if exc.stub:
            raise Fail("your MLMHead is not implemented yet (it raised NotImplementedError)") from None
        raise Fail(f"MLMHead(config, word_embeddings) raised {exc.type}: {exc.message}") from None
    load(sub, head, state, "MLMHead", "dense, norm, bias")
    head.eval()
    hidden = torch.randn(2, 5, E, generator=gen(602))
    got = tensor_out(head(hidden), "MLMHead's logits", (2, 5, V)).double()
    decode = lambda h: h @ word.double().T + state["bias"].double()  # noqa: E731
    h = hidden.double()
    if close(got, decode(mlm_transform(h, state, 0.25))):
        return
    for variant, message in (
            (decode(mlm_transform(h, state, 1e-5)), "norm must use the config's eps: nn.LayerNorm(E, eps=config.layer_norm_eps)"),
            (decode(mlm_transform(h, state, 0.25, act=F.relu)), "the transform uses ReLU; BERT's uses GELU"),
            (decode(mlm_transform(h, state, 0.25, act=lambda x: x)), "the GELU between dense and norm is missing"),
            (decode(mlm_transform(h, state, 0.25, norm=False)), "the LayerNorm after the GELU is missing"),
            (decode(h), "the transform (dense -> GELU -> LayerNorm) before the decoder is missing"),
            (decode(mlm_transform(h, state, 0.25)) - state["bias"].double(), "the head's own bias (V values) is not added")):
        if close(got, variant):
            raise Fail(f"MLMHead with known weights: {message}")
    raise Fail("MLMHead with known weights: the logits differ from norm(GELU(dense(h))) @ word_embeddings.weight^T + bias")


@check("MLM head: the decoder weight is tied to the word embeddings (shared, not copied)", points=1, part=PART,
       depends_on=["Bert"])
def tied(sub, ref):
    cfg = config()
    model = pretraining_model(sub)
    row = 17  # a token absent from the input: only the decoder reads its embedding row
    ids = torch.tensor([[3, 8, 0, 9, 4], [2, 6, 11, 1, 13]])
    delta = torch.randn(cfg["hidden_size"], generator=gen(611))
    try:
        before, after = sub.helpers.bi_tied(model, ids, row, delta)
    except StudentError as exc:
        raise Fail(f"BertForPretraining(config)(input_ids) raised {exc.type}: {exc.message}") from None
    if not (torch.isfinite(before).all() and torch.isfinite(after).all()):  # NaN compares False with any bound
        raise Fail("BertForPretraining(config)(input_ids) gave MLM logits that are not finite numbers (NaN or inf)")
    change = (after - before).double().abs()
    others = torch.cat((change[..., :row], change[..., row + 1:]), dim=-1)
    if change[..., row].max() < 1e-6:
        raise Fail("changing the word embedding of a token does not change the MLM logits of that token: the decoder must "
                   "use the word embeddings' weight itself (tied: shared, not a copy made at construction)")
    if others.max() > 1e-5:
        raise Fail("changing the word embedding of a token absent from the input changed the logits of other tokens: "
                   "the decoder's row v must be word_embeddings.weight[v]")
    # the tied decoder gives logit v at position t as h_t . word[v] + b_v: the change is h_t . delta, which differs
    # from position to position (the hidden states differ); a logit that moves alike everywhere reads the weight
    # without the hidden states (such as word.weight.sum(-1))
    moved = (after - before)[..., row].double()
    if float(moved.max() - moved.min()) < 1e-6:
        raise Fail("changing the word embedding of a token moves its MLM logit by the same amount at every position: the "
                   "logits must be h @ word_embeddings.weight^T + bias, h the transformed hidden state of each position")


# -- the pre-training model --------------------------------------------------------------------------------------

@check("pre-training model: MLM head on the sequence output, NSP head on the pooled output", points=1, part=PART,
       depends_on=["Bert"])
def heads(sub, ref):
    """The wiring only: the logits must be the student's own heads (model.mlm, model.nsp) applied to the stand-in
    Bert's outputs, which the judge computes; the heads themselves are graded by the checks above."""
    cfg = config()
    V = cfg["vocab_size"]
    model = pretraining_model(sub)
    model.eval()
    ids, types, mask = pretraining_inputs(622, cfg)
    mlm, nsp = two_outputs(model(ids, types, mask), 3, 6, V, "BertForPretraining.forward")
    calls = remote_attr(model, "bert.calls")
    if len(calls) != 1 or not (calls[0]["types"] and calls[0]["mask"]):
        raise Fail("BertForPretraining.forward must run self.bert once, with input_ids, token_type_ids and attention_mask")
    word = remote_attr(model, "bert.embeddings.word.weight")
    sequence = torch.tanh(word[ids] + 0.25 * types[..., None].float())  # the stand-in Bert's outputs
    pooled = torch.tanh(2 * sequence[:, 0] + 0.5)
    try:
        own_mlm = tensor_out(model.mlm(sequence), "self.mlm's output", (3, 6, V)).double()
        own_nsp = tensor_out(model.nsp(pooled), "self.nsp's output", (3, 2)).double()
    except StudentError as exc:
        raise Fail(f"the grader could not call your model.mlm and model.nsp on (B, T, E) and (B, E) inputs: {exc.type}: "
                   f"{exc.message}") from None
    if not close(mlm, own_mlm):
        raise Fail("mlm_logits must be self.mlm(sequence_output), sequence_output being the first output of self.bert")
    if close(nsp, own_nsp):
        return
    if close(nsp, tensor_out(model.nsp(sequence[:, 0]), "self.nsp's output", (3, 2)).double()):
        raise Fail("the NSP head reads sequence_output[:, 0]; it must read the POOLED output (the second output of "
                   "self.bert, tanh(pooler([CLS])))")
    raise Fail("nsp_logits must be self.nsp(pooled_output), pooled_output being the second output of self.bert")


@check("pretraining_loss: MLM cross-entropy over the selected positions plus the NSP cross-entropy", points=1, part=PART)
def loss(sub, ref):
    g = gen(631)
    for B, T, V, selected in ((3, 5, 12, 0.3), (4, 7, 30, 0.05)):
        mlm = 2 * torch.randn(B, T, V, generator=g)
        nsp = torch.randn(B, 2, generator=g)
        labels = torch.randint(V, (B, T), generator=g)
        keep_ = torch.rand(B, T, generator=g) < selected
        keep_[0, 0] = True
        labels[~keep_] = -100
        nsl = torch.randint(2, (B,), generator=g)
        got = sub.pretraining_loss(mlm, nsp, labels, nsl)
        if not isinstance(got, torch.Tensor) or got.numel() != 1:
            raise Fail("pretraining_loss must return a scalar tensor (so that .backward() works)")
        got = float(got)
        mlm_loss = F.cross_entropy(mlm[keep_].double(), labels[keep_]).item()
        nsp_loss = F.cross_entropy(nsp.double(), nsl).item()
        if abs(got - (mlm_loss + nsp_loss)) < 1e-5:
            continue
        for value, message in (((mlm_loss + nsp_loss) / 2, "the two losses are averaged; BERT's loss is their SUM"),
                               (mlm_loss, "the NSP loss is missing: MLM loss + NSP loss"),
                               (nsp_loss, "the MLM loss is missing: MLM loss + NSP loss")):
            if abs(got - value) < 1e-5:
                raise Fail(f"pretraining_loss: {message}")
        raise Fail("pretraining_loss must be the MLM cross-entropy over the positions whose label is not -100, plus the "
                   "NSP cross-entropy of (B, 2) logits against next_sentence_label")


def toy_outputs(params, ids, types):
    h = torch.tanh(params["emb"][ids] + 0.1 * types[..., None].double())
    return h @ params["emb"].T, h[:, 0] @ params["w"].T + params["b"]


@check("pretraining_step: the model gets the batch, one optimizer step on the joint loss, the mode left alone",
       points=1, part=PART)
def step(sub, ref):
    V, E, lr = 12, 6, 0.5
    g = gen(641)
    params = {"emb": torch.randn(V, E, generator=g), "w": torch.randn(2, E, generator=g), "b": 0.1 * torch.randn(2, generator=g)}
    ids = torch.randint(V, (5, 7), generator=g)
    types = (torch.arange(7) >= 4).long().expand(5, 7).clone()
    mask = torch.ones(5, 7, dtype=torch.long)
    mask[3, 5:] = 0
    labels = torch.full((5, 7), -100)
    labels[torch.rand(5, 7, generator=g) < 0.3] = 1
    labels[0, 2] = 4
    labels = torch.where(labels == -100, labels, ids)
    batch = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask, "labels": labels,
             "next_sentence_label": torch.tensor([0, 1, 1, 0, 1])}
    try:
        steps = sub.helpers.bi_pretraining_steps(params["emb"], params["w"], params["b"], batch, lr, [True, True, False])
    except StudentError as exc:
        raise Fail(exc.describe("your pretraining_step (on a small stand-in model)")) from None
    before = {k: v.double() for k, v in params.items()}
    # the gradients summed over the steps so far, of the correct loss and of the student's own pretraining_loss: an
    # update along such a sum is a step on gradients left from the previous steps (no zero_grad)
    summed = {"correct": None, "own": None}
    for i, record in enumerate(steps):
        what = f"pretraining_step (call {i + 1}, model in {'train' if i < 2 else 'eval'}() mode)"
        loss_value = record["loss"]
        if isinstance(loss_value, torch.Tensor):
            raise Fail(f"{what} returned a tensor: return the loss as a Python float, loss.item() (the docstring's "
                       "contract; a loss tensor kept by the caller, in a list of losses say, keeps its whole graph alive)")
        if not isinstance(loss_value, float) or isinstance(loss_value, bool):
            raise Fail(f"{what} must return the loss as a Python float (loss.item())")
        if len(record["calls"]) != 1:
            raise Fail(f"{what}: run the model once per step (it ran {len(record['calls'])} times)")
        call = record["calls"][0]
        if call["training"] != (i < 2) or record["training_after"] != (i < 2):
            raise Fail(f"{what}: the step changed the model's train/eval mode; leave it as the caller set it")
        if not torch.equal(call["ids"], ids):
            raise Fail(f"{what}: the model must get batch['input_ids']")
        if call["types"] is None or not torch.equal(call["types"], types) or call["mask"] is None or \
                not torch.equal(call["mask"], mask):
            raise Fail(f"{what}: the model must get batch['token_type_ids'] and batch['attention_mask'] too")
        if record["optimizer_steps"] != i + 1:
            raise Fail(f"{what}: call optimizer.step() once per pretraining_step")
        p = {k: v.clone().requires_grad_(True) for k, v in before.items()}
        mlm, nsp = toy_outputs(p, ids, types)
        selected = labels != -100
        expected = F.cross_entropy(mlm[selected], labels[selected]) + F.cross_entropy(nsp, batch["next_sentence_label"])
        own = sub.pretraining_loss(mlm.detach().float(), nsp.detach().float(), labels, batch["next_sentence_label"])
        own = float(own) if isinstance(own, torch.Tensor) and own.numel() == 1 else None
        if not math.isfinite(loss_value) or (abs(loss_value - expected.item()) > 1e-4 and
                                             (own is None or abs(loss_value - own) > 1e-4)):
            raise Fail(f"{what}: the returned loss is not pretraining_loss of the model's outputs and the batch's labels")
        expected.backward()
        after = {k: v.double() for k, v in record["params"].items()}
        if all(torch.allclose(after[k], before[k]) for k in before):
            raise Fail(f"{what}: the parameters did not change: call loss.backward() and then optimizer.step(), with "
                       "optimizer.zero_grad() before backward, never between backward and step (it wipes the gradients)")
        # The step is judged on its own: its update must follow the gradient of the correct joint loss or of the
        # student's own pretraining_loss (whose mistakes cost the loss check, not this one), on this batch.
        gradients = {"correct": torch.cat([p[k].grad.reshape(-1) for k in before])}
        own_grads = sub.helpers.bi_own_loss_grads(*(before[k].float() for k in ("emb", "w", "b")), batch)
        if isinstance(own_grads, dict) and set(own_grads) == set(before):
            gradients["own"] = torch.cat([own_grads[k].double().reshape(-1) for k in before])
        for name in summed:  # a sum is kept only while its gradient is known at every step
            grad = gradients.get(name)
            summed[name] = None if grad is None or (i > 0 and summed[name] is None) else \
                grad if i == 0 else summed[name] + grad
        delta = torch.cat([(after[k] - before[k]).reshape(-1) for k in before])
        if not any(one_step(delta, -lr * grad) for grad in gradients.values()):
            if i > 0 and any(one_step(delta, -lr * summed[name]) for name in gradients if summed[name] is not None):
                raise Fail(f"{what}: the update follows the gradients of this batch and the previous steps together: "
                           "gradients are left from the previous step: call optimizer.zero_grad() before "
                           "loss.backward() (or after optimizer.step())")
            raise Fail(f"{what}: the update is not one optimizer step on this batch's gradient of the loss: "
                       "pretraining_loss of the model's outputs and the batch's labels, then loss.backward() and one "
                       "optimizer.step()")
        before = after


def one_step(delta, direction):
    """Whether `delta` is the SGD update `direction` (-lr * grad) or a smaller step along it (gradient clipping)."""
    c = (delta @ direction / (direction @ direction)).item()
    return 0 < c <= 1 + 1e-4 and bool((delta - c * direction).norm() <= 1e-4 * direction.norm() + 1e-6)


@check("pre-training model: weights drawn with std config.initializer_range, the first loss about ln(V) + ln(2)", points=0.5, part=PART,
       depends_on=["Bert"])
def first_loss(sub, ref):
    cfg = config(vocab_size=200, hidden_size=32, num_attention_heads=4)
    model = pretraining_model(sub, vocab_size=200, hidden_size=32, num_attention_heads=4)
    model.eval()
    g = gen(651)
    ids = torch.randint(cfg["vocab_size"], (16, 12), generator=g)
    types = (torch.arange(12) >= 6).long().expand(16, 12).clone()
    mask = torch.ones(16, 12, dtype=torch.long)
    mlm, nsp = two_outputs(model(ids, types, mask), 16, 12, cfg["vocab_size"], "BertForPretraining.forward")
    # the initialisation is judged through the reference's heads holding the student's fresh weights: the same logits
    # as the student's when its heads are right, and the initialisation's own when a head is wrong (the heads checks
    # grade that), so that a head's mistake does not cost this check too
    reference = keep(ref.helpers.bi_pretraining_model, remote_config(ref, vocab_size=200, hidden_size=32,
                                                                      num_attention_heads=4))
    mirror_weights(sub, ref, model, reference, "BertForPretraining")
    reference.eval()
    own = (mlm, nsp)
    mlm, nsp = outputs_of(reference(ids, types, mask), "reference")
    labels = torch.where(torch.rand(16, 12, generator=g) < 0.15, ids, torch.full_like(ids, -100))
    labels[0, 0] = ids[0, 0]
    nsl = torch.randint(2, (16,), generator=g)
    total = (F.cross_entropy(mlm.reshape(-1, cfg["vocab_size"]), labels.reshape(-1), ignore_index=-100)
             + F.cross_entropy(nsp, nsl)).item()
    target = math.log(cfg["vocab_size"]) + math.log(2)
    # ... and not by logits that are all alike: a fresh model's MLM logits spread with sd about sqrt(E) * 0.02 = 0.11
    # over the vocabulary (LayerNorm'd hidden states times N(0, 0.02^2) rows), about 0.015 even for a head without
    # its transform (the grader's stand-in Bert's outputs decoded directly); 1e-4 is far below both, and the sd is
    # averaged over 16 x 12 positions of 200 logits each. Constant logits have sd 0.
    spread_logits = float(own[0].double().std(dim=-1).mean())  # the student's own logits
    if not math.isfinite(spread_logits) or spread_logits < 1e-4:
        raise Fail("the MLM logits of a fresh BertForPretraining are (nearly) the same for every token of the vocabulary: "
                   "they must be the tied decoder's h @ word_embeddings.weight^T + bias, which spread with the "
                   "initialised weights (a loss of ln(V) + ln(2) must come from small random logits, not constant ones)")
    # With weights ~ N(0, 0.02^2) the logits have sd about 0.1: the loss is within 0.05 of ln V + ln 2. With PyTorch's
    # default N(0, 1) embeddings the tied decoder's logits have variance E = 32 and the loss is about 16 higher.
    if not math.isfinite(total) or abs(total - target) > 0.5:
        raise Fail(f"the first loss of a fresh BertForPretraining(config) with vocab_size 200 is {total:.2f}; it should be "
                   f"about ln(200) + ln(2) = {target:.2f}: initialise every module with init_bert_weights(std="
                   "config.initializer_range) (self.apply(...)), the tied word embeddings included")
    # each head initialised too (self.apply(...) after the heads are made): PyTorch's own init of nn.Linear(32, ...)
    # has std 1/sqrt(3 * 32) = 0.10 against 0.02 here; 64 and 1,024 values give the std to within 10% (sd 0.0018 and
    # 0.0004 at 0.02), so 0.05 is over 16 sd from both
    for name, what in (("nsp.weight", "the NSP head"), ("mlm.dense.weight", "the MLM head's dense layer")):
        try:
            weight = remote_attr(model, name)
        except StudentError:
            continue  # (named otherwise: the heads checks say so)
        if isinstance(weight, torch.Tensor) and weight.numel() >= 64 and float(weight.double().std()) > 0.05:
            raise Fail(f"{what} ({name}) of a fresh BertForPretraining has weights of std "
                       f"{float(weight.double().std()):.3f}, not config.initializer_range = 0.02: it was not initialised "
                       "with init_bert_weights; call self.apply(...) after every module is created")
    # 0.02 above is init_bert_weights' default too: another range tells whether the config's is passed on
    spread = sub.helpers.bi_weight_spread(pretraining_model(sub, vocab_size=200, hidden_size=32, num_attention_heads=4,
                                                            initializer_range=0.2))
    if not (isinstance(spread, float) and 0.1 <= spread <= 0.3):
        raise Fail("with config.initializer_range = 0.2 the weights of the model's nn.Linear and nn.Embedding modules do "
                   f"not have a standard deviation near 0.2 (got {spread}): initialise with "
                   "init_bert_weights(module, std=config.initializer_range), not its default std")


@check("pre-training model: gradients reach the MLM head, the NSP head and the word embeddings through both",
       points=0.5, part=PART, depends_on=["Bert"])
def gradients(sub, ref):
    cfg = config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    ids, types, mask = pretraining_inputs(631, cfg)
    off = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    student = pretraining_model(sub, **off)
    reference = keep(ref.helpers.bi_pretraining_model, remote_config(ref, **off))
    mirror_weights(sub, ref, student, reference, "BertForPretraining")
    student.eval()
    reference.eval()
    gradients_right(sub, ref, student, reference, [ids, types, mask], "BertForPretraining")
    E = cfg["hidden_size"]
    word = torch.randn(cfg["vocab_size"], E, generator=gen(632))
    try:
        head = keep(sub.helpers.bi_mlm_head, remote_config(sub), word)
        reference = keep(ref.helpers.bi_mlm_head, remote_config(ref), word)
    except StudentError as exc:
        raise Fail(f"MLMHead(config, word_embeddings) raised {exc.type}: {exc.message}") from None
    mirror_weights(sub, ref, head, reference, "MLMHead")
    gradients_right(sub, ref, head, reference, [torch.randn(2, 5, E, generator=gen(633))], "MLMHead", input_grad=True)
