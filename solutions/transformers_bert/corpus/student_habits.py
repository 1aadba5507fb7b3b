"""Correct submissions written the way students really write them: each must get every point.

variants.py covers the choices the notebook leaves open (layouts, mask types, how random numbers are drawn).
These cover habits: code copied from libraries and tutorials, notebook furniture (Colab headers, magics,
drafts left above the final version), globals the functions read (loss objects, constants, a `device`),
helpers defined after the code that calls them, and everyday Python styles. One habit per variant, so that
a variant that loses points names the habit the grader does not support.
"""
from __future__ import annotations

from autograder.corpus import Variant

# -- part 6: Hugging Face's DataCollatorForLanguageModeling.torch_mask_tokens, adapted ----------------
MASK_HF_COLLATOR = '''MASK_REPLACE_PROB = 0.8
RANDOM_REPLACE_PROB = 0.1


def mask_inputs(token_ids, mask_rate, mask_id, vocab_size, pad_id, only_mask=False, generator=None):
    """Adapted from transformers' DataCollatorForLanguageModeling.torch_mask_tokens (its generator passed on)."""
    labels = token_ids.clone()
    inputs = token_ids.clone()
    # We sample a few tokens in each sequence for MLM training (with probability `mask_rate`)
    probability_matrix = torch.full(labels.shape, mask_rate)
    special_tokens_mask = labels == pad_id
    probability_matrix.masked_fill_(special_tokens_mask, value=0.0)
    masked_indices = torch.bernoulli(probability_matrix, generator=generator).bool()
    labels[~masked_indices] = -100  # We only compute loss on masked tokens

    if only_mask:
        inputs[masked_indices] = mask_id
        return inputs, labels

    # mask_replace_prob of the time, we replace masked input tokens with [MASK]
    indices_replaced = (torch.bernoulli(torch.full(labels.shape, MASK_REPLACE_PROB), generator=generator).bool()
                        & masked_indices)
    inputs[indices_replaced] = mask_id

    # random_replace_prob of the time, we replace masked input tokens with a random word
    remaining_prob = 1 - MASK_REPLACE_PROB
    random_replace_prob_scaled = RANDOM_REPLACE_PROB / remaining_prob
    indices_random = (torch.bernoulli(torch.full(labels.shape, random_replace_prob_scaled), generator=generator).bool()
                      & masked_indices & ~indices_replaced)
    random_words = torch.randint(vocab_size, labels.shape, dtype=torch.long, generator=generator)
    inputs[indices_random] = random_words[indices_random]

    # The rest of the time we keep the masked input tokens unchanged
    return inputs, labels
'''

# -- part 2: PyTorch's fused attention inside the module ----------------------------------------------
MHA_SDPA = '''class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, n_heads, attn_drop_rate):
        super().__init__()
        assert embed_dim % n_heads == 0, "embed_dim must be divisible by n_heads"
        self.embed_dim = embed_dim
        self.n_heads = n_heads
        self.head_dim = embed_dim // n_heads
        self.attn_drop_rate = attn_drop_rate
        self.qkv_proj = nn.Linear(embed_dim, 3 * embed_dim)
        self.o_proj = nn.Linear(embed_dim, embed_dim)
        nn.init.xavier_uniform_(self.qkv_proj.weight)
        nn.init.zeros_(self.qkv_proj.bias)
        nn.init.xavier_uniform_(self.o_proj.weight)
        nn.init.zeros_(self.o_proj.bias)

    def forward(self, embedding, mask=None):
        B, T, E = embedding.shape
        q, k, v = self.qkv_proj(embedding).chunk(3, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))  # (B, H, T, D)
        attn_mask = None
        if mask is not None:
            attn_mask = ~mask.bool()[:, None, None, :]  # SDPA's convention: True = may attend
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask,
                                             dropout_p=self.attn_drop_rate if self.training else 0.0)
        return self.o_proj(out.transpose(1, 2).reshape(B, T, E))
'''

