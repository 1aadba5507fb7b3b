"""Hidden checks of part 7: BERTGRUSentiment(bert, hidden_dim, output_dim, n_layers,
bidirectional, dropout), binary_accuracy(logits, labels), train_epoch and evaluate.

The encoder is a tiny randomly initialised transformers BertModel built inside the worker by helper code
(seeded, no download). The classifier's hidden-state selection is compared with the reference's with
identical weights. The last check declares the accuracy rubric for the trained checkpoint: it is measured on a
GPU by `autograder rubric` and reported pending by `autograder grade` without one.
"""
import torch
import torch.nn.functional as F

from _common import close, load_weights
from autograder.rubric import rubric_check
from autograder.testing import (
    Fail, StudentError, check, expect_shape, gen, keep, remote_attr, remote_isinstance, worker_helpers,
)

PART = "7. Frozen BERT + BiGRU sentiment classifier"

worker_helpers('''
import torch
import torch.nn as nn

from autograder.seeding import seed_torch  # torch.manual_seed's stream, without its cost on a machine with no GPU


def tb_tiny_bert(hidden_size=32, n_layers=2, n_heads=2, vocab_size=100, seed=0, bert_dropout=0.1):
    """A small randomly initialised transformers BertModel (no download), seeded; bert_dropout is its own
    hidden and attention dropout (BERT's default 0.1)."""
    import transformers
    config = transformers.BertConfig(vocab_size=vocab_size, hidden_size=hidden_size, num_hidden_layers=n_layers,
                                     num_attention_heads=n_heads, intermediate_size=2 * hidden_size,
                                     max_position_embeddings=64, hidden_dropout_prob=bert_dropout,
                                     attention_probs_dropout_prob=bert_dropout)
    with torch.random.fork_rng():
        seed_torch(seed)
        return transformers.BertModel(config)


def tb_classifier(hidden_dim, output_dim, n_layers, bidirectional, dropout, hidden_size=32, seed=0, bert_dropout=0.1):
    """The notebook's BERTGRUSentiment around a tiny BERT; its own weights seeded too."""
    bert = tb_tiny_bert(hidden_size=hidden_size, bert_dropout=bert_dropout)
    seed_torch(seed)
    return submission.BERTGRUSentiment(bert, hidden_dim, output_dim, n_layers, bidirectional, dropout)


def tb_gru_input(clf, token_ids):
    """What the classifier's GRU reads in a train() forward: its first input (a PackedSequence unpacked to
    (B, T, features)); None when the forward never calls clf.rnn."""
    seen = []

    def hook(module, args, kwargs):
        seen.append(args[0] if args else kwargs.get("input"))

    handle = clf.rnn.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        clf.train()
        clf(token_ids)
    finally:
        handle.remove()
    if not seen:
        return None
    x = seen[0]
    if isinstance(x, nn.utils.rnn.PackedSequence):
        x = nn.utils.rnn.pad_packed_sequence(x, batch_first=True)[0]
    return x.detach().clone()


def tb_state(module):
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def tb_gru_parts(clf, token_ids):
    """What a classifier's GRU computes on the encoder's last hidden states (eval mode)."""
    clf.eval()
    with torch.no_grad():
        hidden = clf.bert(token_ids)[0]
        output, h_n = clf.rnn(hidden)
    return {"output": output, "h_n": h_n, "out.weight": clf.out.weight.detach().clone(),
            "out.bias": clf.out.bias.detach().clone()}


def tb_classifier_gradients(clf, token_ids, labels):
    """One backward of BCEWithLogitsLoss in train() mode: which parameters are trainable and got a gradient."""
    clf.train()
    clf.zero_grad(set_to_none=True)
    logits = clf(token_ids)
    # logits of another shape (the shapes check's mistake) still show where gradients go
    loss = nn.functional.binary_cross_entropy_with_logits(logits.reshape(-1), labels) \
        if logits.numel() == labels.numel() else logits.float().sum()
    loss.backward()
    bert = dict(clf.bert.named_parameters())
    rest = {n: p for n, p in clf.named_parameters() if not n.startswith("bert.")}
    got = lambda p: p.grad is not None and bool(p.grad.abs().sum() > 0)  # noqa: E731
    return {"bert_trainable": sorted(n for n, p in bert.items() if p.requires_grad),
            "bert_with_grad": sorted(n for n, p in bert.items() if got(p)),
            "others_with_grad": sorted(n for n, p in rest.items() if got(p))}


class TbZeroFeatures(nn.Module):
    """Stands in for the classifier's dropout: outputs zeros. Its rate is 1, so that a classifier calling
    F.dropout(x, self.dropout.p, self.training) in train() gets zeros from it too."""
    p = 1.0

    def forward(self, x, *args, **kwargs):
        return torch.zeros_like(x)


def tb_zero_dropout(clf):
    """Replace the classifier's dropout by a module that outputs zeros."""
    clf.dropout = TbZeroFeatures()
    return clf


class TbFrozenEncoder(nn.Module):
    """Stands in for the frozen pretrained encoder (BERTGRUSentiment.bert): one parameter that never trains, so
    that a loop may read or set model.bert (model.bert.eval(), its parameters) as it would on the real model."""
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(1), requires_grad=False)

    def forward(self, token_ids):
        return (token_ids,)


class TbBagModel(nn.Module):
    """A small classifier for the loops: logit = mean(emb[ids]) . w + b; records what each forward saw. It has the
    documented attributes of BERTGRUSentiment a loop may touch: a frozen `bert` submodule."""
    def __init__(self, emb, w, b):
        super().__init__()
        self.bert = TbFrozenEncoder()
        self.emb = nn.Parameter(emb.clone())
        self.w = nn.Parameter(w.clone())
        self.b = nn.Parameter(b.clone())
        self.calls = []

    def forward(self, token_ids):
        out = (self.emb[token_ids].mean(1) @ self.w + self.b).unsqueeze(1)  # (B, 1)
        self.calls.append({"training": self.training, "grad": torch.is_grad_enabled(), "n": token_ids.shape[0],
                           "logits": out.detach().clone().reshape(-1)})
        return out


class TbCountingSGD(torch.optim.SGD):
    def __init__(self, params, lr):
        super().__init__(params, lr=lr)
        self.steps = 0

    def step(self, closure=None):
        self.steps += 1
        return super().step(closure)


def tb_run_loops(emb, w, b, token_ids, labels, batch_size, which):
    """Run the student's evaluate or train_epoch once on a TbBagModel; report what happened."""
    model = TbBagModel(emb, w, b)
    data = torch.utils.data.TensorDataset(token_ids, labels)
    loader = torch.utils.data.DataLoader(data, batch_size=batch_size, shuffle=False)
    optimizer = TbCountingSGD(model.parameters(), lr=0.1)
    criterion = nn.BCEWithLogitsLoss()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    model.train(which == "evaluate")  # the loop must set the mode itself
    if which == "evaluate":
        result = submission.evaluate(model, loader, criterion, "cpu")
    else:
        result = submission.train_epoch(model, loader, optimizer, criterion, "cpu")
    changed = any(not torch.equal(before[n], p.detach()) for n, p in model.named_parameters())
    if isinstance(result, (tuple, list)):
        result = [float(x) if isinstance(x, torch.Tensor) and x.numel() == 1 else x for x in result]
    return {"result": result, "calls": model.calls, "steps": optimizer.steps, "changed": changed,
            "params": {n: p.detach().clone() for n, p in model.named_parameters()}}
''')


