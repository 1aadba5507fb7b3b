"""Hidden checks of part 1: split_sentences(text), make_nsp_pairs(reviews, generator=None),
encode_pair(ids_a, ids_b, max_len, cls_id, sep_id, pad_id) and encode_pairs(pairs, tokenizer, max_len).

Deterministic functions are compared with the reference on fixed inputs. make_nsp_pairs is random: its pairs are
checked for what holds for every draw (one true and one false pair per review with two sentences or more, true
pairs are consecutive sentences, false pairs cross reviews, the library's labels), then for reproducibility with
the generator and for how the draws spread, on large samples. The tokenizer is a small WordPiece tokenizer whose
special ids are not BERT-base's ([CLS] 7, [SEP] 1, [PAD] 12; the word "good" is id 0).
"""
import torch

from _common import CLS, PAD, PLAIN_WORDS, SEP, WORD_IDS, WORKER_CODE, tokenizer
from autograder.testing import Fail, StudentError, check, gen, keep, worker_helpers

PART = "1. NSP sentence pairs"
IS_NEXT, NOT_NEXT = 0, 1

worker_helpers(WORKER_CODE)  # the helpers every test file of this assignment uses (one namespace in the worker)
worker_helpers('''
def bi_nsp_global(reviews, seed):
    """The student's make_nsp_pairs without a generator, torch's global generator seeded with `seed` first."""
    from autograder.seeding import seed_torch

    seed_torch(seed)
    return submission.make_nsp_pairs(reviews)
''')


# -- split_sentences -------------------------------------------------------------------------------------------

SPLIT_CASES = [
    ("Great movie. I loved it.", "two sentences, each ending with '.' followed by a space"),
    ("What?! No way... Really!", "a run of '.', '!' or '?' ('?!', '...') ends a sentence when whitespace follows"),
    ("It was fun!\nThe end?   Yes.", "'!' and '?' end sentences too, and any whitespace may follow (a newline, "
                                    "several spaces)"),
    ("  Rated 7.5/10. Worth it  ", "a '.' not followed by whitespace ('7.5/10') does not end a sentence, and "
                                   "sentences are stripped of surrounding whitespace"),
    ("no punctuation at all", "a text without '.', '!' or '?' is one sentence"),
    ("One.Two. Three", "only a '.' followed by whitespace ends a sentence"),
    ("Mr. Smith was bad. Very bad.", "the rule splits after every '.', '!' or '?' followed by whitespace, "
                                     "abbreviations included"),
    ("", "an empty text has no sentences"),
    ("   \n ", "a text of whitespace has no sentences"),
]


@check("NSP data: split_sentences splits after '.', '!' or '?' followed by whitespace", points=1, part=PART)
def split(sub, ref):
    for text, rule in SPLIT_CASES:
        got = sub.split_sentences(text)
        if not isinstance(got, list) or not all(isinstance(s, str) for s in got):
            raise Fail(f"split_sentences must return a list of str; for {text!r} it returned {type(got).__name__}")
        expected = ref.split_sentences(text)
        if got == expected:
            continue
        if [x.rstrip(".!? ") for x in got] == [x.rstrip(".!? ") for x in expected]:
            raise Fail(f"split_sentences({text!r}): keep the '.', '!' or '?' that ends each sentence (split on the "
                       "whitespace after it)")
        raise Fail(f"split_sentences({text!r}): your sentences are not right: {rule}")


# -- make_nsp_pairs ----------------------------------------------------------------------------------------------

def reviews_of(lengths):
    """Reviews with unique sentences, so that every sentence tells which review and position it comes from."""
    return [[f"review {r} sentence {i}." for i in range(n)] for r, n in enumerate(lengths)]


