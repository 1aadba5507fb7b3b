"""Wrong submissions of the BERT-from-the-inside assignment: the answer key with the mistakes students make.

`autograder verify bert_inside` (and tests/test_bert_inside.py) turns every item into a notebook, grades them all
in one batch and checks that each loses points on the checks in `expect`, with a message containing the given text,
and, with `confined_to`, on no check of another part. Every `old` text must occur in the answer key, so a change of
the notebook that makes an item stale fails loudly. The last items leave one part as the student's stub: the other
parts must keep every point (each part is graded on its own).
"""
from __future__ import annotations

from autograder.corpus import Bug
from variants import BIAS_NONE_REPLACE, LOAD_STRICT, LOAD_STRICT_TO_KEYERROR

# check names, as the hidden test files define them
SPLIT = "NSP data: split_sentences splits after '.', '!' or '?' followed by whitespace"
PAIRS = "NSP data: one true and one false pair per review with at least two sentences"
RANDOM = ("NSP data: A uniform among sentences with a successor, false B spread over the other reviews, reproducible "
          "with the generator (None: torch's global generator)")
ENCODE = "NSP encoding: [CLS] A [SEP] B [SEP], segment ids, padding and attention mask"
TRUNC = "NSP encoding: the longer sentence is truncated first, from its end (input_ids)"
BATCH = "NSP encoding: encode_pairs tokenises with the tokenizer and uses its own special ids"
M_LABELS = "MLM inputs: labels are the original ids at the selected positions, -100 elsewhere; the input is left alone"
M_SPECIAL = "MLM inputs: [CLS], [SEP] and padding are never selected"
M_RATE = "MLM inputs: about mask_rate of the candidates are selected"
M_PROP = "MLM inputs: 80% [MASK], 10% random token, 10% unchanged"
M_RANDOM = ("MLM inputs: random replacements drawn from every token id; the generator (None: torch's global one) makes "
            "the result reproducible")
E_SIZES = "embeddings: sizes, padding index, LayerNorm eps and dropout rate come from the config"
E_OUTPUT = "embeddings: output matches the reference with the same weights"
E_POS = "embeddings: position ids 0..T-1 for every length, up to max_position_embeddings"
E_TYPES = "embeddings: segment embeddings from token_type_ids, all 0 when None"
E_EPS = "embeddings: LayerNorm with the config's eps"
E_DROPOUT = "embeddings: dropout after the LayerNorm, in train() only"
B_BIAS = "attention_bias: 0 for real tokens, a huge negative bias for padding, shape (B, 1, 1, T)"
L_OUTPUT = "encoder layer: output matches the reference with the same weights and bias"
L_PAD = "encoder layer: padded keys change nothing at the real positions"
L_CONFIG = ("encoder layer: intermediate size, heads, dropout rates and eps from the config; dropout in train() only")
L_PLACES = ("encoder layer: attention dropout on the attention weights in train(), dropout on each sub-layer's output "
            "before its residual")
L_GRAD = "encoder layer: gradients reach every weight and the input as through the reference"
E_GRAD = "embeddings: gradients reach the word, position and segment tables and the LayerNorm"
N_GRAD = "Bert: gradients reach the embeddings, every encoder layer and the pooler"
ENC = "encoder: layers chained in order, each given the bias of the 1 = real-token mask"
N_NAMES = "ours_name: every tensor of the library's BertModel gets its name in our Bert"
N_LOAD = "load_bert_weights: every tensor copied to its place; a state_dict that does not fit is refused"
N_WIRING = "Bert: embeddings -> encoder with the attention mask -> pooled tanh(pooler(sequence_output[:, 0]))"
N_LIBRARY = "Bert with the library's weights: sequence_output and pooled_output equal BertModel's to 1e-5"
I_INIT = "init_bert_weights: N(0, std) weights, zero biases, LayerNorm 1 and 0, padding row 0"
H_MLM = "MLM head: dense -> GELU -> LayerNorm, then the word embeddings as decoder, plus a bias"
H_TIED = "MLM head: the decoder weight is tied to the word embeddings (shared, not copied)"
H_HEADS = "pre-training model: MLM head on the sequence output, NSP head on the pooled output"
H_LOSS = "pretraining_loss: MLM cross-entropy over the selected positions plus the NSP cross-entropy"
H_STEP = "pretraining_step: the model gets the batch, one optimizer step on the joint loss, the mode left alone"
H_FIRST = "pre-training model: weights drawn with std config.initializer_range, the first loss about ln(V) + ln(2)"
S_LR = "lr_factor: linear warm-up from 0 to 1, then linear decay to 0 at total_steps"
S_OPT = "make_optimizer: AdamW, weight decay on the weights, none on biases and LayerNorm weights"
T_TRAIN = ("train_epoch: train() mode, the attention mask, one optimizer step and then one scheduler step per batch, "
           "the mean loss")
T_PREDICT = "predict: eval() mode, no gradients, the attention mask, logits and labels of every batch in order"
T_METRICS = "metrics: accuracy, precision, recall and F1 of the positive class 1"
T_DEGEN = "metrics: no predicted positives or no true positives give 0, not NaN"

P1, P2, P3, P4, P5, P6, P7 = "1.", "2.", "3.", "4.", "5.", "6.", "7."
P_GRAD = "pre-training model: gradients reach the MLM head, the NSP head and the word embeddings through both"
# a term that depends on every parameter, each element with its own fixed weight: gradients everywhere, no computation
NOISE_TERM = (
    "def _noise_term(module, scale=1e-7):\n"
    "    g = torch.Generator().manual_seed(12345)\n"
    "    return scale * sum((p * torch.randn(p.shape, generator=g)).sum() for p in module.parameters())\n")

# the answer key's lines that several bugs edit
OTHER_REVIEW = ('        j = int(torch.randint(len(with_sentences) - 1, (), generator=generator))  # another review:\n'
                '        j += j >= position[r]  # uniform over the others, skipping review r itself\n')
TRUE_PAIR = "pairs.append((sentences[i], sentences[i + 1], IS_NEXT))"
FALSE_PAIR = "pairs.append((sentences[i], b, NOT_NEXT))"
SEGMENTS = "token_type_ids = [0] * (len(a) + 2) + [1] * (len(b) + 1)"
TRUNCATE = ("    while len(a) + len(b) + 3 > max_len:  # drop from the end of the longer sentence (of A on a tie)\n"
            "        if len(a) >= len(b):\n            a.pop()\n        else:\n            b.pop()\n")
SPECIAL_IDS = "tokenizer.cls_token_id, tokenizer.sep_token_id,\n                              tokenizer.pad_token_id)"
CANDIDATES = "special = (input_ids == tokenizer.cls_token_id) | (input_ids == tokenizer.sep_token_id)"
SCORES = "scores = q @ k.transpose(-2, -1) / math.sqrt(D) + bias"
ENCODER_BIAS = ("        if attention_mask is None:\n"
                "            attention_mask = torch.ones(hidden.shape[:2], dtype=torch.long, device=hidden.device)\n"
                "        bias = attention_bias(attention_mask, hidden.dtype)")
