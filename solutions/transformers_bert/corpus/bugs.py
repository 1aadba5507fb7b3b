"""Wrong submissions of the Transformers & BERT assignment: each is the answer key with text replaced.

`autograder verify transformers_bert` (and tests/test_transformers_bert.py) builds every bug into a notebook, grades them all
in one batch and checks that each loses points on the checks listed in `expect`, with a message containing the given
substring. The replacements are plain text; each `old` must occur in the answer key (the build of
solutions/transformers_bert), so a change of the notebook that makes a bug stale fails loudly.
"""
from __future__ import annotations

from autograder.corpus import Bug
from student_habits import MASK_HF_COLLATOR

# check names, as the hidden test files and the notebook's test cells define them
P1_WEIGHTS = "attention: weights are softmax(q k^T / sqrt(D)) over the keys"
P1_VALUES = "attention: values are the weights applied to v"
P1_MASK = "attention: padded keys get zero weight"
P1_BOOL = "attention: a bool mask (True = padding) works like a 0/1 mask"
P1_DROPOUT = "attention: dropout on the weights at rate p, exact at rate 0"
P1_GRADS = "attention: gradients reach q, k and v as they do through softmax(q k^T / sqrt(D)) v"
P2_OUTPUT = "MHA: output matches the reference with the same weights"
P2_MASK = "MHA: the padding mask hides padded positions"
P2_DROPOUT = "MHA: attention dropout in train() only"
P2_GRADS = "MHA: gradients reach qkv_proj and o_proj"
P3_OUTPUT = "block: output matches the reference with the same weights"
P3_RESIDUAL = "block: residuals add the block input"
P3_POSTNORM = "block: LayerNorm after each residual (post-norm)"
P3_FFN = "block: feed-forward is Linear -> GELU -> Linear -> Dropout"
P3_DROPOUT = "block: dropout on the attention branch in train() only"
P5_SHAPES = "SmallBERT: embedding has V + 1 rows, head predicts V tokens"
P5_BLOCKS = "SmallBERT: blocks is an nn.Sequential of n_layers TransformerBlocks"
P5_LOGITS = "SmallBERT: logits match the reference with the same weights"
P5_POSITIONAL = "SmallBERT: positional encoding added to the token embeddings"
P5_CHAIN = "SmallBERT: blocks chained in order, each gets the mask"
P5_MODES = "SmallBERT: deterministic in eval(), dropout in train(), mask optional"
P6_LABELS = "MLM masking: labels are the original ids at the selected positions, -100 elsewhere"
P6_PADDING = "MLM masking: padding is never selected"
P6_RATE = "MLM masking: about mask_rate of the real tokens are selected"
P6_PROPORTIONS = "MLM masking: 80% mask id, 10% random token, 10% unchanged"
P6_RANDOM = "MLM masking: random replacements are regular tokens, never the mask id"
P6_ONLY_MASK = "MLM masking: only_mask=True masks every selected token"
P6_STEP = "MLM step: loss on the selected positions, one optimizer step"
P6_FIRST_LOSS = "MLM step: first loss of a fresh SmallBERT is about ln(V)"
P7_SHAPES = "classifier: logits of shape (B, output_dim) for any GRU configuration"
P7_FROZEN = "classifier: the encoder is frozen and gets no gradient"
P7_STATES = "classifier: final forward and backward states of the top GRU layer"
P7_DROPOUT = "classifier: dropout on the final state, GRU dropout between layers"
P7_ACCURACY = "binary_accuracy: positive iff the logit is > 0"
P7_LOOPS = "train_epoch and evaluate: modes, one step per batch, mean loss and accuracy"


MHA_INLINE_SQRT_E = '''        logits = q @ k.transpose(-2, -1) / math.sqrt(E)  # scaled by the model width
        if mask is not None:
            logits = logits.masked_fill(mask[:, None, None, :].bool(), -1e9)
        attention = torch.softmax(logits, dim=-1)
        if drop > 0:
            attention = F.dropout(attention, p=drop)
        values = attention @ v  # (B, H, T, D)
'''

# train_epoch and evaluate handing binary_accuracy the model's (B, 1) logits with (B,) labels (the loss squeezed)
LOOPS_KEEP_B1_LOGITS = {
    "        logits = model(token_ids).squeeze(1)  # (B, 1) -> (B,)\n        loss = criterion(logits, labels)":
    "        logits = model(token_ids)  # (B, 1)\n        loss = criterion(logits.squeeze(1), labels)",
    "            logits = model(token_ids).squeeze(1)  # (B,)": "            logits = model(token_ids)  # (B, 1)",
    "total_loss += criterion(logits, labels).item() * n": "total_loss += criterion(logits.squeeze(1), labels).item() * n",
}

# -- garbage that a check comparing a function with itself would reward ----------------------------------
SDP_Q_Q = '''def scaled_dot_product(q, k, v, attn_drop_rate=0.0, mask=None):
    return q, q
'''

SDP_ZEROS = '''def scaled_dot_product(q, k, v, attn_drop_rate=0.0, mask=None):
    B, H, T, D = q.shape
    return torch.zeros_like(v), torch.zeros(B, H, T, T)
'''

SDP_UNIFORM = '''def scaled_dot_product(q, k, v, attn_drop_rate=0.0, mask=None):
    B, H, T, D = q.shape
    attention = torch.ones(B, H, T, T)
    if mask is not None:
        attention = attention.masked_fill(mask.bool()[:, None, None, :], 0.0)
    attention = attention / attention.sum(-1, keepdim=True)  # uniform over the real keys, whatever q and k
    if attn_drop_rate > 0:
        attention = F.dropout(attention, p=attn_drop_rate)
    return attention @ v, attention
'''

# differentiable, its gradients its true ones, and not attention: no weights to flow through (see attention_gradients)
SDP_Q_TIMES_K_TIMES_V = '''def scaled_dot_product(q, k, v, attn_drop_rate=0.0, mask=None):
    return q * k * v, q @ k.transpose(-2, -1)
'''

SDP_IDENTITY = '''def scaled_dot_product(q, k, v, attn_drop_rate=0.0, mask=None):
    B, H, T, D = q.shape
    return v, torch.eye(T).expand(B, H, T, T)
'''

# -- MLM corruption that ignores the generator argument: not reproducible ---------------------------------
MASK_GLOBAL_RNG = '''def mask_inputs(token_ids, mask_rate, mask_id, vocab_size, pad_id, only_mask=False, generator=None):
    # draws from the global random generator (the generator argument is not used)
    is_real = token_ids != pad_id
    selected = (torch.rand(token_ids.shape) < mask_rate) & is_real
    labels = torch.where(selected, token_ids, -100)
    u = torch.rand(token_ids.shape)
    if only_mask:
        u = torch.zeros(token_ids.shape)
    masked_ids = torch.where(selected & (u < 0.8), torch.full_like(token_ids, mask_id), token_ids)
    random_tokens = torch.randint(vocab_size, token_ids.shape)
    masked_ids = torch.where(selected & (u >= 0.8) & (u < 0.9), random_tokens, masked_ids)
    return masked_ids, labels
'''

# Hugging Face's collator code as adapted in student_habits.py, its generator left out
MASK_HF_COLLATOR_GLOBAL_RNG = MASK_HF_COLLATOR.replace(", generator=generator)", ")").replace(
    "(its generator passed on)", "(global RNG)")