def nsp_pairs(sub, reviews, seed, global_generator=False):
    """The student's pairs with a generator seeded with `seed`; with global_generator, without a generator (None)
    after torch's global generator was seeded with `seed`."""
    try:
        if global_generator:
            pairs = sub.helpers.bi_nsp_global(reviews, seed)
        else:
            pairs = sub.make_nsp_pairs(reviews, generator=keep(sub.helpers.bi_generator, seed))
    except StudentError as exc:
        raise Fail(exc.describe()) from None
    if not isinstance(pairs, (list, tuple)) or not all(isinstance(p, (list, tuple)) and len(p) == 3 for p in pairs):
        raise Fail("make_nsp_pairs must return a list of (sentence_a, sentence_b, next_sentence_label) tuples")
    out = []
    for a, b, label in pairs:
        if isinstance(label, torch.Tensor) and label.numel() == 1:
            label = int(label)
        if not isinstance(a, str) or not isinstance(b, str) or isinstance(label, bool) or label not in (0, 1):
            raise Fail("make_nsp_pairs must return (str, str, label) tuples with the label IS_NEXT = 0 or NOT_NEXT = 1")
        out.append((a, b, int(label)))
    return out


def check_structure(pairs, reviews, what, labels=True, order=True):
    """What every correct draw satisfies; raises a Fail naming the first violation. labels=False: the labels are
    not looked at; order=False: nor is the order of the pairs (both are nsp_structure's to check)."""
    where = {s: (r, i) for r, sentences in enumerate(reviews) for i, s in enumerate(sentences)}
    eligible = {r for r, sentences in enumerate(reviews) if len(sentences) >= 2}
    by_review = {r: [] for r in eligible}
    for a, b, label in pairs:
        if a not in where or b not in where:
            raise Fail(f"{what}: both sentences of a pair must be sentences of the reviews, unchanged")
        if where[a][0] not in eligible:
            raise Fail(f"{what}: a pair's A comes from a review with fewer than two sentences: only reviews with at "
                       "least two sentences give pairs")
        by_review[where[a][0]].append((a, b, label))
    if len(pairs) != 2 * len(eligible):
        raise Fail(f"{what}: {len(eligible)} reviews have at least two sentences, so there must be {2 * len(eligible)} "
                   f"pairs (a true and a false one each); yours made {len(pairs)}")
    labels_inverted = 0
    for r, items in by_review.items():
        if len(items) != 2:
            raise Fail(f"{what}: every review with at least two sentences gives exactly two pairs with an A of its own "
                       "(the true pair and the false pair); yours gave one review " + str(len(items)))
        true = [x for x in items if where[x[1]][0] == r and where[x[1]][1] == where[x[0]][1] + 1]
        false = [x for x in items if where[x[1]][0] != r]
        if len(true) + len(false) != 2:
            raise Fail(f"{what}: a false pair's B must be a sentence of ANOTHER review, never of A's own review "
                       "(and a true pair's B is the sentence right after A)")
        if len(true) != 1:
            raise Fail(f"{what}: every review with at least two sentences gives one true pair (A and the sentence right "
                       "after it) and one false pair (B from another review)")
        if not labels:
            continue
        if true[0][2] == NOT_NEXT and false[0][2] == IS_NEXT:
            labels_inverted += 1
        elif true[0][2] != IS_NEXT or false[0][2] != NOT_NEXT:
            raise Fail(f"{what}: the true pair's label is IS_NEXT = 0 and the false pair's NOT_NEXT = 1")
    if labels_inverted:
        raise Fail(f"{what}: the labels are inverted: the library's BertForPreTraining uses 0 (IS_NEXT) when B follows A "
                   "and 1 (NOT_NEXT) when B is random")
    if not order:
        return
    # the documented order: review by review, in the reviews' order, each review's true pair and then its false pair
    for k, r in enumerate(sorted(eligible)):
        first, second = pairs[2 * k], pairs[2 * k + 1]
        if where[first[0]][0] != r or where[second[0]][0] != r:
            raise Fail(f"{what}: the pairs must come review by review, in the order of the reviews (the two pairs of "
                       "the first review with at least two sentences, then those of the next one, ...)")
        if where[first[1]][0] != r:
            raise Fail(f"{what}: each review gives its TRUE pair first (A, the sentence after A, IS_NEXT) and then its "
                       "false pair (A, a sentence of another review, NOT_NEXT); yours puts the false pair first")


