"""Each graded part broken on its own: the answer key with ONE part (or one graded definition of it) left as
the student's stub, made to raise, made to return NaN, or made silently wrong.

Every item is `confined_to` its part: the other parts are the answer key's, so they must keep every point.
A part is graded on its own merits only if all of these hold; `benchmarks/corpus_by_part.py` prints, per
item, the points lost in every part (the cross-part losses are what dependency substitution removes).

The NaN items keep the right shapes and dtypes (NaN cast to an integer is the most negative int64), so
only the values are garbage. The silently wrong items are plausible mistakes that bugs.py does not hold.
"""
from __future__ import annotations

from autograder.corpus import Bug
from bugs import (
    P1_BOOL, P1_DROPOUT, P1_MASK, P1_VALUES, P1_WEIGHTS, P2_DROPOUT, P2_GRADS, P2_MASK, P2_OUTPUT, P3_DROPOUT,
    P3_FFN, P3_OUTPUT, P3_POSTNORM, P3_RESIDUAL, P5_BLOCKS, P5_CHAIN, P5_LOGITS, P5_MODES, P5_POSITIONAL,
    P5_SHAPES, P6_FIRST_LOSS, P6_LABELS, P6_ONLY_MASK, P6_PADDING, P6_PROPORTIONS, P6_RANDOM, P6_RATE, P6_STEP,
    P7_ACCURACY, P7_DROPOUT, P7_FROZEN, P7_LOOPS, P7_SHAPES, P7_STATES,
)

NAN = ' * float("nan")'
NOT_IMPLEMENTED = "not implemented"

PART1, PART2, PART3, PART5, PART6, PART7 = "1.", "2.", "3.", "5.", "6.", "7."

MASK_INPUTS_NAN = '''def mask_inputs(token_ids, mask_rate, mask_id, vocab_size, pad_id, only_mask=False, generator=None):
    # everything computed in floating point, where a 0/0 made every value NaN, then cast back to ids
    garbage = torch.full(token_ids.shape, float("nan"), device=token_ids.device)
    return garbage.long(), garbage.long()
'''