# -- part 7: the GRU's output sequence, split into its two directions ----------------------------------
GRU_OUTPUT_VIEW = '''class BERTGRUSentiment(nn.Module):
    def __init__(self, bert, hidden_dim, output_dim, n_layers, bidirectional, dropout):
        super().__init__()
        self.bert = bert
        for param in self.bert.parameters():
            param.requires_grad = False
        embedding_dim = bert.config.to_dict()["hidden_size"]
        self.rnn = nn.GRU(embedding_dim, hidden_dim, num_layers=n_layers, bidirectional=bidirectional,
                          batch_first=True, dropout=0 if n_layers < 2 else dropout)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden_dim * 2 if bidirectional else hidden_dim, output_dim)

    def forward(self, token_ids):
        with torch.no_grad():
            hidden_states = self.bert(token_ids).last_hidden_state  # (B, T, hidden_size)
        output, _ = self.rnn(hidden_states)  # (B, T, directions * hidden_dim)
        B, T, _ = output.shape
        directions = 2 if self.rnn.bidirectional else 1
        output = output.view(B, T, directions, self.rnn.hidden_size)
        final = output[:, -1, 0]  # forward direction, after the last token
        if directions == 2:
            final = torch.cat([final, output[:, 0, 1]], dim=-1)  # backward direction, after the first token
        return self.out(self.dropout(final))
'''

# -- part 7: the accuracy of the well-known IMDB sentiment tutorial -----------------------------------
ACC_TUTORIAL = '''def binary_accuracy(logits, labels):
    """
    Returns accuracy per batch, i.e. if you get 8/10 right, this returns 0.8, NOT 8
    """
    #round predictions to the closest integer
    rounded_preds = torch.round(torch.sigmoid(logits.view(-1)))
    correct = (rounded_preds == labels.view(-1)).float() #convert into float for division
    acc = correct.sum() / len(correct)
    return acc
'''

# -- part 1: einsum with a -inf fill through torch.where ------------------------------------------------
SDP_EINSUM_WHERE = '''def scaled_dot_product(q, k, v, attn_drop_rate=0.0, mask=None):
    d_k = q.size(-1)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(d_k)
    if mask is not None:
        pad = mask.to(torch.bool).unsqueeze(1).unsqueeze(2)  # (B, 1, 1, T)
        scores = torch.where(pad, torch.tensor(float("-inf")), scores)
    weights = F.softmax(scores, dim=-1)
    weights = F.dropout(weights, attn_drop_rate)
    return torch.einsum("bhqk,bhkd->bhqd", weights, v), weights
'''

# -- notebook furniture: a Colab header ---------------------------------------------------------------
COLAB_INSTALL = '''!pip install -q transformers datasets
%matplotlib inline
%load_ext autoreload
%autoreload 2'''

COLAB_DRIVE = '''from google.colab import drive
drive.mount('/content/drive')
%cd /content/drive/MyDrive/dl-course/hw4'''

# -- globals read by functions: loss objects and constants --------------------------------------------
STEP_GLOBAL_LOSS = '''IGNORE_INDEX = -100
loss_fn = nn.CrossEntropyLoss(ignore_index=IGNORE_INDEX)


def mlm_train_step(model, token_ids, optimizer, mask_rate, mask_id, vocab_size, pad_id, generator=None):
    masked_ids, labels = mask_inputs(token_ids, mask_rate, mask_id, vocab_size, pad_id, generator=generator)
    logits = model(masked_ids, token_ids == pad_id)
    loss = loss_fn(logits.view(-1, vocab_size), labels.view(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()
'''

LOOPS_GLOBAL_CRITERION = '''criterion = nn.BCEWithLogitsLoss()


def _batch_results(model, token_ids, labels, device):
    """Loss, accuracy and size of one batch (shared by both loops)."""
    token_ids, labels = token_ids.to(device), labels.to(device).float()
    logits = model(token_ids).squeeze(1)
    return criterion(logits, labels), binary_accuracy(logits, labels), len(labels)


def train_epoch(model, loader, optimizer, criterion, device):
    model.train()
    losses, accs, sizes = [], [], []
    for token_ids, labels in tqdm(loader):
        loss, acc, n = _batch_results(model, token_ids, labels, device)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item() * n)
        accs.append(acc.item() * n)
        sizes.append(n)
    return sum(losses) / sum(sizes), sum(accs) / sum(sizes)
'''

EVALUATE_GLOBAL_CRITERION = '''def evaluate(model, loader, criterion, device):
    model.eval()
    losses, accs, sizes = [], [], []
    with torch.no_grad():
        for token_ids, labels in tqdm(loader):
            loss, acc, n = _batch_results(model, token_ids, labels, device)
            losses.append(loss.item() * n)
            accs.append(acc.item() * n)
            sizes.append(n)
    return sum(losses) / sum(sizes), sum(accs) / sum(sizes)
'''