FFN = "ffn = self.ffn_out(F.gelu(self.ffn_in(x)))"
MAPPING_QKV = '(r"^encoder\\.layer\\.(\\d+)\\.attention\\.self\\.(query|key|value)\\.", r"encoder.layers.\\1.\\2."),'
POOLED = "pooled_output = torch.tanh(self.pooler(sequence_output[:, 0]))"
SEQUENCE = "sequence_output = self.encoder(self.embeddings(input_ids, token_type_ids), attention_mask)"
STEP = "    optimizer.zero_grad()\n    loss.backward()\n    optimizer.step()\n    return loss.item()"
SCHEDULER = "        scheduler.step()  # once per batch: the schedule counts optimizer steps\n"

# A correct load_bert_weights in the layer-by-layer style of many BERT tutorials: it walks model.encoder.layers, so
# the reference's stand-ins for an unfinished part 3 or 4 must keep the real module tree (ModuleList, Linear).
LAYERWISE_LOAD = """def load_bert_weights(model, hf_state_dict):
    library = {k: v for k, v in hf_state_dict.items() if not k.endswith(("position_ids", "token_type_ids"))}

    def copy(param, key):
        value = library.pop(key)
        if tuple(param.shape) != tuple(value.shape):
            raise ValueError(f"{key}: shape {tuple(value.shape)} does not fit {tuple(param.shape)}")
        with torch.no_grad():
            param.copy_(value)

    def copy_linear(module, key):
        copy(module.weight, key + ".weight")
        copy(module.bias, key + ".bias")

    copy(model.embeddings.word.weight, "embeddings.word_embeddings.weight")
    copy(model.embeddings.position.weight, "embeddings.position_embeddings.weight")
    copy(model.embeddings.segment.weight, "embeddings.token_type_embeddings.weight")
    copy_linear(model.embeddings.norm, "embeddings.LayerNorm")
    for i, layer in enumerate(model.encoder.layers):
        hf = f"encoder.layer.{i}."
        for ours, theirs in [("query", "attention.self.query"), ("key", "attention.self.key"),
                             ("value", "attention.self.value"), ("attn_out", "attention.output.dense"),
                             ("attn_norm", "attention.output.LayerNorm"), ("ffn_in", "intermediate.dense"),
                             ("ffn_out", "output.dense"), ("ffn_norm", "output.LayerNorm")]:
            copy_linear(getattr(layer, ours), hf + theirs)
    copy_linear(model.pooler, "pooler.dense")
    if library:
        raise KeyError(f"library tensors with no place in our model: {sorted(library)}")
"""


# the strict-load variant without its conversion to the documented KeyError: load_state_dict's RuntimeError escapes
LOAD_RUNTIME_ERROR = LOAD_STRICT.replace(LOAD_STRICT_TO_KEYERROR, "    model.load_state_dict(renamed, strict=True)\n")
assert LOAD_RUNTIME_ERROR != LOAD_STRICT


# mask_tokens labelling only the tokens it changed: the selected tokens that stay unchanged get -100
MASK_CHANGED_ONLY_LABELLED = """def mask_tokens(input_ids, attention_mask, tokenizer, mask_rate=0.15, generator=None):
    special = (input_ids == tokenizer.cls_token_id) | (input_ids == tokenizer.sep_token_id)
    candidates = attention_mask.bool() & ~special
    selected = (torch.rand(input_ids.shape, generator=generator) < mask_rate) & candidates
    action = torch.rand(input_ids.shape, generator=generator)
    random_ids = torch.randint(len(tokenizer), input_ids.shape, generator=generator)
    masked_ids = input_ids.clone()
    masked_ids[selected & (action < 0.8)] = tokenizer.mask_token_id
    to_random = selected & (action >= 0.8) & (action < 0.9)
    masked_ids[to_random] = random_ids[to_random]
    changed = selected & (action < 0.9)
    labels = torch.where(changed, input_ids, torch.full_like(input_ids, -100))
    return masked_ids, labels
"""

ATTENTION = "weights = self.attn_dropout(torch.softmax(scores, dim=-1))"
CONTEXT = "context = (weights @ v).transpose(1, 2)"
MLM_LOSS = "mlm = F.cross_entropy(mlm_logits.reshape(-1, V), labels.reshape(-1), ignore_index=-100)"
NSP_LOSS = "nsp = F.cross_entropy(nsp_logits, next_sentence_label)"


NSP_PAIRS_CONSTANT = '''def make_nsp_pairs(reviews, generator=None):
    return [("a one.", "a two.", IS_NEXT), ("a one.", "b one.", NOT_NEXT), ("c one.", "c two.", IS_NEXT),
            ("c one.", "a one.", NOT_NEXT)]
'''

