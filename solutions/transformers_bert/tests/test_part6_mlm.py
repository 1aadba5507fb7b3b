"""Hidden checks of part 6: mask_inputs(token_ids, mask_rate, mask_id, vocab_size, pad_id, only_mask=False,
generator=None) and mlm_train_step(model, token_ids, optimizer, mask_rate, mask_id, vocab_size, pad_id,
generator=None).

The corruption is random and a correct mask_inputs may draw its numbers in any order and any way, so
nothing is compared position by position with the reference: the checks test invariants that hold for
every draw (labels, padding, only_mask) and proportions on large samples. Every draw must come from the
generator passed in (the notebook asks for reproducible results): the same seed must give the same result,
another seed another selection, for mask_inputs and for mlm_train_step, which passes its generator on. Each statistical
bound states its false-failure probability (normal approximation of a binomial proportion; all are
below 1e-9, the sum over the part below 1e-8). The training step runs the student's mlm_train_step on a
small stand-in model built in the worker, so the judge can recompute the loss and the parameter update.
"""
import functools
import math
from typing import NamedTuple

import torch
import torch.nn.functional as F

from autograder.testing import Fail, StudentError, check, gen, keep, worker_helpers

PART = "6. Masked-language-model pre-training"
# The statistical checks below corrupt 200,000 to 500,000 tokens: a mask_inputs that loops over the tokens in
# Python (a common way to write it) takes 1-2 s a call there, some 50 to 100 times the reference's vectorized
# version, so they keep the assignment's whole check_seconds instead of a limit derived from the reference's time.
BIG_SAMPLE_SECONDS = 60