# -- helpers defined in a later cell than the class that calls them ----------------------------------
MHA_LATE_HELPERS = '''class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, n_heads, attn_drop_rate):
        super().__init__()
        self.embed_dim = embed_dim
        self.n_heads = n_heads
        self.head_dim = embed_dim // n_heads
        self.attn_drop_rate = attn_drop_rate
        self.qkv_proj = nn.Linear(embed_dim, 3 * embed_dim)
        self.o_proj = nn.Linear(embed_dim, embed_dim)
        for layer in (self.qkv_proj, self.o_proj):
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, embedding, mask=None):
        q, k, v = self.qkv_proj(embedding).split(self.embed_dim, dim=-1)
        q, k, v = (_split_heads(t, self.n_heads) for t in (q, k, v))  # (B, H, T, D) each
        drop = self.attn_drop_rate if self.training else 0.0
        values, _ = scaled_dot_product(q, k, v, drop, mask)
        return self.o_proj(_merge_heads(values))
'''

LATE_HELPERS = '''def _split_heads(x, n_heads):
    """(B, T, E) -> (B, H, T, E // H)"""
    B, T, E = x.shape
    return x.view(B, T, n_heads, E // n_heads).transpose(1, 2)


def _merge_heads(x):
    """(B, H, T, D) -> (B, T, H * D)"""
    B, H, T, D = x.shape
    return x.transpose(1, 2).reshape(B, T, H * D)
'''

# -- a `device` global used inside functions ---------------------------------------------------------
DEVICE_LINE = 'DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'

GRU_DEVICE = '''class BERTGRUSentiment(nn.Module):
    def __init__(self, bert, hidden_dim, output_dim, n_layers, bidirectional, dropout):
        super().__init__()
        self.bert = bert
        for p in self.bert.parameters():
            p.requires_grad = False
        self.rnn = nn.GRU(bert.config.hidden_size, hidden_dim, num_layers=n_layers, bidirectional=bidirectional,
                          batch_first=True, dropout=0.0 if n_layers < 2 else dropout)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden_dim * 2 if bidirectional else hidden_dim, output_dim)

    def forward(self, token_ids):
        token_ids = token_ids.to(device)
        with torch.no_grad():
            embedded = self.bert(token_ids)[0]
        _, hidden = self.rnn(embedded)
        if self.rnn.bidirectional:
            hidden = torch.cat((hidden[-2], hidden[-1]), dim=-1)
        else:
            hidden = hidden[-1]
        return self.out(self.dropout(hidden))
'''

STEP_DEVICE = '''def mlm_train_step(model, token_ids, optimizer, mask_rate, mask_id, vocab_size, pad_id, generator=None):
    token_ids = token_ids.to(device)
    masked_ids, labels = mask_inputs(token_ids, mask_rate, mask_id, vocab_size, pad_id, generator=generator)
    logits = model(masked_ids.to(device), (token_ids == pad_id).to(device))
    loss = F.cross_entropy(logits.reshape(-1, vocab_size), labels.to(device).reshape(-1), ignore_index=-100)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()
'''

# -- everyday styles: tuple unpacking, functional aliases, imports next to the code -------------------
SDP_ALIASES = '''from torch import Tensor
from torch.nn.functional import softmax, dropout


def scaled_dot_product(q: Tensor, k: Tensor, v: Tensor, attn_drop_rate: float = 0.0, mask=None):
    *_, seq_len, head_dim = q.shape
    scores = torch.matmul(q, k.mT) / head_dim ** 0.5  # (B, H, T, T)
    if mask is not None:
        bsz, _ = mask.shape
        scores = scores.masked_fill(mask.view(bsz, 1, 1, seq_len) == 1, -1e9)
    p_attn = softmax(scores, dim=-1)
    p_attn = dropout(p_attn, p=attn_drop_rate, training=attn_drop_rate > 0)
    return p_attn @ v, p_attn
'''

BLOCK_ALIASES = '''import torch.nn.functional as nnf


class TransformerBlock(nn.Module):
    def __init__(self, embed_dim, n_heads, attn_drop_rate, layer_drop_rate):
        super(TransformerBlock, self).__init__()
        self.attn = MultiHeadAttention(embed_dim, n_heads, attn_drop_rate)
        self.norm1, self.norm2 = nn.LayerNorm(embed_dim), nn.LayerNorm(embed_dim)
        self.ffn = nn.Sequential(nn.Linear(embed_dim, embed_dim), nn.GELU(), nn.Linear(embed_dim, embed_dim),
                                 nn.Dropout(layer_drop_rate))
        self.dropout = nn.Dropout(layer_drop_rate)

    def forward(self, inputs):
        (embedding, mask) = inputs
        residual = embedding
        embedding = self.dropout(self.attn(embedding, mask))
        embedding = self.norm1(residual + embedding)
        residual = embedding
        embedding = self.norm2(residual + self.ffn(embedding))
        return embedding, mask
'''