@check("NSP data: one true and one false pair per review with at least two sentences", points=1.5, part=PART)
def nsp_structure(sub, ref):
    lengths = torch.randint(0, 7, (30,), generator=gen(101)).tolist()
    lengths[3], lengths[5], lengths[8] = 0, 1, 2  # an empty review, a one-sentence review, a two-sentence review
    reviews = reviews_of(lengths)
    check_structure(nsp_pairs(sub, reviews, 1), reviews, "make_nsp_pairs on 30 reviews")
    # Four reviews only: a false B drawn from all reviews would come from A's own review once in four draws; over
    # 20 seeds (80 false pairs) such a mistake shows with probability 1 - 0.75^80 > 1 - 1e-9.
    few = reviews_of([6, 6, 6, 6])
    for seed in range(20):
        check_structure(nsp_pairs(sub, few, 200 + seed), few, "make_nsp_pairs on four reviews of six sentences")


@check("NSP data: A uniform among sentences with a successor, false B spread over the other reviews, reproducible "
       "with the generator (None: torch's global generator)", points=1, part=PART)
def nsp_randomness(sub, ref):
    reviews = reviews_of([5] * 400)
    first = nsp_pairs(sub, reviews, 7)
    check_structure(first, reviews, "make_nsp_pairs on 400 reviews of five sentences", labels=False, order=False)
    other_seed = nsp_pairs(sub, reviews, 8)  # between the two calls with seed 7: a replayed result is no reproducibility
    if nsp_pairs(sub, reviews, 7) != first:
        raise Fail("make_nsp_pairs with two generators seeded alike gave different pairs: draw every random number "
                   "with torch functions and generator=generator (not Python's random module or the global generator)")
    if other_seed == first:
        raise Fail("make_nsp_pairs gave the same pairs for generators with different seeds: draw A and the false B "
                   "with the generator")
    # generator=None means torch's global generator (the docstring): after torch.manual_seed(s) the pairs are those
    # of seed s, so two seeds give different pairs (40 reviews: A among 4 positions, B among 39 x 5 sentences each;
    # two seeds agree on all of them with probability 780^-40) and the same seed, apart, the same pairs
    few = reviews_of([5] * 40)
    seeded = nsp_pairs(sub, few, 11, global_generator=True)
    other_seed = nsp_pairs(sub, few, 12, global_generator=True)
    if nsp_pairs(sub, few, 11, global_generator=True) != seeded:
        raise Fail("make_nsp_pairs(reviews) without a generator gave different pairs after the same torch.manual_seed: "
                   "generator=None means torch's global generator (pass generator=None on to the torch functions), "
                   "not Python's random module or a generator of your own")
    if other_seed == seeded:
        raise Fail("make_nsp_pairs(reviews) without a generator gave the same pairs after torch.manual_seed with two "
                   "different seeds: generator=None means torch's global generator (pass generator=None on to the "
                   "torch functions), not a generator with a fixed seed of your own")
    where = {s: (r, i) for r, sentences in enumerate(reviews) for i, s in enumerate(sentences)}
    # true and false pairs told apart by their sentences (B from A's review or not), not by their labels
    true = [(where[a], where[b]) for a, b, _ in first if where[a][0] == where[b][0]]
    counts = [sum(1 for (_, i), _ in true if i == k) for k in range(4)]
    # A's position is uniform over 0..3: each count is Binomial(400, 1/4), mean 100, sd 8.66; [50, 150] is 5.8 sd
    # wide on each side (false failure < 3e-8 over the four counts). Always the first sentence gives 400.
    if min(counts) < 50 or max(counts) > 150:
        raise Fail("A must be drawn uniformly among the sentences that have a successor (positions 0 to n-2): on 400 "
                   f"reviews of five sentences yours chose positions 0, 1, 2, 3 {counts[0]}, {counts[1]}, {counts[2]} "
                   f"and {counts[3]} times")
    false = [(where[a][0], where[b]) for a, b, _ in first if where[a][0] != where[b][0]]
    next_review = sum(1 for r, (o, _) in false if o == (r + 1) % len(reviews)) / len(false)
    first_sentence = sum(1 for _, (_, i) in false if i == 0) / len(false)
    # Correct draws: the next review 1 time in 399, the first sentence of a review 1 time in 5 (Binomial(400, 0.2)
    # reaches 0.5 with probability < 1e-40). A fixed choice gives 1.0.
    if next_review > 0.5 or first_sentence > 0.5:
        raise Fail("a false pair's B must be a random sentence of a random other review (drawn with the generator); "
                   "yours are mostly " + ("the next review's" if next_review > 0.5 else "the first sentence of a review"))


