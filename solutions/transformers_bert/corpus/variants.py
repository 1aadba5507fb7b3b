"""Correct submissions written differently from the answer key: each must get full marks.

Each variant rewrites definitions of the answer key with another valid implementation of what the
notebook asks; together they cover the choices the notebook leaves open: the qkv layout, masks used
as bool or float, -1e9 or -inf fill, einsum or matmul, how the random numbers of the MLM corruption
are drawn (always with the generator passed in), how the GRU's final states are selected, how the loops
weight their batches.
"""
from __future__ import annotations

from autograder.corpus import Variant
from bugs import LOOPS_KEEP_B1_LOGITS


# -- part 1 -------------------------------------------------------------------------------------------
SDP_EINSUM_INF = '''def scaled_dot_product(q, k, v, attn_drop_rate=0.0, mask=None):
    scale = q.shape[-1] ** -0.5
    scores = torch.einsum("bhid,bhjd->bhij", q, k) * scale  # (B, H, T, T)
    if mask is not None:
        keep = ~mask.bool()  # True = real token
        scores = scores.masked_fill(~keep.view(mask.shape[0], 1, 1, -1), float("-inf"))
    attention = scores.softmax(dim=-1)
    attention = nn.functional.dropout(attention, p=attn_drop_rate, training=True)
    values = torch.einsum("bhij,bhjd->bhid", attention, v)  # (B, H, T, D)
    return values, attention
'''

SDP_ADDITIVE = '''def scaled_dot_product(q, k, v, attn_drop_rate=0.0, mask=None):
    D = q.shape[-1]
    scores = torch.matmul(q, k.transpose(2, 3)) / D ** 0.5  # (B, H, T, T)
    if mask is not None:
        scores = scores + mask.float().unsqueeze(1).unsqueeze(2) * -1e9  # padding -> -1e9
    weights = F.softmax(scores, dim=3)
    weights = nn.Dropout(attn_drop_rate)(weights)  # a fresh module is in training mode
    return torch.matmul(weights, v), weights
'''

SDP_BAIDU = '''def scaled_dot_product(q, k, v, attn_drop_rate=0.0, mask=None):
    logits = q.matmul(k.permute(0, 1, 3, 2)) * (1.0 / math.sqrt(q.size(3)))
    if mask is not None:
        logits[(mask == 1)[:, None, None, :].expand_as(logits)] = -1e9
    attention = torch.exp(logits - logits.amax(dim=-1, keepdim=True))
    attention = attention / attention.sum(dim=-1, keepdim=True)
    if attn_drop_rate:
        keep = torch.rand_like(attention) >= attn_drop_rate
        attention = attention * keep / (1 - attn_drop_rate)
    return attention @ v, attention
'''

# -- part 2 -------------------------------------------------------------------------------------------
MHA_PER_HEAD = '''class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, n_heads, attn_drop_rate):
        super().__init__()
        assert embed_dim % n_heads == 0
        self.embed_dim, self.n_heads = embed_dim, n_heads
        self.head_dim = embed_dim // n_heads
        self.attn_drop_rate = attn_drop_rate
        self.qkv_proj = nn.Linear(embed_dim, 3 * embed_dim)  # per head [q | k | v]
        self.o_proj = nn.Linear(embed_dim, embed_dim)
        nn.init.xavier_uniform_(self.qkv_proj.weight)
        self.qkv_proj.bias.data.fill_(0)
        nn.init.xavier_uniform_(self.o_proj.weight)
        self.o_proj.bias.data.fill_(0)

    def forward(self, embedding, mask=None):
        batch, length, _ = embedding.size()
        qkv = self.qkv_proj(embedding)  # (B, T, 3E)
        qkv = qkv.reshape(batch, length, self.n_heads, 3 * self.head_dim).permute(0, 2, 1, 3)  # (B, H, T, 3D)
        q, k, v = qkv.chunk(3, dim=-1)  # each (B, H, T, D)
        values, attention = scaled_dot_product(q, k, v, self.attn_drop_rate if self.training else 0, mask)
        values = values.permute(0, 2, 1, 3).reshape(batch, length, self.embed_dim)  # (B, T, E)
        return self.o_proj(values)
'''

