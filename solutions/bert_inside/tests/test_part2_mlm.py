"""Hidden checks of part 2: mask_tokens(input_ids, attention_mask, tokenizer, mask_rate=0.15, generator=None).

The corruption is random, so nothing is compared position by position with the reference: the checks test what
holds for every draw (labels, [CLS] / [SEP] / padding never selected, the input left alone), proportions on large
samples, and reproducibility with the generator. Each statistical bound states its false-failure probability
(normal approximation of a binomial proportion; all below 1e-9). The tokenizer's special ids are not BERT-base's
([CLS] 7, [SEP] 1, [PAD] 12, [MASK] 20) and id 0 is a word, so hard-coded ids or "padding is 0" show.
"""
import torch

from _common import CLS, MASK, PAD, SEP, VOCAB, WORD_IDS, tokenizer
from autograder.testing import Fail, StudentError, check, gen, keep, worker_helpers

PART = "2. Masked-language-model inputs"
# The statistical checks corrupt some 190,000 tokens (big_sample): a mask_tokens that loops over the tokens in
# Python (a common way to write it) takes 1-2 s a call there, some 50 to 100 times the reference's vectorized
# version, so they keep the assignment's whole check_seconds instead of a limit derived from the reference's time.
BIG_SAMPLE_SECONDS = 60
V = len(VOCAB)

worker_helpers('''
def bi_mask_leaves_input(input_ids, attention_mask, tokenizer, mask_rate):
    """Whether the student's mask_tokens leaves its input tensors unchanged."""
    ids, mask = input_ids.clone(), attention_mask.clone()
    submission.mask_tokens(ids, mask, tokenizer, mask_rate)
    return bool(torch.equal(ids, input_ids) and torch.equal(mask, attention_mask))


def bi_mask_global(input_ids, attention_mask, tokenizer, mask_rate, seed):
    """The student's mask_tokens without a generator, torch's global generator seeded with `seed` first."""
    from autograder.seeding import seed_torch

    seed_torch(seed)
    return submission.mask_tokens(input_ids, attention_mask, tokenizer, mask_rate)
''')


def pair_batch(seed, B, T, min_fill=0.5):
    """(input_ids, attention_mask) of B encoded pairs [CLS] A [SEP] B [SEP] + padding, random lengths, words drawn
    from the regular tokens (the word with id 0 included)."""
    g = gen(seed)
    ids = torch.full((B, T), PAD, dtype=torch.long)
    mask = torch.zeros(B, T, dtype=torch.long)
    words = torch.tensor(WORD_IDS)[torch.randint(len(WORD_IDS), (B, T), generator=g)]
    totals = torch.randint(int(min_fill * T), T + 1, (B,), generator=g).tolist()
    for row, total in enumerate(totals):
        len_a = int(torch.randint(1, total - 3, (), generator=g))
        ids[row, :total] = words[row, :total]
        ids[row, 0], ids[row, len_a + 1], ids[row, total - 1] = CLS, SEP, SEP
        mask[row, :total] = 1
    return ids, mask


def candidates_of(ids, mask):
    return (mask == 1) & (ids != CLS) & (ids != SEP)


def corrupt(sub, ids, mask, rate, seed=1, global_generator=False):
    """The student's (masked_ids, labels) with a generator seeded with `seed`; with global_generator, without a
    generator (None) after torch's global generator was seeded with `seed`."""
    try:
        if global_generator:
            out = sub.helpers.bi_mask_global(ids, mask, tokenizer(sub), rate, seed)
        else:
            out = sub.mask_tokens(ids, mask, tokenizer(sub), rate, generator=keep(sub.helpers.bi_generator, seed))
    except StudentError as exc:
        raise Fail(exc.describe()) from None
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise Fail("mask_tokens must return a tuple (masked_ids, labels)")
    for name, t in zip(("masked_ids", "labels"), out):
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != tuple(ids.shape):
            raise Fail(f"mask_tokens: {name} must be a tensor of the input's shape {tuple(ids.shape)}")
        if t.dtype.is_floating_point or t.dtype == torch.bool:
            raise Fail(f"mask_tokens: {name} must be an integer (long) tensor like input_ids, got {t.dtype}")
    return out[0].long(), out[1].long()