def _ids(seed, B, T, V=100):
    return torch.randint(1, V, (B, T), generator=gen(seed))  # no id 0: nothing looks like padding


def _close(a, b):
    return close(a, b, atol=1e-5)


def _classifier(side, hidden_dim, output_dim, n_layers, bidirectional, dropout, hidden_size=32, **kwargs):
    return keep(side.helpers.tb_classifier, hidden_dim, output_dim, n_layers, bidirectional, dropout, hidden_size,
                **kwargs)


def _student_classifier(sub, *args, **kwargs):
    try:
        return _classifier(sub, *args, **kwargs)
    except StudentError as exc:
        if exc.stub:
            raise Fail("your BERTGRUSentiment is not implemented yet (it raised NotImplementedError)") from None
        raise Fail(f"BERTGRUSentiment(tiny BERT, {', '.join(map(str, args))}) raised {exc.type}: {exc.message}"
                   + ("\n    " + "\n    ".join(exc.trace) if exc.trace else "")) from None


def _logits(clf, ids, output_dim, what):
    out = clf(ids)
    if not isinstance(out, torch.Tensor):
        raise Fail(f"{what}.forward must return a logits tensor, got {type(out).__name__}")
    expect_shape(out, (ids.shape[0], output_dim), f"{what} logits for token ids of shape {tuple(ids.shape)}")
    if not bool(torch.isfinite(out).all()):
        raise Fail(f"{what} logits for token ids of shape {tuple(ids.shape)} contain NaN or inf")
    return out.double()