BUGS: list[Bug] = [
    # -- part 1: scaled_dot_product ---------------------------------------------------------------------
    Bug("part1_stub", stub=["part1_scaled_dot_product"], why="part 1 left as the stub", confined_to=PART1,
        expect={P1_WEIGHTS: NOT_IMPLEMENTED, P1_VALUES: NOT_IMPLEMENTED, P1_MASK: NOT_IMPLEMENTED,
                P1_BOOL: NOT_IMPLEMENTED, P1_DROPOUT: NOT_IMPLEMENTED}),
    Bug("part1_raises",
        {"logits = q @ k.transpose(-2, -1) / math.sqrt(d)": "logits = torch.bmm(q, k.transpose(-2, -1)) / math.sqrt(d)"},
        {P1_WEIGHTS: "RuntimeError", P1_MASK: "RuntimeError"},
        "torch.bmm on 4-d tensors (batch1 must be a 3D tensor)", confined_to=PART1),
    Bug("part1_nan", {"return values, attention": f"return values{NAN}, attention{NAN}"},
        {P1_WEIGHTS: "", P1_VALUES: "", P1_MASK: "", P1_BOOL: "", P1_DROPOUT: "", "part1_public": ""},
        "NaN values and weights of the right shapes: every check of part 1 must fail", confined_to=PART1),
    Bug("part1_wrong_scale_by_d",
        {"logits = q @ k.transpose(-2, -1) / math.sqrt(d)": "logits = q @ k.transpose(-2, -1) / d"},
        {P1_WEIGHTS: "divided by D instead of sqrt(D)"}, "divides the logits by D", confined_to=PART1),
    Bug("part1_wrong_dropout_always_on",
        {"    if attn_drop_rate > 0:\n        attention = F.dropout(attention, p=attn_drop_rate)":
         "    attention = F.dropout(attention, p=0.1)  # regularise"},
        {P1_DROPOUT: "exact", P1_WEIGHTS: ""},
        "a fixed dropout rate, on even at attn_drop_rate=0 (so MHA in eval() is random)", confined_to=PART1),
    # -- part 2: MultiHeadAttention ---------------------------------------------------------------------
    Bug("part2_stub", stub=["part2_multi_head_attention"], why="part 2 left as the stub", confined_to=PART2,
        expect={P2_OUTPUT: NOT_IMPLEMENTED, P2_MASK: NOT_IMPLEMENTED, P2_DROPOUT: NOT_IMPLEMENTED,
                P2_GRADS: NOT_IMPLEMENTED}),
    Bug("part2_raises", {"q, k, v = qkv.split(E, dim=-1)": "q, k, v = qkv.split(3, dim=-1)"},
        {P2_OUTPUT: "ValueError", P2_MASK: "ValueError"},
        "split(3) (chunks of size 3) for chunk(3): too many values to unpack", confined_to=PART2),
    Bug("part2_nan", {"return self.o_proj(values)  # (B, T, E)": f"return self.o_proj(values){NAN}  # (B, T, E)"},
        {P2_OUTPUT: "", P2_MASK: "", P2_DROPOUT: "", P2_GRADS: "", "part2_public": ""},
        "NaN outputs of the right shape", confined_to=PART2),
    Bug("part2_wrong_q_k_swapped", {"q, k, v = qkv.split(E, dim=-1)": "k, q, v = qkv.split(E, dim=-1)"},
        {P2_OUTPUT: "differs from the reference's"},
        "reads the first E features as keys and the second as queries (the mask still hides the padding: the mask "
        "check grades that alone)", confined_to=PART2),
    # -- part 3: TransformerBlock -----------------------------------------------------------------------
    Bug("part3_stub", stub=["part3_transformer_block"], why="part 3 left as the stub", confined_to=PART3,
        expect={P3_OUTPUT: NOT_IMPLEMENTED, P3_RESIDUAL: NOT_IMPLEMENTED, P3_POSTNORM: NOT_IMPLEMENTED,
                P3_FFN: NOT_IMPLEMENTED, P3_DROPOUT: NOT_IMPLEMENTED}),
    Bug("part3_raises",
        {"x = self.norm1(embedding + self.dropout(self.attn(embedding, mask)))":
         "x = self.norm1(embedding + self.dropout(self.attn(inputs)))"},
        {P3_OUTPUT: "raised", P3_RESIDUAL: "raised"},
        "hands the (embedding, mask) tuple to the attention", confined_to=PART3),
    Bug("part3_nan", {"        return x, mask": f"        return x{NAN}, mask"},
        {P3_OUTPUT: "", P3_RESIDUAL: "", P3_POSTNORM: "", P3_FFN: "", P3_DROPOUT: "", "part3_public": ""},
        "NaN embeddings of the right shape", confined_to=PART3),
    Bug("part3_wrong_ffn_reads_block_input",
        {"x = self.norm2(x + self.ffn(x))": "x = self.norm2(x + self.ffn(embedding))"},
        {P3_RESIDUAL: "feed-forward network gets the block input"},
        "the feed-forward network reads the block input instead of x'", confined_to=PART3),
    # -- part 5: SmallBERT ------------------------------------------------------------------------------
    Bug("part5_stub", stub=["part5_small_bert"], why="part 5 left as the stub", confined_to=PART5,
        expect={P5_SHAPES: NOT_IMPLEMENTED, P5_BLOCKS: NOT_IMPLEMENTED, P5_LOGITS: NOT_IMPLEMENTED,
                P5_POSITIONAL: NOT_IMPLEMENTED, P5_CHAIN: NOT_IMPLEMENTED, P5_MODES: NOT_IMPLEMENTED}),
    Bug("part5_raises", {"x, _ = self.blocks((x, mask))": "x, _ = self.blocks(x, mask)"},
        {P5_LOGITS: "TypeError", P5_CHAIN: "TypeError"},
        "calls the nn.Sequential with two arguments", confined_to=PART5),
    Bug("part5_nan", {"return self.head(x)  # (B, T, V)": f"return self.head(x){NAN}  # (B, T, V)"},
        {P5_SHAPES: "", P5_BLOCKS: "", P5_LOGITS: "", P5_POSITIONAL: "", P5_CHAIN: "", P5_MODES: "",
         "part5_public": ""},
        "NaN logits of the right shape", confined_to=PART5),
    Bug("part5_wrong_embedding_scaled",
        {"x = self.pos_encoding(self.embedding(token_ids))":
         "x = self.pos_encoding(self.embedding(token_ids) * math.sqrt(self.embedding.embedding_dim))"},
        {P5_POSITIONAL: "multiplied by sqrt(E)", P5_LOGITS: "multiplied by sqrt(E)"},
        "scales the embeddings by sqrt(E) as in the original Transformer", confined_to=PART5),
    # -- part 6: mask_inputs and mlm_train_step (one solution cell) --------------------------------------
    Bug("part6_stub", stub=["part6_mlm"], why="part 6 left as the stub", confined_to=PART6,
        expect={P6_LABELS: NOT_IMPLEMENTED, P6_PADDING: NOT_IMPLEMENTED, P6_RATE: NOT_IMPLEMENTED,
                P6_PROPORTIONS: NOT_IMPLEMENTED, P6_RANDOM: NOT_IMPLEMENTED, P6_ONLY_MASK: NOT_IMPLEMENTED,
                P6_STEP: NOT_IMPLEMENTED, P6_FIRST_LOSS: NOT_IMPLEMENTED}),
    Bug("part6_mask_inputs_raises",
        {"selected = torch.rand(shape, generator=generator).to(device) < mask_rate":
         "selected = torch.bernoulli(mask_rate, generator=generator).to(device).bool()"},
        {P6_LABELS: "TypeError", P6_RATE: "TypeError"},
        "torch.bernoulli on a float instead of a tensor of probabilities", confined_to=PART6),
    Bug("part6_mask_inputs_nan", definitions={"mask_inputs": MASK_INPUTS_NAN},
        expect={P6_LABELS: "", P6_PADDING: "", P6_RATE: "", P6_PROPORTIONS: "", P6_RANDOM: "", P6_ONLY_MASK: "",
                "part6_public": ""},
        why="NaN ids (cast to long) of the right shape", confined_to=PART6),
    Bug("part6_mask_inputs_wrong_in_place",
        {"masked_ids = token_ids.clone()": "masked_ids = token_ids  # (B, T)"},
        {P6_LABELS: "modified the token_ids tensor"}, "corrupts the caller's batch in place", confined_to=PART6),
    Bug("part6_step_raises",
        {"loss = nn.CrossEntropyLoss(ignore_index=-100)(logits.reshape(-1, vocab_size), labels.reshape(-1))":
         "loss = nn.CrossEntropyLoss(ignore_index=-100)(logits, labels)"},
        {P6_STEP: "RuntimeError", P6_FIRST_LOSS: "RuntimeError"},
        "cross-entropy on (B, T, V) logits against (B, T) labels", confined_to=PART6),
    Bug("part6_step_nan", {"return loss.item()": f"return loss.item(){NAN}"},
        {P6_STEP: "", P6_FIRST_LOSS: ""}, "a NaN loss", confined_to=PART6),
    Bug("part6_step_wrong_step_before_backward",
        {"    optimizer.zero_grad()\n    loss.backward()\n    optimizer.step()":
         "    optimizer.zero_grad()\n    optimizer.step()\n    loss.backward()"},
        {P6_STEP: "the parameters did not change"}, "optimizer.step() before loss.backward()", confined_to=PART6),
    # -- part 7: BERTGRUSentiment -----------------------------------------------------------------------
    Bug("part7_model_stub", stub=["part7_model"], why="the classifier left as the stub", confined_to=PART7,
        expect={P7_SHAPES: NOT_IMPLEMENTED, P7_FROZEN: NOT_IMPLEMENTED, P7_STATES: NOT_IMPLEMENTED,
                P7_DROPOUT: NOT_IMPLEMENTED}),
    Bug("part7_model_raises",
        {"embedded = self.bert(token_ids)[0]  # last_hidden_state": "embedded = self.bert(token_ids)  # last_hidden_state"},
        {P7_SHAPES: "raised", P7_STATES: "raised"},
        "hands the encoder's output object (not last_hidden_state) to the GRU", confined_to=PART7),
    Bug("part7_model_nan",
        {"return self.out(self.dropout(hidden))  # (B, output_dim)":
         f"return self.out(self.dropout(hidden)){NAN}  # (B, output_dim)"},
        {P7_SHAPES: "", P7_FROZEN: "", P7_STATES: "", P7_DROPOUT: "", "part7_public": ""},
        "NaN logits of the right shape", confined_to=PART7),
    Bug("part7_model_wrong_mean_pooling",
        {"_, hidden = self.rnn(embedded)": "output, hidden = self.rnn(embedded)",
         "return self.out(self.dropout(hidden))  # (B, output_dim)":
         "return self.out(self.dropout(output.mean(dim=1)))  # (B, output_dim)"},
        {P7_STATES: "the logits differ from out(dropout(final hidden state))"},
        "averages the GRU outputs over time instead of taking the final states", confined_to=PART7),
    # -- part 7: binary_accuracy ------------------------------------------------------------------------
    Bug("part7_accuracy_stub", stub=["part7_binary_accuracy"], why="binary_accuracy left as the stub",
        expect={P7_ACCURACY: NOT_IMPLEMENTED}, confined_to=PART7),
    Bug("part7_accuracy_raises",
        {"predictions = (logits.reshape(-1) > 0).float()": "predictions = (logits.squeeze(1) > 0).float()"},
        {P7_ACCURACY: "IndexError"}, "squeeze(1) on 1-d logits", confined_to=PART7),
    Bug("part7_accuracy_nan",
        {"return (predictions == labels.reshape(-1).float()).float().mean()":
         f"return (predictions == labels.reshape(-1).float()).float().mean(){NAN}"},
        {P7_ACCURACY: "not the fraction", "part7_public": ""}, "a NaN accuracy", confined_to=PART7),
    Bug("part7_accuracy_wrong_count",
        {"return (predictions == labels.reshape(-1).float()).float().mean()":
         "return (predictions == labels.reshape(-1).float()).float().sum()"},
        {P7_ACCURACY: "not the fraction", "part7_public": ""},
        "the number of correct predictions instead of the fraction", confined_to=PART7),
    # -- part 7: train_epoch and evaluate ---------------------------------------------------------------
    Bug("part7_loops_stub", stub=["part7_loops"], why="train_epoch and evaluate left as the stub",
        expect={P7_LOOPS: NOT_IMPLEMENTED}, confined_to=PART7),
    Bug("part7_loops_raise",
        {"logits = model(token_ids).squeeze(1)": "logits = model(token_ids)"},
        {P7_LOOPS: "ValueError"}, "(B, 1) logits against (B,) labels in BCEWithLogitsLoss", confined_to=PART7),
    Bug("part7_loops_nan",
        {"return total_loss / total_n, total_correct / total_n":
         f"return total_loss / total_n{NAN}, total_correct / total_n{NAN}"},
        {P7_LOOPS: "mean loss"}, "NaN means", confined_to=PART7),
    Bug("part7_loops_wrong_no_train_mode",
        {"    model.train()\n    total_loss": "    total_loss"},
        {P7_LOOPS: "train() mode"}, "train_epoch relies on the model being in train() mode already",
        confined_to=PART7),
]