# -- loops averaging the batch means: the last, smaller batch counts as much as a full one --------------
TRAIN_BATCH_MEANS = '''def train_epoch(model, loader, optimizer, criterion, device):
    epoch_loss, epoch_acc = 0, 0
    model.train()
    for token_ids, labels in tqdm(loader):
        optimizer.zero_grad()
        predictions = model(token_ids.to(device)).squeeze(1)
        loss = criterion(predictions, labels.to(device))
        acc = binary_accuracy(predictions, labels.to(device))
        loss.backward()
        optimizer.step()
        epoch_loss += loss.item()
        epoch_acc += acc.item()
    return epoch_loss / len(loader), epoch_acc / len(loader)
'''

EVALUATE_BATCH_MEANS = '''def evaluate(model, loader, criterion, device):
    epoch_loss, epoch_acc = 0, 0
    model.eval()
    with torch.no_grad():
        for token_ids, labels in loader:
            predictions = model(token_ids.to(device)).squeeze(1)
            epoch_loss += criterion(predictions, labels.to(device)).item()
            epoch_acc += binary_accuracy(predictions, labels.to(device)).item()
    return epoch_loss / len(loader), epoch_acc / len(loader)
'''

BLOCKS_BUILT = """        self.blocks = nn.Sequential(
            *[TransformerBlock(embed_dim, n_heads, attn_drop_rate, layer_drop_rate) for _ in range(n_layers)]
        )"""
STEP_MASKING = ("    masked_ids, labels = mask_inputs(token_ids, mask_rate, mask_id, vocab_size, pad_id, "
                "generator=generator)")