worker_helpers('''
import torch
import torch.nn as nn

from autograder.seeding import seed_torch  # torch.manual_seed's stream, without its cost on a machine with no GPU


def tb_generator(seed):
    """A seeded torch.Generator in the worker (generators cannot be sent from the judge)."""
    return torch.Generator().manual_seed(seed)


def tb_mask_inputs_leaves_input(token_ids, *args, **kwargs):
    """True if mask_inputs does not modify the tensor it is given."""
    before = token_ids.clone()
    submission.mask_inputs(token_ids, *args, generator=torch.Generator().manual_seed(2), **kwargs)
    return bool(torch.equal(before, token_ids))


def tb_mask_inputs_with_seeds(token_ids, seeds, *args, **kwargs):
    """mask_inputs' (masked_ids, labels) for each seed, each call with a fresh torch.Generator seeded so."""
    outs = []
    for seed in seeds:
        out = submission.mask_inputs(token_ids.clone(), *args, generator=torch.Generator().manual_seed(seed), **kwargs)
        outs.append([t.detach().clone() if isinstance(t, torch.Tensor) else t for t in out])
    return outs


def tb_count_steps(optimizer):
    """Count the optimizer's step() calls: returns a list whose one item is the count so far."""
    count, step = [0], optimizer.step

    def counting(*args, **kwargs):
        count[0] += 1
        return step(*args, **kwargs)

    optimizer.step = counting
    return count


class TbToyMLM(nn.Module):
    """Stands in for SmallBERT: logits = tanh(emb[ids]) W^T + b. Remembers what each forward got. It sets the
    plain attributes the notebook's SmallBERT sets before its layers (vocab_size, mask_id): a step may read them."""
    def __init__(self, emb, weight, bias):
        super().__init__()
        self.vocab_size = weight.shape[0]
        self.mask_id = self.vocab_size  # the extra embedding row, as in SmallBERT
        self.emb = nn.Parameter(emb.clone())
        self.weight = nn.Parameter(weight.clone())
        self.bias = nn.Parameter(bias.clone())
        self.calls = []

    def forward(self, *args, **kwargs):
        # SmallBERT.forward(token_ids, mask=None), called positionally or by those names
        ids = args[0] if args else kwargs.get("token_ids", kwargs.get("ids"))
        mask = args[1] if len(args) > 1 else kwargs.get("mask", kwargs.get("padding_mask"))
        self.calls.append({"ids": ids.detach().clone(), "mask": None if mask is None else mask.detach().clone(),
                           "training": self.training})
        return torch.tanh(self.emb[ids]) @ self.weight.T + self.bias


def tb_documented_arguments(args, kwargs):
    """A mask_inputs call's settings by the documented parameter names; None when the call does not fit
    mask_inputs(token_ids, mask_rate, mask_id, vocab_size, pad_id, only_mask=False, generator=None)."""
    import inspect

    def documented(token_ids, mask_rate, mask_id, vocab_size, pad_id, only_mask=False, generator=None):
        pass

    try:
        bound = inspect.signature(documented).bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return {k: v for k, v in bound.arguments.items() if k not in ("token_ids", "generator")}


def tb_mlm_steps(emb, weight, bias, token_ids, lr, modes, mask_rate, mask_id, vocab_size, pad_id):
    """Run the student's mlm_train_step once per entry of modes (True: train(), False: eval()) with SGD(lr)
    on a TbToyMLM, recording mask_inputs' results, the model's inputs and the parameters after each step."""
    model = TbToyMLM(emb, weight, bias)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    recorded, arguments = [], []
    original = submission.mask_inputs

    def recording_mask_inputs(*args, **kwargs):
        out = original(*args, **kwargs)
        recorded.append([t.detach().clone() if isinstance(t, torch.Tensor) else t for t in out])
        arguments.append(tb_documented_arguments(args, kwargs))
        return out

    submission.mask_inputs = recording_mask_inputs
    steps = []
    count = tb_count_steps(optimizer)
    try:
        for i, mode in enumerate(modes):
            model.train(mode)
            n_calls, n_recorded, n_steps = len(model.calls), len(recorded), count[0]
            loss = submission.mlm_train_step(model, token_ids.clone(), optimizer, mask_rate, mask_id, vocab_size,
                                             pad_id, generator=torch.Generator().manual_seed(100 + i))
            if isinstance(loss, torch.Tensor):
                loss = loss.detach()
            steps.append({"loss": loss, "calls": model.calls[n_calls:], "mask_inputs": recorded[n_recorded:],
                          "mask_inputs_arguments": arguments[n_recorded:],
                          "training_after": model.training, "optimizer_steps": count[0] - n_steps,
                          "params": {n: p.detach().clone() for n, p in model.named_parameters()}})
    finally:
        submission.mask_inputs = original
    return steps


def tb_mlm_step_seeds(emb, weight, bias, token_ids, lr, seeds, mask_rate, mask_id, vocab_size, pad_id):
    """One step of the student's mlm_train_step per seed, each on a fresh TbToyMLM (the same weights) with a
    fresh SGD(lr) and a fresh torch.Generator seeded so: [(loss, parameters after the step)]."""
    out = []
    for seed in seeds:
        model = TbToyMLM(emb, weight, bias)
        model.train()
        optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        loss = submission.mlm_train_step(model, token_ids.clone(), optimizer, mask_rate, mask_id, vocab_size, pad_id,
                                         generator=torch.Generator().manual_seed(seed))
        out.append((float(loss) if isinstance(loss, (torch.Tensor, int, float)) else loss,
                    {n: p.detach().clone() for n, p in model.named_parameters()}))
    return out


def tb_first_mlm_loss(n_layers, vocab_size, embed_dim, n_heads, token_ids, seed):
    """The first loss of the student's mlm_train_step on a fresh SmallBERT with AdamW, and whether it is the model's:
    the step changed the parameters, left gradients on them, or returned the cross-entropy of the logits the model
    computed in the step against the labels mask_inputs gave it (a step without optimizer.step(), or with zero_grad
    between backward and step, still returns the model's loss: the step check grades the step)."""
    seed_torch(seed)
    model = submission.SmallBERT(n_layers, vocab_size, embed_dim, n_heads, 0.1, 0.1)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    count = tb_count_steps(optimizer)
    before = [p.detach().clone() for p in model.parameters()]
    outputs, labels, mask_inputs = [], [], submission.mask_inputs

    def recording(*args, **kwargs):
        out = mask_inputs(*args, **kwargs)
        labels.append(out[1] if isinstance(out, (tuple, list)) and len(out) == 2 else None)
        return out

    hook = model.register_forward_hook(lambda module, args, out: outputs.append(out))
    submission.mask_inputs = recording
    try:
        loss = submission.mlm_train_step(model, token_ids, optimizer, 0.15, vocab_size, vocab_size, 0,
                                         generator=torch.Generator().manual_seed(seed))
    finally:
        submission.mask_inputs = mask_inputs
        hook.remove()
    changed = any(not torch.equal(b, p.detach()) for b, p in zip(before, model.parameters()))
    with_grads = any(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in model.parameters())
    return {"loss": loss.detach() if isinstance(loss, torch.Tensor) else loss, "steps": count[0],
            "from_model": changed or with_grads or _is_cross_entropy(loss, outputs, labels, vocab_size)}


def _is_cross_entropy(loss, outputs, labels, vocab_size):
    """Whether `loss` is the cross-entropy of the step's one forward's logits against mask_inputs' labels."""
    if len(outputs) != 1 or len(labels) != 1 or not isinstance(outputs[0], torch.Tensor) \
            or not isinstance(labels[0], torch.Tensor):
        return False
    try:
        expected = nn.functional.cross_entropy(outputs[0].detach().reshape(-1, vocab_size).double(),
                                               labels[0].long().reshape(-1), ignore_index=-100)
        return abs(float(loss) - float(expected)) <= 1e-4 * max(1.0, abs(float(expected)))
    except (RuntimeError, TypeError, ValueError):
        return False
''')


def padded_batch(seed, B, T, V, pad_id=0, min_len=None, low=1):
    """(B, T) ids uniform over the regular tokens low..V-1 except pad_id; sequence b has a random length in
    [min_len, T], then pad_id. Returns (ids, real) with real = not padding: copies of the batch drawn once per
    grading process (the same for every submission; drawing 500,000 ids costs more than copying them)."""
    ids, real = _drawn_batch(seed, B, T, V, pad_id, min_len, low)
    return ids.clone(), real.clone()