# -- a list comprehension over heads -------------------------------------------------------------------
MHA_HEAD_LIST = '''class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, n_heads, attn_drop_rate):
        super().__init__()
        self.embed_dim, self.n_heads = embed_dim, n_heads
        self.head_dim = embed_dim // n_heads
        self.attn_drop_rate = attn_drop_rate
        self.qkv_proj = nn.Linear(embed_dim, 3 * embed_dim)
        self.o_proj = nn.Linear(embed_dim, embed_dim)
        nn.init.xavier_uniform_(self.qkv_proj.weight); nn.init.zeros_(self.qkv_proj.bias)
        nn.init.xavier_uniform_(self.o_proj.weight); nn.init.zeros_(self.o_proj.bias)

    def forward(self, embedding, mask=None):
        E, D = self.embed_dim, self.head_dim
        q, k, v = self.qkv_proj(embedding).split(E, dim=-1)  # (B, T, E) each
        drop = self.attn_drop_rate if self.training else 0.0
        heads = [
            scaled_dot_product(q[..., h * D:(h + 1) * D].unsqueeze(1), k[..., h * D:(h + 1) * D].unsqueeze(1),
                               v[..., h * D:(h + 1) * D].unsqueeze(1), drop, mask)[0].squeeze(1)
            for h in range(self.n_heads)
        ]  # n_heads tensors (B, T, D)
        return self.o_proj(torch.cat(heads, dim=-1))
'''

# -- attention written inline in the module, with a precomputed scale --------------------------------
MHA_INLINE = '''class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, n_heads, attn_drop_rate):
        super(MultiHeadAttention, self).__init__()
        self.embed_dim = embed_dim
        self.n_heads = n_heads
        self.head_dim = embed_dim // n_heads
        self.scale = self.head_dim ** -0.5
        self.attn_drop_rate = attn_drop_rate
        self.qkv_proj = nn.Linear(embed_dim, 3 * embed_dim)
        self.o_proj = nn.Linear(embed_dim, embed_dim)
        nn.init.xavier_uniform_(self.qkv_proj.weight)
        nn.init.xavier_uniform_(self.o_proj.weight)
        nn.init.constant_(self.qkv_proj.bias, 0.0)
        nn.init.constant_(self.o_proj.bias, 0.0)

    def forward(self, embedding, mask=None):
        B, T, _ = embedding.size()
        qkv = self.qkv_proj(embedding).view(B, T, 3, self.n_heads, self.head_dim)
        q, k, v = qkv[:, :, 0].transpose(1, 2), qkv[:, :, 1].transpose(1, 2), qkv[:, :, 2].transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) * self.scale
        if mask is not None:
            scores = scores.masked_fill(mask.bool().view(B, 1, 1, T), float("-inf"))
        attn = scores.softmax(dim=-1)
        attn = F.dropout(attn, p=self.attn_drop_rate, training=self.training)
        out = (attn @ v).transpose(1, 2).contiguous().view(B, T, self.embed_dim)
        return self.o_proj(out)
'''

# -- loops: inference_mode, enumerate(tqdm(...)), progress prints ------------------------------------
TRAIN_ENUMERATE = '''def train_epoch(model, loader, optimizer, criterion, device):
    model.train()
    running_loss, running_correct, seen = 0.0, 0.0, 0
    for i, (token_ids, labels) in enumerate(tqdm(loader, desc="train")):
        token_ids = token_ids.to(device)
        labels = labels.to(device).float()
        model.zero_grad()
        predictions = model(token_ids).view(-1)
        loss = criterion(predictions, labels)
        loss.backward()
        optimizer.step()
        batch_size = labels.size(0)
        running_loss += loss.item() * batch_size
        running_correct += binary_accuracy(predictions, labels).item() * batch_size
        seen += batch_size
        if i % 100 == 0:
            print(f"batch {i}: loss {loss.item():.4f}")
    return running_loss / seen, running_correct / seen
'''

EVALUATE_INFERENCE_MODE = '''@torch.inference_mode()
def evaluate(model, loader, criterion, device):
    model.eval()
    running_loss, running_correct, seen = 0.0, 0.0, 0
    for token_ids, labels in tqdm(loader, desc="eval"):
        predictions = model(token_ids.to(device)).view(-1)
        labels = labels.to(device).float()
        batch_size = labels.size(0)
        running_loss += criterion(predictions, labels).item() * batch_size
        running_correct += binary_accuracy(predictions, labels).item() * batch_size
        seen += batch_size
    return running_loss / seen, running_correct / seen
'''

# -- a draft left above the final version ---------------------------------------------------------------
ACC_DRAFT = '''# first try (wrong: logits are not probabilities), fixed further down
def binary_accuracy(logits, labels):
    return ((logits > 0.5).float() == labels).float().mean()'''

