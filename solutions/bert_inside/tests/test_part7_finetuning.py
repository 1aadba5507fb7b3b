"""Hidden checks of part 7: lr_factor(step, warmup_steps, total_steps), make_optimizer(model, lr, weight_decay),
train_epoch(model, loader, optimizer, scheduler, device), predict(model, loader, device) and
classification_metrics(logits, labels).

The loops run on a small stand-in for AutoModelForSequenceClassification (the same call interface: input_ids,
attention_mask, labels -> an output with .loss and .logits) whose logits depend on the attention mask, with a
counting SGD and a counting scheduler: the judge knows every loss, every update one step must give, and in what
order the steps came. make_optimizer runs on a tiny BertForSequenceClassification of the library (no download).
Metrics are checked against their definitions, the cases with a zero denominator included.
"""
import math

import torch
import torch.nn.functional as F

from autograder.testing import Fail, StudentError, check, gen, worker_helpers

PART = "7. Fine-tuning for sentiment"

worker_helpers('''
import torch.nn.functional as F


class BiToyClassifier(nn.Module):
    """Stands in for AutoModelForSequenceClassification: logits (B, 2) from the masked mean of emb[input_ids];
    .loss = cross-entropy when labels are given. Records every call and the parameters it saw."""
    def __init__(self, emb, w, b):
        super().__init__()
        self.emb = nn.Parameter(emb.clone())
        self.w = nn.Parameter(w.clone())
        self.b = nn.Parameter(b.clone())
        self.calls = []

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                inputs_embeds=None, labels=None, **kwargs):  # the library's order of arguments
        from transformers.modeling_outputs import SequenceClassifierOutput
        self.calls.append({"training": self.training, "grad": torch.is_grad_enabled(), "n": int(input_ids.shape[0]),
                           "mask": None if attention_mask is None else attention_mask.detach().clone(),
                           "labels": labels is not None,
                           "params": {n: p.detach().clone() for n, p in self.named_parameters()}})
        m = torch.ones_like(input_ids) if attention_mask is None else attention_mask
        h = (self.emb[input_ids] * m[..., None]).sum(1) / m.sum(1, keepdim=True)  # (B, E), padding left out
        logits = h @ self.w.T + self.b  # (B, 2)
        loss = None if labels is None else F.cross_entropy(logits, labels)
        return SequenceClassifierOutput(loss=loss, logits=logits)


class BiCountingScheduler(torch.optim.lr_scheduler.LambdaLR):
    """A constant schedule that records, at each of its steps, how many optimizer steps came before."""
    def __init__(self, optimizer):
        self.records = []
        super().__init__(optimizer, lambda step: 1.0)
        self.ready = True

    def step(self, *args, **kwargs):
        if getattr(self, "ready", False):
            self.records.append(self.optimizer.steps)
        return super().step(*args, **kwargs)


def bi_loader(batches):
    """A DataLoader yielding these dict batches in this order, as make_loader's does: len(loader) is the number of
    batches, loader.dataset holds every example (code that averages over len(loader.dataset) works)."""
    examples = [{key: value[i] for key, value in batch.items()} for batch in batches
                for i in range(len(batch["labels"]))]
    index_lists, start = [], 0
    for batch in batches:
        index_lists.append(list(range(start, start + len(batch["labels"]))))
        start += len(batch["labels"])

    def collate(items):
        return {key: torch.stack([item[key] for item in items]) for key in items[0]}

    return torch.utils.data.DataLoader(examples, batch_sampler=index_lists, collate_fn=collate)


def bi_run_train_epoch(emb, w, b, batches, lr):
    model = BiToyClassifier(emb, w, b)
    optimizer = BiCountingSGD(model.parameters(), lr)
    scheduler = BiCountingScheduler(optimizer)
    model.eval()  # the loop must switch to train() itself
    result = submission.train_epoch(model, bi_loader(batches), optimizer, scheduler, "cpu")
    if isinstance(result, torch.Tensor) and result.numel() == 1:
        result = float(result)
    return {"result": result, "calls": model.calls, "optimizer_steps": optimizer.steps, "scheduler": scheduler.records,
            "final": {n: p.detach().clone() for n, p in model.named_parameters()}}


def bi_run_predict(emb, w, b, batches):
    model = BiToyClassifier(emb, w, b)
    model.train()  # predict must switch to eval() itself
    out = submission.predict(model, bi_loader(batches), "cpu")
    return {"out": out, "calls": [{k: v for k, v in c.items() if k != "params"} for c in model.calls]}


def bi_optimizer_groups(lr, weight_decay):
    """The student's make_optimizer on a tiny BertForSequenceClassification: its type and parameter groups by name."""
    import transformers
    config = transformers.BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=16, max_position_embeddings=16, num_labels=2)
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(config)
    optimizer = submission.make_optimizer(model, lr, weight_decay)
    names = {id(p): n for n, p in model.named_parameters()}
    norms = sorted(f"{m_name}.{p_name}" for m_name, m in model.named_modules() if isinstance(m, nn.LayerNorm)
                   for p_name, _ in m.named_parameters())
    groups = [{"lr": float(g["lr"]), "weight_decay": float(g.get("weight_decay", 0.0)),
               "names": [names.get(id(p), "(not a parameter of the model)") for p in g["params"]]}
              for g in getattr(optimizer, "param_groups", [])]
    return {"adamw": isinstance(optimizer, torch.optim.AdamW), "type": type(optimizer).__name__, "groups": groups,
            "parameters": sorted(names.values()), "layer_norm": norms}
''')