def unselected_label(labels, mask, ids) -> int:
    """The label the submission gives positions it did not select: -100 as asked, or, when no label is -100, the
    label of most padding positions (never selected), so that a wrong "ignore" value (0, say) costs only the labels
    check and the other checks still see which positions were selected."""
    padding = labels[mask == 0]
    if (labels == -100).any() or padding.numel() == 0:
        return -100
    if torch.equal(padding, ids[mask == 0]):  # every id copied as its label, padding's too: no "ignore" label
        return -100
    values, counts = padding.unique(return_counts=True)
    return int(values[counts.argmax()])


def selected_positions(ids, mask, masked, labels):
    """Positions the submission selected: labelled with something other than its "ignore" label, or changed."""
    return (labels != unselected_label(labels, mask, ids)) | (masked != ids)


CHANGED_SHARE = 0.8 + 0.1 * 32 / 33  # of the selected tokens, those 80/10/10 changes: [MASK], or a random other id
MASK_SHARE = (0.8 + 0.1 / 33) / CHANGED_SHARE  # of the changed ones, those that became [MASK]


def selection(ids, mask, masked, labels):
    """(selected, from_labels): the positions the submission selected, from its labels and its changes where the
    labels follow the selection: every changed token labelled, some selected tokens left unchanged and labelled, not
    every candidate labelled. Labels that do not (only the [MASK] positions labelled, only the changed ones, every
    candidate: the labels check's mistakes) tell nothing more than the changes: then the changed positions, and
    from_labels False (the checks judge what the changes show, so that the labels cost the labels check only)."""
    candidates = candidates_of(ids, mask)
    labelled, changed = labels != unselected_label(labels, mask, ids), masked != ids
    follows = bool((changed & ~labelled & candidates).sum() == 0 and (labelled & ~changed & candidates).any() and
                   not labelled[candidates].all())
    return (labelled | changed, True) if follows else (changed, False)


def invariants(ids, masked, labels, what, mask=None):
    """The labels' and the ids' agreement; with `mask`, under the submission's own "ignore" label (see
    unselected_label), without it under -100 (the labels check itself)."""
    selected = labels != -100 if mask is None else selected_positions(ids, mask, masked, labels)
    if not torch.equal(labels[selected], ids[selected]):
        raise Fail(f"{what}: at the selected positions the label must be the ORIGINAL token id, and -100 everywhere else")
    if ((masked != ids) & ~selected).any():
        raise Fail(f"{what}: a position whose id was changed has the label -100: every changed token is selected and "
                   "labelled with its original id; tokens that are not selected stay unchanged")


@check("MLM inputs: labels are the original ids at the selected positions, -100 elsewhere; the input is left alone",
       points=1, part=PART)