# -- encode_pair -------------------------------------------------------------------------------------------------

def rows_of(out, what):
    """(input_ids, token_type_ids, attention_mask) as three lists of ints."""
    if not isinstance(out, (tuple, list)) or len(out) != 3:
        raise Fail(f"{what} must return (input_ids, token_type_ids, attention_mask)")
    rows = []
    for name, row in zip(("input_ids", "token_type_ids", "attention_mask"), out):
        if isinstance(row, torch.Tensor):
            row = row.reshape(-1).tolist()
        if not isinstance(row, (list, tuple)) or not all(isinstance(x, int) and not isinstance(x, bool) for x in row):
            raise Fail(f"{what}: {name} must be a list of ints")
        rows.append(list(row))
    return tuple(rows)


def random_ids(g, n):
    return [WORD_IDS[i] for i in torch.randint(len(WORD_IDS), (n,), generator=g).tolist()]


def _diagnose_layout(got, a, b, max_len):
    """A message for an untruncated pair encoded wrongly."""
    ids, types, mask = got
    n = len(a) + len(b) + 3
    if len(ids) != max_len or len(types) != max_len or len(mask) != max_len:
        return "every row must have max_len entries (pad up to max_len)"
    if ids[:n] != [CLS, *a, SEP, *b, SEP]:
        return "input_ids must be [CLS] A [SEP] B [SEP], with the special ids given as arguments"
    if ids[n:] != [PAD] * (max_len - n):
        return "the padding after the second [SEP] must be pad_id (the argument, not 0)"
    if mask[:n] == [0] * n and mask[n:] == [1] * (max_len - n):
        return "attention_mask is inverted: 1 for the real tokens (specials included), 0 for the padding"
    if mask != [1] * n + [0] * (max_len - n):
        return "attention_mask must be 1 for every real token ([CLS] and [SEP] included) and 0 for the padding"
    seg_a, seg_b = types[: len(a) + 2], types[len(a) + 2: n]
    if seg_a == [1] * len(seg_a) and seg_b == [0] * len(seg_b):
        return "the segment ids are swapped: 0 for [CLS] A [SEP], 1 for B [SEP]"
    if seg_a == [0] * len(seg_a) and seg_b == [1] * (len(b)) + [0]:
        return "the second [SEP] belongs to segment B: its token_type_id is 1"
    if seg_a == [0] * (len(a) + 1) + [1] and seg_b == [1] * len(seg_b):
        return "the first [SEP] belongs to segment A: its token_type_id is 0"
    if types[n:] != [0] * (max_len - n):
        return "token_type_ids are 0 on the padding"
    return "token_type_ids must be 0 for [CLS] A [SEP] and 1 for B [SEP]"


@check("NSP encoding: [CLS] A [SEP] B [SEP], segment ids, padding and attention mask", points=1.5, part=PART)
def encoding(sub, ref):
    g = gen(131)
    for len_a, len_b, max_len in ((3, 2, 10), (1, 1, 5), (4, 6, 13), (5, 5, 16), (2, 7, 12)):
        a, b = random_ids(g, len_a), random_ids(g, len_b)
        what = f"encode_pair(A of {len_a} ids, B of {len_b} ids, max_len={max_len}, cls_id={CLS}, sep_id={SEP}, pad_id={PAD})"
        got = rows_of(sub.encode_pair(a, b, max_len, CLS, SEP, PAD), what)
        if got != rows_of(ref.encode_pair(a, b, max_len, CLS, SEP, PAD), what):
            raise Fail(f"{what}: {_diagnose_layout(got, a, b, max_len)}")