MHA_RESHAPE_3 = '''class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, n_heads, attn_drop_rate):
        super().__init__()
        self.embed_dim = embed_dim
        self.n_heads = n_heads
        self.head_dim = embed_dim // n_heads
        self.attn_drop_rate = attn_drop_rate
        self.qkv_proj = nn.Linear(embed_dim, 3 * embed_dim)
        self.o_proj = nn.Linear(embed_dim, embed_dim)
        self._reset_parameters()

    def _reset_parameters(self):
        for module in (self.qkv_proj, self.o_proj):
            nn.init.xavier_uniform_(module.weight)
            nn.init.zeros_(module.bias)

    def forward(self, embedding, mask=None):
        B, T, E = embedding.shape
        qkv = self.qkv_proj(embedding).reshape(B, T, 3, self.n_heads, self.head_dim)  # [all q | all k | all v]
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, H, T, D)
        rate = self.attn_drop_rate if self.training else 0.0
        out, _ = scaled_dot_product(q, k, v, rate, mask=None if mask is None else mask.bool())
        return self.o_proj(out.transpose(1, 2).flatten(2))  # (B, T, E)
'''

# -- part 3 -------------------------------------------------------------------------------------------
BLOCK_KEYWORD = '''class TransformerBlock(nn.Module):
    def __init__(self, embed_dim, n_heads, attn_drop_rate, layer_drop_rate):
        super().__init__()
        self.attn = MultiHeadAttention(embed_dim, n_heads, attn_drop_rate)
        self.dropout = nn.Dropout(p=layer_drop_rate)
        self.norm1 = nn.LayerNorm(embed_dim)
        self.ffn = nn.Sequential(nn.Linear(embed_dim, embed_dim), nn.GELU(), nn.Linear(embed_dim, embed_dim),
                                 nn.Dropout(p=layer_drop_rate))
        self.norm2 = nn.LayerNorm(embed_dim)

    def forward(self, inputs):
        embedding, mask = inputs
        attn_out = self.attn(embedding, mask=mask)  # (B, T, E)
        hidden = self.norm1(embedding + self.dropout(attn_out))
        out = self.norm2(hidden + self.ffn(hidden))
        return (out, mask)
'''

BLOCK_INDEXED = '''class TransformerBlock(nn.Module):
    def __init__(self, embed_dim, n_heads, attn_drop_rate, layer_drop_rate):
        super().__init__()
        self.attn = MultiHeadAttention(embed_dim, n_heads, attn_drop_rate)
        self.norm1, self.norm2 = nn.LayerNorm(embed_dim), nn.LayerNorm(embed_dim)
        layers = [nn.Linear(embed_dim, embed_dim), nn.GELU(), nn.Linear(embed_dim, embed_dim),
                  nn.Dropout(layer_drop_rate)]
        self.ffn = nn.Sequential(*layers)
        self.dropout = nn.Dropout(layer_drop_rate)

    def forward(self, inputs):
        x = inputs[0]
        x = self.norm1(x + self.dropout(self.attn(x, inputs[1])))
        return self.norm2(x + self.ffn(x)), inputs[1]
'''

# -- part 5 -------------------------------------------------------------------------------------------
BERT_LOOP = '''class SmallBERT(nn.Module):
    def __init__(self, n_layers, vocab_size, embed_dim, n_heads, attn_drop_rate, layer_drop_rate):
        super().__init__()
        self.vocab_size = vocab_size
        self.mask_id = vocab_size
        self.embedding = nn.Embedding(num_embeddings=vocab_size + 1, embedding_dim=embed_dim)
        self.pos_encoding = PositionalEncoding(embed_dim, drop_rate=layer_drop_rate)
        blocks = []
        for _ in range(n_layers):
            blocks.append(TransformerBlock(embed_dim, n_heads, attn_drop_rate, layer_drop_rate))
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(embed_dim, vocab_size)

    def forward(self, token_ids, mask=None):
        if mask is not None:
            mask = mask.bool()
        x = self.embedding(token_ids)
        x = self.pos_encoding(x)
        for block in self.blocks:
            x, mask = block((x, mask))
        return self.head(x)
'''

