"""Correct submissions written differently from the answer key: each must get full marks.

Together they cover the choices the notebook leaves open, written the ways students write them: loops or regular
expressions, the library's tokenizer doing the pair encoding, the library's data-collator style of masking (Bernoulli
draws, the tokenizer's special-tokens mask), position ids in a buffer, -10000 as the padding bias (the original
BERT's), einsum or PyTorch's scaled_dot_product_attention, a tied nn.Linear decoder (the library's way), gradient
clipping, name-based weight-decay groups, metrics with tensors.
"""
from __future__ import annotations

from autograder.corpus import Variant

# -- part 1 -------------------------------------------------------------------------------------------------------
SPLIT_LOOP = '''def split_sentences(text):
    sentences, current, i = [], "", 0
    while i < len(text):
        current += text[i]
        if text[i] in ".!?" and (i + 1 == len(text) or text[i + 1].isspace()):
            sentences.append(current.strip())
            current = ""
        i += 1
    sentences.append(current.strip())
    return [s for s in sentences if s]
'''

PAIRS_REJECTION = '''def make_nsp_pairs(reviews, generator=None):
    pairs = []
    for r, sentences in enumerate(reviews):
        if len(sentences) < 2:
            continue
        i = torch.randint(0, len(sentences) - 1, (1,), generator=generator).item()
        while True:  # draw reviews until one is another non-empty review
            o = torch.randint(0, len(reviews), (1,), generator=generator).item()
            if o != r and len(reviews[o]) > 0:
                break
        j = torch.randint(0, len(reviews[o]), (1,), generator=generator).item()
        pairs += [(sentences[i], sentences[i + 1], IS_NEXT), (sentences[i], reviews[o][j], NOT_NEXT)]
    return pairs
'''

ENCODE_ARITHMETIC = '''def encode_pair(ids_a, ids_b, max_len, cls_id, sep_id, pad_id):
    n_a, n_b = len(ids_a), len(ids_b)
    while n_a + n_b > max_len - 3:
        if n_a >= n_b:
            n_a -= 1
        else:
            n_b -= 1
    tokens = [cls_id] + list(ids_a[:n_a]) + [sep_id] + list(ids_b[:n_b]) + [sep_id]
    segments = [0] * (n_a + 2) + [1] * (n_b + 1)
    n = len(tokens)
    return (tokens + [pad_id] * (max_len - n),
            segments + [0] * (max_len - n),
            [1] * n + [0] * (max_len - n))
'''

ENCODE_PAIRS_STACK = '''def encode_pairs(pairs, tokenizer, max_len):
    rows = []
    for a, b, _ in pairs:
        ids_a = tokenizer(a, add_special_tokens=False)["input_ids"]
        ids_b = tokenizer(b, add_special_tokens=False)["input_ids"]
        rows.append(torch.tensor(encode_pair(ids_a, ids_b, max_len, tokenizer.cls_token_id, tokenizer.sep_token_id,
                                             tokenizer.pad_token_id)))  # (3, max_len)
    stacked = torch.stack(rows)  # (N, 3, max_len)
    return {"input_ids": stacked[:, 0], "token_type_ids": stacked[:, 1], "attention_mask": stacked[:, 2],
            "next_sentence_label": torch.tensor([label for _, _, label in pairs])}
'''

ENCODE_PAIRS_LIBRARY = '''def encode_pairs(pairs, tokenizer, max_len):
    firsts = [a for a, _, _ in pairs]
    seconds = [b for _, b, _ in pairs]
    batch = tokenizer(firsts, seconds, truncation="longest_first", max_length=max_len, padding="max_length",
                      return_tensors="pt")
    return {"input_ids": batch["input_ids"], "token_type_ids": batch["token_type_ids"],
            "attention_mask": batch["attention_mask"], "next_sentence_label": torch.tensor([p[2] for p in pairs])}
'''

# the library's truncation="longest_first" as the fast tokenizers compute it (tokenizers' LongestFirst): it differs from
# the notebook's loop only where A is the longer one, both are cut and an odd token is left (A keeps it); accepted
ENCODE_LIBRARY_TRUNCATION = '''def encode_pair(ids_a, ids_b, max_len, cls_id, sep_id, pad_id):
    budget = max_len - 3
    n1, n2 = len(ids_a), len(ids_b)
    if n1 + n2 > budget:
        swap = n1 > n2
        if swap:
            n1, n2 = n2, n1
        n2 = max(n1, budget - n1)
        if n1 + n2 > budget:
            n1 = budget // 2
            n2 = n1 + budget % 2
        if swap:
            n1, n2 = n2, n1
    a, b = list(ids_a)[:n1], list(ids_b)[:n2]
    ids = [cls_id, *a, sep_id, *b, sep_id]
    types = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    pad = max_len - len(ids)
    return ids + [pad_id] * pad, types + [0] * pad, [1] * len(ids) + [0] * pad
'''