@functools.lru_cache(maxsize=16)
def _drawn_batch(seed, B, T, V, pad_id, min_len, low):
    g = gen(seed)
    ids = torch.randint(low, V, (B, T), generator=g)
    if pad_id >= low:
        ids[ids == pad_id] = (pad_id + 1 - low) % (V - low) + low  # regular tokens other than pad_id
    lengths = torch.randint(min_len or T // 2, T + 1, (B,), generator=g)
    real = torch.arange(T)[None, :] < lengths[:, None]
    ids[~real] = pad_id
    return ids, real


def corrupt(sub, ids, mask_rate, mask_id, V, pad_id, only_mask=False, seed=1, strict=False):
    """The student's (masked_ids, labels) as long tensors. Whole numbers in a float tensor fail only with `strict`
    (the labels check grades the dtype; the other checks judge what was selected and how)."""
    generator = keep(sub.helpers.tb_generator, seed)
    out = sub.mask_inputs(ids, mask_rate, mask_id, V, pad_id, only_mask=only_mask, generator=generator)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise Fail("mask_inputs must return a tuple (masked_ids, labels)")
    masked, labels = out
    for name, t in (("masked_ids", masked), ("labels", labels)):
        if not isinstance(t, torch.Tensor):
            raise Fail(f"mask_inputs must return tensors; {name} is a {type(t).__name__}")
        if tuple(t.shape) != tuple(ids.shape):
            raise Fail(f"{name} must have the input's shape {tuple(ids.shape)}, got {tuple(t.shape)}")
        whole = t.dtype.is_floating_point and bool(torch.isfinite(t).all()) and torch.equal(t, t.round())
        if t.dtype == torch.bool or t.dtype.is_floating_point and (strict or not whole):
            raise Fail(f"{name} must be an integer (long) tensor like token_ids, got {t.dtype}")
    return masked.long(), labels.long()


def unselected_label(labels, real, ids) -> int:
    """The label the submission gives the positions it did not select: -100 as asked; else (no label is -100) the
    label most padding positions carry (padding is never selected), or most positions where there is no padding,
    so that a wrong "ignore" value (0, say) costs only the labels check and the other checks still see which
    positions were selected. Every id copied as its label: no "ignore" label to find, -100."""
    if (labels == -100).any() or all_where(labels == ids, real) or bool((labels == labels.flatten()[0]).all()):
        return -100  # -100 used, every id its own label, or one label everywhere: no other "ignore" label to find
    pool = labels[~real] if (~real).any() else labels
    values, counts = pool.unique(return_counts=True)
    return int(values[counts.argmax()])


class Selection(NamedTuple):
    """What `selection` reads: the selected positions; whether they are read from the labels; where they are not,
    why not (a phrase for messages); the share of the real tokens the labels leave unselected that were changed
    anyway (0 unless the labels tell a selection and the corruption reaches beyond it)."""
    selected: torch.Tensor
    from_labels: bool
    why_not: str = ""
    stray: float = 0.0


def selection(ids, real, masked, labels) -> Selection:
    """The positions the submission selected, read from its labels and its changes where the labels follow the
    selection: every changed token labelled, some labelled tokens left unchanged (the 10% kept, and random draws of
    the original), not every real token labelled. Labels that do not (the input copied as its labels, only the mask
    id's positions labelled, only the changed ones: the labels check's mistakes) tell nothing more than the changes:
    then the changed positions, and from_labels False (the checks judge what the changes show, so that the labels'
    mistake costs the labels check only).
    One more case: labels that tell a selection (most labelled tokens changed, some kept) while the unlabelled tokens
    were changed about as often (at least half as often as the labelled ones): the corruption ignores the selection
    (drawn for every position, not for the selected ones). A labels mistake cannot look so: the selected tokens it
    forgets to label are a minority of the unlabelled ones at any mask rate under one half. Then the selection is
    the labels', and `stray` says how many unselected tokens changed (the proportions check grades it)."""
    labelled = labels != unselected_label(labels, real, ids)
    changed = masked != ids
    everywhere = all_where(labelled, real)
    kept = bool((labelled & ~changed & real).any())
    if not (changed & ~labelled & real).any() and kept and not everywhere:
        return Selection(labelled | changed, True)
    if everywhere:
        return Selection(changed, False, "its labels label every real token")
    changed_labelled, changed_unlabelled = share(changed, labelled & real), share(changed, ~labelled & real)
    if kept and changed_labelled >= 0.5 and changed_unlabelled >= 0.5 * changed_labelled:
        return Selection(labelled, True, stray=changed_unlabelled)
    return Selection(changed, False, "its labels do not follow its changes" if kept else
                     "its labels mark only tokens it changed")


def share(flags, among) -> float:
    """The share of the positions `among` where `flags` holds (both bool, one shape): flags[among].double().mean()
    without copying the positions out (some 3 ms a call on 500,000 tokens); nan where `among` is empty."""
    n = int(among.sum())
    return int((flags & among).sum()) / n if n else math.nan


def all_where(flags, among) -> bool:
    """flags[among].all() without copying the positions out."""
    return bool((flags | ~among).all())


def changed_share(V: int) -> float:
    """The share of selected tokens an 80/10/10 corruption changes: the mask id, or a random token other than the
    original (1 in V of the random ones is the original itself)."""
    return 0.8 + 0.1 * (V - 1) / V


def _invariants(ids, masked, labels, what, real, strict=False):
    """The labels' and the ids' agreement at the real (not padding) positions: what happens to padding is the
    padding check's. Under the submission's own "ignore" label (see unselected_label), or with `strict` under -100
    (the labels check itself)."""
    ignore = -100 if strict else unselected_label(labels, real, ids)
    labelled = (labels != ignore) & real
    if not all_where(labels == ids, labelled):
        raise Fail(f"{what}: at selected positions the label must be the ORIGINAL token id (and -100 elsewhere)")
    if ((masked != ids) & ~labelled & real).any():
        raise Fail(f"{what}: a corrupted position has label {ignore}: every position whose id was changed is "
                   "selected and must be labelled with its original id; unselected tokens stay unchanged")


@check("MLM masking: labels are the original ids at the selected positions, -100 elsewhere", points=1, part=PART)
def mlm_labels(sub, ref):
    V = 100
    ids, real = padded_batch(601, 200, 50, V)
    masked, labels = corrupt(sub, ids, 0.15, V, V, 0, strict=True)
    other = unselected_label(labels, real, ids)
    if other != -100:  # another "ignore" label: the selected positions' labels may be right
        raise Fail(f"mask_inputs(ids, 0.15, ...) gives the positions it did not select the label {other}: they must "
                   "get -100, the label the loss ignores")
    _invariants(ids, masked, labels, "mask_inputs(ids, 0.15, ...)", real, strict=True)
    if (labels != -100).sum() == 0:
        raise Fail("mask_inputs(ids, 0.15, ...) selected no token at all (every label is -100)")
    # labels everywhere (e.g. the input returned as its own labels) pass the invariants and label nothing
    # in particular. 15% of 5,000+ real tokens: selecting them all has probability 0.15^5000.
    if (labels[ids != 0] != -100).all():
        changed = ((masked != ids) & real).double().sum().item() / real.sum().item()
        raise Fail("mask_inputs(ids, 0.15, ...) gives every real token a label: label only the selected tokens (their "
                   "original id), -100 everywhere else" + (f" (it changed {changed:.0%} of them: the selection itself "
                                                         "may be right)" if 0.05 < changed < 0.5 else ""))
    if not sub.helpers.tb_mask_inputs_leaves_input(ids, 0.15, V, V, 0):
        raise Fail("mask_inputs modified the token_ids tensor it was given: corrupt a copy (token_ids.clone())")
    problem = _reproducibility_problem(sub)
    if problem:
        raise Fail(problem, 0.5)


def _reproducibility_problem(sub):
    """Why mask_inputs is not reproducible with its generator argument, or None. Two fresh generators seeded the
    same must give the same (masked_ids, labels); two seeded differently, other selections: 1,280 tokens, about
    1,000 of them real, selected at rate 0.5: the same selection twice by chance has probability 2^-1000."""
    ids, _ = padded_batch(602, 32, 40, 50, min_len=20)
    first, second, other = sub.helpers.tb_mask_inputs_with_seeds(ids, [5, 5, 6], 0.5, 50, 50, 0)
    same = lambda a, b: all(isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.shape == y.shape  # noqa: E731
                            and torch.equal(x, y) for x, y in zip(a, b))
    if not same(first, second):
        return ("mask_inputs called twice with generators seeded the same (torch.Generator().manual_seed(5)) gave "
                "different results: draw every random number from the generator passed in (torch.rand(..., "
                "generator=generator), torch.randint(..., generator=generator), torch.bernoulli(..., "
                "generator=generator)), never from the global random state, so that results are reproducible")
    if torch.equal(first[1] != -100, other[1] != -100):
        return ("mask_inputs selected the same positions with generators seeded differently: draw the random "
                "numbers from the generator passed in (generator=generator), not from a generator or seed of your own")
    return None


@check("MLM masking: padding is never selected", points=1, part=PART)
def mlm_padding(sub, ref):
    V = 60
    for pad_id, seed in ((0, 611), (7, 612)):
        ids, real = padded_batch(seed, 300, 40, V, pad_id=pad_id, min_len=5)
        for rate in (0.15, 0.9):
            masked, labels = corrupt(sub, ids, rate, V, V, pad_id, seed=seed)
            what = f"mask_inputs(ids, {rate}, ..., pad_id={pad_id})"
            selected, from_labels = selection(ids, real, masked, labels)[:2]
            changed = (masked[~real] != pad_id).any()
            # labels on padding count only where the labels tell the selection (else the labels check's mistake)
            labelled = from_labels and (labels != unselected_label(labels, real, ids))[~real].any()
            if changed or labelled:
                done = " and ".join(w for w, yes in (("were changed", changed), ("got a label", labelled)) if yes)
                raise Fail(f"{what}: padding positions {done}: padding is never selected (it stays pad_id, its label "
                           "is -100)")
            # selecting nothing at all would keep padding safe trivially. 1,500+ real tokens at rate 0.15:
            # none selected (or, read from the changes alone, none changed) has probability below 1e-80.
            if not (selected & real).any():
                none = "every label is -100" if from_labels else "none was changed, and every token has a label"
                raise Fail(f"{what}: no real token was selected ({none}), so the padding rule cannot be checked: "
                           "select each non-padding token with probability mask_rate")


def _big_sample(sub, mask_rate, only_mask=False, V=100):
    """About 150,000 real tokens (lengths 100..200 of 200), pad_id 0, mask id V. What the labels hold is the labels
    check's: the checks of the sample read the selection from them only where they tell it (`selection`)."""
    ids, real = padded_batch(621, 1000, 200, V, min_len=100)
    masked, labels = corrupt(sub, ids, mask_rate, V, V, 0, only_mask=only_mask, seed=3)
    return ids, real, masked, labels


@check("MLM masking: about mask_rate of the real tokens are selected", points=1, part=PART, timeout=BIG_SAMPLE_SECONDS)
def mlm_rate(sub, ref):
    for rate in (0.15, 0.3):
        ids, real, masked, labels = _big_sample(sub, rate)
        n = real.sum().item()
        selected, from_labels, why_not, _ = selection(ids, real, masked, labels)
        seen = share(selected, real)
        # labels that tell nothing: the changed share, over the share of selected tokens 80/10/10 changes
        frac = seen / (1 if from_labels else changed_share(100))
        # n >= 100,000 real tokens: the selected fraction has sd sqrt(p(1-p)/n) <= 0.00145 (read from the changes,
        # 0.0011 at p = 0.15 and 0.0016 at 0.3); the bound 0.01 is >= 6.2 sd (false failure < 1e-9 for each rate).
        if abs(frac - rate) > 0.01:
            got = (f"selected {frac:.1%} of the {n:,} real tokens" if from_labels else
                   f"changed {seen:.1%} of the {n:,} real tokens ({why_not}, so the selection is "
                   f"read from the changes: selecting {rate:.0%} changes about {rate * changed_share(100):.1%})")
            raise Fail(f"mask_inputs(ids, {rate}, ...) {got}; expected about {rate:.0%} selected: select each "
                       "non-padding token with probability mask_rate")


@check("MLM masking: 80% mask id, 10% random token, 10% unchanged", points=1, part=PART, timeout=BIG_SAMPLE_SECONDS)
def mlm_proportions(sub, ref):
    V = 100
    ids, real, masked, labels = _big_sample(sub, 0.15, V=V)
    selected, from_labels, _, stray = selection(ids, real, masked, labels)
    if not from_labels:
        return _proportions_of_the_changes(ids, real, masked, V)
    if stray:
        unselected = int((real & ~selected).sum())
        raise Fail(f"{stray:.1%} of the {unselected:,} real tokens your labels leave unselected (-100) were changed: the "
                   "80/10/10 corruption applies to the selected tokens only (to_mask = selected & ..., to_random = "
                   "selected & ...); every other token keeps its id (your labels mark the selection)")
    selected &= real  # padding: the padding check's
    n_sel = selected.sum().item()
    to_mask = share(masked == V, selected)
    unchanged = share(masked == ids, selected)
    random_other = 1 - to_mask - unchanged
    # n_sel is about 22,500: the sd of the three fractions is at most 0.0027 (mask id, p = 0.8) and
    # 0.0020 (p = 0.1); the bounds 0.02 and 0.015 are >= 7.4 sd (false failure < 2e-13 each). Fractions among the
    # selected tokens: a wrong rate is the rate check's.
    if (n_sel < 15000 or abs(to_mask - 0.8) > 0.02 or abs(unchanged - 0.101) > 0.015
            or abs(random_other - 0.099) > 0.015):
        raise Fail(f"of the {n_sel:,} selected tokens {to_mask:.1%} became the mask id, {random_other:.1%} a different "
                   f"regular token and {unchanged:.1%} kept their id; expected about 80%, 9.9% and 10.1% (80% [MASK], "
                   "10% a uniformly random regular token, which can equal the original, 10% unchanged)")


def _proportions_of_the_changes(ids, real, masked, V):
    """The 80/10/10 split judged where the labels tell nothing of the selection (`selection`): the changed share of
    the real tokens (mask rate times the share 80/10/10 changes) and the mask id's share of the changes."""
    changed = (masked != ids) & real
    changed_real = share(changed, real)
    to_mask = share(masked == V, changed) if changed.any() else 0.0
    # 150,000 real tokens, p = 0.1349: sd 0.00088, the bound 0.006 is 6.8 sd; some 20,000 changes, the mask id's
    # share 0.8899 has sd 0.0022, the bound 0.02 is 9 sd (false failure < 1e-11 each)
    if abs(changed_real - 0.15 * changed_share(V)) > 0.006 or abs(to_mask - 0.8 / changed_share(V)) > 0.02:
        raise Fail(f"{changed_real:.2%} of the real tokens were changed, {to_mask:.1%} of them into the mask id; expected "
                   f"about {0.15 * changed_share(V):.1%} and {0.8 / changed_share(V):.1%} (80% [MASK], 10% a uniformly "
                   "random regular token, 10% unchanged, of the 15% selected)")


@check("MLM masking: random replacements are regular tokens, never the mask id", points=0.5, part=PART,
       timeout=BIG_SAMPLE_SECONDS)
def mlm_random_tokens(sub, ref):
    V = 4  # regular tokens 0..3, mask id 4: a replacement drawn from 0..V would hit the mask id 1 time in 5
    ids, real = padded_batch(631, 2000, 250, V, min_len=250)
    masked, labels = corrupt(sub, ids, 0.15, V, V, 0, seed=4)
    if masked.min() < 0 or masked.max() > V:
        raise Fail("corrupted ids must be regular tokens (0..vocab_size-1) or the mask id")
    selected, from_labels = selection(ids, real, masked, labels)[:2]
    selected &= real  # padding: the padding check's
    frac = share(masked == V, selected)
    n_sel = selected.sum().item()
    # n_sel is about 75,000: with replacements from 0..V-1 the mask-id fraction is 0.8 (sd 0.00146); from
    # 0..V it is 0.82. The threshold 0.81 is 6.8 sd from both (false failure < 6e-12, missed bug < 1e-11).
    # Read from the changes alone (labels that tell nothing), the mask id's share of the changes: 0.8 / 0.875 =
    # 0.9143 from 0..V-1, 0.82 / 0.88 = 0.9318 from 0..V (sd 0.0011 over some 65,000 changes): threshold 0.923.
    # Far from both (70%, 90% [MASK]), the proportions are wrong: the proportions check grades that, and the mask
    # id's share then says nothing about the replacements.
    low, high, threshold = (0.78, 0.835, 0.81) if from_labels else (0.905, 0.94, 0.923)
    if n_sel < (60000 if from_labels else 50000):
        raise Fail(f"with vocab_size=4 and mask_rate=0.15 only {n_sel:,} of some 500,000 real tokens were selected: "
                   "too few to judge the random replacements (see the rate check)")
    if low <= frac <= high and frac > threshold:
        raise Fail(f"with vocab_size=4, {frac:.1%} of the {'selected' if from_labels else 'changed'} tokens became the "
                   f"mask id instead of {'80%' if from_labels else '91.4%'}, as if random replacements could be the "
                   "mask id: draw them from the regular tokens 0..vocab_size-1, never the mask id")
    # about 7,500 random replacements over 4 ids, some 5,600 of them visible (another id than the original): each
    # id shows up (a missing one has probability < 4 * (3/4)^1400 < 1e-170)
    replaced = set((masked[selected & (masked != ids) & (masked != V)]).tolist())
    if replaced != set(range(V)):
        raise Fail(f"with vocab_size=4 the random replacements never took the id(s) "
                   f"{sorted(set(range(V)) - replaced)}: draw them uniformly from all regular tokens 0..vocab_size-1")


@check("MLM masking: only_mask=True masks every selected token", points=0.5, part=PART, timeout=BIG_SAMPLE_SECONDS)
def mlm_only_mask(sub, ref):
    V = 100
    ids, real, masked, labels = _big_sample(sub, 0.15, only_mask=True, V=V)
    changed = (masked != ids) & real  # padding: the padding check's
    labelled = (labels != unselected_label(labels, real, ids)) & real
    from_labels = not all_where(labelled, real)  # (labels that tell nothing of the selection: see `selection`)
    selected = labelled | changed if from_labels else changed
    if not selected.any():
        raise Fail("with only_mask=True no real token was selected (none labelled, none changed)")
    if not all_where(masked == V, selected):
        raise Fail(f"with only_mask=True every selected token must become the mask id; {share(masked == V, selected):.1%} "
                   "did")
    if from_labels and not torch.equal(changed, labelled):
        raise Fail("with only_mask=True the tokens that became the mask id are not the selected (labelled) ones: "
                   "select as without only_mask, then put the mask id at every selected position")
    # labels that tell nothing: the changed tokens are the selection, about 15% (sd 0.00092: the bound 0.01 is 10 sd);
    # else the rate is the rate check's
    frac = share(changed, real)
    if not from_labels and abs(frac - 0.15) > 0.01:
        raise Fail(f"with only_mask=True {frac:.1%} of the real tokens were selected; expected about 15%")


def _toy_logits(params, ids):
    return torch.tanh(params["emb"][ids]) @ params["weight"].T + params["bias"]


def _as_float(loss, what, strict=False):
    """The loss as a float; a one-element tensor is read too unless `strict` (the check of the step's return)."""
    if isinstance(loss, torch.Tensor) and strict:
        raise Fail(f"{what} must return the loss as a Python float (loss.item()), not a tensor: the docstring says it "
                   "returns a float, and a tensor kept across steps holds on to its graph")
    if isinstance(loss, torch.Tensor) and loss.numel() == 1:
        return float(loss)
    if isinstance(loss, (int, float)) and not isinstance(loss, bool):
        return float(loss)
    raise Fail(f"{what} must return the loss as a Python float (loss.item()), got {type(loss).__name__}")


@check("MLM step: loss on the selected positions, one optimizer step", points=1.5, part=PART,
       depends_on=["mask_inputs"])
def mlm_step(sub, ref):
    V, E = 12, 6
    g = gen(641)
    params = {"emb": torch.randn(V + 1, E, generator=g), "weight": torch.randn(V, E, generator=g),
              "bias": 0.1 * torch.randn(V, generator=g)}
    # pad_id 0 with the regular ids 1..V-1, as in the notebook's demo
    _check_steps(sub, params, padded_batch(642, 16, 10, V, pad_id=0, min_len=4)[0], 0, V)
    # pad_id 5 with id 0 a frequent real token: a step that finds padding or the selected positions by the value 0
    # (token_ids == 0, labels > 0) fails here. 58 of the 111 real tokens are 0, each selected with probability 0.3:
    # a step that selects none of them (and so hides labels > 0) has probability 0.7^58 (about 1e-9).
    ids, real = padded_batch(643, 16, 10, V, pad_id=5, min_len=4, low=0)
    ids[real & (torch.rand(ids.shape, generator=gen(644)) < 0.5)] = 0
    _check_steps(sub, params, ids, 5, V)
    problem = _step_reproducibility_problem(sub, params, ids, 5, V)
    if problem:
        raise Fail(problem, 2 / 3)  # 1 of the 1.5 points: the step itself is right


# optimizer.step() called and nothing changed: the gradients were not there (zero_grad between backward and step,
# or step before backward); part 7's loops say the same of train_epoch
STEP_WITHOUT_GRADIENT = ("optimizer.step() was called but the parameters did not change: each step must follow that "
                         "batch's loss.backward() with its gradients still there (optimizer.zero_grad(), "
                         "loss.backward(), then optimizer.step(): zero_grad before backward, never between backward "
                         "and step)")


def _step_reproducibility_problem(sub, params, ids, pad_id, V, lr=0.5):
    """Why mlm_train_step is not reproducible with its generator argument, or None: two fresh stand-in models with
    the same weights stepped with generators seeded the same must get the same loss and the same weights; seeded
    differently, another loss (the positions selected differ: the same loss by chance is out of reach)."""
    try:
        (loss_a, after_a), (loss_b, after_b), (loss_c, _) = sub.helpers.tb_mlm_step_seeds(
            params["emb"], params["weight"], params["bias"], ids, lr, [7, 7, 8], 0.3, V, V, pad_id)
    except StudentError as exc:
        return exc.describe("your mlm_train_step (called three times on fresh copies of the grader's small test "
                            "model, each with a new generator)")
    if loss_a != loss_b or not all(torch.equal(after_a[k], after_b[k]) for k in after_a):
        return ("mlm_train_step on two identical models with generators seeded the same gave different losses or "
                "weights: pass the step's generator on to mask_inputs (mask_inputs(..., generator=generator)) so "
                "that training is reproducible")
    if loss_a == loss_c:
        return ("mlm_train_step gave the same loss with generators seeded differently: pass the step's own generator "
                "on to mask_inputs (generator=generator), not one of your own")
    return None


def _check_steps(sub, params, ids, pad_id, V, lr=0.5):
    """Three steps of the student's mlm_train_step (train, train, eval) on the stand-in model against the judge's
    own loss and SGD update, step by step."""
    try:
        steps = sub.helpers.tb_mlm_steps(params["emb"], params["weight"], params["bias"], ids, lr,
                                         [True, True, False], 0.3, V, V, pad_id)
    except StudentError as exc:
        raise Fail(exc.describe("your mlm_train_step (on the grader's small test model, TbToyMLM, which stands in for "
                                "SmallBERT with its vocab_size and mask_id attributes)")) from None
    before = {k: v.double() for k, v in params.items()}
    for i, step in enumerate(steps):
        what = f"mlm_train_step (pad_id={pad_id}, call {i + 1}, model in {'train' if i < 2 else 'eval'}() mode)"
        loss = _as_float(step["loss"], what, strict=True)
        if len(step["mask_inputs"]) != 1:
            raise Fail(f"{what}: corrupt the batch by calling mask_inputs once per step")
        masked, labels = (t.long() for t in step["mask_inputs"][0][:2])
        settings = step["mask_inputs_arguments"][0]
        wanted = {"mask_rate": 0.3, "mask_id": V, "vocab_size": V, "pad_id": pad_id, "only_mask": False}
        if settings is not None and settings != wanted:
            got = ", ".join(f"{k}={settings.get(k)!r}" for k in wanted)
            raise Fail(f"{what}: mask_inputs was called with {got}; pass the step's own mask_rate, mask_id, vocab_size "
                       "and pad_id, in the documented order")
        if len(step["calls"]) != 1:
            raise Fail(f"{what}: the model must be called once per step (it was called {len(step['calls'])} times)")
        call = step["calls"][0]
        if call["training"] != (i < 2) or step["training_after"] != (i < 2):
            raise Fail(f"{what}: the step changed the model's train/eval mode; leave it as the caller set it")
        if not torch.equal(call["ids"], masked):
            raise Fail(f"{what}: the model must get the corrupted ids returned by mask_inputs"
                       + (", not the original batch" if torch.equal(call["ids"], ids) else ""))
        pad = ids == pad_id
        m = call["mask"]
        if m is None or tuple(m.shape) != tuple(ids.shape) or not (
                torch.equal(m != 0, pad) or torch.equal(m != 0, masked == pad_id)):
            raise Fail(f"{what}: the model must get the padding mask token_ids == pad_id as its second argument")
        p = {k: v.clone().requires_grad_(True) for k, v in before.items()}
        logits = _toy_logits(p, masked)
        expected = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=-100)
        if not math.isfinite(loss) or abs(loss - expected.item()) > 1e-4 * max(1.0, abs(expected.item())):
            everything = F.cross_entropy(logits.reshape(-1, V), ids.reshape(-1))
            positive = labels.reshape(-1) > 0
            hint = ""
            if abs(loss - everything.item()) < 1e-4:
                hint = ": it is averaged over every position; only the selected ones (label != -100) count"
            elif positive.any() and abs(loss - F.cross_entropy(logits.reshape(-1, V)[positive],
                                                               labels.reshape(-1)[positive]).item()) < 1e-4:
                hint = (": selected positions whose original id is 0 are left out; 0 is a regular token here, every "
                        "position with a label other than -100 counts")
            raise Fail(f"{what}: the returned loss is not the cross-entropy of the model's logits against the labels "
                       f"over the selected positions{hint}")
        expected.backward()
        after = {k: v.double() for k, v in step["params"].items()}
        if all(torch.allclose(after[k], before[k]) for k in before):
            if step["optimizer_steps"]:
                raise Fail(f"{what}: {STEP_WITHOUT_GRADIENT}")
            raise Fail(f"{what}: the parameters did not change: call loss.backward() and optimizer.step()")
        # SGD(lr) on this batch's gradient moves the parameters by -lr * grad; gradient clipping would
        # shorten that step (a factor c in (0, 1]) without turning it, so any such c is accepted
        delta = torch.cat([(after[k] - before[k]).reshape(-1) for k in before])
        step_dir = torch.cat([(-lr * p[k].grad).reshape(-1) for k in before])
        c = (delta @ step_dir / (step_dir @ step_dir)).item()
        if not (0 < c <= 1 + 1e-4) or (delta - c * step_dir).norm() > 1e-4 * step_dir.norm() + 1e-6:
            raise Fail(f"{what}: the parameter update is not one optimizer step on this batch's gradient (gradients "
                       "left from the previous step? call optimizer.zero_grad() before loss.backward())")
        before = after