# -- lr_factor ---------------------------------------------------------------------------------------------------

def factor(step, warmup, total):
    if step < warmup:
        return step / max(1, warmup)
    return max(0.0, (total - step) / max(1, total - warmup))


@check("lr_factor: linear warm-up from 0 to 1, then linear decay to 0 at total_steps", points=1, part=PART)
def schedule(sub, ref):
    for warmup, total in ((3, 10), (0, 8), (10, 10), (4, 7), (1, 1), (25, 250)):
        steps = list(range(total + 3)) if total < 50 else [0, 1, 12, 24, 25, 26, 100, 249, 250, 260]
        got = []
        for s in steps:
            value = sub.lr_factor(s, warmup, total)
            if isinstance(value, torch.Tensor) and value.numel() == 1:
                value = float(value)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise Fail("lr_factor must return a number")
            got.append(float(value))
        expected = [factor(s, warmup, total) for s in steps]
        if all(abs(a - b) < 1e-9 for a, b in zip(got, expected)):
            continue
        what = f"lr_factor with warmup_steps={warmup}, total_steps={total}"
        ahead = [(a, min(1.0, (s + 1) / warmup)) for a, s in zip(got, steps) if s < warmup] if warmup else []
        if ahead and all(abs(a - b) < 1e-9 for a, b in ahead):
            raise Fail(f"{what}: the warm-up is one step ahead: the factor is step / warmup_steps, 0 at step 0")
        if warmup and got[0] > 0.5:
            raise Fail(f"{what}: there is no warm-up: the factor rises linearly from 0 (step 0) to 1 (step warmup_steps)")
        if any(v < 0 for v in got):
            raise Fail(f"{what}: the factor must stay at 0 after total_steps, never negative")
        first = next(i for i, (a, b) in enumerate(zip(got, expected)) if abs(a - b) >= 1e-9)
        if steps[first] < warmup:  # the formula is the notebook's: the value at that step is no secret
            raise Fail(f"{what}: at step {steps[first]}, during the warm-up, yours is {got[first]:.4g}: the factor is "
                       f"step / warmup_steps there ({expected[first]:.4g}), whatever total_steps is")
        raise Fail(f"{what}: after the warm-up the factor decays linearly, (total_steps - step) / (total_steps - "
                   "warmup_steps), reaching 0 at total_steps")


# -- make_optimizer ----------------------------------------------------------------------------------------------

@check("make_optimizer: AdamW, weight decay on the weights, none on biases and LayerNorm weights", points=1, part=PART)
def optimizer(sub, ref):
    lr, wd = 3e-4, 0.07
    try:
        report = sub.helpers.bi_optimizer_groups(lr, wd)
    except StudentError as exc:
        if exc.stub:
            raise Fail("your make_optimizer is not implemented yet (it raised NotImplementedError)") from None
        raise Fail(f"make_optimizer(BertForSequenceClassification(config), {lr}, {wd}) raised {exc.type}: "
                   f"{exc.message}") from None
    if not report["adamw"]:
        raise Fail(f"make_optimizer must return torch.optim.AdamW (decoupled weight decay), not {report['type']}")
    seen = [name for group in report["groups"] for name in group["names"]]
    if sorted(seen) != report["parameters"]:
        raise Fail("every trainable parameter of the model must be in exactly one parameter group")
    no_decay = {n for n in report["parameters"] if n.endswith("bias") or n in report["layer_norm"]}
    decayed_norms = []
    for group in report["groups"]:
        if abs(group["lr"] - lr) > 1e-12:
            raise Fail("every parameter group must use the learning rate lr")
        for name in group["names"]:
            want = 0.0 if name in no_decay else wd
            if abs(group["weight_decay"] - want) > 1e-12:
                if want == 0.0:
                    decayed_norms.append(name)
                else:
                    raise Fail(f"the weights (e.g. {name}) must get weight_decay = {wd} (the argument)")
    if decayed_norms:
        raise Fail(f"biases and LayerNorm weights must get no weight decay (weight_decay 0 in their group); e.g. "
                   f"{decayed_norms[0]} gets some")