@check("classifier: logits of shape (B, output_dim) for any GRU configuration", points=1, part=PART)
def classifier_shapes(sub, ref):
    ids = _ids(701, 3, 9)
    for hidden_dim, output_dim, n_layers, bidirectional, hidden_size in (
            (16, 1, 2, True, 32), (8, 3, 1, False, 32), (12, 2, 1, True, 24), (10, 1, 3, False, 24)):
        what = f"BERTGRUSentiment(bert, {hidden_dim}, {output_dim}, {n_layers}, {bidirectional}, 0.25)"
        clf = _student_classifier(sub, hidden_dim, output_dim, n_layers, bidirectional, 0.25, hidden_size)
        if remote_attr(clf, "rnn.input_size") != hidden_size:
            raise Fail(f"with an encoder of hidden size {hidden_size}, rnn must be nn.GRU(bert.config.hidden_size, "
                       "hidden_dim, ...): read the size from the encoder's config")
        clf.eval()
        logits = _logits(clf, ids, output_dim, what)
        # the shape counts for logits computed from the input (not, say, out(zeros))
        if _close(logits, _logits(clf, _ids(702, 3, 9), output_dim, what)):
            raise Fail(f"{what} in eval() gives the same logits for other token ids: compute them from the input")


@check("classifier: the encoder is frozen and gets no gradient", points=1.5, part=PART)
def classifier_frozen(sub, ref):
    clf = _student_classifier(sub, 16, 1, 2, True, 0.25)
    ids = _ids(711, 4, 10)
    labels = torch.tensor([1.0, 0.0, 1.0, 0.0])
    try:
        report = sub.helpers.tb_classifier_gradients(clf, ids, labels)
    except StudentError as exc:
        raise Fail(f"a forward and backward pass of your BERTGRUSentiment in train() mode failed: {exc.type}: "
                   f"{exc.message}") from None
    if report["bert_trainable"]:
        raise Fail(f"{len(report['bert_trainable'])} parameters of the encoder still have requires_grad=True: "
                   "the constructor must freeze the encoder (requires_grad = False on all of bert's parameters)")
    if report["bert_with_grad"]:
        raise Fail("a gradient reached the encoder's parameters: it must be frozen and run under torch.no_grad()")
    with_grad = report["others_with_grad"]
    for prefix, name in (("rnn.", "the GRU (rnn)"), ("out.", "the output layer (out)")):
        if not any(n.startswith(prefix) for n in with_grad):
            raise Fail(f"no gradient reaches {name}: only the encoder is frozen and runs under torch.no_grad(); "
                       "the GRU and the output layer are trained")


def _selection_candidates(parts, bidirectional):
    """Logits of plausible hidden-state selections, computed from the reference's GRU results."""
    output, h_n = parts["output"].double(), parts["h_n"].double()
    w, b = parts["out.weight"].double(), parts["out.bias"].double()
    out = lambda features: features @ w.T + b  # noqa: E731
    candidates = []
    if bidirectional:
        candidates += [
            (out(output[:, -1]), "output[:, -1] is used: at the last position the backward direction has read only "
                                 "one token. Use the GRU's final hidden states, h_n[-2] (forward) and h_n[-1] "
                                 "(backward)"),
            (out(torch.cat((h_n[0], h_n[1]), dim=-1)), "the first GRU layer's final states are used; take the top "
                                                       "layer's: h_n[-2] (forward) and h_n[-1] (backward)"),
            (out(torch.cat((h_n[-1], h_n[-1]), dim=-1)),
             "the backward state h_n[-1] is used twice; concatenate the top layer's forward state h_n[-2] and "
             "backward state h_n[-1]"),
        ]
    else:
        candidates.append((out(h_n[0]), "the first GRU layer's final state is used; take the top layer's, h_n[-1]"))
    return candidates