BERT_INDEX0 = '''class SmallBERT(nn.Module):
    def __init__(self, n_layers, vocab_size, embed_dim, n_heads, attn_drop_rate, layer_drop_rate):
        super().__init__()
        self.vocab_size, self.mask_id = vocab_size, vocab_size
        self.embedding = nn.Embedding(vocab_size + 1, embed_dim)
        self.pos_encoding = PositionalEncoding(embed_dim, layer_drop_rate)
        self.blocks = nn.Sequential(*(TransformerBlock(embed_dim, n_heads, attn_drop_rate, layer_drop_rate)
                                      for _ in range(n_layers)))
        self.head = nn.Linear(embed_dim, vocab_size)

    def forward(self, token_ids, mask=None):
        hidden = self.blocks((self.pos_encoding(self.embedding(token_ids)), mask))[0]
        return self.head(hidden)
'''

# -- part 6 -------------------------------------------------------------------------------------------
MASK_MULTINOMIAL = '''def mask_inputs(token_ids, mask_rate, mask_id, vocab_size, pad_id, only_mask=False, generator=None):
    probs = torch.full(token_ids.shape, float(mask_rate))
    selected = torch.bernoulli(probs, generator=generator).bool() & (token_ids != pad_id)
    labels = token_ids.masked_fill(~selected, -100)
    masked_ids = token_ids.clone()
    n = int(selected.sum())
    if only_mask:
        masked_ids[selected] = mask_id
        return masked_ids, labels
    # 0: [MASK], 1: random token, 2: unchanged
    choice = torch.multinomial(torch.tensor([0.8, 0.1, 0.1]), n, replacement=True, generator=generator)
    replacement = token_ids[selected].clone()
    replacement[choice == 0] = mask_id
    n_random = int((choice == 1).sum())
    replacement[choice == 1] = torch.randint(0, vocab_size, (n_random,), generator=generator)
    masked_ids[selected] = replacement
    return masked_ids, labels
'''

MASK_WHERE = '''def mask_inputs(token_ids, mask_rate, mask_id, vocab_size, pad_id, only_mask=False, generator=None):
    is_real = token_ids != pad_id
    selected = (torch.rand(token_ids.shape, generator=generator) < mask_rate) & is_real
    labels = torch.where(selected, token_ids, -100)
    u = torch.rand(token_ids.shape, generator=generator)
    if only_mask:
        u = torch.zeros(token_ids.shape)
    masked_ids = torch.where(selected & (u < 0.8), torch.full_like(token_ids, mask_id), token_ids)
    random_tokens = torch.randint(vocab_size, token_ids.shape, generator=generator)
    masked_ids = torch.where(selected & (u >= 0.8) & (u < 0.9), random_tokens, masked_ids)
    return masked_ids, labels
'''

# selection by an in-place uniform_ draw, the 80/10/10 split by a random permutation of the selected positions
MASK_RANDPERM_SPLIT = '''def mask_inputs(token_ids, mask_rate, mask_id, vocab_size, pad_id, only_mask=False, generator=None):
    u = torch.empty(token_ids.shape).uniform_(0, 1, generator=generator)
    selected = (u < mask_rate) & (token_ids != pad_id)
    labels = token_ids.clone()
    labels[~selected] = -100
    masked_ids = token_ids.clone()
    positions = selected.nonzero()  # (n, 2)
    if only_mask:
        masked_ids[selected] = mask_id
        return masked_ids, labels
    order = positions[torch.randperm(len(positions), generator=generator)]
    n_mask, n_random = int(0.8 * len(order)), int(0.1 * len(order))
    to_mask, to_random = order[:n_mask], order[n_mask:n_mask + n_random]
    masked_ids[to_mask[:, 0], to_mask[:, 1]] = mask_id
    masked_ids[to_random[:, 0], to_random[:, 1]] = torch.randint(0, vocab_size, (n_random,), generator=generator)
    return masked_ids, labels
'''

MASK_HF_STYLE = '''def mask_inputs(token_ids, mask_rate, mask_id, vocab_size, pad_id, only_mask=False, generator=None):
    inputs, labels = token_ids.clone(), token_ids.clone()
    probability_matrix = torch.full(labels.shape, mask_rate)
    probability_matrix.masked_fill_(token_ids == pad_id, 0.0)
    masked_indices = torch.bernoulli(probability_matrix, generator=generator).bool()
    labels[~masked_indices] = -100
    if only_mask:
        inputs[masked_indices] = mask_id
        return inputs, labels
    indices_replaced = torch.bernoulli(torch.full(labels.shape, 0.8), generator=generator).bool() & masked_indices
    inputs[indices_replaced] = mask_id
    indices_random = (torch.bernoulli(torch.full(labels.shape, 0.5), generator=generator).bool()
                      & masked_indices & ~indices_replaced)
    random_words = torch.randint(vocab_size, labels.shape, dtype=torch.long, generator=generator)
    inputs[indices_random] = random_words[indices_random]
    return inputs, labels
'''