# -- the loops ---------------------------------------------------------------------------------------------------

def toy_batches(seed, sizes, V=20, T=9):
    g = gen(seed)
    batches = []
    for B in sizes:
        lengths = torch.randint(3, T + 1, (B,), generator=g)
        t_max = int(lengths.max())
        ids = torch.randint(1, V, (B, t_max), generator=g)
        mask = (torch.arange(t_max)[None, :] < lengths[:, None]).long()
        ids[mask == 0] = 0
        batches.append({"input_ids": ids, "attention_mask": mask, "labels": torch.randint(2, (B,), generator=g)})
    return batches


def toy_logits(params, batch):
    m = batch["attention_mask"].double()
    h = (params["emb"].double()[batch["input_ids"]] * m[..., None]).sum(1) / m.sum(1, keepdim=True)
    return h @ params["w"].double().T + params["b"].double()


def toy_params(seed, V=20, E=5):
    g = gen(seed)
    return {"emb": torch.randn(V, E, generator=g), "w": torch.randn(2, E, generator=g), "b": 0.1 * torch.randn(2, generator=g)}


@check("train_epoch: train() mode, the attention mask, one optimizer step and then one scheduler step per batch, "
       "the mean loss", points=2, part=PART)
def train_loop(sub, ref):
    params, lr = toy_params(701), 0.5
    batches = toy_batches(702, [4, 4, 4, 4, 3])
    try:
        report = sub.helpers.bi_run_train_epoch(params["emb"], params["w"], params["b"], batches, lr)
    except StudentError as exc:
        raise Fail(exc.describe("your train_epoch (on a small stand-in model)")) from None
    calls = report["calls"]
    if len(calls) != len(batches):
        raise Fail(f"train_epoch must run the model once per batch ({len(batches)} batches, {len(calls)} calls)")
    for call, batch in zip(calls, batches):
        if not call["training"]:
            raise Fail("train_epoch must put the model in train() mode")
        if call["mask"] is None or not torch.equal(call["mask"], batch["attention_mask"]):
            raise Fail("train_epoch must pass each batch's attention_mask to the model: model(input_ids=..., "
                       "attention_mask=..., labels=...)")
    if report["optimizer_steps"] != len(batches):
        raise Fail(f"train_epoch must take one optimizer step per batch ({len(batches)} batches, "
                   f"{report['optimizer_steps']} steps)")
    records = report["scheduler"]
    if records != list(range(1, len(batches) + 1)):
        if len(records) < len(batches):
            raise Fail(f"scheduler.step() must be called once per BATCH, after optimizer.step() (the schedule counts "
                       f"optimizer steps); it was called {len(records)} time(s) for {len(batches)} batches")
        if records == list(range(len(batches))):
            raise Fail("scheduler.step() must come after optimizer.step(), not before")
        raise Fail("scheduler.step() must be called exactly once per batch, right after optimizer.step()")
    total, n = 0.0, 0
    snapshots = [c["params"] for c in calls] + [report["final"]]
    for k, batch in enumerate(batches):
        p = {name: value.double().clone().requires_grad_(True) for name, value in snapshots[k].items()}
        loss = F.cross_entropy(toy_logits(p, batch), batch["labels"])
        loss.backward()
        total += loss.item() * len(batch["labels"])
        n += len(batch["labels"])
        delta = torch.cat([(snapshots[k + 1][name].double() - p[name].detach()).reshape(-1) for name in p])
        direction = torch.cat([(-lr * p[name].grad).reshape(-1) for name in p])
        c = (delta @ direction / (direction @ direction)).item()
        if not (0 < c <= 1 + 1e-4) or (delta - c * direction).norm() > 1e-4 * direction.norm() + 1e-6:
            raise Fail(f"train_epoch, batch {k + 1}: the update is not one optimizer step on this batch's gradient of the "
                       "cross-entropy (gradients left from the previous batch? call optimizer.zero_grad() before "
                       "loss.backward())")
    result = report["result"]
    if not isinstance(result, float) or isinstance(result, bool):
        raise Fail("train_epoch must return the mean loss as a Python float")
    if abs(result - total / n) > 1e-5:
        unweighted = sum(F.cross_entropy(toy_logits({k: v.double() for k, v in snapshots[i].items()}, b), b["labels"]).item()
                         for i, b in enumerate(batches)) / len(batches)
        if abs(result - unweighted) < 1e-5:
            raise Fail("train_epoch returns the mean of the batch losses; weight each batch's loss by its size (the last "
                       "batch is smaller): the mean over the examples")
        raise Fail("train_epoch must return the mean loss over the examples (each batch's loss weighted by its size)")