# -- part 2 -------------------------------------------------------------------------------------------------------
MASK_PER_TOKEN_LOOP = '''def mask_tokens(input_ids, attention_mask, tokenizer, mask_rate=0.15, generator=None):
    masked_ids = input_ids.clone()
    labels = torch.full_like(input_ids, -100)
    specials = {tokenizer.cls_token_id, tokenizer.sep_token_id}
    vocab_size = len(tokenizer)
    B, T = input_ids.shape
    for b in range(B):  # one token at a time, as written from the description: 50-100x slower than vectorized
        for t in range(T):
            token = input_ids[b, t].item()
            if attention_mask[b, t].item() == 0 or token in specials:
                continue
            if torch.rand(1, generator=generator).item() >= mask_rate:
                continue
            labels[b, t] = token
            r = torch.rand(1, generator=generator).item()
            if r < 0.8:
                masked_ids[b, t] = tokenizer.mask_token_id
            elif r < 0.9:
                masked_ids[b, t] = torch.randint(vocab_size, (1,), generator=generator).item()
    return masked_ids, labels
'''

MASK_COLLATOR = '''def mask_tokens(input_ids, attention_mask, tokenizer, mask_rate=0.15, generator=None):
    labels = input_ids.clone()
    probability = torch.full(labels.shape, mask_rate)
    special = torch.tensor([tokenizer.get_special_tokens_mask(row, already_has_special_tokens=True)
                            for row in labels.tolist()], dtype=torch.bool)
    probability.masked_fill_(special | (attention_mask == 0), 0.0)
    selected = torch.bernoulli(probability, generator=generator).bool()
    labels[~selected] = -100
    inputs = input_ids.clone()
    replaced = torch.bernoulli(torch.full(labels.shape, 0.8), generator=generator).bool() & selected
    inputs[replaced] = tokenizer.convert_tokens_to_ids(tokenizer.mask_token)
    randomised = torch.bernoulli(torch.full(labels.shape, 0.5), generator=generator).bool() & selected & ~replaced
    words = torch.randint(len(tokenizer), labels.shape, dtype=torch.long, generator=generator)
    inputs[randomised] = words[randomised]
    return inputs, labels
'''

# -- parts 3 and 4 -------------------------------------------------------------------------------------------------
EMBEDDINGS_BUFFER = '''class Embeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.word = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.segment = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.register_buffer("position_ids", torch.arange(config.max_position_embeddings).expand((1, -1)),
                             persistent=False)

    def forward(self, input_ids, token_type_ids=None):
        seq_length = input_ids.size(1)
        position_ids = self.position_ids[:, :seq_length]
        if token_type_ids is None:
            token_type_ids = torch.zeros(input_ids.size(), dtype=torch.long, device=input_ids.device)
        embeddings = self.word(input_ids)
        embeddings = embeddings + self.segment(token_type_ids)
        embeddings = embeddings + self.position(position_ids)
        embeddings = self.norm(embeddings)
        return self.dropout(embeddings)
'''

BIAS_10000 = '''def attention_bias(attention_mask, dtype=torch.float32):
    extended = attention_mask.unsqueeze(1).unsqueeze(2).to(dtype)  # (B, 1, 1, T)
    return (1.0 - extended) * -10000.0
'''