def _truncations(a, b, max_len):
    """input_ids of the usual wrong truncations: {message: ids}."""
    def pair(x, y):
        return [CLS, *x, SEP, *y, SEP]

    def loop(choose):
        x, y = list(a), list(b)
        while len(x) + len(y) + 3 > max_len:
            (x if choose(x, y) else y).pop()
        return pair(x, y)

    def front(x, y):
        x, y = list(x), list(y)
        while len(x) + len(y) + 3 > max_len:
            (x if len(x) >= len(y) else y).pop(0)
        return pair(x, y)

    return {
        "only A is truncated: truncate the LONGER sentence first": loop(lambda x, y: len(x) > 0),
        "only B is truncated: truncate the LONGER sentence first": loop(lambda x, y: len(y) == 0),
        "the shorter sentence is truncated first: truncate the LONGER one first":
            loop(lambda x, y: 0 < len(x) < len(y) or not y),
        "A and B are equally long here: on a tie the notebook's rule drops A's last token, so with an odd number of "
        "tokens to share B keeps one more (the library's fast tokenizers do the same here); yours drops B's":
            loop(lambda x, y: len(x) > len(y)),
        "the whole sequence is cut at max_len, which loses the final [SEP]: truncate the sentences, keep both [SEP]":
            pair(a, b)[:max_len],
        "tokens are dropped from the start of a sentence: drop them from its end": front(a, b),
    }


def library_lengths(n_a, n_b, max_len):
    """How many tokens of A and of B the library's fast tokenizers keep with truncation="longest_first" (the Rust
    tokenizers' LongestFirst): the same as the notebook's loop (drop the last token of the longer sentence, of A on a
    tie), except where A is the longer one, both are cut and an odd token is left to share: the library keeps it in
    A, the loop in B (checked against BertTokenizerFast for every pair of lengths 1..8 and max_len 5..19)."""
    budget = max_len - 3
    if n_a + n_b <= budget:
        return n_a, n_b
    swap = n_a > n_b
    if swap:
        n_a, n_b = n_b, n_a
    n_b = max(n_a, budget - n_a)
    if n_a + n_b > budget:
        n_a = budget // 2
        n_b = n_a + budget % 2
    return (n_b, n_a) if swap else (n_a, n_b)


@check("NSP encoding: the longer sentence is truncated first, from its end (input_ids)", points=1, part=PART)
def truncation(sub, ref):
    g = gen(141)
    # (7, 6, 12) is where the library's rule and the notebook's differ (both accepted); (5, 5, 10) where both drop the
    # first token from A and dropping it from B on the tie shows
    for len_a, len_b, max_len in ((10, 3, 10), (3, 10, 10), (6, 6, 11), (7, 6, 12), (8, 2, 8), (2, 8, 8), (5, 5, 9),
                                  (5, 5, 10)):
        a, b = random_ids(g, len_a), random_ids(g, len_b)
        what = f"encode_pair(A of {len_a} ids, B of {len_b} ids, max_len={max_len})"
        got = rows_of(sub.encode_pair(a, b, max_len, CLS, SEP, PAD), what)[0]
        expected = rows_of(ref.encode_pair(a, b, max_len, CLS, SEP, PAD), what)[0]
        keep_a, keep_b = library_lengths(len_a, len_b, max_len)
        library = [CLS, *a[:keep_a], SEP, *b[:keep_b], SEP]
        library += [PAD] * (max_len - len(library))
        if got in (expected, library):  # the token ids only: segment ids and the mask are graded by the check above
            continue
        if len(got) != max_len:
            raise Fail(f"{what}: the rows must have exactly max_len entries: truncate until [CLS] A [SEP] B [SEP] fits")
        for message, ids in _truncations(a, b, max_len).items():
            padded = ids + [PAD] * (max_len - len(ids))
            if got == padded and padded not in (expected, library):
                raise Fail(f"{what}: {message}")
        raise Fail(f"{what}: while [CLS] A [SEP] B [SEP] is longer than max_len, drop the last token of the longer "
                   "sentence (of A when both are equally long)")