@check("predict: eval() mode, no gradients, the attention mask, logits and labels of every batch in order",
       points=1, part=PART)
def predict_loop(sub, ref):
    params = toy_params(711)
    batches = toy_batches(712, [3, 5, 2])
    try:
        report = sub.helpers.bi_run_predict(params["emb"], params["w"], params["b"], batches)
    except StudentError as exc:
        raise Fail(exc.describe("your predict (on a small stand-in model)")) from None
    calls = report["calls"]
    if len(calls) != len(batches):
        raise Fail(f"predict must run the model once per batch ({len(batches)} batches, {len(calls)} calls)")
    for call, batch in zip(calls, batches):
        if call["training"]:
            raise Fail("predict must put the model in eval() mode")
        if call["grad"]:
            raise Fail("predict must run the model under torch.no_grad()")
        if call["mask"] is None or not torch.equal(call["mask"], batch["attention_mask"]):
            raise Fail("predict must pass each batch's attention_mask to the model")
    out = report["out"]
    if not isinstance(out, (tuple, list)) or len(out) != 2 or not all(isinstance(t, torch.Tensor) for t in out):
        raise Fail("predict must return a tuple (logits, labels) of tensors")
    logits, labels = out
    expected = torch.cat([toy_logits(params, b) for b in batches])
    if tuple(logits.shape) != tuple(expected.shape) or not torch.allclose(logits.double(), expected, atol=1e-5):
        for mistake, value in (("softmax probabilities", expected.softmax(-1)),
                               ("the predicted classes", expected.argmax(-1).double()),
                               ("log-probabilities (log_softmax)", expected.log_softmax(-1))):
            if tuple(logits.shape) == tuple(value.shape) and torch.allclose(logits.double(), value, atol=1e-5):
                raise Fail(f"predict returns {mistake} of every example, in order; it must return the model's logits "
                           "themselves (N, 2), the batches' logits concatenated")
        raise Fail(f"predict must return the logits of every example, in the loader's order: shape (N, 2) = "
                   f"{tuple(expected.shape)}, the batches' logits concatenated")
    if not torch.equal(labels.reshape(-1).long(), torch.cat([b["labels"] for b in batches])):
        raise Fail("predict must return the labels of every example, in the loader's order, shape (N,)")


# -- classification_metrics --------------------------------------------------------------------------------------

def definitions(logits, labels, positive=1):
    predicted = logits.argmax(-1)
    tp = int(((predicted == positive) & (labels == positive)).sum())
    fp = int(((predicted == positive) & (labels != positive)).sum())
    fn = int(((predicted != positive) & (labels == positive)).sum())
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"accuracy": float((predicted == labels).double().mean()), "precision": precision, "recall": recall, "f1": f1}


KEYS = ("accuracy", "precision", "recall", "f1")


def metrics_of(sub, logits, labels, what):
    try:
        got = sub.classification_metrics(logits, labels)
    except StudentError as exc:
        raise Fail(f"classification_metrics on {what}: {exc.describe()}") from None
    if not isinstance(got, dict) or set(KEYS) - set(got):
        raise Fail("classification_metrics must return a dict with the keys accuracy, precision, recall and f1")
    out = {}
    for key in KEYS:
        value = got[key]
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = float(value)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise Fail(f"classification_metrics: {key} must be a number (a Python float)")
        if not math.isfinite(value):
            raise Fail(f"classification_metrics on {what}: {key} is {value}; a ratio whose denominator is 0 is 0, "
                       "never NaN")
        out[key] = float(value)
    return out


def same(a, b):
    return all(abs(a[k] - b[k]) < 1e-6 for k in KEYS)