LAYER_EINSUM = '''class EncoderLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.n_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        hidden, inner = config.hidden_size, config.intermediate_size
        self.query, self.key, self.value = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, eps=config.layer_norm_eps)
        self.ffn_in = nn.Linear(hidden, inner)
        self.ffn_out = nn.Linear(inner, hidden)
        self.ffn_norm = nn.LayerNorm(hidden, eps=config.layer_norm_eps)
        self.attn_dropout = nn.Dropout(config.attention_probs_dropout_prob)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.act = nn.GELU()

    def split(self, x):
        return x.reshape(x.shape[0], x.shape[1], self.n_heads, self.head_dim)  # (B, T, H, D)

    def forward(self, hidden, bias):
        q, k, v = self.split(self.query(hidden)), self.split(self.key(hidden)), self.split(self.value(hidden))
        scores = torch.einsum("bihd,bjhd->bhij", q, k) / self.head_dim ** 0.5 + bias  # (B, H, T, T)
        probs = self.attn_dropout(scores.softmax(-1))
        context = torch.einsum("bhij,bjhd->bihd", probs, v).flatten(2)  # (B, T, E)
        attended = self.attn_norm(self.dropout(self.attn_out(context)) + hidden)
        return self.ffn_norm(self.dropout(self.ffn_out(self.act(self.ffn_in(attended)))) + attended)
'''

LAYER_SDPA = '''class EncoderLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.n_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        E = config.hidden_size
        for name in ("query", "key", "value", "attn_out"):
            setattr(self, name, nn.Linear(E, E))
        self.attn_norm = nn.LayerNorm(E, eps=config.layer_norm_eps)
        self.ffn_in = nn.Linear(E, config.intermediate_size)
        self.ffn_out = nn.Linear(config.intermediate_size, E)
        self.ffn_norm = nn.LayerNorm(E, eps=config.layer_norm_eps)
        self.attn_dropout = nn.Dropout(config.attention_probs_dropout_prob)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden, bias):
        B, T, E = hidden.shape
        q, k, v = (m(hidden).view(B, T, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
                   for m in (self.query, self.key, self.value))  # each (B, H, T, D)
        p = self.attn_dropout.p if self.training else 0.0
        context = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=p)  # (B, H, T, D)
        context = context.permute(0, 2, 1, 3).reshape(B, T, E)
        x = self.attn_norm(hidden + self.dropout(self.attn_out(context)))
        return self.ffn_norm(x + self.dropout(self.ffn_out(nn.functional.gelu(self.ffn_in(x)))))
'''

# one head at a time: slices of the projections, the heads concatenated back
LAYER_HEAD_LOOP = '''class EncoderLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.n_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        E, I = config.hidden_size, config.intermediate_size
        self.query, self.key, self.value, self.attn_out = (nn.Linear(E, E) for _ in range(4))
        self.attn_norm = nn.LayerNorm(E, eps=config.layer_norm_eps)
        self.ffn_in, self.ffn_out = nn.Linear(E, I), nn.Linear(I, E)
        self.ffn_norm = nn.LayerNorm(E, eps=config.layer_norm_eps)
        self.attn_dropout = nn.Dropout(config.attention_probs_dropout_prob)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden, bias):
        q, k, v = self.query(hidden), self.key(hidden), self.value(hidden)
        heads = []
        for h in range(self.n_heads):
            part = slice(h * self.head_dim, (h + 1) * self.head_dim)
            scores = q[..., part] @ k[..., part].transpose(1, 2) / self.head_dim ** 0.5 + bias[:, 0]
            heads.append(self.attn_dropout(scores.softmax(-1)) @ v[..., part])
        x = self.attn_norm(hidden + self.dropout(self.attn_out(torch.cat(heads, -1))))
        return self.ffn_norm(x + self.dropout(self.ffn_out(nn.GELU()(self.ffn_in(x)))))
'''

ENCODER_LOOP = '''class Encoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layers = nn.ModuleList()
        for _ in range(config.num_hidden_layers):
            self.layers.append(EncoderLayer(config))

    def forward(self, hidden, attention_mask=None):
        if attention_mask is None:
            attention_mask = hidden.new_ones(hidden.shape[0], hidden.shape[1])
        extended = attention_bias(attention_mask, dtype=hidden.dtype)
        for i in range(len(self.layers)):
            hidden = self.layers[i](hidden, extended)
        return hidden
'''

# -- part 5 -------------------------------------------------------------------------------------------------------
OURS_NAME_REPLACE = '''def ours_name(hf_name):
    if hf_name in ("embeddings.position_ids", "embeddings.token_type_ids"):
        return None
    name = hf_name.replace("encoder.layer.", "encoder.layers.")
    for old, new in [("embeddings.word_embeddings", "embeddings.word"),
                     ("embeddings.position_embeddings", "embeddings.position"),
                     ("embeddings.token_type_embeddings", "embeddings.segment"),
                     ("embeddings.LayerNorm", "embeddings.norm"),
                     ("attention.self.", ""),
                     ("attention.output.dense", "attn_out"),
                     ("attention.output.LayerNorm", "attn_norm"),
                     ("intermediate.dense", "ffn_in"),
                     ("output.dense", "ffn_out"),
                     ("output.LayerNorm", "ffn_norm"),
                     ("pooler.dense", "pooler")]:
        name = name.replace(old, new)
    return name
'''