@check("classifier: final forward and backward states of the top GRU layer", points=2, part=PART)
def classifier_states(sub, ref):
    for seed, (hidden_dim, output_dim, n_layers, bidirectional) in enumerate(
            ((16, 1, 2, True), (8, 2, 1, True), (12, 1, 2, False))):
        ids = _ids(721 + seed, 5, 11)
        what = f"BERTGRUSentiment(bert, {hidden_dim}, {output_dim}, {n_layers}, {bidirectional}, 0.25)"
        reference = _classifier(ref, hidden_dim, output_dim, n_layers, bidirectional, 0.25)
        state = ref.helpers.tb_state(reference)
        reference.eval()
        expected = reference(ids).double()
        parts = ref.helpers.tb_gru_parts(reference, ids)
        clf = _student_classifier(sub, hidden_dim, output_dim, n_layers, bidirectional, 0.25)
        width = remote_attr(clf, "out.in_features") if remote_isinstance(clf.out, "torch.nn.Linear") else None
        if width != hidden_dim * (2 if bidirectional else 1):
            raise Fail(f"{what}: out must be nn.Linear({'2 * ' if bidirectional else ''}hidden_dim, output_dim)"
                       + (": it reads the last forward and the last backward state, concatenated" if bidirectional
                          else ""))
        load_weights(sub, clf, state, what, "bert, rnn, out")
        clf.eval()
        got = _logits(clf, ids, output_dim, what)
        if _close(got, expected):
            continue
        if bidirectional:  # [backward; forward] is as good as [forward; backward]: try the swapped output layer
            swapped = dict(state)
            w = state["out.weight"]
            swapped["out.weight"] = torch.cat((w[:, hidden_dim:], w[:, :hidden_dim]), 1)
            sub.helpers.tb_load_state(clf, swapped)
            if _close(_logits(clf, ids, output_dim, what), expected):
                continue
        if _close(got, torch.sigmoid(expected)):
            raise Fail(f"{what}: forward returns probabilities (a sigmoid is applied); return the logits: "
                       "BCEWithLogitsLoss applies the sigmoid itself")
        for value, message in _selection_candidates(parts, bidirectional):
            if _close(got, value):
                raise Fail(f"{what}: {message}")
        raise Fail(f"{what} in eval() with identical weights: the logits differ from out(dropout(final hidden "
                   "state)), the final state being [h_n[-2]; h_n[-1]] for a bidirectional GRU and h_n[-1] otherwise")


@check("classifier: dropout on the final state, GRU dropout between layers", points=0.5, part=PART)
def classifier_dropout(sub, ref):
    clf = _student_classifier(sub, 16, 1, 2, True, 0.3)
    if not remote_isinstance(clf.dropout, "torch.nn.Dropout") or abs(remote_attr(clf, "dropout.p") - 0.3) > 1e-9:
        raise Fail("dropout must be nn.Dropout(dropout)")
    if abs(remote_attr(clf, "rnn.dropout") - 0.3) > 1e-9 or not remote_attr(clf, "rnn.batch_first"):
        raise Fail("with n_layers=2 the GRU must be nn.GRU(..., batch_first=True, dropout=dropout): dropout between "
                   "its layers, batches first")
    clf.eval()
    # reading the dropout's output only counts if what goes into it comes from the input: a model that
    # feeds the output layer zeros would pass the stand-in test below
    first, other = (_logits(clf, _ids(seed, 3, 7), 1, "BERTGRUSentiment") for seed in (731, 732))
    if _close(first, other):
        raise Fail("in eval() the logits are the same for other token ids: out(self.dropout(final hidden state)) "
                   "must be computed from the input")
    sub.helpers.tb_zero_dropout(clf)  # the grader's stand-in dropout outputs zeros (in train(): rate 1)
    clf.train()
    got = _logits(clf, _ids(731, 3, 7), 1, "BERTGRUSentiment")
    bias = remote_attr(clf, "out.bias").double().expand_as(got)
    # a sigmoid on the logits is the states check's mistake, not graded again here: out(zeros) through it is accepted
    if not (_close(got, bias) or _close(got, torch.sigmoid(bias))):
        raise Fail("the output layer must read self.dropout(final hidden state): out(self.dropout(hidden))")
    _gru_reads_encoder_output(sub, ref)


