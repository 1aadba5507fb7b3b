"""Hidden checks of part 5: Bert(config) (forward(input_ids, token_type_ids=None, attention_mask=None)),
ours_name(hf_name) and load_bert_weights(model, hf_state_dict).

The library's BertModel is built here, in the judge, from a small seeded BertConfig (no download). The student's
Bert is built with the student's own Embeddings and Encoder; where those fail it, the checks run again with the
reference answering for them (depends_on), or with recording probes with known maps, so parts 3 and 4 are graded
on their own:
- ours_name on every name of the library's state_dict;
- load_bert_weights: every tensor lands where the notebook's table says, and a state_dict that does not fit is refused;
- Bert's wiring (embeddings -> encoder with the mask -> tanh(pooler([CLS]))) through recording probes;
- with the library's weights, sequence_output and pooled_output equal BertModel's to 1e-5.
"""
import re

import torch

from _common import config, gradients_right, load, mirror_weights, remote_config, tensor_out
from autograder.testing import Fail, StudentError, check, close, gen, keep

PART = "5. Loading the library's weights"
BERT_PARTS = ["Embeddings", "Encoder"]  # what Bert(config) builds: stand-ins here, graded in parts 3 and 4
# load_bert_weights calls ours_name (graded on its own by the names check): the loading checks run again with the
# reference's names, so that a wrong rule costs the names check only
LOAD_PARTS = BERT_PARTS + ["ours_name"]

RULES = [  # the notebook's table: library name -> ours
    (r"^embeddings\.word_embeddings\.", "embeddings.word."),
    (r"^embeddings\.position_embeddings\.", "embeddings.position."),
    (r"^embeddings\.token_type_embeddings\.", "embeddings.segment."),
    (r"^embeddings\.LayerNorm\.", "embeddings.norm."),
    (r"^encoder\.layer\.(\d+)\.attention\.self\.(query|key|value)\.", r"encoder.layers.\1.\2."),
    (r"^encoder\.layer\.(\d+)\.attention\.output\.dense\.", r"encoder.layers.\1.attn_out."),
    (r"^encoder\.layer\.(\d+)\.attention\.output\.LayerNorm\.", r"encoder.layers.\1.attn_norm."),
    (r"^encoder\.layer\.(\d+)\.intermediate\.dense\.", r"encoder.layers.\1.ffn_in."),
    (r"^encoder\.layer\.(\d+)\.output\.dense\.", r"encoder.layers.\1.ffn_out."),
    (r"^encoder\.layer\.(\d+)\.output\.LayerNorm\.", r"encoder.layers.\1.ffn_norm."),
    (r"^pooler\.dense\.", "pooler."),
]
BUFFERS = ["embeddings.position_ids", "embeddings.token_type_ids"]  # kept in the state_dict by some library versions


def correct_name(hf_name):
    for pattern, replacement in RULES:
        name, hits = re.subn(pattern, replacement, hf_name)
        if hits:
            return name
    return None


def library_bert(cfg, seed):
    """The library's BertModel (built in the judge, seeded, eval mode) with non-trivial LayerNorm weights."""
    import transformers

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = transformers.BertModel(transformers.BertConfig(**cfg)).eval()
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "LayerNorm" in name or name.endswith("bias"):
                    p.add_(0.1 * torch.randn(p.shape))  # biases and norms away from 0 and 1: a mix-up shows
    return model