# -- blocks added one by one under names of the student's own ------------------------------------------
BLOCKS_BY_NAME = {"""        self.blocks = nn.Sequential(
            *[TransformerBlock(embed_dim, n_heads, attn_drop_rate, layer_drop_rate) for _ in range(n_layers)]
        )""": """        self.blocks = nn.Sequential()
        for i in range(n_layers):
            self.blocks.add_module(f"block{i}", TransformerBlock(embed_dim, n_heads, attn_drop_rate, layer_drop_rate))"""}

VARIANTS: list[Variant] = [
    Variant("habit_blocks_added_by_name", replace=BLOCKS_BY_NAME,
            why="SmallBERT's blocks added with add_module(f'block{i}', ...): the documented names blocks.0... differ, "
                "the structure is the same"),
    Variant("habit_hf_collator_masking", {"mask_inputs": MASK_HF_COLLATOR},
            "mask_inputs adapted from DataCollatorForLanguageModeling: torch.bernoulli and torch.randint with "
            "generator=generator, "
            "mask_replace_prob / random_replace_prob module constants"),
    Variant("habit_sdpa_in_mha", {"MultiHeadAttention": MHA_SDPA},
            "F.scaled_dot_product_attention inside the module (its mask: True = attend; dropout_p only in train())"),
    Variant("habit_gru_output_sequence", {"BERTGRUSentiment": GRU_OUTPUT_VIEW},
            "final states read from the GRU's output sequence viewed as (B, T, directions, H)"),
    Variant("habit_tutorial_accuracy", {"binary_accuracy": ACC_TUTORIAL},
            "torch.round(torch.sigmoid(...)) accuracy as in the IMDB tutorial"),
    Variant("habit_einsum_where_ninf", {"scaled_dot_product": SDP_EINSUM_WHERE},
            "einsum attention, -inf through torch.where, F.dropout with a positional rate"),
    Variant("habit_colab_header", prepend=[COLAB_INSTALL, COLAB_DRIVE],
            why="a Colab header: !pip install, %matplotlib inline, %autoreload, drive.mount, %cd"),
    Variant("habit_module_level_losses",
            {"mlm_train_step": STEP_GLOBAL_LOSS, "train_epoch": LOOPS_GLOBAL_CRITERION,
             "evaluate": EVALUATE_GLOBAL_CRITERION},
            "module-level loss_fn = nn.CrossEntropyLoss(ignore_index=IGNORE_INDEX) and criterion = "
            "nn.BCEWithLogitsLoss() read inside the functions, a constant IGNORE_INDEX, a shared batch helper"),
    Variant("habit_helpers_defined_later", {"MultiHeadAttention": MHA_LATE_HELPERS}, append=[LATE_HELPERS],
            why="module-level _split_heads / _merge_heads defined in a cell after the class that calls them"),
    Variant("habit_device_global", {"BERTGRUSentiment": GRU_DEVICE, "mlm_train_step": STEP_DEVICE},
            replace={DEVICE_LINE: DEVICE_LINE + 'device = torch.device("cuda" if torch.cuda.is_available() '
                                                'else "cpu")\n'},
            why="device = torch.device(...) at the top, .to(device) inside the classifier and the MLM step"),
    Variant("habit_aliases_and_unpacking", {"scaled_dot_product": SDP_ALIASES, "TransformerBlock": BLOCK_ALIASES},
            "imports next to the code (from torch.nn.functional import softmax, dropout; import ... as nnf), "
            "type hints, *_ unpacking, k.mT, super(Class, self), tuple-unpacked inputs and residual variables"),
    Variant("habit_head_list_comprehension", {"MultiHeadAttention": MHA_HEAD_LIST},
            "one scaled_dot_product call per head in a list comprehension, heads concatenated with torch.cat"),
    Variant("habit_inline_attention_in_mha", {"MultiHeadAttention": MHA_INLINE},
            "attention written inline in MultiHeadAttention (a precomputed scale, -inf fill, "
            "F.dropout(training=self.training)); scaled_dot_product not called"),
    Variant("habit_loops_inference_mode", {"train_epoch": TRAIN_ENUMERATE, "evaluate": EVALUATE_INFERENCE_MODE},
            "enumerate(tqdm(loader)), model.zero_grad(), progress prints; evaluate decorated with "
            "@torch.inference_mode()"),
    Variant("habit_draft_left_above", prepend=[ACC_DRAFT],
            why="a wrong first draft of binary_accuracy left in a cell above the final one"),
]