# -- encode_pairs ------------------------------------------------------------------------------------------------

def sentence(g, n):
    words = [PLAIN_WORDS[i] for i in torch.randint(len(PLAIN_WORDS), (n,), generator=g).tolist()]
    return " ".join(words) + [" .", " !", " ?", ""][int(torch.randint(4, (), generator=g))]


@check("NSP encoding: encode_pairs tokenises with the tokenizer and uses its own special ids", points=1, part=PART)
def encoding_batch(sub, ref):
    g = gen(151)
    pairs = [(sentence(g, la), sentence(g, lb), label)
             for la, lb, label in ((2, 3, 0), (6, 2, 1), (3, 9, 0), (1, 1, 1), (7, 7, 0), (4, 2, 1))]
    max_len = 12
    try:
        got = sub.encode_pairs(pairs, tokenizer(sub), max_len)
    except StudentError as exc:
        raise Fail(exc.describe()) from None
    expected = ref.encode_pairs(pairs, tokenizer(ref), max_len)
    keys = ("input_ids", "token_type_ids", "attention_mask", "next_sentence_label")
    if not isinstance(got, dict) or set(keys) - set(got):
        raise Fail(f"encode_pairs must return a dict with the keys {', '.join(keys)}")
    for key in keys:
        value = got[key]
        shape = (len(pairs), max_len) if key != "next_sentence_label" else (len(pairs),)
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != shape:
            raise Fail(f"encode_pairs: {key} must be a tensor of shape {shape} for {len(pairs)} pairs and max_len={max_len}")
        if value.dtype.is_floating_point or value.dtype == torch.bool:
            raise Fail(f"encode_pairs: {key} must be an integer (long) tensor, got {value.dtype}")
    if not torch.equal(got["next_sentence_label"].long(), expected["next_sentence_label"]):
        raise Fail("encode_pairs: next_sentence_label must hold each pair's label, in order")
    if all(torch.equal(got[k].long(), expected[k]) for k in keys[:3]):
        return
    ids = got["input_ids"]
    if (ids == 101).any() or (ids == 102).any():
        raise Fail("encode_pairs puts BERT-base's ids 101 / 102 in: use the tokenizer's own tokenizer.cls_token_id and "
                   "tokenizer.sep_token_id (this tokenizer's differ)")
    if bool((ids[:, 0] != CLS).any()):
        raise Fail("every row must start with the tokenizer's [CLS] id (tokenizer.cls_token_id)")
    if bool((got["attention_mask"] == 0).any()) and bool((ids[got["attention_mask"] == 0] == 0).all()):
        raise Fail("the padding must be the tokenizer's pad id (tokenizer.pad_token_id, not 0 for this tokenizer)")
    # The rows may still be right up to encode_pair (graded on its own above): compare with the student's own
    # encode_pair on correctly tokenised sentences with the tokenizer's special ids.
    tok = tokenizer(ref)
    own = [rows_of(sub.encode_pair(ref.helpers.bi_token_ids(tok, a), ref.helpers.bi_token_ids(tok, b), max_len,
                                   CLS, SEP, PAD), "encode_pair") for a, b, _ in pairs]
    if all(torch.equal(got[key][i].long(), torch.tensor(row[j])) for i, row in enumerate(own)
           for j, key in enumerate(keys[:3])):
        return
    raise Fail("encode_pairs: tokenise each sentence without special tokens (tokenizer.tokenize + "
               "convert_tokens_to_ids), then encode_pair with the tokenizer's cls_token_id, sep_token_id and pad_token_id")