def mlm_labels(sub, ref):
    ids, mask = pair_batch(201, 200, 40)
    masked, labels = corrupt(sub, ids, mask, 0.15)
    ignore = unselected_label(labels, mask, ids)
    if ignore != -100:
        raise Fail(f"mask_tokens: positions that are not selected must have the label -100 (the value cross_entropy "
                   f"ignores), not {ignore}: with {ignore} the loss would train the model to predict token {ignore} "
                   "there")
    invariants(ids, masked, labels, "mask_tokens(input_ids, attention_mask, tokenizer, 0.15)")
    labelled = (labels != -100).double().mean().item()
    if labelled == 0:
        raise Fail("mask_tokens(..., 0.15) selected no token at all (every label is -100)")
    # about 15% of the positions' candidates are selected (at most 15% of all positions); 50% of ~6,000 positions
    # is far out of reach for a correct draw (false failure < 1e-100)
    if labelled > 0.5:
        raise Fail(f"mask_tokens(..., 0.15) gave {labelled:.0%} of the positions a label: the label is -100 everywhere "
                   "except at the selected positions (about 15% of the candidates)")
    if not sub.helpers.bi_mask_leaves_input(ids, mask, tokenizer(sub), 0.15):
        raise Fail("mask_tokens modified the tensors it was given: corrupt a copy (input_ids.clone())")
    # The selected tokens that stay unchanged are labelled too. With mask_rate 1.0 every candidate is selected, and
    # of the labelled positions a fraction 0.1 + 0.1 / 33 = 0.103 keeps its id (left alone, or a random draw of the
    # original). With n >= 3,000 labelled positions (some 5,000 candidates) a share below 0.04 has probability
    # < exp(-2 n 0.063^2) < 1e-10 (Hoeffding). Labelling only the changed tokens gives 0.003 and leaves about 10% of
    # the candidates unlabelled; the second condition keeps this message from a wrong 90/10/0 split (every candidate
    # labelled, none unchanged: the proportions check's), a selection rate not read from mask_rate (too few labelled
    # positions: the rate check's) and the like.
    masked, labels = corrupt(sub, ids, mask, 1.0, seed=4)
    candidates = candidates_of(ids, mask)
    labelled = candidates & (labels == ids)
    n_labelled = int(labelled.sum())
    kept_share = ((masked == ids) & labelled).sum().item() / max(1, n_labelled)
    unlabelled = (candidates & ~labelled).sum().item() / int(candidates.sum())
    if n_labelled >= 3000 and kept_share < 0.04 and unlabelled > 0.02:
        raise Fail(f"mask_tokens(..., mask_rate=1.0) selects every candidate, yet yours labels only the tokens it "
                   f"changed: {unlabelled:.0%} of the candidates got the label -100 and only {kept_share:.1%} of the "
                   "labelled ones kept their id (about 10% should). The selected tokens that stay unchanged (10% of the "
                   "selected) are selected too and keep their original id as label: the model must predict them as well")


@check("MLM inputs: [CLS], [SEP] and padding are never selected", points=2, part=PART)
def mlm_specials(sub, ref):
    ids, mask = pair_batch(211, 400, 30, min_fill=0.3)
    for rate in (0.15, 0.9):  # at 0.9 nearly every candidate is selected: a special position would be too
        masked, labels = corrupt(sub, ids, mask, rate, seed=2)
        what = f"mask_tokens(..., mask_rate={rate})"
        selected = selected_positions(ids, mask, masked, labels)  # (what the labels say is the labels check's)
        if (selected & (mask == 0)).any() or (masked[mask == 0] != PAD).any():
            raise Fail(f"{what}: padding positions (attention_mask 0) were selected or changed; padding is never "
                       "selected (this tokenizer's [PAD] id is not 0)")
        for special, name in ((CLS, "[CLS]"), (SEP, "[SEP]")):
            if (selected & (ids == special)).any() or (masked[ids == special] != special).any():
                raise Fail(f"{what}: {name} positions were selected; [CLS] and [SEP] are never selected (compare with "
                           "tokenizer.cls_token_id and tokenizer.sep_token_id)")
        # id 0 is a regular word here: a candidate must be selectable whatever its id (about 250 candidates have
        # id 0; at rate 0.9 none of them is selected with probability 0.1^250)
        if rate == 0.9 and not selected[candidates_of(ids, mask) & (ids == 0)].any():
            raise Fail(f"{what}: tokens with id 0 are never selected, but id 0 is a word of this tokenizer: tell "
                       "padding by attention_mask (or tokenizer.pad_token_id), not by id 0")


def big_sample(sub, rate, seed=3):
    """About 135,000 candidates."""
    ids, mask = pair_batch(221, 3000, 64)
    masked, labels = corrupt(sub, ids, mask, rate, seed=seed)
    return ids, mask, masked, labels