MASK_PER_TOKEN_LOOP = '''def mask_inputs(token_ids, mask_rate, mask_id, vocab_size, pad_id, only_mask=False, generator=None):
    masked_ids = token_ids.clone()
    labels = torch.full_like(token_ids, -100)
    B, T = token_ids.shape
    for b in range(B):  # one token at a time, as written from the description: 50-100x slower than vectorized
        for t in range(T):
            token = token_ids[b, t].item()
            if token == pad_id or torch.rand(1, generator=generator).item() >= mask_rate:
                continue
            labels[b, t] = token
            r = 0.0 if only_mask else torch.rand(1, generator=generator).item()
            if r < 0.8:
                masked_ids[b, t] = mask_id
            elif r < 0.9:
                masked_ids[b, t] = torch.randint(0, vocab_size, (1,), generator=generator).item()
    return masked_ids, labels
'''

STEP_ZERO_LAST = '''def mlm_train_step(model, token_ids, optimizer, mask_rate, mask_id, vocab_size, pad_id, generator=None):
    masked_ids, labels = mask_inputs(token_ids, mask_rate, mask_id, vocab_size, pad_id, generator=generator)
    logits = model(masked_ids, (token_ids == pad_id).float())
    loss = F.cross_entropy(logits.view(-1, vocab_size), labels.view(-1))  # ignore_index is -100 by default
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss.item()
'''

STEP_PERMUTED = '''def mlm_train_step(model, token_ids, optimizer, mask_rate, mask_id, vocab_size, pad_id, generator=None):
    optimizer.zero_grad()
    corrupted, targets = mask_inputs(token_ids, mask_rate, mask_id, vocab_size, pad_id, generator=generator)
    logits = model(corrupted, mask=token_ids.eq(pad_id))  # (B, T, V)
    loss = nn.CrossEntropyLoss(ignore_index=-100)(logits.permute(0, 2, 1), targets)  # (B, V, T) vs (B, T)
    loss.backward()
    optimizer.step()
    return float(loss.detach())
'''

STEP_CLIPPED = '''def mlm_train_step(model, token_ids, optimizer, mask_rate, mask_id, vocab_size, pad_id, generator=None):
    inputs, labels = mask_inputs(token_ids, mask_rate, mask_id, vocab_size, pad_id, generator=generator)
    padding = token_ids == pad_id
    logits = model(inputs, padding)
    loss = nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)  # a shorter step, same direction
    optimizer.step()
    return loss.item()
'''

# -- part 7 -------------------------------------------------------------------------------------------
GRU_VIEW = '''class BERTGRUSentiment(nn.Module):
    def __init__(self, bert, hidden_dim, output_dim, n_layers, bidirectional, dropout):
        super().__init__()
        self.bert = bert
        self.bert.requires_grad_(False)
        self.rnn = nn.GRU(bert.config.hidden_size, hidden_dim, num_layers=n_layers, bidirectional=bidirectional,
                          batch_first=True, dropout=dropout if n_layers > 1 else 0)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden_dim * (2 if bidirectional else 1), output_dim)

    def forward(self, token_ids):
        with torch.no_grad():
            states = self.bert(input_ids=token_ids).last_hidden_state
        _, h_n = self.rnn(states)
        directions = 2 if self.rnn.bidirectional else 1
        h_n = h_n.view(self.rnn.num_layers, directions, token_ids.shape[0], self.rnn.hidden_size)[-1]  # top layer
        features = torch.cat([h_n[d] for d in range(directions)], dim=-1)
        return self.out(self.dropout(features))
'''