LOAD_STRICT_TO_KEYERROR = '''    try:
        model.load_state_dict(renamed, strict=True)  # raises for missing and unexpected names
    except RuntimeError as exc:
        raise KeyError(str(exc)) from exc
'''
LOAD_STRICT = '''def load_bert_weights(model, hf_state_dict):
    renamed = {ours_name(k): v for k, v in hf_state_dict.items() if ours_name(k) is not None}
    own = model.state_dict()
    for name, tensor in renamed.items():
        if name in own and own[name].shape != tensor.shape:
            raise ValueError(f"shape mismatch for {name}")
''' + LOAD_STRICT_TO_KEYERROR

# -- part 6 -------------------------------------------------------------------------------------------------------
INIT_DATA = '''def init_bert_weights(module, std=0.02):
    if isinstance(module, (nn.Linear, nn.Embedding)):
        module.weight.data.normal_(mean=0.0, std=std)
    if isinstance(module, nn.Linear) and module.bias is not None:
        module.bias.data.zero_()
    if isinstance(module, nn.Embedding) and module.padding_idx is not None:
        module.weight.data[module.padding_idx].zero_()
    if isinstance(module, nn.LayerNorm):
        module.bias.data.zero_()
        module.weight.data.fill_(1.0)
'''

MLM_HEAD_LINEAR = '''class MLMHead(nn.Module):
    def __init__(self, config, word_embeddings):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = nn.GELU()
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.decoder.weight = word_embeddings.weight  # tied, as in the library
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden):
        return self.decoder(self.norm(self.act(self.dense(hidden)))) + self.bias
'''

# the library's BertLMPredictionHead: the decoder's bias IS the head's `bias` too (`self.decoder.bias = self.bias`)
MLM_HEAD_LINEAR_TIED_BIAS = '''class MLMHead(nn.Module):
    def __init__(self, config, word_embeddings):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)
        self.decoder.weight = word_embeddings.weight
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.decoder.bias = self.bias

    def forward(self, hidden):
        return self.decoder(self.norm(F.gelu(self.dense(hidden))))
'''

LOSS_MODULES = '''def pretraining_loss(mlm_logits, nsp_logits, labels, next_sentence_label):
    loss_fn = nn.CrossEntropyLoss()  # ignore_index is -100 by default
    masked_lm_loss = loss_fn(mlm_logits.view(-1, mlm_logits.size(-1)), labels.view(-1))
    next_sentence_loss = loss_fn(nsp_logits.view(-1, 2), next_sentence_label.view(-1))
    return masked_lm_loss + next_sentence_loss
'''

STEP_CLIPPED = '''def pretraining_step(model, batch, optimizer):
    optimizer.zero_grad(set_to_none=True)
    mlm_logits, nsp_logits = model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"],
                                   attention_mask=batch["attention_mask"])
    loss = pretraining_loss(mlm_logits, nsp_logits, batch["labels"], batch["next_sentence_label"])
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return float(loss.detach())
'''

# zero_grad after the step (the next call starts from zero gradients) and the model called with keyword arguments
STEP_ZERO_GRAD_LAST = '''def pretraining_step(model, batch, optimizer):
    inputs = {k: batch[k] for k in ("input_ids", "token_type_ids", "attention_mask")}
    mlm_logits, nsp_logits = model(**inputs)
    loss = pretraining_loss(mlm_logits, nsp_logits, batch["labels"], batch["next_sentence_label"])
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss.item()
'''

# -- part 7 -------------------------------------------------------------------------------------------------------
LR_FACTOR_HF = '''def lr_factor(step, warmup_steps, total_steps):
    if step < warmup_steps:
        return float(step) / float(max(1, warmup_steps))
    return max(0.0, float(total_steps - step) / float(max(1, total_steps - warmup_steps)))
'''

OPTIMIZER_BY_NAME = '''def make_optimizer(model, lr, weight_decay):
    no_decay = ["bias", "LayerNorm.weight"]
    grouped = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
         "weight_decay": weight_decay},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(grouped, lr=lr)
'''