@check("MLM inputs: about mask_rate of the candidates are selected", points=1, part=PART, timeout=BIG_SAMPLE_SECONDS)
def mlm_rate(sub, ref):
    for rate in (0.15, 0.3):
        ids, mask, masked, labels = big_sample(sub, rate)
        candidates = candidates_of(ids, mask)
        n = int(candidates.sum())
        selected, from_labels = selection(ids, mask, masked, labels)
        share = selected[candidates].double().mean().item()
        frac = share if from_labels else share / CHANGED_SHARE  # (labels that tell nothing: read from the changes)
        # n >= 100,000 candidates: the selected fraction has sd sqrt(p(1-p)/n) <= 0.00145 (read from the changes,
        # 0.0011 at 0.15 and 0.0016 at 0.3); the bound 0.01 is >= 6.2 sd (false failure < 1e-9 for each rate).
        if abs(frac - rate) > 0.01:
            got = (f"selected {frac:.1%} of the {n:,} candidates (real tokens other than [CLS] and [SEP])" if from_labels
                   else f"changed {share:.1%} of the {n:,} candidates (its labels do not show the selection, so it is "
                        f"read from the changes: selecting {rate:.0%} changes about {rate * CHANGED_SHARE:.1%})")
            raise Fail(f"mask_tokens(..., mask_rate={rate}) {got}; expected about {rate:.0%} selected: select each "
                       "candidate with probability mask_rate")


@check("MLM inputs: 80% [MASK], 10% random token, 10% unchanged", points=1.5, part=PART, timeout=BIG_SAMPLE_SECONDS)
def mlm_proportions(sub, ref):
    ids, mask, masked, labels = big_sample(sub, 0.15)
    selected, from_labels = selection(ids, mask, masked, labels)
    if not from_labels:
        return _proportions_of_the_changes(ids, mask, masked)
    n_sel = int(selected.sum())
    to_mask = (masked == MASK)[selected].double().mean().item()
    unchanged = (masked == ids)[selected].double().mean().item()
    other = 1 - to_mask - unchanged
    # Random replacements are uniform over the V = 33 ids: 1 in 33 is [MASK], 1 in 33 the original, so the expected
    # shares are 0.8 + 0.1/33 = 0.803, 0.1 + 0.1/33 = 0.103 and 0.094. n_sel is about 20,000: the sds are at most
    # 0.0029 ([MASK]) and 0.0022; the bounds 0.02 and 0.015 are >= 6.8 sd (false failure < 1e-11 each).
    if n_sel < 15000 or abs(to_mask - 0.803) > 0.02 or abs(unchanged - 0.103) > 0.015 or abs(other - 0.094) > 0.015:
        raise Fail(f"of the {n_sel:,} selected tokens {to_mask:.1%} became [MASK], {other:.1%} another token and "
                   f"{unchanged:.1%} kept their id; expected about 80%, 9.4% and 10.3% (80% [MASK], 10% a uniformly "
                   "random token, which can be the original or [MASK], 10% unchanged)")


def _proportions_of_the_changes(ids, mask, masked):
    """The 80/10/10 split judged where the labels do not show the selection (`selection`): the changed share of the
    candidates (mask rate times CHANGED_SHARE) and [MASK]'s share of the changes."""
    candidates = candidates_of(ids, mask)
    changed = (masked != ids) & candidates
    share = changed[candidates].double().mean().item()
    to_mask = (masked == MASK)[changed].double().mean().item() if changed.any() else 0.0
    # some 135,000 candidates, p = 0.1346: sd 0.00093, the bound 0.006 is 6.5 sd; some 18,000 changes, [MASK]'s share
    # 0.8953 has sd 0.0023, the bound 0.02 is 8.7 sd (false failure < 1e-10 each)
    if abs(share - 0.15 * CHANGED_SHARE) > 0.006 or abs(to_mask - MASK_SHARE) > 0.02:
        raise Fail(f"{share:.2%} of the candidates were changed, {to_mask:.1%} of them into [MASK]; expected about "
                   f"{0.15 * CHANGED_SHARE:.1%} and {MASK_SHARE:.1%} (80% [MASK], 10% a uniformly random token, 10% "
                   "unchanged, of the 15% selected)")