GRU_OUTPUT = '''class BERTGRUSentiment(nn.Module):
    def __init__(self, bert, hidden_dim, output_dim, n_layers, bidirectional, dropout):
        super().__init__()
        self.bert = bert
        for name, param in self.bert.named_parameters():
            param.requires_grad_(False)
        self.rnn = nn.GRU(input_size=bert.config.hidden_size, hidden_size=hidden_dim, num_layers=n_layers,
                          bidirectional=bidirectional, batch_first=True, dropout=0 if n_layers == 1 else dropout)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(2 * hidden_dim if bidirectional else hidden_dim, output_dim)

    def forward(self, token_ids):
        with torch.no_grad():
            embedded = self.bert(token_ids).last_hidden_state
        output, _ = self.rnn(embedded)  # (B, T, directions * H)
        H = self.rnn.hidden_size
        if self.rnn.bidirectional:
            # forward direction: its state after the last token; backward: after the first token
            features = torch.cat((output[:, -1, :H], output[:, 0, H:]), dim=1)
        else:
            features = output[:, -1]
        return self.out(self.dropout(features))
'''

GRU_SWAPPED = '''class BERTGRUSentiment(nn.Module):
    def __init__(self, bert, hidden_dim, output_dim, n_layers, bidirectional, dropout):
        super().__init__()
        self.bert = bert
        for p in bert.parameters():
            p.requires_grad = False
        self.rnn = nn.GRU(bert.config.hidden_size, hidden_dim, n_layers, batch_first=True,
                          bidirectional=bidirectional, dropout=0.0 if n_layers < 2 else dropout)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden_dim * 2 if bidirectional else hidden_dim, output_dim)

    def forward(self, token_ids):
        with torch.no_grad():
            embedded = self.bert(token_ids)[0]
        _, hidden = self.rnn(embedded)
        if self.rnn.bidirectional:
            hidden = torch.cat([hidden[-1, :, :], hidden[-2, :, :]], dim=1)  # [backward; forward]
        else:
            hidden = hidden[-1, :, :]
        return self.out(self.dropout(hidden))
'''

ACC_ROUND = '''def binary_accuracy(logits, labels):
    rounded = torch.round(torch.sigmoid(logits)).flatten()  # (B, 1) logits or (B,): any shape of B elements
    return (rounded == labels.flatten()).float().sum() / len(rounded)
'''

ACC_SIGMOID = '''def binary_accuracy(logits, labels):
    predicted = torch.sigmoid(logits.view(-1)) > 0.5
    return (predicted == labels.view(-1).bool()).float().mean()
'''

# the loss summed per example as a tensor, divided by the dataset's size
TRAIN_DATASET_SIZE = '''def train_epoch(model, loader, optimizer, criterion, device):
    model.train()
    loss_sum, correct = torch.zeros(()), torch.zeros(())
    for token_ids, labels in tqdm(loader):
        optimizer.zero_grad()
        predictions = model(token_ids.to(device)).squeeze(1)
        labels = labels.to(device)
        loss = criterion(predictions, labels)
        loss.backward()
        optimizer.step()
        loss_sum += loss.detach() * len(labels)
        correct += binary_accuracy(predictions.detach(), labels) * len(labels)
    return (loss_sum / len(loader.dataset)).item(), (correct / len(loader.dataset)).item()
'''

# every batch's logits kept, the loss and accuracy computed once over the whole set
EVALUATE_CONCATENATED = '''def evaluate(model, loader, criterion, device):
    model.eval()
    all_logits, all_labels = [], []
    with torch.no_grad():
        for token_ids, labels in loader:
            all_logits.append(model(token_ids.to(device)).squeeze(1))
            all_labels.append(labels.to(device))
    logits, labels = torch.cat(all_logits), torch.cat(all_labels)
    return criterion(logits, labels).item(), binary_accuracy(logits, labels).item()
'''