def library_state(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


# -- ours_name ---------------------------------------------------------------------------------------------------

def name_hint(hf_name, got):
    if got is not None and "attn_norm" in got and "attention" not in hf_name or \
            got is not None and "ffn_norm" in got and "attention" in hf_name:
        return ("the two LayerNorms of a layer are mixed up: attention.output.LayerNorm is attn_norm (after the "
                "attention), output.LayerNorm is ffn_norm (after the feed-forward network)")
    if got is not None and "attn_out" in got and "attention" not in hf_name or \
            got is not None and "ffn_out" in got and "attention" in hf_name:
        return "attention.output.dense is attn_out; output.dense (after intermediate.dense) is ffn_out"
    return "see the table of part 5"


@check("ours_name: every tensor of the library's BertModel gets its name in our Bert", points=1.5, part=PART)
def names(sub, ref):
    names_ = list(library_state(library_bert(config(), 0))) + BUFFERS
    for hf_name in names_:
        try:
            got = sub.ours_name(hf_name)
        except StudentError as exc:
            if exc.stub:
                raise Fail(exc.describe()) from None
            if hf_name in BUFFERS:
                raise Fail(f"ours_name({hf_name!r}) raised {exc.type}: the library's index buffers have no counterpart, "
                           "return None for them") from None
            raise Fail(f"ours_name({hf_name!r}) raised {exc.type}: {exc.message}") from None
        expected = ref.ours_name(hf_name)
        if got != expected:
            if hf_name in BUFFERS:
                raise Fail(f"ours_name({hf_name!r}) must return None: the library's index buffers have no counterpart")
            raise Fail(f"ours_name({hf_name!r}) is not our name of that tensor: {name_hint(hf_name, got)}")


# -- load_bert_weights -------------------------------------------------------------------------------------------

def student_bert(sub, cfg_overrides=None):
    try:
        return keep(sub.Bert, remote_config(sub, **(cfg_overrides or {})))
    except StudentError as exc:
        if exc.stub:
            raise Fail("your Bert is not implemented yet (it raised NotImplementedError)") from None
        raise Fail(f"Bert(config) raised {exc.type}: {exc.message}") from None


def load_library(sub, model, hf_state):
    try:
        return sub.helpers.bi_load_library_weights(model, hf_state)
    except StudentError as exc:
        if exc.stub:
            raise Fail("your load_bert_weights is not implemented yet (it raised NotImplementedError)") from None
        raise Fail(f"load_bert_weights(Bert(config), BertModel(config).state_dict()) raised {exc.type}: "
                   f"{exc.message[:200]}") from None


def where_from(value, hf_state):
    """The library tensor `value` equals (or equals transposed), for the message."""
    for hf_name, tensor in hf_state.items():
        if tensor.shape == value.shape and torch.equal(tensor, value):
            return hf_name, False
        if tensor.dim() == 2 and tensor.T.shape == value.shape and torch.equal(tensor.T, value):
            return hf_name, True
    return None, False


@check("load_bert_weights: every tensor copied to its place; a state_dict that does not fit is refused", points=2,
       part=PART, depends_on=LOAD_PARTS)
def load_weights(sub, ref):
    cfg = config()
    hf_state = library_state(library_bert(cfg, 501))
    # the index buffers older versions of the library keep in the state_dict (ours_name gives them None)
    hf_state["embeddings.position_ids"] = torch.arange(cfg["max_position_embeddings"])[None]
    hf_state["embeddings.token_type_ids"] = torch.zeros(1, cfg["max_position_embeddings"], dtype=torch.long)
    ours = load_library(sub, student_bert(sub), hf_state)
    for hf_name, tensor in hf_state.items():
        name = correct_name(hf_name)
        if name is None:
            continue
        if name not in ours:
            raise Fail(f"after load_bert_weights the model has no {name}: Bert must hold embeddings, encoder and pooler")
        if torch.equal(ours[name], tensor):
            continue
        source, transposed = where_from(ours[name], hf_state)
        if transposed:
            raise Fail(f"{name} holds the library's {source} transposed: both store a linear layer's weight as (out, in), "
                       "copy it as it is")
        if source is not None:
            raise Fail(f"{name} holds the library's {source}, not {hf_name}: {name_hint(hf_name, ours_name_of(source))}")
        raise Fail(f"{name} did not get the library's {hf_name}: every tensor of ours must be loaded")
    bad_shape = dict(hf_state)
    bad_shape["pooler.dense.weight"] = torch.zeros(cfg["hidden_size"], cfg["hidden_size"] + 1)
    missing = {k: v for k, v in hf_state.items() if k != "pooler.dense.bias"}
    for state, what, error in ((bad_shape, "a tensor of another shape (pooler.dense.weight)", "ValueError"),
                               (missing, "a tensor missing (pooler.dense.bias)", "KeyError")):
        raised = sub.helpers.bi_load_refused(remote_config(sub), state)
        if not raised:
            raise Fail(f"load_bert_weights accepted a state_dict with {what}: raise (ValueError for a shape, KeyError for "
                       "a tensor of ours that gets no value) instead of loading part of the weights")
        if error not in raised:  # refused, but not as documented: most of the check's points stand
            raise Fail(f"load_bert_weights refused a state_dict with {what} with {raised[0]}: raise {error}, as the "
                       "docstring says (check the names and shapes yourself before load_state_dict)", partial=0.75)


def ours_name_of(hf_name):
    return correct_name(hf_name)


# -- Bert's wiring -----------------------------------------------------------------------------------------------

def probe_mix(E):
    return torch.randn(E, E, generator=gen(77)) / E ** 0.5


def bert_inputs(seed, cfg, B=3, T=7):
    g = gen(seed)
    ids = torch.randint(cfg["vocab_size"], (B, T), generator=g)
    types = torch.randint(cfg["type_vocab_size"], (B, T), generator=g)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, 5:] = 0
    mask[2, 3:] = 0
    return ids, types, mask