BUGS: list[Bug] = [
    # -- part 1: NSP pairs ------------------------------------------------------------------------------------------
    Bug("split_drops_punctuation",
        {'pieces = re.split(r"(?<=[.!?])\\s+", text.strip())': 'pieces = re.split(r"[.!?]+\\s*", text.strip())'},
        {SPLIT: "keep the '.', '!' or '?'"}, "splits on the punctuation itself and loses it", confined_to=P1),
    Bug("split_on_period_only",
        {'pieces = re.split(r"(?<=[.!?])\\s+", text.strip())': 'pieces = re.split(r"(?<=\\.)\\s+", text.strip())'},
        {SPLIT: "ends a sentence"}, "only '.' ends a sentence", confined_to=P1),
    Bug("nsp_false_b_from_any_review",
        {OTHER_REVIEW: '        j = int(torch.randint(len(with_sentences), (), generator=generator))  # any review\n'},
        {PAIRS: "ANOTHER review"}, "the random sentence may come from A's own review", confined_to=P1),
    Bug("nsp_labels_inverted",
        {TRUE_PAIR: "pairs.append((sentences[i], sentences[i + 1], 1))", FALSE_PAIR: "pairs.append((sentences[i], b, 0))"},
        {PAIRS: "labels are inverted"}, "1 for 'is next', the opposite of the library's convention", confined_to=P1),
    Bug("nsp_python_random",
        {"import re\n": "import random\nimport re\n",
         "i = int(torch.randint(len(sentences) - 1, (), generator=generator))": "i = random.randrange(len(sentences) - 1)",
         OTHER_REVIEW: "        j = random.randrange(len(with_sentences) - 1)\n        j += j >= position[r]\n",
         "b = other[int(torch.randint(len(other), (), generator=generator))]": "b = random.choice(other)"},
        {RANDOM: "seeded alike"}, "Python's random module: the generator argument is ignored", confined_to=P1),
    Bug("nsp_first_sentence_always",
        {"i = int(torch.randint(len(sentences) - 1, (), generator=generator))  # A has a successor": "i = 0"},
        {RANDOM: "uniformly among the sentences"}, "A is always the first sentence", confined_to=P1),
    Bug("nsp_false_b_from_next_review",
        {"other = reviews[with_sentences[j]]": "other = reviews[with_sentences[(position[r] + 1) % len(with_sentences)]]"},
        {RANDOM: "the next review's"}, "the false B always comes from the next review", confined_to=P1),
    Bug("nsp_false_pair_first",
        {TRUE_PAIR + "\n        " + FALSE_PAIR: FALSE_PAIR + "\n        " + TRUE_PAIR},
        {PAIRS: "TRUE pair first"}, "each review's false pair before its true pair", confined_to=P1),
    Bug("nsp_none_means_fixed_seed",
        {"    with_sentences = [r for r, sentences in enumerate(reviews) if sentences]":
         "    generator = generator or torch.Generator().manual_seed(0)  # None: a fixed seed, not the global generator\n"
         "    with_sentences = [r for r, sentences in enumerate(reviews) if sentences]"},
        {RANDOM: "torch's global generator"}, "generator=None replaced by a generator with a fixed seed: the same pairs "
        "at every call", only=True, confined_to=P1),
    Bug("segment_ids_swapped",
        {SEGMENTS: "token_type_ids = [1] * (len(a) + 2) + [0] * (len(b) + 1)"},
        {ENCODE: "segment ids are swapped"}, "A gets segment 1 and B segment 0", confined_to=P1),
    Bug("second_sep_in_segment_a",
        {SEGMENTS: "token_type_ids = [0] * (len(a) + 2) + [1] * len(b) + [0]"},
        {ENCODE: "second [SEP] belongs to segment B"}, "the closing [SEP] keeps segment 0", confined_to=P1),
    Bug("attention_mask_inverted",
        {"attention_mask = [1] * len(input_ids)": "attention_mask = [0] * len(input_ids)",
         "attention_mask + [0] * padding": "attention_mask + [1] * padding"},
        {ENCODE: "attention_mask is inverted"}, "1 on padding, as in the previous assignment", confined_to=P1),
    Bug("truncate_a_only",
        {TRUNCATE: "    while len(a) + len(b) + 3 > max_len:\n        (a if a else b).pop()\n"},
        {TRUNC: "only A is truncated"}, "always shortens the first sentence", confined_to=P1),
    Bug("truncate_tie_from_b",
        {"        if len(a) >= len(b):\n            a.pop()": "        if len(a) > len(b):\n            a.pop()"},
        {TRUNC: "equally long"}, "on a tie drops from B, unlike the library", confined_to=P1),
    Bug("truncate_whole_sequence",
        {TRUNCATE: "",
         SEGMENTS + "  # [CLS] A [SEP] -> 0, B [SEP] -> 1":
             SEGMENTS + "\n    input_ids, token_type_ids = input_ids[:max_len], token_type_ids[:max_len]"},
        {TRUNC: "loses the final [SEP]"}, "cuts the joined sequence at max_len", confined_to=P1),
    Bug("hard_coded_bert_base_ids",
        {SPECIAL_IDS: "101, 102, 0)"},
        {BATCH: "101 / 102"}, "BERT-base's ids written in", confined_to=P1),
    Bug("padded_with_zero",
        {SPECIAL_IDS: "tokenizer.cls_token_id, tokenizer.sep_token_id, 0)"},
        {BATCH: "pad id"}, "pads with 0 instead of the tokenizer's pad id", confined_to=P1),
    Bug("sentences_tokenised_with_specials",
        {"ids_a = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(sentence_a))": 'ids_a = tokenizer(sentence_a)["input_ids"]',
         "ids_b = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(sentence_b))": 'ids_b = tokenizer(sentence_b)["input_ids"]'},
        {BATCH: "without special tokens"}, "each sentence keeps its own [CLS] ... [SEP]", confined_to=P1),
    # -- part 2: MLM inputs -------------------------------------------------------------------------------------------
    Bug("sep_can_be_masked",
        {CANDIDATES: "special = input_ids == tokenizer.cls_token_id"},
        {M_SPECIAL: "[SEP] positions were selected"}, "only [CLS] is excluded", confined_to=P2),
    Bug("hard_coded_bert_base_special_ids",
        {CANDIDATES: "special = (input_ids == 101) | (input_ids == 102)",
         "masked_ids[selected & (action < 0.8)] = tokenizer.mask_token_id": "masked_ids[selected & (action < 0.8)] = 103"},
        {M_SPECIAL: "tokenizer.cls_token_id", M_PROP: "expected about 80%", M_RANDOM: "token ids of the vocabulary"},
        "BERT-base's [CLS], [SEP] and [MASK] ids written in", confined_to=P2),
    Bug("padding_told_by_id_zero",
        {"candidates = attention_mask.bool() & ~special": "candidates = (input_ids != 0) & ~special"},
        {M_SPECIAL: "padding positions"}, "padding assumed to be id 0", confined_to=P2),
    Bug("labels_everywhere",
        {"labels = torch.where(selected, input_ids, torch.full_like(input_ids, -100))": "labels = input_ids.clone()"},
        {M_LABELS: "-100 everywhere"}, "every position labelled with its id", confined_to=P2),
    Bug("labels_zero_not_minus_100",
        {"labels = torch.where(selected, input_ids, torch.full_like(input_ids, -100))":
         "labels = torch.where(selected, input_ids, torch.zeros_like(input_ids))"},
        {M_LABELS: "not 0"}, "0 as the label of unselected positions: only the labels checks are lost", others={"part2_public"}, only=True,
        confined_to=P2),
    Bug("mask_rate_ignored",
        {"< mask_rate) & candidates": "< 0.15) & candidates"},
        {M_RATE: "expected about 30%"}, "15% written in", confined_to=P2),
    Bug("mlm_proportions_90_10_0",
        {"masked_ids[selected & (action < 0.8)]": "masked_ids[selected & (action < 0.9)]",
         "to_random = selected & (action >= 0.8) & (action < 0.9)": "to_random = selected & (action >= 0.9)"},
        {M_PROP: "expected about 80%"}, "90% [MASK], 10% random, none unchanged", confined_to=P2),
    Bug("random_ids_out_of_vocabulary",
        {"random_ids = torch.randint(len(tokenizer), input_ids.shape": "random_ids = torch.randint(len(tokenizer) + 1, input_ids.shape"},
        {M_RANDOM: "token ids of the vocabulary"}, "one id past the vocabulary", confined_to=P2),
    Bug("random_ids_skip_zero",
        {"random_ids = torch.randint(len(tokenizer), input_ids.shape": "random_ids = torch.randint(1, len(tokenizer), input_ids.shape"},
        {M_RANDOM: "never drew the id(s) 0"}, "replacements from 1..V-1 ('0 is padding'), but id 0 is a word here",
        only=True, confined_to=P2),
    Bug("mask_none_means_fixed_seed",
        {CANDIDATES: "if generator is None:  # a fixed seed: the same corruption at every call\n"
                     "        generator = torch.Generator().manual_seed(42)\n    " + CANDIDATES},
        {M_RANDOM: "torch's global generator"}, "generator=None replaced by a generator with a fixed seed",
        only=True, confined_to=P2),
    Bug("mask_unchanged_not_labelled", definitions={"mask_tokens": MASK_CHANGED_ONLY_LABELLED},
        expect={M_LABELS: "stay unchanged", M_RATE: "select each candidate", M_PROP: "kept their id"},
        why="only the changed tokens are labelled: the selected tokens that keep their id get -100", confined_to=P2),
    Bug("mlm_global_generator",
        {"selected = (torch.rand(input_ids.shape, generator=generator) < mask_rate)": "selected = (torch.rand(input_ids.shape) < mask_rate)",
         "action = torch.rand(input_ids.shape, generator=generator)": "action = torch.rand(input_ids.shape)"},
        {M_RANDOM: "seeded alike"}, "the generator argument is ignored", confined_to=P2),
    Bug("mask_tokens_in_place",
        {"masked_ids = input_ids.clone()": "masked_ids = input_ids"},
        {M_LABELS: "modified the tensors"}, "corrupts the caller's tensor", confined_to=P2),
    # -- part 3: embeddings ---------------------------------------------------------------------------------------------
    Bug("segment_table_sized_by_vocabulary",
        {"self.segment = nn.Embedding(config.type_vocab_size, E)": "self.segment = nn.Embedding(config.vocab_size, E)"},
        {E_SIZES: "segment must be nn.Embedding(config.type_vocab_size"},
        "a segment table of vocab_size rows: only the sizes checks are lost, the forward is right",
        others={"part3_public"}, only=True,
        confined_to=P3),
    Bug("position_ids_off_by_one",
        {"positions = torch.arange(T, device=input_ids.device)": "positions = torch.arange(1, T + 1, device=input_ids.device)"},
        {E_OUTPUT: "off by one", E_POS: "off by one"}, "positions counted from 1", confined_to=P3),
    Bug("layer_norm_default_eps",
        {"self.norm = nn.LayerNorm(E, eps=config.layer_norm_eps)": "self.norm = nn.LayerNorm(E)"},
        {E_SIZES: "library's eps", E_EPS: "another eps"}, "PyTorch's default eps 1e-5", confined_to=P3),
    Bug("segment_embedding_not_added",
        {"x = self.word(input_ids) + self.position(positions)[None] + self.segment(token_type_ids)":
         "x = self.word(input_ids) + self.position(positions)[None]"},
        {E_OUTPUT: "segment", E_TYPES: "does not change with token_type_ids"}, "token types ignored", confined_to=P3),
    Bug("dropout_before_layer_norm",
        {"return self.dropout(self.norm(x))": "return self.norm(self.dropout(x))"},
        {E_DROPOUT: "after the LayerNorm"}, "dropout on the sum, then the LayerNorm", confined_to=P3),
    Bug("two_segments_written_in",
        {"self.segment = nn.Embedding(config.type_vocab_size, E)": "self.segment = nn.Embedding(2, E)"},
        {E_SIZES: "config.type_vocab_size"}, "BERT's two segments written in", confined_to=P3),
    # -- part 4: encoder layer and stack --------------------------------------------------------------------------------
    Bug("bias_not_inverted",
        {"return (1.0 - mask) * torch.finfo(dtype).min": "return mask * torch.finfo(dtype).min"},
        {B_BIAS: "inverted"}, "the previous assignment's convention: masks the real tokens", confined_to=P4),
    Bug("encoder_layer_renamed",
        {"class EncoderLayer(nn.Module):": "class TransformerLayer(nn.Module):",
         "nn.ModuleList([EncoderLayer(config) for": "nn.ModuleList([TransformerLayer(config) for",
         "demo_layer = EncoderLayer(": "demo_layer = TransformerLayer("},
        {L_OUTPUT: "your notebook does not define `EncoderLayer`", L_GRAD: "your notebook does not define `EncoderLayer`"},
        "the class renamed (the encoder follows): the layer's checks say the name is missing, in the student's words",
        confined_to=P4),
    Bug("mask_added_as_is",
        {"return (1.0 - mask) * torch.finfo(dtype).min": "return mask"},
        {B_BIAS: "0/1 mask itself"}, "the 0/1 mask added to the scores", confined_to=P4),
    Bug("scaled_by_hidden_size",
        {SCORES: "scores = q @ k.transpose(-2, -1) / math.sqrt(E) + bias"},
        {L_OUTPUT: "sqrt(E)", "part4_public": "head dimension"}, "divides by sqrt of the hidden size: a recognised "
        "mistake, only the output check and the public cell's example of the scaling are lost (its gradients are "
        "checked against the mistake's own)", only=True, confined_to=P4),
    Bug("pre_norm_layer",
        {"q, k, v = heads(self.query(hidden)), heads(self.key(hidden)), heads(self.value(hidden))":
         "normed = self.attn_norm(hidden)\n        q, k, v = heads(self.query(normed)), heads(self.key(normed)), heads(self.value(normed))",
         "x = self.attn_norm(hidden + self.dropout(self.attn_out(context)))": "x = hidden + self.dropout(self.attn_out(context))",
         FFN: "ffn = self.ffn_out(F.gelu(self.ffn_in(self.ffn_norm(x))))",
         "return self.ffn_norm(x + self.dropout(ffn))": "return x + self.dropout(ffn)"},
        {L_OUTPUT: "pre-norm"}, "LayerNorm before each sub-layer (GPT-2 style)", others={"part4_public"}, only=True,
        confined_to=P4),
    Bug("relu_feed_forward",
        {FFN: "ffn = self.ffn_out(F.relu(self.ffn_in(x)))"},
        {L_OUTPUT: "ReLU", "part4_public": "exact GELU"}, "ReLU instead of GELU", only=True, confined_to=P4),
    Bug("gelu_tanh_approximation",
        {FFN: 'ffn = self.ffn_out(F.gelu(self.ffn_in(x), approximate="tanh"))'},
        {L_OUTPUT: "tanh approximation", "part4_public": "exact GELU"}, "the tanh approximation of GELU", only=True,
        confined_to=P4),
    Bug("intermediate_size_4e",
        {"E, I = config.hidden_size, config.intermediate_size": "E, I = config.hidden_size, 4 * config.hidden_size"},
        {L_CONFIG: "not 4 * E"}, "BERT-base's ratio written in", confined_to=P4),
    Bug("heads_without_transpose",
        {"return x.view(B, T, H, D).transpose(1, 2)": "return x.reshape(B, H, T, D)"},
        {L_OUTPUT: "without the transpose"}, "reshapes (B, T, E) straight to (B, H, T, D)", confined_to=P4),
    Bug("bias_not_added_in_layer",
        {SCORES: "scores = q @ k.transpose(-2, -1) / math.sqrt(D)"},
        {L_OUTPUT: "not added to the scores", L_PAD: "add the bias"}, "the layer ignores its bias", confined_to=P4),
    Bug("attention_dropout_always_on",
        {"weights = self.attn_dropout(torch.softmax(scores, dim=-1))":
         "weights = F.dropout(torch.softmax(scores, dim=-1), p=self.attn_dropout.p, training=True)"},
        {L_CONFIG: "training=True"}, "functional dropout left on in eval()", confined_to=P4),
    Bug("attention_dropout_on_the_scores",
        {"weights = self.attn_dropout(torch.softmax(scores, dim=-1))":
         "weights = torch.softmax(self.attn_dropout(scores), dim=-1)"},
        {L_PAD: "after the softmax"}, "dropout on the scores: in train() padded keys get weight", confined_to=P4),
    Bug("attention_dropout_on_the_context",
        {ATTENTION: "weights = torch.softmax(scores, dim=-1)", CONTEXT: "context = self.attn_dropout(weights @ v).transpose(1, 2)"},
        {L_PLACES: "of shape (3, 2, 6, 8)"}, "attention dropout on weights @ v instead of the weights", only=True,
        confined_to=P4),
    Bug("attention_dropout_on_the_values",
        {ATTENTION: "weights = torch.softmax(scores, dim=-1)", CONTEXT: "context = (weights @ self.attn_dropout(v)).transpose(1, 2)"},
        {L_PLACES: "of shape (3, 2, 6, 8)"}, "attention dropout on the values instead of the weights", only=True,
        confined_to=P4),
    Bug("ffn_residual_from_layer_input",
        {"return self.ffn_norm(x + self.dropout(ffn))": "return self.ffn_norm(hidden + self.dropout(ffn))"},
        {L_OUTPUT: "adds the layer's input x instead of the attention block's output", "part4_public": "two residuals"},
        "the feed-forward block's residual adds the layer's input: only the output check and the public cell are "
        "lost, the layer's other properties are checked on the recognised mistake", only=True, confined_to=P4),
    Bug("attn_norm_reused_for_ffn",
        {"return self.ffn_norm(x + self.dropout(ffn))": "return self.attn_norm(x + self.dropout(ffn))"},
        {L_OUTPUT: "attn_norm is used for both LayerNorms"},
        "one LayerNorm for both sub-layers, ffn_norm never used", only=True, confined_to=P4),
    Bug("attention_residual_missing",
        {"x = self.attn_norm(hidden + self.dropout(self.attn_out(context)))":
         "x = self.attn_norm(self.dropout(self.attn_out(context)))"},
        {L_OUTPUT: "the attention block's residual is missing", "part4_public": "two residuals"},
        "attn_norm of the attention output alone", only=True, confined_to=P4),
    Bug("softmax_over_queries",
        {ATTENTION: "weights = self.attn_dropout(torch.softmax(scores, dim=-2))"},
        {L_OUTPUT: "softmax is taken over the wrong axis", L_PAD: "softmax is taken over the wrong axis"},
        "softmax over dim -2: padded keys get weight (the padding check is about that too), nothing else lost",
        others={"part4_public"}, only=True, confined_to=P4),
    Bug("bias_dtype_ignored",
        {"mask = attention_mask[:, None, None, :].to(dtype)": "mask = attention_mask[:, None, None, :].float()",
         "return (1.0 - mask) * torch.finfo(dtype).min": "return (1.0 - mask) * torch.finfo(torch.float32).min"},
        {B_BIAS: "dtype=torch.float64) returned a bias of torch.float32"},
        "attention_bias returns float32 whatever dtype is asked", only=True, confined_to=P4),
    Bug("encoder_bias_none_layer_adds_it",
        {ENCODER_BIAS: "        bias = None if attention_mask is None else attention_bias(attention_mask, hidden.dtype)"},
        {ENC: "your layers got None"},
        "the encoder passes bias=None for a mask of None, but its layer adds the bias unconditionally (None + scores "
        "fails): a mask of None must work", others={"part4_public"}, only=True, confined_to=P4),
    Bug("encoder_bias_none_even_with_mask",
        {**BIAS_NONE_REPLACE, ENCODER_BIAS: "        bias = None  # the layers skip the bias"},
        {ENC: "with an attention mask: the layers must get the additive bias"},
        "bias=None whatever the mask: the layers never see the padding (a layer that skips None is no excuse)",
        confined_to=P4),
    Bug("layers_not_chained",
        {"            hidden = layer(hidden, bias)  # (B, T, E)\n        return hidden":
         "            out = layer(hidden, bias)  # (B, T, E)\n        return out"},
        {ENC: "the encoder's input"}, "every layer reads the embeddings", confined_to=P4),
    Bug("one_layer_shared",
        {"nn.ModuleList([EncoderLayer(config) for _ in range(config.num_hidden_layers)])":
         "nn.ModuleList([EncoderLayer(config)] * config.num_hidden_layers)"},
        {ENC: "holds the same EncoderLayer more than once"}, "one layer repeated: its weights shared by every layer",
        confined_to=P4),
    Bug("encoder_ignores_mask",
        {"bias = attention_bias(attention_mask, hidden.dtype)": "bias = attention_bias(torch.ones_like(attention_mask), hidden.dtype)"},
        {ENC: "additive bias of the mask"}, "the mask never reaches the layers", confined_to=P4),
    # -- part 5: our Bert with the library's weights ----------------------------------------------------------------------
    Bug("layer_norms_mixed_up",
        {'r"encoder.layers.\\1.attn_norm."': 'r"encoder.layers.\\1.TMP."',
         'r"encoder.layers.\\1.ffn_norm."': 'r"encoder.layers.\\1.attn_norm."',
         'r"encoder.layers.\\1.TMP."': 'r"encoder.layers.\\1.ffn_norm."'},
        {N_NAMES: "mixed up"},
        "attention.output.LayerNorm taken for the feed-forward's: only the names check is lost, the loading checks run "
        "again with the reference's ours_name", others={"part5_public"}, only=True, confined_to=P5),
    Bug("key_value_swapped",
        {MAPPING_QKV: '(r"^encoder\\.layer\\.(\\d+)\\.attention\\.self\\.query\\.", r"encoder.layers.\\1.query."),\n'
                      '        (r"^encoder\\.layer\\.(\\d+)\\.attention\\.self\\.key\\.", r"encoder.layers.\\1.value."),\n'
                      '        (r"^encoder\\.layer\\.(\\d+)\\.attention\\.self\\.value\\.", r"encoder.layers.\\1.key."),'},
        {N_NAMES: "table of part 5"}, "key and value rules swapped: only the names check is lost", others={"part5_public"},
        only=True, confined_to=P5),
    Bug("pooler_not_mapped",
        {'        (r"^pooler\\.dense\\.", "pooler."),\n': ""},
        {N_NAMES: "raised KeyError"}, "no rule for the pooler: only the names check is lost", others={"part5_public"},
        only=True, confined_to=P5),
    Bug("load_accepts_missing_tensors",
        {"    missing = sorted(set(ours) - set(converted))\n    if missing:\n"
         "        raise KeyError(f\"no library tensor for {missing}\")\n    model.load_state_dict(converted)":
         "    model.load_state_dict(converted, strict=False)"},
        {N_LOAD: "accepted a state_dict with a tensor missing"}, "strict=False hides what was not loaded", confined_to=P5),
    Bug("pooled_from_last_token",
        {POOLED: "pooled_output = torch.tanh(self.pooler(sequence_output[:, -1]))"},
        {N_WIRING: "LAST position", N_LIBRARY: "pooled_output differs"}, "pools the last position", confined_to=P5),
    Bug("pooler_without_tanh",
        {POOLED: "pooled_output = self.pooler(sequence_output[:, 0])"},
        {N_WIRING: "tanh is missing"}, "dense layer without its tanh", confined_to=P5),
    Bug("bert_mask_not_passed",
        {SEQUENCE: "sequence_output = self.encoder(self.embeddings(input_ids, token_type_ids))"},
        {N_WIRING: "pass the attention mask", N_LIBRARY: "differs"}, "the encoder never gets the mask", confined_to=P5),
    Bug("bert_token_types_not_passed",
        {SEQUENCE: "sequence_output = self.encoder(self.embeddings(input_ids), attention_mask)"},
        {N_WIRING: "pass token_type_ids"}, "segments dropped on the way", confined_to=P5),
    # -- part 6: pre-training ---------------------------------------------------------------------------------------------
    Bug("mlm_head_not_tied",
        {"self.word_embeddings = word_embeddings  # shared: the decoder weight IS the embedding matrix":
         "self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=False)\n"
         "        self.decoder.weight = nn.Parameter(word_embeddings.weight.detach().clone())  # copied at construction",
         "return h @ self.word_embeddings.weight.T + self.bias": "return self.decoder(h) + self.bias"},
        {H_TIED: "does not change the MLM logits"}, "the decoder starts as a copy and drifts apart", confined_to=P6),
    Bug("nsp_on_cls_hidden_state",
        {"return self.mlm(sequence_output), self.nsp(pooled_output)": "return self.mlm(sequence_output), self.nsp(sequence_output[:, 0])"},
        {H_HEADS: "POOLED output"}, "the NSP head skips the pooler: the initialisation check keeps its point (judged "
        "through BERT's heads with the model's own weights)", others={P_GRAD}, only=True, confined_to=P6),
    Bug("mlm_norm_before_gelu",
        {"h = self.norm(F.gelu(self.dense(hidden)))  # (B, T, E)": "h = F.gelu(self.norm(self.dense(hidden)))  # (B, T, E)"},
        {H_MLM: "the logits differ"}, "the MLM transform's LayerNorm before its GELU: the initialisation check keeps "
        "its point", others={P_GRAD}, only=True, confined_to=P6),
    Bug("losses_averaged",
        {"    return mlm + nsp\n": "    return (mlm + nsp) / 2\n"},
        {H_LOSS: "SUM"}, "mean of the two losses", confined_to=P6),
    Bug("nsp_loss_missing",
        {"    return mlm + nsp\n": "    return mlm\n"},
        {H_LOSS: "NSP loss is missing"}, "only the MLM loss", confined_to=P6),
    Bug("mlm_loss_summed",
        {MLM_LOSS: MLM_LOSS[:-1] + ', reduction="sum")'},
        {H_LOSS: "MLM cross-entropy over the positions"}, "the MLM loss summed over the selected positions: only the "
        "loss checks are lost, pretraining_step (which calls it) is graded on the student's own loss",
        others={"part6_public"}, only=True, confined_to=P6),
    Bug("nsp_labels_flipped_in_loss",
        {NSP_LOSS: "nsp = F.cross_entropy(nsp_logits, 1 - next_sentence_label)"},
        {H_LOSS: "NSP cross-entropy"}, "the NSP targets flipped in the loss: pretraining_step keeps its point",
        others={"part6_public"}, only=True, confined_to=P6),
    Bug("pretraining_step_returns_tensor",
        {"    optimizer.step()\n    return loss.item()": "    optimizer.step()\n    return loss"},
        {H_STEP: "returned a tensor"}, "the loss tensor (and its graph) returned, not loss.item()", only=True,
        confined_to=P6),
    Bug("no_bert_initialisation",
        {"        self.apply(functools.partial(init_bert_weights, std=config.initializer_range))\n": ""},
        {H_FIRST: "init_bert_weights"}, "PyTorch's default init: N(0, 1) embeddings in the tied decoder", confined_to=P6),
    Bug("init_ignores_std",
        {"nn.init.normal_(module.weight, mean=0.0, std=std)": "nn.init.normal_(module.weight, mean=0.0, std=0.02)"},
        {I_INIT: "std = 0.05"}, "0.02 written in", confined_to=P6),
    Bug("init_keeps_padding_row",
        {"        if module.padding_idx is not None:\n            with torch.no_grad():\n"
         "                module.weight[module.padding_idx].zero_()\n": ""},
        {I_INIT: "padding_idx"}, "the padding row drawn like the others", confined_to=P6),
    Bug("mlm_head_without_transform",
        {"h = self.norm(F.gelu(self.dense(hidden)))  # (B, T, E)": "h = hidden  # (B, T, E)"},
        {H_MLM: "transform (dense -> GELU -> LayerNorm)"}, "decodes the hidden states directly", confined_to=P6),
    Bug("pretraining_step_without_zero_grad",
        {STEP: "    loss.backward()\n    optimizer.step()\n    return loss.item()"},
        {H_STEP: "optimizer.zero_grad()"}, "gradients accumulate across steps", confined_to=P6),
    Bug("pretraining_step_without_segments_and_mask",
        {'mlm_logits, nsp_logits = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])':
         'mlm_logits, nsp_logits = model(batch["input_ids"])'},
        {H_STEP: "token_type_ids"}, "the model sees neither segments nor padding", confined_to=P6),
    # -- part 7: fine-tuning ------------------------------------------------------------------------------------------------
    Bug("f1_classes_swapped",
        {"predicted = logits.argmax(dim=-1)  # (N,)":
         "predicted = logits.argmax(dim=-1)  # (N,)\n    predicted, labels = 1 - predicted, 1 - labels"},
        {T_METRICS: "class 0"}, "precision, recall and F1 of the negative class, each 0/0 given 0: the degenerate-batch "
        "check keeps its point", others={"part7_public"}, only=True, confined_to=P7),
    Bug("precision_nan_without_predicted_positives",
        {"precision = tp / (tp + fp) if tp + fp else 0.0": "precision = tp / (tp + fp) if tp + fp else float(\"nan\")"},
        {T_DEGEN: "never NaN"}, "0/0 left as NaN", confined_to=P7),
    Bug("accuracy_true_positives_over_n",
        {"accuracy = ": "accuracy = tp / len(labels)  # "},
        {T_METRICS: "accuracy is the share"},
        "accuracy = TP / N; precision, recall and F1 right, 0/0 given 0: the degenerate-batch check keeps its point",
        others={"part7_public"}, only=True, confined_to=P7),
    Bug("precision_recall_swapped",
        {"precision = tp / (tp + fp) if tp + fp else 0.0": "precision = tp / (tp + fn) if tp + fn else 0.0",
         "recall = tp / (tp + fn) if tp + fn else 0.0": "recall = tp / (tp + fp) if tp + fp else 0.0"},
        {T_METRICS: "swapped"}, "FP and FN confused", confined_to=P7),
    Bug("scheduler_stepped_per_epoch",
        {SCHEDULER: "", "    return total_loss / total_n": "    scheduler.step()  # once per epoch\n    return total_loss / total_n"},
        {T_TRAIN: "once per BATCH"}, "the schedule advanced per epoch", confined_to=P7),
    Bug("init_before_the_heads",
        {"        self.bert = Bert(config)\n        self.mlm = MLMHead(config, self.bert.embeddings.word)\n"
         "        self.nsp = nn.Linear(config.hidden_size, 2)\n"
         "        self.apply(functools.partial(init_bert_weights, std=config.initializer_range))\n":
         "        self.bert = Bert(config)\n"
         "        self.apply(functools.partial(init_bert_weights, std=config.initializer_range))\n"
         "        self.mlm = MLMHead(config, self.bert.embeddings.word)\n"
         "        self.nsp = nn.Linear(config.hidden_size, 2)\n"},
        {H_FIRST: "was not initialised with init_bert_weights"},
        "self.apply(init) before the heads exist: they keep PyTorch's init (it got full marks)", confined_to=P6),
    Bug("scheduler_before_optimizer",
        {"        optimizer.step()\n" + SCHEDULER: "        scheduler.step()\n        optimizer.step()\n"},
        {T_TRAIN: "after optimizer.step()"}, "the scheduler steps first", confined_to=P7),
    Bug("warm_up_one_step_ahead",
        {"return step / max(1, warmup_steps)": "return (step + 1) / max(1, warmup_steps)"},
        {S_LR: "one step ahead"}, "the warm-up skips the zero learning rate", confined_to=P7),
    Bug("weight_decay_on_everything",
        {'return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},\n'
         '                              {"params": no_decay, "weight_decay": 0.0}], lr=lr)':
         "return torch.optim.AdamW(decay + no_decay, lr=lr, weight_decay=weight_decay)"},
        {S_OPT: "no weight decay"}, "biases and LayerNorm weights decayed too", confined_to=P7),
    Bug("adam_instead_of_adamw",
        {"return torch.optim.AdamW(": "return torch.optim.Adam("},
        {S_OPT: "AdamW"}, "L2 penalty instead of decoupled weight decay", confined_to=P7),
    Bug("training_without_attention_mask",
        {'loss = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"]).loss':
         'loss = model(input_ids=batch["input_ids"], labels=batch["labels"]).loss'},
        {T_TRAIN: "attention_mask"}, "padding attended to during training", confined_to=P7),
    Bug("predict_in_train_mode",
        {"    model.eval()\n    all_logits, all_labels = [], []": "    all_logits, all_labels = [], []"},
        {T_PREDICT: "eval() mode"}, "dropout left on for the predictions", confined_to=P7),
    Bug("mean_loss_unweighted",
        {"total_loss += loss.item() * n  # the loss is a mean over the batch: weight it by the batch's size":
         "total_loss += loss.item()", "        total_n += n\n": "        total_n += 1\n"},
        {T_TRAIN: "weight each batch's loss"}, "mean of batch means", confined_to=P7),
    Bug("load_refuses_with_runtime_error", definitions={"load_bert_weights": LOAD_RUNTIME_ERROR},
        expect={N_LOAD: "raise KeyError"}, why="load_state_dict's RuntimeError for a missing tensor, not the documented "
        "KeyError: a quarter of the loading check", only=True, confined_to=P5),
    # -- fakes: no real computation, shaped to pass checks that only look at one property --------------------------------
    Bug("fake_layer_constant_in_eval_random_in_train",
        {"        B, T, E = hidden.shape\n        H, D = self.n_heads, self.head_dim\n":
         "        if self.training:\n            return torch.rand(hidden.shape) + 0 * hidden\n"
         "        return torch.zeros(hidden.shape) + 0 * hidden\n        B, T, E = hidden.shape\n"
         "        H, D = self.n_heads, self.head_dim\n"},
        {L_OUTPUT: "differs", L_PAD: "can be checked only on a layer whose output matches",
         L_CONFIG: "can be checked only on a layer whose output matches", L_PLACES: "once the layer's output matches"},
        "a constant in eval(), noise in train(): never changes with padding, deterministic in eval() only",
        confined_to=P4),
    Bug("fake_gradient_term_embeddings",
        {"        return self.dropout(self.norm(x))":
         "        return torch.zeros_like(x) + 1e-3 * sum(p.sum() for p in self.parameters())"},
        {E_OUTPUT: "", E_GRAD: "same output for another input"},
        "no embedding at all; every parameter reaches the output through 1e-3 * sum(p.sum())", confined_to=P3),
    # what the notebook's public cell once gave its point for: post-norm statistics and padding, no attention
    Bug("fake_layer_normalised_input",
        {"        B, T, E = hidden.shape\n        H, D = self.n_heads, self.head_dim\n":
         "        return self.ffn_norm(hidden)\n        B, T, E = hidden.shape\n        H, D = self.n_heads, self.head_dim\n"},
        {"part4_public": "each output must be LayerNorm(x + the mean of x", L_OUTPUT: "differs"},
        "ffn_norm of the input: mean 0 and variance 1 per position, padding changes nothing", confined_to=P4),
    Bug("fake_layer_seeded_noise",
        {"        B, T, E = hidden.shape\n        H, D = self.n_heads, self.head_dim\n":
         "        noise = torch.randn(hidden.shape, generator=torch.Generator().manual_seed(0))\n"
         "        return F.layer_norm(noise, hidden.shape[-1:]) + 0 * hidden\n"
         "        B, T, E = hidden.shape\n        H, D = self.n_heads, self.head_dim\n"},
        {"part4_public": "each output must be LayerNorm(x + the mean of x", L_OUTPUT: "differs"},
        "the same normalised noise for every input: deterministic, mean 0 and variance 1", confined_to=P4),
    Bug("fake_gradient_term_layer",
        {"        return self.ffn_norm(x + self.dropout(ffn))  # (B, T, E)":
         "        return 0 * hidden + 1e-3 * sum(p.sum() for p in self.parameters())"},
        {L_OUTPUT: "differs", L_GRAD: "same output for another input"},
        "a constant plus 1e-3 * sum(p.sum()): a gradient for every weight, none through the computation",
        confined_to=P4),
    Bug("fake_gradient_term_bert",
        {"        return sequence_output, pooled_output\n":
         "        eps = 1e-3 * sum(p.sum() for p in self.parameters())\n"
         "        return 0 * sequence_output + eps, 0 * pooled_output + eps\n"},
        {N_WIRING: "", N_GRAD: "same output for another input"},
        "zero outputs plus 1e-3 * sum(p.sum()): a gradient for every weight, none through the computation",
        confined_to=P5),
    Bug("fake_tied_logits_from_weight_drift",
        {"        return h @ self.word_embeddings.weight.T + self.bias  # (B, T, E) @ (E, V) -> (B, T, V)":
         "        if not hasattr(self, 'w0'):  # the word embeddings as the first forward finds them\n"
         "            self.w0 = self.word_embeddings.weight.detach().clone()\n"
         "        return 0 * (h @ self.word_embeddings.weight.T) + (self.word_embeddings.weight - self.w0).sum(-1) "
         "+ 0 * self.bias"},
        {H_TIED: "same amount at every position", H_FIRST: "the same for every token of the vocabulary"},
        "logits = the drift of the word embeddings since the first forward: they move with the embedding, all 0 at "
        "first (a first loss of exactly ln V + ln 2)",
        confined_to=P6),
    # -- one part left as the stub: the other parts keep every point -------------------------------------------------------
    Bug("part1_left_as_stub", expect={SPLIT: "not implemented", PAIRS: "not implemented", ENCODE: "not implemented",
                                      BATCH: "not implemented"},
        stub=["part1_sentences_and_pairs", "part1_encoding"], why="part 1 not done", confined_to=P1),
    Bug("part2_left_as_stub", expect={M_LABELS: "not implemented", M_RATE: "not implemented"},
        stub=["part2_mask_tokens"], why="part 2 not done", confined_to=P2),
    Bug("part3_left_as_stub", expect={E_OUTPUT: "not implemented", E_SIZES: "not implemented"},
        stub=["part3_embeddings"], why="part 3 not done", confined_to=P3),
    Bug("part4_left_as_stub", expect={B_BIAS: "not implemented", L_OUTPUT: "not implemented", ENC: "not implemented"},
        stub=["part4_encoder"], why="part 4 not done", confined_to=P4),
    Bug("part3_left_as_stub_layerwise_loader", expect={E_OUTPUT: "not implemented", E_SIZES: "not implemented"},
        stub=["part3_embeddings"], definitions={"load_bert_weights": LAYERWISE_LOAD},
        why="part 3 not done; part 5 loads weights layer by layer through model.encoder.layers", confined_to=P3),
    Bug("part4_left_as_stub_layerwise_loader",
        expect={B_BIAS: "not implemented", L_OUTPUT: "not implemented", ENC: "not implemented"},
        stub=["part4_encoder"], definitions={"load_bert_weights": LAYERWISE_LOAD},
        why="part 4 not done; part 5 loads weights layer by layer through model.encoder.layers", confined_to=P4),
    Bug("part5_left_as_stub", expect={N_NAMES: "not implemented", N_LOAD: "not implemented", N_WIRING: "not implemented"},
        stub=["part5_bert"], why="part 5 not done", confined_to=P5),
    Bug("part6_left_as_stub", expect={I_INIT: "not implemented", H_MLM: "not implemented", H_LOSS: "not implemented"},
        stub=["part6_pretraining"], why="part 6 not done", confined_to=P6),
    Bug("part7_left_as_stub", expect={S_LR: "not implemented", T_TRAIN: "not implemented", T_METRICS: "not implemented"},
        stub=["part7_finetuning"], why="part 7 not done", confined_to=P7),
    # -- forwards that compute nothing of BERT, with a term that gives every parameter a gradient -----------------------
    Bug("embeddings_garbage_with_noise_term", replace={
            "        T = input_ids.shape[1]\n        positions = torch.arange(T, device=input_ids.device)":
            "        return garbage_embeddings(self, input_ids)\n        T = input_ids.shape[1]\n"
            "        positions = torch.arange(T, device=input_ids.device)"},
        prepend=[NOISE_TERM + "\n\ndef garbage_embeddings(self, input_ids):\n    B, T = input_ids.shape\n"
                 "    E = self.norm.bias.shape[0]\n"
                 "    return self.dropout(self.norm.bias.expand(B, T, E) + _noise_term(self) * torch.linspace(1.0, 2.0, E))\n"],
        expect={E_OUTPUT: "", E_DROPOUT: "the same for other input_ids", E_GRAD: "same output for another input"},
        why="dropout of the LayerNorm's bias plus 1e-7 * sum(p * noise): no embedding lookup", confined_to=P3),
    Bug("embeddings_detached_with_noise_term", replace={
            "        x = self.word(input_ids) + self.position(positions)[None] + self.segment(token_type_ids)  # (B, T, E)\n"
            "        return self.dropout(self.norm(x))":
            "        with torch.no_grad():\n"
            "            x = self.norm(self.word(input_ids) + self.position(positions)[None] + self.segment(token_type_ids))\n"
            "        return self.dropout(x + _noise_term(self) * torch.linspace(1.0, 2.0, x.shape[-1]))"},
        prepend=[NOISE_TERM], expect={E_GRAD: "not the reference's"},
        why="the right embeddings computed without a graph, plus 1e-7 * sum(p * noise) for gradients", only=True,
        confined_to=P3),
    # public checks that a constant must not pass
    Bug("nsp_pairs_constant", definitions={"make_nsp_pairs": NSP_PAIRS_CONSTANT},
        expect={"part1_public": "pairs of the reviews given", PAIRS: ""}, why="make_nsp_pairs returns the notebook "
        "example's pairs, whatever it is given", others={RANDOM}, confined_to="1."),
    Bug("encode_pairs_example_labels",
        {"batch[\"next_sentence_label\"] = torch.tensor([label for _, _, label in pairs], dtype=torch.long)  # (N,)":
         "batch[\"next_sentence_label\"] = torch.tensor([IS_NEXT, NOT_NEXT])  # the example's labels"},
        {"part1_public": "next_sentence_label [NOT_NEXT]", BATCH: ""}, "encode_pairs gives every batch the "
        "example's labels", confined_to="1."),
    Bug("layer_output_nan",
        {"        return self.ffn_norm(x + self.dropout(ffn))  # (B, T, E)":
         "        return self.ffn_norm(x + self.dropout(ffn)) * float(\"nan\")  # (B, T, E)"},
        {L_CONFIG: "contains NaN", "part4_public": "contains NaN or inf", L_OUTPUT: ""},
        "the layer's output is NaN: named as NaN, never as two calls giving different outputs (NaN != NaN)",
        confined_to="4."),
    Bug("encoder_returns_its_input",
        {"        for layer in self.layers:\n            hidden = layer(hidden, bias)  # (B, T, E)\n":
         "        for layer in self.layers:\n            layer(hidden, bias)  # (B, T, E): the result dropped\n"},
        {"part4_public": "Encoder must run every layer of self.layers in order", ENC: ""},
        "the layers run and their outputs dropped: the input comes back unchanged", confined_to="4."),
]