@check("metrics: accuracy, precision, recall and F1 of the positive class 1", points=1.5, part=PART)
def metrics(sub, ref):
    g = gen(721)
    for case in range(6):
        n = 40 + 7 * case
        labels = (torch.rand(n, generator=g) < 0.3 + 0.1 * case).long()
        logits = torch.randn(n, 2, generator=g) + 0.8 * torch.stack((1 - labels, labels), 1) * (case % 3)
        what = f"{n} examples"
        got = metrics_of(sub, logits, labels, what)
        expected = definitions(logits, labels)
        if same(got, expected):
            continue
        if abs(got["accuracy"] - expected["accuracy"]) > 1e-6:
            raise Fail(f"classification_metrics on {what}: the accuracy is the share of examples whose argmax over the "
                       "two logits (dim -1) equals the label")
        swapped = definitions(logits, labels, positive=0)
        if all(abs(got[k] - swapped[k]) < 1e-6 for k in ("precision", "recall", "f1")):
            raise Fail(f"classification_metrics on {what}: precision, recall and F1 are computed for class 0; the positive "
                       "class is 1 (a positive review)")
        if abs(got["precision"] - expected["recall"]) < 1e-6 and abs(got["recall"] - expected["precision"]) < 1e-6:
            raise Fail(f"classification_metrics on {what}: precision and recall are swapped: precision = TP / (TP + FP), "
                       "recall = TP / (TP + FN)")
        for key in ("precision", "recall"):
            if abs(got[key] - expected[key]) > 1e-6:
                raise Fail(f"classification_metrics on {what}: {key} is wrong: precision = TP / (TP + FP), recall = "
                           "TP / (TP + FN), with the prediction argmax(logits) and the positive class 1")
        if abs(got["f1"] - (expected["precision"] + expected["recall"]) / 2) < 1e-6:
            raise Fail(f"classification_metrics on {what}: F1 is the harmonic mean 2 P R / (P + R), not the arithmetic mean")
        raise Fail(f"classification_metrics on {what}: F1 must be 2 * precision * recall / (precision + recall)")


def zero_denominators(logits, labels, positive):
    """The metrics whose denominator is 0 on this batch for the class `positive`: precision (TP + FP), recall (TP +
    FN), F1 (precision + recall: 0 exactly when TP is 0)."""
    predicted = logits.argmax(-1)
    tp = int(((predicted == positive) & (labels == positive)).sum())
    fp = int(((predicted == positive) & (labels != positive)).sum())
    fn = int(((predicted != positive) & (labels == positive)).sum())
    return [key for key, denominator in (("precision", tp + fp), ("recall", tp + fn), ("f1", tp)) if denominator == 0]


def class_computed(sub):
    """The class whose precision, recall and F1 the student's classification_metrics computes on an ordinary batch: 0
    when they are class 0's (a mistake the metrics check names), else 1."""
    g = gen(731)
    labels = (torch.rand(30, generator=g) < 0.4).long()
    logits = torch.randn(30, 2, generator=g) + 0.8 * torch.stack((1 - labels, labels), 1)
    got = metrics_of(sub, logits, labels, "30 examples")
    expected, swapped = definitions(logits, labels), definitions(logits, labels, positive=0)
    fields = ("precision", "recall", "f1")
    if all(abs(got[k] - swapped[k]) < 1e-6 for k in fields) and not all(abs(got[k] - expected[k]) < 1e-6 for k in fields):
        return 0
    return 1


@check("metrics: no predicted positives or no true positives give 0, not NaN", points=0.5, part=PART)
def degenerate(sub, ref):
    # Only the metrics whose denominator is 0 are judged here (the metrics check grades the others, the accuracy
    # included), for the class the student's code computes them for (the metrics check grades the class): each case
    # also mirrored (labels and logits of the two classes swapped), so that either class meets every 0/0.
    cases = [
        (torch.tensor([[2.0, 1.0], [1.0, -1.0], [0.5, 0.0], [3.0, 1.0]]), torch.tensor([1, 0, 1, 0]),
         "no predicted positives"),
        (torch.tensor([[0.0, 1.0], [-1.0, 1.0], [2.0, 1.0]]), torch.tensor([0, 0, 0]), "no positive labels"),
        (torch.tensor([[1.0, 0.0], [2.0, -1.0]]), torch.tensor([0, 0]), "no positives at all, none predicted"),
        (torch.tensor([[0.0, 1.0], [1.0, 0.0]]), torch.tensor([0, 1]), "no true positive"),
    ]
    positive = class_computed(sub)
    for logits, labels, what in cases + [(logits.flip(-1), 1 - labels, f"{what} (the classes swapped)")
                                         for logits, labels, what in cases]:
        got = metrics_of(sub, logits, labels, f"a batch with {what}")
        wrong = [key for key in zero_denominators(logits, labels, positive) if abs(got[key]) > 1e-6]
        if wrong:
            raise Fail(f"classification_metrics on a batch with {what}: {', '.join(wrong)} must be 0 where the "
                       "denominator is 0 (precision: TP + FP, recall: TP + FN; F1 is 0 when precision + recall is 0)")