BUGS: list[Bug] = [
    # -- part 1 ---------------------------------------------------------------------------------
    Bug("sdp_without_none_guard",
        {"    if mask is not None:\n        # (B, T) -> (B, 1, 1, T): one key mask shared by every head and every query\n"
         "        logits = logits.masked_fill(mask[:, None, None, :].bool(), -1e9)":
         "    # (B, T) -> (B, 1, 1, T): one key mask shared by every head and every query\n"
         "    logits = logits.masked_fill(mask[:, None, None, :].bool(), -1e9)"},
        {P1_WEIGHTS: "TypeError", P1_VALUES: "TypeError", P1_DROPOUT: "TypeError"},
        "no `if mask is not None`: every call without a mask raises; the masking checks still pass", confined_to="1."),
    Bug("weights_returned_before_dropout",
        {"        attention = F.dropout(attention, p=attn_drop_rate)\n    values = attention @ v  # (B, H, T, D)":
         "        values = F.dropout(attention, p=attn_drop_rate) @ v\n    else:\n        values = attention @ v"},
        {P1_DROPOUT: "return the attention weights after dropout"},
        "dropout applied to the values' weights but the weights returned before it", confined_to="1."),
    Bug("mask_zeroed_after_softmax",
        {"    if mask is not None:\n        # (B, T) -> (B, 1, 1, T): one key mask shared by every head and every query\n"
         "        logits = logits.masked_fill(mask[:, None, None, :].bool(), -1e9)\n"
         "    attention = torch.softmax(logits, dim=-1)  # (B, H, T, T), softmax over the keys\n":
         "    attention = torch.softmax(logits, dim=-1)  # (B, H, T, T), softmax over the keys\n"
         "    if mask is not None:\n"
         "        attention = attention.masked_fill(mask[:, None, None, :].bool(), 0.0)\n"},
        {P1_MASK: "", "part1_public": ""},
        "padded weights zeroed after the softmax, rows not renormalised: the masking check's alone (the bool mask "
        "is handled as the 0/1 one)", only=True),
    Bug("no_scaling",
        {"logits = q @ k.transpose(-2, -1) / math.sqrt(d)": "logits = q @ k.transpose(-2, -1)"},
        {P1_WEIGHTS: "not scaled"}, "forgot the 1/sqrt(D) factor"),
    Bug("softmax_over_queries",
        {"attention = torch.softmax(logits, dim=-1)": "attention = torch.softmax(logits, dim=-2)"},
        {P1_WEIGHTS: "wrong axis"}, "softmax over the query axis: graded by the weights check alone (the mask and "
        "dropout checks mask and drop its own weights)", others={"part1_public"}, only=True),
    Bug("softmax_scaled_after",
        {"logits = q @ k.transpose(-2, -1) / math.sqrt(d)": "logits = q @ k.transpose(-2, -1)",
         "attention = torch.softmax(logits, dim=-1)": "attention = torch.softmax(logits, dim=-1) / math.sqrt(d)"},
        {P1_WEIGHTS: "multiplied by"}, "the softmax's output divided by sqrt(D) instead of its input: graded by the "
        "weights check alone (masking, values and dropout are right for its own weights)",
        others={"part1_public"}, only=True),
    Bug("mask_inverted",
        {"logits.masked_fill(mask[:, None, None, :].bool(), -1e9)":
         "logits.masked_fill(mask[:, None, None, :] == 0, -1e9)"},
        {P1_MASK: "inverted"}, "masks the real tokens"),
    Bug("mask_ignored",
        {"logits = logits.masked_fill(mask[:, None, None, :].bool(), -1e9)": "logits = logits"},
        {P1_MASK: "ignore the mask"}, "never applies the mask"),
    Bug("float_only_mask",
        {"logits = logits.masked_fill(mask[:, None, None, :].bool(), -1e9)":
         "m = mask[:, None, None, :]\n        logits = logits * (1 - m) - 1e9 * m"},
        {P1_BOOL: "with a bool mask"}, "arithmetic on the mask that a bool tensor does not support"),
    Bug("dropout_ignores_rate",
        {"attention = F.dropout(attention, p=attn_drop_rate)": "attention = attention"},
        {P1_DROPOUT: "should be dropped"}, "attn_drop_rate accepted but never used"),
    # -- a wrong forward that also cuts part of the graph: its gradients are checked against its own derivatives
    Bug("no_scaling_and_v_data_in_sum",
        {"logits = q @ k.transpose(-2, -1) / math.sqrt(d)": "logits = q @ k.transpose(-2, -1)",
         "values = attention @ v  # (B, H, T, D)":
         "values = 0.5 * (attention @ v + attention @ v.data)  # (B, H, T, D)"},
        {P1_WEIGHTS: "not scaled", P1_GRADS: "with respect to v are not the derivatives"},
        "forgot the 1/sqrt(D) factor, and half of the values term reads v.data: half of v's gradient is lost",
        confined_to="1."),
    Bug("std_item_temperature",
        {"logits = q @ k.transpose(-2, -1) / math.sqrt(d)":
         "logits = q @ k.transpose(-2, -1)\n    logits = logits / logits.std().item()  # a temperature from the data"},
        {P1_WEIGHTS: "differ from softmax", P1_GRADS: "with respect to q, k are not the derivatives"},
        "logits divided by their standard deviation taken with .item(): the graph misses the division's dependence "
        "on q and k", confined_to="1."),
    Bug("sdp_syntax_error",
        {"def scaled_dot_product(q, k, v, attn_drop_rate=0.0, mask=None):":
         "def scaled_dot_product(q, k, v, attn_drop_rate=0.0, mask=None)"},
        {P1_WEIGHTS: "SyntaxError"}, "a missing colon: the cell is skipped, the name never defined; the parts "
        "that call it are graded with the reference's in its place", confined_to="1."),
    Bug("sdp_renamed",
        {"def scaled_dot_product(q, k, v, attn_drop_rate=0.0, mask=None):":
         "def scaled_attention(q, k, v, attn_drop_rate=0.0, mask=None):",
         "values, _ = scaled_dot_product(q, k, v, attn_drop_rate=drop, mask=mask)":
         "values, _ = scaled_attention(q, k, v, attn_drop_rate=drop, mask=mask)"},
        {P1_WEIGHTS: "your notebook does not define `scaled_dot_product`",
         P1_GRADS: "your notebook does not define `scaled_dot_product`"},
        "the function renamed (its callers follow): every check of part 1 says the name is missing, in the "
        "student's words", confined_to="1."),
    # -- part 2 ---------------------------------------------------------------------------------
    Bug("mha_scaled_by_sqrt_E",
        {"        values, _ = scaled_dot_product(q, k, v, attn_drop_rate=drop, mask=mask)  # (B, H, T, D)\n":
         MHA_INLINE_SQRT_E},
        {P2_OUTPUT: "sqrt(E)"}, "inline attention scaled by the model width"),
    Bug("heads_view_without_transpose",
        {"q = q.view(B, T, H, D).transpose(1, 2)": "q = q.reshape(B, H, T, D)",
         "k = k.view(B, T, H, D).transpose(1, 2)": "k = k.reshape(B, H, T, D)",
         "v = v.view(B, T, H, D).transpose(1, 2)": "v = v.reshape(B, H, T, D)"},
        {P2_OUTPUT: "split with a view"}, "reshapes (B, T, E) straight to (B, H, T, D)"),
    Bug("heads_merged_without_transpose",
        {"values = values.transpose(1, 2).reshape(B, T, E)": "values = values.reshape(B, T, E)"},
        {P2_OUTPUT: "merged with a view"}, "reshapes (B, H, T, D) straight to (B, T, E)"),
    Bug("missing_o_proj",
        {"return self.o_proj(values)  # (B, T, E)": "return values  # (B, T, E)"},
        {P2_OUTPUT: "without o_proj"}, "forgot the output projection"),
    Bug("attention_dropout_in_eval",
        {"drop = self.attn_drop_rate if self.training else 0.0": "drop = self.attn_drop_rate"},
        {P2_DROPOUT: "in eval() two calls"}, "attention dropout stays on in eval()"),
    Bug("mha_mask_not_passed",
        {"values, _ = scaled_dot_product(q, k, v, attn_drop_rate=drop, mask=mask)":
         "values, _ = scaled_dot_product(q, k, v, attn_drop_rate=drop)"},
        {P2_MASK: "mask does not reach"}, "MHA drops the mask"),
    Bug("mha_scales_q_twice",
        {"q = q.view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)":
         "q = q.view(B, T, H, D).transpose(1, 2) / math.sqrt(D)  # (B, H, T, D)"},
        {P2_OUTPUT: "divided by D instead of sqrt(D)"},
        "q divided by sqrt(D) before scaled_dot_product, which divides again (with D = sqrt(E) this once read as "
        "'divided by sqrt(E)'); its mask still hides the padding, which the mask check grades alone", only=True),
    Bug("mha_without_o_proj",
        {"return self.o_proj(values)": "return values"},
        {P2_OUTPUT: ""}, "the heads' merged values returned without o_proj: the mask still hides the padding, "
        "which the mask check grades alone", only=True, others={P2_GRADS}),
    Bug("mha_heads_strided",
        {"q = q.view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)": "q = q.view(B, T, D, H).permute(0, 3, 1, 2)",
         "k = k.view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)": "k = k.view(B, T, D, H).permute(0, 3, 1, 2)",
         "v = v.view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)": "v = v.view(B, T, D, H).permute(0, 3, 1, 2)",
         "values = values.transpose(1, 2).reshape(B, T, E)": "values = values.permute(0, 2, 3, 1).reshape(B, T, E)"},
        {P2_OUTPUT: ""}, "every H-th feature to a head (view(B, T, D, H)), merged the same way: its attention "
        "dropout and its mask are right, which their checks grade alone", only=True),
    Bug("mha_mask_inverted",
        {"values, _ = scaled_dot_product(q, k, v, attn_drop_rate=drop, mask=mask)":
         "values, _ = scaled_dot_product(q, k, v, attn_drop_rate=drop, mask=None if mask is None else 1 - mask.float())"},
        {P2_MASK: "mask reaching the attention is inverted", "part2_public": "as it is (1 = padding)"},
        "MHA hands scaled_dot_product 1 - mask (this once got a message about splitting qkv_proj's output)",
        only=True),
    Bug("mha_dropout_on_values",
        {"        values, _ = scaled_dot_product(q, k, v, attn_drop_rate=drop, mask=mask)  # (B, H, T, D)\n":
         "        values, _ = scaled_dot_product(q, k, v, attn_drop_rate=0.0, mask=mask)\n"
         "        values = F.dropout(values, drop)  # (B, H, T, D)\n"},
        {P2_DROPOUT: "not attention with dropped attention weights"},
        "dropout on the attention's values instead of its weights: random in train() only, like the right one",
        only=True),
    Bug("mha_dropout_on_output",
        {"values, _ = scaled_dot_product(q, k, v, attn_drop_rate=drop, mask=mask)":
         "values, _ = scaled_dot_product(q, k, v, attn_drop_rate=0.0, mask=mask)",
         "return self.o_proj(values)  # (B, T, E)": "return F.dropout(self.o_proj(values), drop)  # (B, T, E)"},
        {P2_DROPOUT: "not attention with dropped attention weights"}, "dropout on the module's output", only=True),
    Bug("mha_xavier_per_qkv_block",
        {"        for layer in (self.qkv_proj, self.o_proj):\n"
         "            nn.init.xavier_uniform_(layer.weight)\n":
         "        with torch.no_grad():\n"
         "            for block in self.qkv_proj.weight.split(embed_dim, dim=0):  # W_Q, W_K, W_V each Xavier\n"
         "                nn.init.xavier_uniform_(block)\n"
         "        nn.init.xavier_uniform_(self.o_proj.weight)\n"
         "        for layer in (self.qkv_proj, self.o_proj):\n"},
        {"part2_public": "whole (3E, E) weight with one call"},
        "Xavier bounds of E x E blocks (fan_out E), wider than the (3E, E) weight's", only=True),
    Bug("mha_detached",
        {"qkv = self.qkv_proj(embedding)  # (B, T, 3E)": "qkv = self.qkv_proj(embedding).detach()  # (B, T, 3E)"},
        {P2_GRADS: "no gradient reaches qkv_proj"}, "detaches the projection"),
 # -- part 3 ---------------------------------------------------------------------------------
    Bug("residual_adds_embed_dim",
        {"self.norm1 = nn.LayerNorm(embed_dim)":
         "self.embed_dim = embed_dim\n        self.norm1 = nn.LayerNorm(embed_dim)",
         "x = self.norm1(embedding + self.dropout(self.attn(embedding, mask)))":
         "x = self.norm1(self.embed_dim + self.dropout(self.attn(embedding, mask)))"},
        {P3_OUTPUT: "adds a constant, not the block input", P3_RESIDUAL: "adds a constant"},
        "adds the integer embed_dim where the block input belongs"),
    Bug("pre_norm",
        {"x = self.norm1(embedding + self.dropout(self.attn(embedding, mask)))":
         "x = embedding + self.dropout(self.attn(self.norm1(embedding), mask))",
         "x = self.norm2(x + self.ffn(x))": "x = x + self.ffn(self.norm2(x))"},
        {P3_OUTPUT: "pre-norm", P3_POSTNORM: "pre-norm"}, "normalises before each sub-layer"),
    Bug("block_functional_dropout_in_eval",
        {"x = self.norm1(embedding + self.dropout(self.attn(embedding, mask)))":
         "x = self.norm1(embedding + F.dropout(self.attn(embedding, mask), self.dropout.p))"},
        {P3_DROPOUT: "a dropout acts in eval()", P3_OUTPUT: "", "part3_public": ""},
        "F.dropout without training=self.training: dropout in eval() too", only=True),
    Bug("relu_instead_of_gelu",
        {"            nn.GELU(),\n": "            nn.ReLU(),\n"},
        {P3_OUTPUT: "ReLU", P3_FFN: "ReLU"}, "ReLU in the feed-forward network"),
    Bug("no_ffn_dropout",
        {"            nn.Dropout(layer_drop_rate),\n        )": "        )"},
        {P3_FFN: "must end with nn.Dropout"}, "feed-forward network without its dropout"),
    Bug("no_attention_branch_dropout",
        {"x = self.norm1(embedding + self.dropout(self.attn(embedding, mask)))":
         "x = self.norm1(embedding + self.attn(embedding, mask))"},
        {P3_DROPOUT: "should be dropped"}, "self.dropout defined but never applied"),
    Bug("ffn_residual_adds_block_input",
        {"x = self.norm2(x + self.ffn(x))": "x = self.norm2(embedding + self.ffn(x))"},
        {P3_RESIDUAL: "feed-forward residual adds the block input"}, "second residual adds the block input",
        others={P3_OUTPUT}, only=True),
    Bug("no_ffn_residual",
        {"x = self.norm2(x + self.ffn(x))": "x = self.norm2(self.ffn(x))"},
        {P3_OUTPUT: "feed-forward residual is missing", P3_RESIDUAL: "feed-forward residual is missing"},
        "no residual around the feed-forward network: only the residual and output checks lose", only=True),
    Bug("no_attention_residual",
        {"x = self.norm1(embedding + self.dropout(self.attn(embedding, mask)))":
         "x = self.norm1(self.dropout(self.attn(embedding, mask)))"},
        {P3_OUTPUT: "attention residual is missing", P3_RESIDUAL: "attention residual is missing"},
        "no residual around the attention: only the residual and output checks lose", only=True),
    Bug("ffn_branch_dropped_twice",
        {"x = self.norm2(x + self.ffn(x))": "x = self.norm2(x + self.dropout(self.ffn(x)))"},
        {P3_FFN: "dropped twice"}, "self.dropout on the feed-forward branch, whose ffn already ends in Dropout",
        only=True),
    Bug("block_mask_not_passed",
        {"x = self.norm1(embedding + self.dropout(self.attn(embedding, mask)))":
         "x = self.norm1(embedding + self.dropout(self.attn(embedding)))"},
        {P3_OUTPUT: "mask is not passed to self.attn"}, "the block forgets the mask"),
 # -- part 5 ---------------------------------------------------------------------------------
    Bug("embedding_without_mask_row",
        {"self.embedding = nn.Embedding(vocab_size + 1, embed_dim)":
         "self.embedding = nn.Embedding(vocab_size, embed_dim)"},
        {P5_SHAPES: "vocab_size + 1"}, "no row for [MASK]: the shapes check's alone (the logits and gradient checks "
        "use the weights and ids it can take)", others={"part5_public"}, only=True),
    Bug("positional_encoding_not_added",
        {"x = self.pos_encoding(self.embedding(token_ids))": "x = self.embedding(token_ids)"},
        {P5_POSITIONAL: "positional encoding is not added", P5_LOGITS: "positional encoding is not added"},
        "forgets the positional encoding"),
    Bug("only_first_block",
        {"x, _ = self.blocks((x, mask))": "x, _ = self.blocks[0]((x, mask))"},
        {P5_CHAIN: "only the first block", P5_LOGITS: "only the first block"}, "uses blocks[0] only"),
    Bug("blocks_not_chained",
        {"x, _ = self.blocks((x, mask))":
         "embedded = x\n        for block in self.blocks:\n            x, _ = block((embedded, mask))"},
        {P5_CHAIN: "instead of the previous block's output"}, "feeds every block the embeddings"),
    Bug("blocks_in_a_list",
        {"self.blocks = nn.Sequential(\n            *[TransformerBlock(":
         "self.blocks = (\n            [TransformerBlock(",
         "x, _ = self.blocks((x, mask))": "for block in self.blocks:\n            x, mask = block((x, mask))"},
        {P5_BLOCKS: "nn.Sequential", P5_MODES: "in eval() two calls"},
        "a Python list: the blocks are not registered, so eval() does not reach them"),
    Bug("mask_none_pads_id_zero",
        {"        x = self.pos_encoding(self.embedding(token_ids))  # (B, T, E)":
         "        if mask is None:\n            mask = (token_ids == 0).float()  # id 0 taken for padding\n"
         "        x = self.pos_encoding(self.embedding(token_ids))  # (B, T, E)"},
        {P5_MODES: "mask=None must mean no padding"},
        "mask=None read as 'id 0 is padding': id 0 is a regular token, None means no padding", only=True),
    Bug("mask_turned_to_the_librarys_convention",
        {"x, _ = self.blocks((x, mask))  # (B, T, E); the blocks pass the mask along":
         "x, _ = self.blocks((x, None if mask is None else (mask == 0)))  # 1 = attend, as transformers has it"},
        {P5_LOGITS: "", P5_CHAIN: "did not get the padding mask", "part5_public": "pass the mask to the blocks"},
        "the blocks get the mask turned around (1 = real token): mask=None still means no padding, which the modes "
        "check grades alone", only=True),
    Bug("positional_encoding_default_rate",
        {"self.pos_encoding = PositionalEncoding(embed_dim, layer_drop_rate)":
         "self.pos_encoding = PositionalEncoding(embed_dim)"},
        {P5_POSITIONAL: "PositionalEncoding(embed_dim, layer_drop_rate)"},
        "the positional encoding's dropout at its default 0.1 (its rate is read nowhere in eval())", only=True),
    Bug("positional_encoding_without_dropout",
        {"self.pos_encoding = PositionalEncoding(embed_dim, layer_drop_rate)":
         "self.pos_encoding = PositionalEncoding(embed_dim, 0.0)"},
        {P5_POSITIONAL: "dropped 0% of the embeddings"}, "no dropout after the positional encoding", only=True),
    Bug("blocks_one_module_repeated",
        {BLOCKS_BUILT: "        self.blocks = nn.Sequential(*([TransformerBlock(embed_dim, n_heads, attn_drop_rate, "
                       "layer_drop_rate)] * n_layers))"},
        {P5_BLOCKS: "are the same module: the n_layers blocks must be separate modules (no parameters shared)",
         P5_LOGITS: "the n_layers blocks must be separate modules"},
        "a list of ONE block repeated n_layers times: every layer is the same module with the same weights (this "
        "once got full marks: the logits were excused as right given the student's own blocks)", only=True),
    Bug("blocks_shallow_copies_share_parameters",
        {BLOCKS_BUILT: "        import copy\n"
                       "        block = TransformerBlock(embed_dim, n_heads, attn_drop_rate, layer_drop_rate)\n"
                       "        self.blocks = nn.Sequential(*[copy.copy(block) for _ in range(n_layers)])"},
        {P5_BLOCKS: "share parameters: the n_layers blocks must be separate modules",
         P5_LOGITS: "the n_layers blocks must be separate modules"},
        "copy.copy of one block: separate module objects that share its parameters (a deep copy was meant)",
        only=True),
    Bug("bert_mask_not_passed",
        {"x, _ = self.blocks((x, mask))": "x, _ = self.blocks((x, None))"},
        {P5_CHAIN: "did not get the padding mask", P5_LOGITS: "mask does not reach the blocks"}, "drops the mask"),
    Bug("positional_encoding_added_twice",
        {"x = self.pos_encoding(self.embedding(token_ids))  # (B, T, E)":
         "x = self.pos_encoding(self.pos_encoding(self.embedding(token_ids)))  # (B, T, E)"},
        {P5_LOGITS: "", P5_POSITIONAL: ""}, "the positional encoding added twice: the blocks are still chained, each "
        "with the mask, which their check grades alone", only=True),
 # -- part 6 ---------------------------------------------------------------------------------
    Bug("labels_as_floats",
        {"labels = torch.where(selected, token_ids, torch.full_like(token_ids, -100))  # (B, T)":
         "labels = torch.where(selected, token_ids, torch.full_like(token_ids, -100)).float()  # (B, T)"},
        {P6_LABELS: "integer (long) tensor"}, "labels returned as floats: the labels check grades the dtype, the "
        "others what was selected and how", only=True),
    Bug("loss_defined_in_the_demo_cell",
        {"    loss = nn.CrossEntropyLoss(ignore_index=-100)(logits.reshape(-1, vocab_size), labels.reshape(-1))":
         "    loss = loss_fn(logits.reshape(-1, vocab_size), labels.reshape(-1))",
         "mlm_model.train()\n": "mlm_model.train()\nloss_fn = nn.CrossEntropyLoss(ignore_index=-100)\n"},
        {P6_STEP: "`loss_fn` is defined in cell 39, which the grader skipped: it is tagged skip-grading"},
        "the loss object is created in the training demo cell, which the grader never runs"),
    Bug("loss_defined_in_a_loop",
        {"    loss = nn.CrossEntropyLoss(ignore_index=-100)(logits.reshape(-1, vocab_size), labels.reshape(-1))":
         "    loss = loss_fn(logits.reshape(-1, vocab_size), labels.reshape(-1))"},
        {P6_STEP: "which the grader did not run: a `for` loop at the top level of a cell is never run"},
        "the loss object is created in a loop over settings", append=[
            "for loss_fn in [nn.CrossEntropyLoss(ignore_index=-100)]:\n    pass\n"]),
    Bug("labels_on_padding",
        {"    selected &= token_ids != pad_id  # padding is never selected\n"
         "    labels = torch.where(selected, token_ids, torch.full_like(token_ids, -100))  # (B, T)\n":
         "    labels = torch.where(selected, token_ids, torch.full_like(token_ids, -100))  # (B, T)\n"
         "    selected &= token_ids != pad_id  # padding is never selected\n"},
        {P6_PADDING: "padding positions got a label"}, "labels computed before padding is excluded: the padding "
        "check's alone (the proportions and only_mask checks count real tokens)", others={"part6_public"}, only=True),
    Bug("labels_on_unselected_positions",
        {"labels = torch.where(selected, token_ids, torch.full_like(token_ids, -100))":
         "labels = torch.where(selected, torch.full_like(token_ids, -100), token_ids)"},
        {P6_LABELS: "a corrupted position has label -100"}, "labels where nothing was selected"),
    Bug("padding_corrupted_without_label",
        {"    selected &= token_ids != pad_id  # padding is never selected\n"
         "    labels = torch.where(selected, token_ids, torch.full_like(token_ids, -100))  # (B, T)\n":
         "    labels = torch.where(selected & (token_ids != pad_id), token_ids, torch.full_like(token_ids, -100))\n"},
        {P6_PADDING: "padding positions were changed"}, "padding is never labelled but still corrupted: the padding "
        "check's alone (it cost 5.5 points over six checks)", others={"part6_public"}, only=True),
    Bug("padding_selected",
        {"    selected &= token_ids != pad_id  # padding is never selected\n": ""},
        {P6_PADDING: "padding positions were changed and got a label"}, "padding can be selected and corrupted"),
    Bug("mask_rate_ignored",
        {"selected = torch.rand(shape, generator=generator).to(device) < mask_rate":
         "selected = torch.rand(shape, generator=generator).to(device) < 0.15"},
        {P6_RATE: "expected about 30%"}, "hard-codes 15%"),
    Bug("random_replacement_can_be_mask_id",
        {"random_ids = torch.randint(0, vocab_size, shape": "random_ids = torch.randint(0, vocab_size + 1, shape"},
        {P6_RANDOM: "never the mask id"}, "draws replacements from 0..V, the mask id included"),
    Bug("proportions_90_10_0",
        {"to_mask = selected & (action < 0.8)": "to_mask = selected & (action < 0.9)",
         "to_random = selected & (action >= 0.8) & (action < 0.9)": "to_random = selected & (action >= 0.9)"},
        {P6_PROPORTIONS: "expected about 80%"}, "90% [MASK], 10% random, none unchanged"),
    Bug("proportions_70_10_20",
        {"to_mask = selected & (action < 0.8)": "to_mask = selected & (action < 0.7)",
         "to_random = selected & (action >= 0.8) & (action < 0.9)": "to_random = selected & (action >= 0.7) & (action < 0.8)"},
        {P6_PROPORTIONS: "expected about 80%"}, "70% [MASK], 10% random, 20% unchanged: the proportions check "
        "grades it alone (the random replacements are right)", only=True),
    Bug("proportions_swapped_random_unchanged",
        {"to_random = selected & (action >= 0.8) & (action < 0.9)": "to_random = selected & (action >= 0.8)"},
        {P6_PROPORTIONS: "expected about 80%"}, "20% random, none unchanged"),
    Bug("corrupts_every_token",
        {"to_mask = selected & (action < 0.8)": "to_mask = action < 0.8",
         "to_random = selected & (action >= 0.8) & (action < 0.9)": "to_random = (action >= 0.8) & (action < 0.9)"},
        {P6_PROPORTIONS: "applies to the selected tokens only", P6_PADDING: "padding positions were changed",
         P6_LABELS: "a corrupted position has label -100"},
        "the 80/10/10 draw applied to every position, not to the selected ones: about 90% of all tokens changed while "
        "the labels are right"),
    Bug("corrupts_every_real_token",
        {"to_mask = selected & (action < 0.8)": "to_mask = (token_ids != pad_id) & (action < 0.8)",
         "to_random = selected & (action >= 0.8) & (action < 0.9)":
         "to_random = (token_ids != pad_id) & (action >= 0.8) & (action < 0.9)"},
        {P6_PROPORTIONS: "applies to the selected tokens only", P6_LABELS: "a corrupted position has label -100"},
        "the 80/10/10 draw applied to every real token, not to the selected ones: about 90% "
        "of the real tokens changed while the labels are right: the rate check reads the selection from the labels",
        others={"part6_public"}, only=True),
    Bug("labels_copy_every_id",
        {"labels = torch.where(selected, token_ids, torch.full_like(token_ids, -100))": "labels = token_ids.clone()"},
        {"part6_public": "", P6_LABELS: "gives every real token a label"},
        "the input copied as its labels, -100 forgotten: the labels check's alone (the selection and the 80/10/10 "
        "corruption are right, read from the changes)", only=True),
    Bug("labels_are_the_corrupted_ids",
        {"    return masked_ids, labels  # the remaining 10% of selected tokens stay unchanged":
         "    labels = torch.where(selected, masked_ids, labels)\n"
         "    return masked_ids, labels  # the remaining 10% of selected tokens stay unchanged"},
        {"part6_public": "ORIGINAL", P6_LABELS: "ORIGINAL token id"},
        "labels taken from the corrupted ids: the labels check's alone", only=True),
    Bug("rate_twelve_percent",
        {"selected = torch.rand(shape, generator=generator).to(device) < mask_rate":
         "selected = torch.rand(shape, generator=generator).to(device) < 0.8 * mask_rate"},
        {"part6_public": "", P6_RATE: "expected about 15%"},
        "selects at 80% of the rate: the rate check's alone (the 80/10/10 split and only_mask are right)", only=True),
    Bug("only_mask_ignored",
        {"    if only_mask:\n        masked_ids[selected] = mask_id\n        return masked_ids, labels\n": ""},
        {P6_ONLY_MASK: "with only_mask=True every selected token must become the mask id"}, "only_mask unused"),
    Bug("mask_inputs_global_rng", definitions={"mask_inputs": MASK_GLOBAL_RNG},
        expect={P6_LABELS: "generators seeded the same (torch.Generator().manual_seed(5)) gave different results"},
        why="every draw from the global random state, the generator argument ignored (this once got full marks)",
        only=True),
    Bug("mask_inputs_hf_collator_global_rng", definitions={"mask_inputs": MASK_HF_COLLATOR_GLOBAL_RNG},
        expect={P6_LABELS: "draw every random number from the generator passed in"},
        why="Hugging Face's torch_mask_tokens copied as it was in older releases: torch.bernoulli and torch.randint "
            "without the generator", only=True),
    Bug("mask_inputs_own_seeded_generator",
        {"    shape, device = token_ids.shape, token_ids.device\n":
         "    generator = torch.Generator().manual_seed(0)  # for reproducibility\n"
         "    shape, device = token_ids.shape, token_ids.device\n"},
        {P6_LABELS: "selected the same positions with generators seeded differently"},
        "a generator of its own seeded with 0 replaces the one passed in: reproducible, the same masks every call",
        only=True),
    Bug("mlm_step_generator_not_passed",
        {STEP_MASKING: "    masked_ids, labels = mask_inputs(token_ids, mask_rate, mask_id, vocab_size, pad_id)"},
        {P6_STEP: "pass the step's generator on to mask_inputs"},
        "mlm_train_step calls mask_inputs without its generator (this once got full marks)", only=True),
    Bug("mlm_step_own_generator",
        {STEP_MASKING: "    masked_ids, labels = mask_inputs(token_ids, mask_rate, mask_id, vocab_size, pad_id, "
                       "generator=torch.Generator().manual_seed(0))"},
        {P6_STEP: "the same loss with generators seeded differently"},
        "mlm_train_step hands mask_inputs a generator of its own, seeded with 0: the same masks every step",
        only=True),
    Bug("mlm_step_zero_grad_between_backward_and_step",
        {"    optimizer.zero_grad()\n    loss.backward()\n    optimizer.step()":
         "    loss.backward()\n    optimizer.zero_grad()\n    optimizer.step()"},
        {P6_STEP: "zero_grad before backward, never between backward and step"},
        "zero_grad between backward and step wipes the gradients before the step (this once was told to call "
        "loss.backward() and optimizer.step(), which it does; the first loss, the model's, is right)", only=True),
    Bug("mlm_step_without_optimizer_step",
        {"    loss.backward()\n    optimizer.step()\n    return loss.item()": "    loss.backward()\n    return loss.item()"},
        {P6_STEP: ""}, "no optimizer.step(): the step check's alone (the first loss, the model's, is right)",
        others={"part6_public"}, only=True),
    Bug("no_zero_grad",
        {"    optimizer.zero_grad()\n    loss.backward()": "    loss.backward()"},
        {P6_STEP: "optimizer.zero_grad()"}, "gradients accumulate across steps"),
    Bug("loss_on_every_position",
        {"labels.reshape(-1))  # (B*T, V) vs (B*T,)": "token_ids.reshape(-1))  # (B*T, V) vs (B*T,)"},
        {P6_STEP: "only the selected ones"}, "cross-entropy against the original ids everywhere"),
    Bug("model_gets_original_ids",
        {"logits = model(masked_ids, padding_mask)": "logits = model(token_ids, padding_mask)"},
        {P6_STEP: "not the original batch"}, "the model sees the uncorrupted batch"),
    Bug("model_without_padding_mask",
        {"logits = model(masked_ids, padding_mask)": "logits = model(masked_ids)"},
        {P6_STEP: "padding mask"}, "no padding mask for the model"),
    Bug("loss_positions_labels_above_0",
        {"    loss = nn.CrossEntropyLoss(ignore_index=-100)(logits.reshape(-1, vocab_size), labels.reshape(-1))":
         "    sel = labels > 0  # the masked positions\n    loss = F.cross_entropy(logits[sel], labels[sel])"},
        {P6_STEP: "original id is 0 are left out"}, "selects the loss positions by labels > 0: drops the real token 0",
        only=True),
    Bug("padding_mask_for_pad_id_0",
        {"padding_mask = token_ids == pad_id": "padding_mask = token_ids == 0"},
        {P6_STEP: "padding mask token_ids == pad_id"}, "the padding mask built for pad_id 0 whatever pad_id is",
        only=True),
    Bug("step_sets_train_mode",
        {"    masked_ids, labels = mask_inputs(token_ids, mask_rate, mask_id, vocab_size, pad_id, generator=generator)":
         "    model.train()\n    masked_ids, labels = mask_inputs(token_ids, mask_rate, mask_id, vocab_size, pad_id, "
         "generator=generator)"},
        {P6_STEP: "train/eval mode"}, "forces train() inside the step"),
 # -- part 7 ---------------------------------------------------------------------------------
    Bug("accuracy_threshold_at_half",
        {"predictions = (logits.reshape(-1) > 0).float()": "predictions = (logits.reshape(-1) > 0.5).float()"},
        {P7_ACCURACY: "thresholds the raw logits at 0.5"}, "treats logits as probabilities"),
    Bug("accuracy_sigmoid_twice",
        {"predictions = (logits.reshape(-1) > 0).float()":
         "predictions = (torch.sigmoid(torch.sigmoid(logits.reshape(-1))) > 0.5).float()"},
        {P7_ACCURACY: "sigmoid twice"}, "sigmoid on top of a sigmoid"),
    Bug("accuracy_not_flattened",
        {"predictions = (logits.reshape(-1) > 0).float()": "predictions = (logits > 0).float()",
         "return (predictions == labels.reshape(-1).float()).float().mean()":
         "return (predictions == labels).float().mean()"},
        {P7_ACCURACY: "compares every logit with every label"},
        "(B, 1) logits against (B,) labels broadcast to (B, B)", only=True),
    Bug("accuracy_not_flattened_loops_pass_b1_logits",
        {"predictions = (logits.reshape(-1) > 0).float()": "predictions = (logits > 0).float()",
         "return (predictions == labels.reshape(-1).float()).float().mean()":
         "return (predictions == labels).float().mean()", **LOOPS_KEEP_B1_LOGITS},
        {P7_ACCURACY: "compares every logit with every label"},
        "the same accuracy, called by loops that keep the model's (B, 1) logits: the loops are graded with the "
        "reference's binary_accuracy, so the mistake costs the accuracy check only", only=True),
    Bug("loops_accuracy_on_probabilities",
        {"binary_accuracy(logits.detach(), labels)": "binary_accuracy(torch.sigmoid(logits.detach()), labels)",
         "binary_accuracy(logits, labels).item()": "binary_accuracy(torch.sigmoid(logits), labels).item()"},
        {P7_LOOPS: "predicting the same class for every example"},
        "the loops hand binary_accuracy sigmoid(logits): every prediction positive", only=True),
    Bug("classifier_dropout_on_encoder_output",
        {"_, hidden = self.rnn(embedded)": "_, hidden = self.rnn(self.dropout(embedded))"},
        {P7_DROPOUT: "GRU does not read the encoder's last hidden states unchanged"},
        "dropout on BERT's output before the GRU too", only=True),
    Bug("forward_returns_probabilities",
        {"return self.out(self.dropout(hidden))  # (B, output_dim)":
         "return torch.sigmoid(self.out(self.dropout(hidden)))  # (B, output_dim)"},
        {P7_STATES: "returns probabilities"}, "a sigmoid before BCEWithLogitsLoss (not graded again by the dropout "
        "check)", only=True),
    Bug("encoder_not_frozen",
        {"        for p in self.bert.parameters():\n"
         "            p.requires_grad = False  # frozen: only the GRU and the output layer are trained\n": ""},
        {P7_FROZEN: "requires_grad=True"}, "forgets to freeze (no_grad alone hides it from the gradient)"),
    Bug("encoder_trained",
        {"        for p in self.bert.parameters():\n"
         "            p.requires_grad = False  # frozen: only the GRU and the output layer are trained\n": "",
         "        with torch.no_grad():  # frozen encoder: no graph, no gradients\n"
         "            embedded = self.bert(token_ids)[0]": "        embedded = self.bert(token_ids)[0]"},
        {P7_FROZEN: "requires_grad=True"}, "fine-tunes the encoder"),
    Bug("everything_under_no_grad",
        {"            embedded = self.bert(token_ids)[0]  # last_hidden_state: (B, T, hidden_size)\n"
         "        _, hidden = self.rnn(embedded)":
         "            embedded = self.bert(token_ids)[0]  # last_hidden_state: (B, T, hidden_size)\n"
         "            _, hidden = self.rnn(embedded)"},
        {P7_FROZEN: "no gradient reaches the GRU"}, "the GRU runs under no_grad too"),
    Bug("gru_output_last_position",
        {"_, hidden = self.rnn(embedded)": "output, hidden = self.rnn(embedded)",
         "hidden = torch.cat((hidden[-2], hidden[-1]), dim=-1)": "hidden = output[:, -1]"},
        {P7_STATES: "output[:, -1] is used"}, "takes output[:, -1] for both directions"),
    Bug("backward_state_only",
        {"hidden = torch.cat((hidden[-2], hidden[-1]), dim=-1)": "hidden = hidden[-1]",
         "self.out = nn.Linear(hidden_dim * 2 if bidirectional else hidden_dim, output_dim)":
         "self.out = nn.Linear(hidden_dim, output_dim)"},
        {P7_STATES: "out must be nn.Linear(2 * hidden_dim, output_dim)"}, "unidirectional selection of hidden[-1]"),
    Bug("first_layer_states",
        {"hidden = torch.cat((hidden[-2], hidden[-1]), dim=-1)": "hidden = torch.cat((hidden[0], hidden[1]), dim=-1)"},
        {P7_STATES: "first GRU layer"}, "the bottom layer's states"),
    Bug("hidden_size_hard_coded",
        {"embedding_dim = bert.config.hidden_size": "embedding_dim = 768"},
        {P7_SHAPES: "bert.config.hidden_size"}, "BERT-base's width hard-coded"),
    Bug("dropout_never_applied",
        {"return self.out(self.dropout(hidden))  # (B, output_dim)": "return self.out(hidden)  # (B, output_dim)"},
        {P7_DROPOUT: "self.dropout"}, "dropout module defined, never called"),
    Bug("evaluate_in_train_mode",
        {"    model.eval()\n    total_loss, total_correct, total_n = 0.0, 0.0, 0\n    with torch.no_grad():":
         "    total_loss, total_correct, total_n = 0.0, 0.0, 0\n    with torch.no_grad():"},
        {P7_LOOPS: "eval() mode"}, "evaluate forgets model.eval()"),
    Bug("train_epoch_step_before_backward",
        {"        optimizer.zero_grad()\n        loss.backward()\n        optimizer.step()\n":
         "        optimizer.zero_grad()\n        optimizer.step()\n        loss.backward()\n"},
        {P7_LOOPS: "no step changed the parameters"}, "optimizer.step() before loss.backward(): steps that do nothing"),
    Bug("mlm_step_returns_tensor",
        {"    return loss.item()": "    return loss"},
        {P6_STEP: "not a tensor"}, "mlm_train_step returns the loss tensor, not a float", only=True),
    Bug("leftover_raise_in_small_bert",
        {"        self.head = nn.Linear(embed_dim, vocab_size)\n":
         "        self.head = nn.Linear(embed_dim, vocab_size)\n        raise NotImplementedError()\n"},
        {P5_SHAPES: "(it raised NotImplementedError), at cell"}, "a stub's raise left below written code"),
    Bug("unselected_labels_zero",
        {"labels = torch.where(selected, token_ids, torch.full_like(token_ids, -100))":
         "labels = torch.where(selected, token_ids, torch.zeros_like(token_ids))"},
        {"part6_public": "must have the label -100", P6_LABELS: "-100"}, "label 0 instead of -100 where not selected"),
    Bug("loops_average_batch_means", definitions={"train_epoch": TRAIN_BATCH_MEANS, "evaluate": EVALUATE_BATCH_MEANS},
        expect={P7_LOOPS: "evaluate and train_epoch average the batch means for the mean loss and accuracy"},
        why="sums of batch means divided by len(loader): the last, smaller batch weighs as much as a full one "
            "(this was once accepted)", only=True),
    Bug("evaluate_averages_batch_means", definitions={"evaluate": EVALUATE_BATCH_MEANS},
        expect={P7_LOOPS: "evaluate averages the batch means"},
        why="evaluate alone divides its sums of batch means by len(loader)", only=True),
    Bug("train_epoch_sigmoid_before_bce_with_logits",
        {"        loss = criterion(logits, labels)\n        optimizer.zero_grad()\n":
         "        loss = criterion(torch.sigmoid(logits), labels)\n        optimizer.zero_grad()\n"},
        {P7_LOOPS: "train_epoch: criterion gets the logits: BCEWithLogitsLoss applies the sigmoid itself"},
        "a sigmoid before BCEWithLogitsLoss in train_epoch (this once got advice about zero_grad)", only=True),
    Bug("evaluate_sigmoid_before_bce_with_logits",
        {"total_loss += criterion(logits, labels).item() * n":
         "total_loss += criterion(torch.sigmoid(logits), labels).item() * n"},
        {P7_LOOPS: "evaluate: criterion gets the logits: BCEWithLogitsLoss applies the sigmoid itself"},
        "a sigmoid before BCEWithLogitsLoss in evaluate", only=True),
    Bug("train_epoch_no_zero_grad",
        {"        loss = criterion(logits, labels)\n        optimizer.zero_grad()\n":
         "        loss = criterion(logits, labels)\n"},
        {P7_LOOPS: "each batch's own gradient"}, "gradients accumulate over the epoch"),
 # -- garbage: consistent with itself, computing nothing (checks must not pay for it) ----------------
    Bug("sdp_returns_q_q", definitions={"scaled_dot_product": SDP_Q_Q},
        expect={P1_WEIGHTS: "", P1_VALUES: "", P1_MASK: "", P1_BOOL: "not softmax weights", P1_DROPOUT: "exact",
                "part1_public": ""}, why="returns (q, q)"),
    Bug("sdp_returns_zeros", definitions={"scaled_dot_product": SDP_ZEROS},
        expect={P1_WEIGHTS: "", P1_VALUES: "not softmax weights", P1_MASK: "", P1_BOOL: "not softmax weights",
                P1_DROPOUT: "exact", "part1_public": ""}, why="zero values and zero weights"),
    Bug("sdp_uniform_weights", definitions={"scaled_dot_product": SDP_UNIFORM},
        expect={P1_WEIGHTS: "", P1_VALUES: "do not depend on the queries", P1_MASK: "do not depend on the queries",
                P1_BOOL: "do not depend on the queries", P1_DROPOUT: "do not depend on the queries"},
        why="uniform weights over the real keys, with a correct mask and dropout, never looking at q and k"),
    Bug("sdp_q_times_k_times_v", definitions={"scaled_dot_product": SDP_Q_TIMES_K_TIMES_V},
        expect={P1_WEIGHTS: "", P1_VALUES: "", P1_MASK: "", P1_BOOL: "not softmax weights", P1_DROPOUT: "exact",
                P1_GRADS: "only for a function that computes attention", "part1_public": ""},
        why="returns (q * k * v, q k^T): differentiable, its gradients its true ones, but not attention",
        confined_to="1."),
    Bug("sdp_identity_weights", definitions={"scaled_dot_product": SDP_IDENTITY},
        expect={P1_WEIGHTS: "", P1_VALUES: "do not depend on the queries", P1_MASK: "",
                P1_BOOL: "do not depend on the queries", P1_DROPOUT: "do not depend on the queries"},
        why="returns v with identity weights"),
    Bug("mha_skips_attention_sdp_identity",
        definitions={"scaled_dot_product": SDP_IDENTITY},
        replace={"values, _ = scaled_dot_product(q, k, v, attn_drop_rate=drop, mask=mask)  # (B, H, T, D)":
                 "values = v  # (B, H, T, D)"},
        expect={P2_OUTPUT: "", P2_MASK: "", "part2_public": "changed nothing at the other positions"},
        why="MHA without attention: matches its own scaled_dot_product only because that one returns v"),
    Bug("mha_returns_zeros", replace={
            "        B, T, E = embedding.shape\n        H, D = self.n_heads, self.head_dim\n":
            "        return torch.zeros_like(embedding)\n        B, T, E = embedding.shape\n"
            "        H, D = self.n_heads, self.head_dim\n"},
        expect={"part2_public": "changed nothing at the other positions", P2_DROPOUT: "same output for a different input",
                P2_OUTPUT: "", P2_GRADS: ""}, why="MHA returns zeros"),
    Bug("mha_returns_input", replace={
            "        B, T, E = embedding.shape\n        H, D = self.n_heads, self.head_dim\n":
            "        return embedding\n        B, T, E = embedding.shape\n        H, D = self.n_heads, self.head_dim\n"},
        expect={"part2_public": "changed nothing at the other positions", P2_DROPOUT: "returns its input unchanged",
                P2_OUTPUT: ""}, why="MHA returns its input"),
    Bug("block_skips_attention_mha_zeros", replace={
            "        B, T, E = embedding.shape\n        H, D = self.n_heads, self.head_dim\n":
            "        return torch.zeros_like(embedding)\n        B, T, E = embedding.shape\n"
            "        H, D = self.n_heads, self.head_dim\n",
            "x = self.norm1(embedding + self.dropout(self.attn(embedding, mask)))": "x = self.norm1(embedding)"},
        expect={P3_OUTPUT: "the attention branch is missing", P3_RESIDUAL: ""},
        why="a block without attention matches its own MHA only because that one returns zeros"),
    Bug("bert_skips_blocks_identity_blocks", replace={
            "        x = self.norm1(embedding + self.dropout(self.attn(embedding, mask)))  # (B, T, E)\n"
            "        x = self.norm2(x + self.ffn(x))  # (B, T, E)\n": "        x = embedding\n",
            "x, _ = self.blocks((x, mask))  # (B, T, E)": "x = x  # blocks skipped"},
        expect={P5_LOGITS: "the blocks are not applied", P5_CHAIN: ""},
        why="a model without blocks matches its own blocks only because they return their input"),
    Bug("bert_returns_zeros", replace={
            "        x = self.pos_encoding(self.embedding(token_ids))  # (B, T, E)\n":
            "        return torch.zeros(*token_ids.shape, self.vocab_size)\n"},
        expect={"part5_public": "changed no logit at the other positions", P5_SHAPES: "same logits for other token ids",
                P5_BLOCKS: "same logits for other token ids", P5_MODES: "same for other token ids", P5_LOGITS: ""},
        why="SmallBERT returns zero logits of the right shape"),
    Bug("mask_inputs_returns_input_as_labels",
        {"    shape, device = token_ids.shape, token_ids.device\n":
         "    return token_ids.clone(), token_ids.clone()\n    shape, device = token_ids.shape, token_ids.device\n"},
        {P6_LABELS: "gives every real token a label", P6_PADDING: "", P6_RATE: ""}, "returns (token_ids, token_ids)"),
    Bug("mask_inputs_selects_nothing",
        {"    shape, device = token_ids.shape, token_ids.device\n":
         "    return token_ids.clone(), torch.full_like(token_ids, -100)\n"
         "    shape, device = token_ids.shape, token_ids.device\n"},
        {P6_LABELS: "selected no token", P6_PADDING: "no real token was selected", P6_RATE: ""},
        "returns the batch unchanged with every label -100"),
    Bug("mlm_step_returns_a_constant",
        {"    masked_ids, labels = mask_inputs(token_ids, mask_rate, mask_id, vocab_size, pad_id, generator=generator)\n"
         "    padding_mask":
         "    return math.log(vocab_size)\n"
         "    masked_ids, labels = mask_inputs(token_ids, mask_rate, mask_id, vocab_size, pad_id, generator=generator)\n"
         "    padding_mask"},
        {P6_FIRST_LOSS: "did not change the model's parameters", P6_STEP: ""}, "returns ln(V) and trains nothing"),
    Bug("classifier_ignores_its_input",
        {"return self.out(self.dropout(hidden))  # (B, output_dim)":
         "return self.out(self.dropout(torch.zeros_like(hidden)))  # (B, output_dim)"},
        {P7_SHAPES: "same logits for other token ids", P7_DROPOUT: "same for other token ids",
         "part7_public": "a hidden test failed", P7_STATES: ""},
        "the output layer reads zeros: the logits are its bias"),
    # public checks that a constant or a position-wise stand-in must not pass
    Bug("accuracy_constant",
        {"    predictions = (logits.reshape(-1) > 0).float()  # sigmoid(z) > 0.5  <=>  z > 0\n"
         "    return (predictions == labels.reshape(-1).float()).float().mean()":
         "    return torch.tensor(0.75)  # what the notebook's example expects"},
        {"part7_public": "1 of 3 predictions is right", P7_ACCURACY: ""}, "binary_accuracy returns the example's "
        "answer, whatever it is given", others={P7_LOOPS}, confined_to="7."),
    Bug("block_attention_position_wise",
        {"x = self.norm1(embedding + self.dropout(self.attn(embedding, mask)))":
         "x = self.norm1(embedding + self.dropout(embedding))  # the attention left out"},
        {"part3_public": "changed nothing at the other positions", P3_OUTPUT: ""}, "the attention branch replaced by "
        "the block's input: nothing mixes the positions", others={P3_DROPOUT, P3_RESIDUAL}),
    Bug("bert_without_blocks",
        {"x, _ = self.blocks((x, mask))  # (B, T, E); the blocks pass the mask along":
         "x = x  # the blocks left out"},
        {"part5_public": "changed no logit at the other positions", P5_LOGITS: ""}, "the embeddings read by the head "
        "directly, no block run", others={P5_CHAIN, P5_MODES, P6_STEP, P6_FIRST_LOSS}),
]