def _gru_reads_encoder_output(sub, ref):
    """In train(), the GRU reads the encoder's last hidden states as they are: the notebook's dropout acts on the
    final state only. The tiny encoder's own dropout is 0 here, so its output is the same in train() and eval(),
    and the reference's GRU input (the same seeded encoder) is what the student's must be. A dropout at rate 0.3
    on the 4 x 10 x 32 encoder states leaves them all unchanged with probability 0.7^1280 (< 1e-190)."""
    ids = _ids(733, 4, 10)
    clf = _student_classifier(sub, 16, 1, 2, True, 0.3, bert_dropout=0.0)
    got = sub.helpers.tb_gru_input(clf, ids)
    expected = ref.helpers.tb_gru_input(_classifier(ref, 16, 1, 2, True, 0.3, bert_dropout=0.0), ids)
    if got is None:
        raise Fail("in train() the forward never called self.rnn: run the GRU module on the encoder's output")
    if not _close(got, expected):
        raise Fail("in train() the GRU does not read the encoder's last hidden states unchanged: the dropout acts "
                   "on the final hidden state only, out(self.dropout(hidden)), not on BERT's output")


@check("binary_accuracy: positive iff the logit is > 0", points=1, part=PART)
def accuracy(sub, ref):
    logits = torch.tensor([0.1, 0.3, 0.45, -0.2, 2.0, -3.0, 0.05, -0.4])
    labels = torch.tensor([1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0])
    g = gen(741)
    cases = [(logits, labels), (3 * torch.randn(1000, generator=g), torch.randint(0, 2, (1000,), generator=g).float()),
             # the docstring asks only for the same number of elements: the model's (B, 1) logits with (B,) labels
             # (and the reverse) must not broadcast to (B, B)
             (logits.reshape(-1, 1), labels), (logits, labels.reshape(-1, 1))]
    for z, y in cases:
        got = sub.binary_accuracy(z, y)
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = float(got)
        if not isinstance(got, (int, float)) or isinstance(got, bool):
            raise Fail(f"binary_accuracy must return one number (a 0-d tensor or a float), got {type(got).__name__}")
        if abs(got - ((z.reshape(-1) > 0).float() == y.reshape(-1)).float().mean().item()) < 1e-6:
            continue
        if z.shape != y.shape:
            shapes = f"logits of shape {tuple(z.shape)} and labels of shape {tuple(y.shape)}"
            if abs(got - ((z > 0).float() == y).float().mean().item()) < 1e-6:
                raise Fail(f"binary_accuracy with {shapes} compares every logit with every label (the comparison "
                           f"broadcasts to ({len(y)}, {len(y)})): flatten both first, logits.reshape(-1) and "
                           "labels.reshape(-1); the docstring asks only for the same number of elements")
            raise Fail(f"binary_accuracy with {shapes} is not the fraction of examples with (logit > 0) == label: "
                       "flatten both first (the docstring asks only for the same number of elements)")
        if abs(got - ((z > 0.5).float() == y).float().mean().item()) < 1e-6:
            raise Fail("binary_accuracy thresholds the raw logits at 0.5: a logit is not a probability; predict "
                       "positive when sigmoid(logit) > 0.5, i.e. logit > 0")
        if abs(got - ((torch.sigmoid(torch.sigmoid(z)) > 0.5).float() == y).float().mean().item()) < 1e-6:
            raise Fail("binary_accuracy applies the sigmoid twice (every prediction is positive)")
        if abs(got - (z.round() == y).float().mean().item()) < 1e-6:
            raise Fail("binary_accuracy rounds the raw logits; round sigmoid(logit), or predict positive iff logit > 0")
        raise Fail("binary_accuracy is not the fraction of examples with (logit > 0) == label")