def outputs(out, B, T, E, what="Bert.forward"):
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise Fail(f"{what} must return a tuple (sequence_output, pooled_output)")
    return (tensor_out(out[0], f"{what}'s sequence_output", (B, T, E)).double(),
            tensor_out(out[1], f"{what}'s pooled_output", (B, E)).double())


@check("Bert: embeddings -> encoder with the attention mask -> pooled tanh(pooler(sequence_output[:, 0]))",
       points=1.5, part=PART, depends_on=BERT_PARTS)
def wiring(sub, ref):
    cfg = config()
    E = cfg["hidden_size"]
    g = gen(511)
    state = {"embeddings.word.weight": torch.randn(cfg["vocab_size"], E, generator=g),
             "pooler.weight": torch.randn(E, E, generator=g) / E ** 0.5, "pooler.bias": 0.3 * torch.randn(E, generator=g)}
    ids, types, mask = bert_inputs(512, cfg)
    for given in ("all", "ids only"):
        try:
            model = sub.helpers.bi_probe_bert(remote_config(sub))
        except StudentError as exc:
            if exc.stub:
                raise Fail("your Bert is not implemented yet (it raised NotImplementedError)") from None
            raise Fail(f"Bert(config) raised {exc.type}: {exc.message}") from None
        load(sub, model, state, "Bert", "embeddings, encoder, pooler")
        model.eval()
        B, T = ids.shape
        sequence, pooled = outputs(model(ids, types, mask) if given == "all" else model(ids), B, T, E)
        calls = sub.helpers.bi_probe_calls(model)
        what = "Bert(input_ids, token_type_ids, attention_mask)" if given == "all" else "Bert(input_ids)"
        if len(calls["embeddings"]) != 1 or len(calls["encoder"]) != 1:
            raise Fail(f"{what}: call self.embeddings and self.encoder once each")
        emb_call, enc_call = calls["embeddings"][0], calls["encoder"][0]
        if not torch.equal(emb_call["ids"], ids):
            raise Fail(f"{what}: the embeddings must get the input_ids")
        types_used = emb_call["types"]
        expected_types = types if given == "all" else torch.zeros_like(ids)
        if given == "all" and (types_used is None or not torch.equal(types_used, types)):
            raise Fail(f"{what}: pass token_type_ids on to the embeddings: self.embeddings(input_ids, token_type_ids)")
        if given != "all" and types_used is not None and not torch.equal(types_used, expected_types):
            raise Fail(f"{what}: without token_type_ids every token is in segment 0 (pass None or zeros)")
        enc_mask = enc_call["mask"]
        if given == "all":
            if enc_mask is None:
                raise Fail(f"{what}: pass the attention mask on to the encoder: self.encoder(hidden, attention_mask)")
            if enc_mask.shape != mask.shape or not torch.equal(enc_mask.long(), mask):
                raise Fail(f"{what}: the encoder must get the 1 = real-token attention mask itself (B, T); it turns it "
                           "into the additive bias")
        elif enc_mask is not None and not bool((enc_mask == 1).all()):
            raise Fail(f"{what}: without an attention mask every token is real (pass None or ones to the encoder)")
        word = state["embeddings.word.weight"].double()
        embedded = torch.tanh(word[ids] + 0.5 * (expected_types[..., None].double() + 1))
        expected_sequence = torch.tanh(embedded @ probe_mix(E).double())
        if not close(sequence, expected_sequence):
            raise Fail(f"{what}: sequence_output must be the encoder's output, encoder(embeddings(input_ids, "
                       "token_type_ids), attention_mask)")
        head = lambda x: x @ state["pooler.weight"].double().T + state["pooler.bias"].double()  # noqa: E731
        if close(pooled, torch.tanh(head(expected_sequence[:, 0]))):
            continue
        if close(pooled, head(expected_sequence[:, 0])):
            raise Fail(f"{what}: pooled_output is tanh(pooler(sequence_output[:, 0])): the tanh is missing")
        if close(pooled, torch.tanh(head(expected_sequence[:, -1]))):
            raise Fail(f"{what}: pooled_output reads the LAST position; BERT pools the first one, [CLS]: sequence_output[:, 0]")
        if close(pooled, torch.tanh(head(expected_sequence.mean(1)))):
            raise Fail(f"{what}: pooled_output averages the positions; BERT pools the [CLS] position, sequence_output[:, 0]")
        raise Fail(f"{what}: pooled_output must be tanh(pooler(sequence_output[:, 0]))")