TRAIN_KWARGS = '''def train_epoch(model, loader, optimizer, scheduler, device):
    model.train()
    losses, sizes = [], []
    for batch in loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        outputs = model(**batch)
        outputs.loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        losses.append(outputs.loss.item())
        sizes.append(len(batch["labels"]))
    return sum(l * s for l, s in zip(losses, sizes)) / sum(sizes)
'''

PREDICT_INFERENCE = '''def predict(model, loader, device):
    model.eval()
    logits, labels = [], []
    with torch.inference_mode():
        for batch in loader:
            out = model(input_ids=batch["input_ids"].to(device), attention_mask=batch["attention_mask"].to(device))
            logits.append(out.logits.cpu())
            labels.append(batch["labels"])
    return torch.cat(logits, dim=0), torch.cat(labels, dim=0)
'''

METRICS_TENSORS = '''def classification_metrics(logits, labels):
    preds = torch.argmax(logits, dim=1)
    tp = ((preds == 1) & (labels == 1)).sum().float()
    fp = ((preds == 1) & (labels == 0)).sum().float()
    fn = ((preds == 0) & (labels == 1)).sum().float()
    precision = torch.where(tp + fp > 0, tp / (tp + fp).clamp(min=1), torch.tensor(0.0))
    recall = torch.where(tp + fn > 0, tp / (tp + fn).clamp(min=1), torch.tensor(0.0))
    f1 = torch.where(2 * tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn).clamp(min=1), torch.tensor(0.0))
    return {"accuracy": (preds == labels).float().mean().item(), "precision": precision.item(),
            "recall": recall.item(), "f1": f1.item()}
'''

# the PyTorch tutorials' epoch loop: the loss summed per example, divided by the size of the loader's dataset
TRAIN_EPOCH_TUTORIAL = '''def train_epoch(model, loader, optimizer, scheduler, device):
    model.train()
    running_loss = 0.0
    for batch in loader:
        input_ids = batch["input_ids"].to(device)
        attention_mask = batch["attention_mask"].to(device)
        labels = batch["labels"].to(device)
        optimizer.zero_grad()
        outputs = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        outputs.loss.backward()
        optimizer.step()
        scheduler.step()
        running_loss += outputs.loss.item() * input_ids.size(0)
    return running_loss / len(loader.dataset)
'''

# the library's way of skipping an absent mask: no bias at all for attention_mask=None, the layer adding one only when
# it gets one
BIAS_NONE_REPLACE = {
    "scores = q @ k.transpose(-2, -1) / math.sqrt(D) + bias  #":
        "scores = q @ k.transpose(-2, -1) / math.sqrt(D)\n"
        "        if bias is not None:  # no mask: every key is real, nothing to add\n"
        "            scores = scores + bias\n        #",
    "        if attention_mask is None:\n"
    "            attention_mask = torch.ones(hidden.shape[:2], dtype=torch.long, device=hidden.device)\n"
    "        bias = attention_bias(attention_mask, hidden.dtype)":
        "        bias = None if attention_mask is None else attention_bias(attention_mask, hidden.dtype)",
}