def _expected_means(sub, calls, labels, weighted=True, sigmoid_first=False):
    """The loop's expected results from the logits the model produced; the accuracy by the student's own
    binary_accuracy (graded by its own check). With `sigmoid_first`, the loss of a loop that hands the criterion
    sigmoid(logits) instead of the logits."""
    losses, accs, sizes = [], [], []
    start = 0
    for call in calls:
        n = call["n"]
        z, y = call["logits"].double(), labels[start:start + n].double()
        losses.append(F.binary_cross_entropy_with_logits(torch.sigmoid(z) if sigmoid_first else z, y).item())
        try:
            accs.append(float(sub.binary_accuracy(call["logits"], labels[start:start + n])))
        except (StudentError, TypeError, ValueError):
            accs.append(((z > 0).double() == y).double().mean().item())
        sizes.append(n)
        start += n
    if weighted:
        total = sum(sizes)
        return sum(l * n for l, n in zip(losses, sizes)) / total, sum(a * n for a, n in zip(accs, sizes)) / total
    return sum(losses) / len(losses), sum(accs) / len(accs)


def _sgd_replay(emb, w, b, ids, labels, batch, lr=0.1, sigmoid_first=False):
    """The bag model's parameters after train_epoch's SGD steps, one per batch on that batch's mean loss (with
    `sigmoid_first`, the loss of sigmoid(logits) given to BCEWithLogitsLoss, which applies a sigmoid again)."""
    p = {"emb": emb.double().clone(), "w": w.double().clone(), "b": b.double().clone()}
    for start in range(0, len(ids), batch):
        leaves = {k: v.clone().requires_grad_(True) for k, v in p.items()}
        z = leaves["emb"][ids[start:start + batch]].mean(1) @ leaves["w"] + leaves["b"]
        if sigmoid_first:
            z = torch.sigmoid(z)
        F.binary_cross_entropy_with_logits(z, labels[start:start + batch].double()).backward()
        p = {k: (leaves[k] - lr * leaves[k].grad).detach() for k in p}
    return p


@check("train_epoch and evaluate: modes, one step per batch, mean loss and accuracy", points=1, part=PART,
       depends_on=["binary_accuracy"])