@check("MLM step: first loss of a fresh SmallBERT is about ln(V)", points=0.5, part=PART,
       depends_on=["mask_inputs", "SmallBERT"])
def mlm_first_loss(sub, ref):
    V = 100
    ids = torch.randint(1, V, (32, 32), generator=gen(651))
    try:
        run = sub.helpers.tb_first_mlm_loss(2, V, 32, 4, ids, 0)
    except StudentError as exc:
        what = "a first mlm_train_step on SmallBERT(2, 100, 32, 4, 0.1, 0.1) with AdamW"
        if exc.stub:
            where = f" ({exc.trace[-1]})" if exc.trace else ""
            raise Fail(f"{what} failed: not implemented yet (it raised NotImplementedError){where}") from None
        raise Fail(f"{what} failed: {exc.type}: {exc.message}") from None
    loss = _as_float(run["loss"], "mlm_train_step")
    if not run["from_model"]:  # a number that is not the model's loss (a constant returned, nothing trained)
        raise Fail("a first mlm_train_step on SmallBERT(2, 100, 32, 4, 0.1, 0.1) with AdamW did not change the "
                   "model's parameters, and the loss it returned is not the cross-entropy of the logits the model "
                   "computed: compute the loss from model(masked_ids, padding_mask), then loss.backward() and "
                   "optimizer.step()")
    # A fresh model's predictions are close to uniform: the loss starts near ln(100) = 4.61 (a little
    # above, as its logits are not exactly equal).
    if not math.isfinite(loss) or not (math.log(V) - 0.5 < loss < math.log(V) + 1.0):
        raise Fail(f"the first MLM loss of a fresh SmallBERT(2, 100, 32, 4, 0.1, 0.1) is {loss:.3f}; it should be "
                   f"about ln(100) = {math.log(V):.2f} (a uniform guess over the vocabulary)")
    # another seed (other initial weights, other masked positions) gives another loss: a number that does not come
    # from the model's logits (a constant near ln V) does not
    try:
        other = _as_float(sub.helpers.tb_first_mlm_loss(2, V, 32, 4, ids, 1)["loss"], "mlm_train_step")
    except StudentError:
        other = float("nan")
    if other == loss:
        raise Fail("mlm_train_step returns the same loss for a model with other weights and other masked positions: "
                   "return the cross-entropy of the model's logits at the selected positions")