VARIANTS = [
    Variant("encoder_bias_none_without_mask", replace=BIAS_NONE_REPLACE,
            why="Encoder gives its layers bias=None when attention_mask is None and EncoderLayer adds the bias only "
                "when it is not None (how the library skips an absent mask): the outputs are the reference's"),
    Variant("heads_read_the_bert_they_wrap",
            replace={"        self.nsp = nn.Linear(config.hidden_size, 2)\n":
                     "        self.nsp = nn.Linear(self.bert.config.hidden_size, 2)\n",
                     "        self.mlm = MLMHead(config, self.bert.embeddings.word)\n":
                     "        self.mlm = MLMHead(config, self.bert.input_embeddings())\n",
                     "    def forward(self, input_ids, token_type_ids=None, attention_mask=None):\n"
                     "        \"\"\"input_ids, token_type_ids (None: all 0)":
                     "    def input_embeddings(self):\n        return self.embeddings.word\n\n"
                     "    def forward(self, input_ids, token_type_ids=None, attention_mask=None):\n"
                     "        \"\"\"input_ids, token_type_ids (None: all 0)"},
            why="BertForPretraining sizes its NSP head from self.bert.config (the notebook's Bert sets it) and takes "
                "the word embedding from a method of the student's own Bert: the grader's stand-in for Bert has both "
                "(it lost 3 points of part 6 to AttributeErrors)"),
    Variant("bert_runs_the_encoder_layers_itself",
            replace={"        sequence_output = self.encoder(self.embeddings(input_ids, token_type_ids), attention_mask)"
                     "  # (B, T, E)\n":
                     "        hidden = self.embeddings(input_ids, token_type_ids)  # (B, T, E)\n"
                     "        if attention_mask is None:\n            attention_mask = torch.ones_like(input_ids)\n"
                     "        bias = attention_bias(attention_mask, hidden.dtype)  # (B, 1, 1, T)\n"
                     "        for layer in self.encoder.layers:\n            hidden = layer(hidden, bias)\n"
                     "        sequence_output = hidden\n"},
            why="Bert.forward runs self.encoder.layers (the notebook's attribute) itself with attention_bias: the "
                "grader's stand-in encoder has those layers too (it lost 1.5 to an AttributeError)"),
    Variant("train_epoch_tutorial_average", {"train_epoch": TRAIN_EPOCH_TUTORIAL},
            "the loss summed per example and divided by len(loader.dataset), as in the PyTorch tutorials"),
    Variant("loops_and_arithmetic",
            {"split_sentences": SPLIT_LOOP, "make_nsp_pairs": PAIRS_REJECTION, "encode_pair": ENCODE_ARITHMETIC,
             "encode_pairs": ENCODE_PAIRS_STACK},
            "a character loop for sentences, rejection sampling for the other review, lengths counted down, "
            "tokenizer(s, add_special_tokens=False) and torch.stack"),
    Variant("library_truncation_rule", {"encode_pair": ENCODE_LIBRARY_TRUNCATION, "pretraining_step": STEP_ZERO_GRAD_LAST},
            "encode_pair truncating as the library's fast tokenizers do (the odd token to the longer A), and "
            "pretraining_step calling zero_grad after the step"),
    Variant("library_tokenizer_encodes_pairs", {"encode_pairs": ENCODE_PAIRS_LIBRARY},
            "the library's tokenizer(a, b, truncation='longest_first', padding='max_length') does the encoding"),
    Variant("data_collator_masking", {"mask_tokens": MASK_COLLATOR},
            "the library's DataCollatorForLanguageModeling way: Bernoulli draws and the tokenizer's special-tokens mask"),
    Variant("mask_tokens_per_token_loop", {"mask_tokens": MASK_PER_TOKEN_LOOP},
            "the MLM corruption written as a Python loop over the tokens: correct, and slow on the checks' large "
            "samples, which keep the whole check_seconds for it"),
    Variant("library_style_modules",
            {"Embeddings": EMBEDDINGS_BUFFER, "attention_bias": BIAS_10000, "EncoderLayer": LAYER_EINSUM,
             "Encoder": ENCODER_LOOP},
            "position ids in a buffer, the original BERT's -10000 bias, einsum attention, an indexed loop"),
    Variant("encoder_layer_head_loop", {"EncoderLayer": LAYER_HEAD_LOOP},
            "attention one head at a time (slices of the projections, torch.cat), nn.GELU() built in forward"),
    Variant("sdpa_and_string_mapping",
            {"EncoderLayer": LAYER_SDPA, "ours_name": OURS_NAME_REPLACE, "load_bert_weights": LOAD_STRICT},
            "PyTorch's scaled_dot_product_attention with the bias as attn_mask; names by str.replace; strict loading"),
    Variant("library_style_heads",
            {"init_bert_weights": INIT_DATA, "MLMHead": MLM_HEAD_LINEAR, "pretraining_loss": LOSS_MODULES,
             "pretraining_step": STEP_CLIPPED},
            "in-place .data initialisation, a tied nn.Linear decoder, CrossEntropyLoss modules, gradient clipping"),
    Variant("decoder_weight_and_bias_tied", {"MLMHead": MLM_HEAD_LINEAR_TIED_BIAS},
            "the library's way of tying: an nn.Linear decoder whose weight IS the word embeddings' and whose bias IS "
            "the head's `bias` (one tensor under two names, twice)"),
    Variant("trainer_style_fine_tuning",
            {"lr_factor": LR_FACTOR_HF, "make_optimizer": OPTIMIZER_BY_NAME, "train_epoch": TRAIN_KWARGS,
             "predict": PREDICT_INFERENCE, "classification_metrics": METRICS_TENSORS},
            "the library's schedule formula, no_decay by parameter names, model(**batch), clipping, inference_mode, "
            "metrics with tensors"),
]