# -- against the library -----------------------------------------------------------------------------------------

@check("Bert with the library's weights: sequence_output and pooled_output equal BertModel's to 1e-5", points=1.5,
       part=PART, depends_on=LOAD_PARTS)
def against_library(sub, ref):
    cfg = config()
    library = library_bert(cfg, 521)
    model = student_bert(sub)
    load_library(sub, model, library_state(library))
    model.eval()
    ids, types, mask = bert_inputs(522, cfg, B=3, T=9)
    sequence, pooled = outputs(model(ids, types, mask), 3, 9, cfg["hidden_size"])
    with torch.no_grad():
        theirs = library(input_ids=ids, token_type_ids=types, attention_mask=mask)
    real = mask.bool()
    error = (sequence - theirs.last_hidden_state.double())[real].abs().max().item()
    if not close(sequence[real], theirs.last_hidden_state[real], atol=1e-5, rtol=1e-5):
        raise Fail(f"with the library's weights loaded by your load_bert_weights (and the grader's embeddings and encoder, "
                   f"graded in parts 3 and 4), your sequence_output differs from BertModel's last_hidden_state by up to "
                   f"{error:.2g} at real tokens: check load_bert_weights and Bert.forward")
    if not close(pooled, theirs.pooler_output, atol=1e-5, rtol=1e-5):
        raise Fail("with the library's weights your pooled_output differs from BertModel's pooler_output: "
                   "tanh(pooler(sequence_output[:, 0])) with the library's pooler.dense weights")


@check("Bert: gradients reach the embeddings, every encoder layer and the pooler", points=0.5, part=PART,
       depends_on=BERT_PARTS)
def gradients(sub, ref):
    cfg = config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    ids, types, mask = bert_inputs(531, cfg)
    types[0] = 0
    types[1] = 1  # both segments used
    off = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    student = student_bert(sub, off)
    reference = keep(ref.Bert, remote_config(ref, **off))
    mirror_weights(sub, ref, student, reference, "Bert")
    student.eval()
    reference.eval()
    gradients_right(sub, ref, student, reference, [ids, types, mask], "Bert")