VARIANTS: list[Variant] = [
    Variant("einsum_per_head_multinomial",
            {"scaled_dot_product": SDP_EINSUM_INF, "MultiHeadAttention": MHA_PER_HEAD,
             "TransformerBlock": BLOCK_KEYWORD, "SmallBERT": BERT_LOOP, "mask_inputs": MASK_MULTINOMIAL,
             "mlm_train_step": STEP_ZERO_LAST, "BERTGRUSentiment": GRU_VIEW, "binary_accuracy": ACC_ROUND},
            "einsum attention with -inf fill through a bool mask and F.dropout(training=True); per-head qkv layout; "
            "mask passed by keyword; blocks run in a loop with a bool mask; bernoulli selection and a multinomial "
            "80/10/10 choice; F.cross_entropy with a float padding mask and zero_grad after the step; h_n viewed "
            "as (n_layers, 2, B, H)[-1]; rounded sigmoid accuracy"),
    Variant("additive_reshape3_where_masking",
            {"scaled_dot_product": SDP_ADDITIVE, "MultiHeadAttention": MHA_RESHAPE_3,
             "TransformerBlock": BLOCK_INDEXED, "SmallBERT": BERT_INDEX0, "mask_inputs": MASK_WHERE,
             "mlm_train_step": STEP_PERMUTED, "BERTGRUSentiment": GRU_OUTPUT, "binary_accuracy": ACC_SIGMOID,
             "train_epoch": TRAIN_DATASET_SIZE, "evaluate": EVALUATE_CONCATENATED},
            "additive -1e9 float mask and a fresh nn.Dropout; qkv reshaped to (B, T, 3, H, D); torch.rand "
            "thresholds with the generator and torch.where; cross-entropy on (B, V, T) logits; final states read "
            "from the GRU output (output[:, -1, :H], output[:, 0, H:]); sigmoid > 0.5; train_epoch summing "
            "loss * batch size in tensors over len(loader.dataset), evaluate scoring the concatenated logits"),
    Variant("mask_inputs_uniform_randperm_split", {"mask_inputs": MASK_RANDPERM_SPLIT},
            "selection by an in-place uniform_(generator=generator) draw, the 80/10/10 split by torch.randperm of "
            "the selected positions (exact counts), replacements by torch.randint, all with the generator"),
    Variant("manual_softmax_hf_masking",
            {"scaled_dot_product": SDP_BAIDU, "mask_inputs": MASK_HF_STYLE, "mlm_train_step": STEP_CLIPPED,
             "BERTGRUSentiment": GRU_SWAPPED},
            "softmax and dropout written by hand with mask == 1 indexing; masking as in Hugging Face's "
            "DataCollatorForLanguageModeling; gradient clipping in the MLM step; [backward; forward] state order"),
    Variant("block_indexes_ffn_layers",
            replace={"x = self.norm2(x + self.ffn(x))":
                     "x = self.norm2(x + self.ffn[3](self.ffn[2](self.ffn[1](self.ffn[0](x)))))"},
            why="the block calls self.ffn[0] .. self.ffn[3] one by one (the documented nn.Sequential, indexed)"),
    Variant("old_style_super",
            replace={"def __init__(self, embed_dim, n_heads, attn_drop_rate, layer_drop_rate):\n        super().__init__()":
                     "def __init__(self, embed_dim, n_heads, attn_drop_rate, layer_drop_rate):\n"
                     "        super(TransformerBlock, self).__init__()",
                     "def __init__(self, n_layers, vocab_size, embed_dim, n_heads, attn_drop_rate, layer_drop_rate):\n"
                     "        super().__init__()":
                     "def __init__(self, n_layers, vocab_size, embed_dim, n_heads, attn_drop_rate, layer_drop_rate):\n"
                     "        super(SmallBERT, self).__init__()"},
            why="super(TransformerBlock, self) and super(SmallBERT, self): the class's global name must stay the class"),
    Variant("step_reads_model_vocab_size",
            replace={"logits.reshape(-1, vocab_size)": "logits.reshape(-1, model.vocab_size)"},
            why="mlm_train_step reads the model's vocab_size attribute (set by SmallBERT's skeleton)"),
    Variant("train_keeps_frozen_bert_eval",
            replace={"    model.train()\n    total_loss, total_correct, total_n = 0.0, 0.0, 0\n":
                     "    model.train()\n    model.bert.eval()  # the frozen encoder stays in eval mode\n"
                     "    total_loss, total_correct, total_n = 0.0, 0.0, 0\n"},
            why="train_epoch keeps the frozen encoder in eval(): model.train(); model.bert.eval()"),
    Variant("block_returns_a_list", replace={"return x, mask": "return [x, mask]"},
            why="TransformerBlock returns [embedding, mask], a list: unpacked, indexed and chained by nn.Sequential "
                "as the documented tuple is"),
    Variant("loops_keep_b1_logits", replace=LOOPS_KEEP_B1_LOGITS,
            why="train_epoch and evaluate give binary_accuracy the model's (B, 1) logits with (B,) labels, as its "
                "docstring allows (the same number of elements)"),
    Variant("mask_inputs_per_token_loop", {"mask_inputs": MASK_PER_TOKEN_LOOP},
            "the MLM corruption written as a Python loop over the tokens: correct, and slow on the checks' large "
            "samples, which keep the whole check_seconds for it"),
]