def loops(sub, ref):
    g = gen(751)
    V, E, N, batch = 30, 5, 10, 4  # batches of 4, 4 and 2 examples
    emb, w, b = torch.randn(V, E, generator=g), torch.randn(E, generator=g), torch.zeros(1)
    ids = torch.randint(0, V, (N, 6), generator=g)
    # The model's logits get 8 of these 10 labels right (0.75, 1 and 0.5 by batch) in both loops; predicting every
    # example positive would score 0.6 (by batch 0.5, 0.75, 0.5), every one negative 0.4: none of these coincide.
    labels = torch.tensor([1.0, 1, 0, 0, 1, 1, 1, 0, 1, 0])
    unweighted = []  # (loop, ["loss", "accuracy"]) averaging batch means: half the points, once both loops run
    for which in ("evaluate", "train_epoch"):
        try:
            run = sub.helpers.tb_run_loops(emb, w, b, ids, labels, batch, which)
        except StudentError as exc:
            if exc.stub:
                raise Fail(f"your {which} ran into code that is not implemented yet (raise NotImplementedError)"
                           + (f" ({exc.trace[-1]})" if exc.trace else "")) from None
            raise Fail(f"your {which} raised {exc.type}: {exc.message} (run on the grader's small test model, "
                       "TbBagModel, which stands in for BERTGRUSentiment with a frozen `bert` submodule, and a "
                       "DataLoader of (token_ids, labels) batches)" + ("\n    " + "\n    ".join(exc.trace) if exc.trace else "")) from None
        calls = run["calls"]
        result = run["result"]
        if not isinstance(result, (tuple, list)) or len(result) != 2 or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in result):
            raise Fail(f"{which} must return (mean loss, mean accuracy) as two numbers")
        if len(calls) != 3:
            raise Fail(f"{which} must run the model once per batch ({len(calls)} calls for 3 batches)")
        if which == "evaluate":
            if any(c["training"] for c in calls):
                raise Fail("evaluate must put the model in eval() mode")
            if any(c["grad"] for c in calls):
                raise Fail("evaluate must run the model under torch.no_grad()")
            if run["changed"] or run["steps"]:
                raise Fail("evaluate must not change the model's parameters")
        else:
            if not all(c["training"] for c in calls):
                raise Fail("train_epoch must put the model in train() mode")
            if run["steps"] != 3:
                raise Fail(f"train_epoch must take one optimizer step per batch ({run['steps']} steps for 3 batches)")
            if not run["changed"]:  # steps taken with no gradient: before backward, or right after zero_grad
                raise Fail("train_epoch called optimizer.step() once per batch, but no step changed the parameters: "
                           "each step must follow that batch's loss.backward() (in each batch: optimizer.zero_grad(), "
                           "loss.backward(), then optimizer.step())")
            # three steps are not enough: each must follow that batch's gradient alone
            expected = _sgd_replay(emb, w, b, ids, labels, batch)
            if not all(close(run["params"][k], expected[k], atol=1e-5) for k in expected):
                squashed = _sgd_replay(emb, w, b, ids, labels, batch, sigmoid_first=True)
                if all(close(run["params"][k], squashed[k], atol=1e-5) for k in squashed):
                    raise Fail(f"train_epoch: {SIGMOID_FIRST}")
                raise Fail("train_epoch's optimizer steps do not follow each batch's own gradient: call "
                           "optimizer.zero_grad() in every batch, before loss.backward() (or right after step())")
        # the notebook asks for means over the examples, each batch weighted by its size
        by_example, batch_means = _expected_means(sub, calls, labels), _expected_means(sub, calls, labels, False)
        loss_by = [abs(result[0] - m[0]) < 1e-5 for m in (by_example, batch_means)]
        acc_by = [abs(result[1] - m[1]) < 1e-5 for m in (by_example, batch_means)]
        if loss_by[0] and acc_by[0]:
            continue
        if any(loss_by) and any(acc_by):  # a mean of batch means for the loss, the accuracy or both
            unweighted.append((which, [what for what, by in (("loss", loss_by), ("accuracy", acc_by)) if not by[0]]))
            continue
        if any(abs(result[0] - m[0]) < 1e-5 for m in (_expected_means(sub, calls, labels, each, sigmoid_first=True)
                                                      for each in (True, False))):
            raise Fail(f"{which}: {SIGMOID_FIRST}")
        if any(abs(result[1] - _constant_accuracy(labels, calls, label, weighted)) < 1e-5
               for label in (0.0, 1.0) for weighted in (True, False)):
            raise Fail(f"{which} reports the accuracy of predicting the same class for every example: pass the "
                       "model's logits themselves to binary_accuracy (a sigmoid's output is always > 0, so every "
                       "prediction on it is positive)")
        raise Fail(f"{which} must return the mean loss and the mean accuracy (binary_accuracy) over the examples")
    if unweighted:
        names = [which for which, _ in unweighted]
        what = " and ".join(x for x in ("loss", "accuracy") if any(x in whats for _, whats in unweighted))
        raise Fail(f"{' and '.join(names)} {'averages' if len(names) == 1 else 'average'} the batch means for the "
                   f"mean {what} (a sum over the batches divided by len(loader)), not the mean over the examples: "
                   "the last batch is smaller (10 examples in batches of 4, 4 and 2), so weight each batch's loss "
                   "and accuracy by its size (loss.item() * len(labels)), or sum per example, and divide by the "
                   "number of examples", 0.5)


SIGMOID_FIRST = ("criterion gets the logits: BCEWithLogitsLoss applies the sigmoid itself, so a sigmoid before it "
                 "squashes the logits twice (loss = criterion(logits, labels), without torch.sigmoid)")


def _constant_accuracy(labels, calls, label, weighted=True):
    """The loop's accuracy if every prediction were `label` (over the examples, or the mean of batch means)."""
    hits = (labels == label).double()
    if weighted:
        return hits.mean().item()
    starts = [sum(c["n"] for c in calls[:i]) for i in range(len(calls))]
    return sum(hits[s:s + c["n"]].mean().item() for s, c in zip(starts, calls)) / len(calls)


# The accuracy rubric: 8 x clamp((acc - 0.50) / 0.40, 0, 1) on the validation split, measured by the grader from
# the saved CHECKPOINT with the pretrained encoder. Without CUDA it is reported pending, never failed;
# `autograder rubric transformers_bert ...` on a GPU machine adds its points (docs/rubric.md).
validation_accuracy = rubric_check(points=8, part=PART)