@check("MLM inputs: random replacements drawn from every token id; the generator (None: torch's global one) makes "
       "the result reproducible", points=1.5, part=PART, timeout=BIG_SAMPLE_SECONDS)
def mlm_random(sub, ref):
    ids, mask, masked, labels = big_sample(sub, 0.15)
    if masked.min() < 0 or masked.max() >= V:
        raise Fail(f"corrupted ids must be token ids of the vocabulary, 0 to len(tokenizer) - 1 = {V - 1}")
    other = (masked != ids) & (masked != MASK)
    drawn, originals = masked[other], ids[other]
    distinct = len(set(drawn.tolist()))
    # about 1,900 random replacements uniform over 33 ids; fewer than 20 distinct ids means they are not drawn from
    # the whole vocabulary
    if distinct < 20:
        raise Fail(f"the random replacements take only {distinct} different ids: draw them uniformly from 0 to "
                   "len(tokenizer) - 1")
    # A replacement seen here is neither its original id nor [MASK], so it is uniform over the other V - 2 = 31 ids:
    # id x is never drawn with probability (30/31)^n_x, n_x the replacements whose original is not x. The check asks
    # for every id only when the sum of these over all ids is below 1e-9 (about 1e-25 with some 1,900 replacements),
    # so a correct draw fails it with probability below 1e-9. Ids 1..V-1 ("0 is padding") never draw id 0, a word.
    ids_seen = set(drawn.tolist())
    missing = [x for x in range(V) if x != MASK and x not in ids_seen]
    bound = sum((30 / 31) ** int((originals != x).sum()) for x in range(V) if x != MASK)
    if missing and bound < 1e-9:
        shown = ", ".join(map(str, missing[:6])) + (" and more" if len(missing) > 6 else "")
        raise Fail(f"in {int(other.sum()):,} random replacements your mask_tokens never drew the id(s) {shown}: draw them "
                   "uniformly from ALL the ids 0 to len(tokenizer) - 1, as the library's DataCollatorForLanguageModeling "
                   "does (id 0 is a word of this tokenizer, not padding, and specials may be drawn too)")
    small_ids, small_mask = pair_batch(231, 100, 30)
    # seeds 9, 10, then 9 again: the same seed apart, not back to back (a result replayed for a repeated input
    # is no reproducibility)
    first = corrupt(sub, small_ids, small_mask, 0.15, seed=9)
    other_seed = corrupt(sub, small_ids, small_mask, 0.15, seed=10)
    again = corrupt(sub, small_ids, small_mask, 0.15, seed=9)
    if not (torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])):
        raise Fail("mask_tokens with two generators seeded alike gave different results: draw every random number "
                   "with generator=generator")
    if torch.equal(first[1], other_seed[1]):
        raise Fail("mask_tokens gave the same selection for generators with different seeds: use the generator")
    # generator=None means torch's global generator (the docstring): the result after torch.manual_seed(s) is seed s's,
    # so two seeds give different selections (some 2,000 candidates at 0.15: equal with probability far below 1e-100)
    # and the same seed, apart, the same result
    first = corrupt(sub, small_ids, small_mask, 0.15, seed=21, global_generator=True)
    other_seed = corrupt(sub, small_ids, small_mask, 0.15, seed=22, global_generator=True)
    again = corrupt(sub, small_ids, small_mask, 0.15, seed=21, global_generator=True)
    if not (torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])):
        raise Fail("mask_tokens without a generator gave different results after the same torch.manual_seed: "
                   "generator=None means torch's global generator (pass generator=None on to the torch functions)")
    if torch.equal(first[1], other_seed[1]):
        raise Fail("mask_tokens without a generator gave the same selection after torch.manual_seed with two different "
                   "seeds: generator=None means torch's global generator (pass generator=None on to the torch "
                   "functions), not a generator with a fixed seed of your own")
