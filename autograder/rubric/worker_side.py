"""Grader helper code that runs INSIDE the student's worker process, beside the student's definitions.

The rubric ships this file's source into the worker (like `worker_helpers` in hidden tests); there
the name `submission` is the student's module. Everything the judge decides on comes back as plain
data: key names and shapes, weight fingerprints, logits. Labels never come here.

The student's checkpoint arrives as bytes and is read with `torch.load(..., weights_only=True)` here,
never in the judge. The frozen encoder is the grader's: read from the folder the grader exported
(config.json + model.safetensors, no pickle) or sent over the channel as tensors.

The judge imports this module too, for `tensor_fingerprint` (the same code on both sides); nothing here runs
at import time.
"""
from __future__ import annotations

import io
import json
import os
import re

import torch

_STATE: dict = {}

# keyword arguments a call to the encoder may carry and still be served from the cache
_HARMLESS = {"return_dict": (None, True), "output_attentions": (None, False), "output_hidden_states": (None, False),
             "use_cache": (None, False)}


def tensor_fingerprint(t: torch.Tensor) -> list[float]:
    """[numel, sum, sum of squares, weighted sum] in float64: equal tensors give equal numbers (up to
    summation order), a changed tensor almost surely does not. Used on the encoder weights."""
    x = t.detach().reshape(-1).double()
    n = x.numel()
    w = torch.cos(torch.arange(n, dtype=torch.float64, device=x.device) * 0.7548776662466927)
    return [float(n), float(x.sum()), float((x * x).sum()), float((x * w).sum())]


class CacheMiss(Exception):
    """The model called the encoder in a way the cached hidden states cannot answer."""


class CachedEncoder(torch.nn.Module):
    """Stands in for the frozen encoder: answers `encoder(token_ids)` with the grader's cached last
    hidden states for exactly the batch being evaluated (and the encoder's own pooler on them)."""

    def __init__(self, encoder):
        super().__init__()
        self.config = encoder.config
        self._pooler = getattr(encoder, "pooler", None)
        self._anchor = torch.nn.Parameter(torch.zeros(0, device=_device(encoder)), requires_grad=False)
        self.expected_ids = None
        self.states = None
        self.calls = 0

    @property
    def device(self):
        return self._anchor.device

    @property
    def dtype(self):
        return torch.float32

    def get_input_embeddings(self):
        """Always CacheMiss: a model that reads the embeddings itself bypasses the cache, so the encoder must run for
        real."""
        raise CacheMiss("the model reads the encoder's embeddings directly")

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, *args, **kwargs):
        """The cached hidden states of this batch, as the encoder's own output type; CacheMiss where the call differs
        in any way from the one cached (other ids, arguments, a mask hiding padding)."""
        self.calls += 1
        if args:
            raise CacheMiss("the encoder was called with more positional arguments than the token ids")
        for key, value in kwargs.items():
            if key not in _HARMLESS or value not in _HARMLESS[key]:
                raise CacheMiss(f"the encoder was called with {key}={value!r}")
        if not isinstance(input_ids, torch.Tensor) or input_ids.shape != self.expected_ids.shape or \
                not torch.equal(input_ids.detach().to("cpu", torch.long), self.expected_ids):
            raise CacheMiss("the encoder was called with other token ids than the batch")
        if attention_mask is not None and not bool((attention_mask != 0).all()):
            raise CacheMiss("the encoder was called with an attention mask that hides padding")
        if token_type_ids is not None and bool((token_type_ids != 0).any()):
            raise CacheMiss("the encoder was called with token_type_ids")
        from transformers.modeling_outputs import BaseModelOutputWithPoolingAndCrossAttentions

        pooled = self._pooler(self.states) if self._pooler is not None else None
        out = BaseModelOutputWithPoolingAndCrossAttentions(last_hidden_state=self.states, pooler_output=pooled)
        return out if kwargs.get("return_dict", True) is not False else out.to_tuple()


def _device(module) -> torch.device:
    for p in module.parameters():
        return p.device
    return torch.device("cpu")


def setup(device: str, threads: int, encoder_dir: str | None, cache_dir: str | None, seed: int = 0) -> dict:
    """Pick the device, load the grader's encoder from its exported folder, open the hidden-state cache.
    Returns which of the two could be read from disk (the judge sends over the channel what could not)."""
    torch.set_num_threads(max(1, int(threads)))
    _STATE.clear()
    _STATE["device"] = torch.device(device)
    _STATE["seed"] = seed
    report = {"encoder": False, "cache": False}
    if encoder_dir and os.path.isfile(os.path.join(encoder_dir, "config.json")):
        try:
            from transformers import AutoModel

            encoder = AutoModel.from_pretrained(encoder_dir, local_files_only=True)
            _STATE["encoder"] = encoder.float().to(_STATE["device"]).eval()
            report["encoder"] = True
        except Exception as exc:  # noqa: BLE001 - unreadable here: the judge sends the tensors instead
            report["encoder_error"] = f"{type(exc).__name__}: {exc}"[:300]
    if cache_dir:
        try:
            with open(os.path.join(cache_dir, "manifest.json"), encoding="utf-8") as fh:
                manifest = json.load(fh)
            from safetensors import safe_open

            _STATE["cache_dir"] = cache_dir
            _STATE["shard_of"] = manifest["shard_of"]
            _STATE["shards"] = {}
            for name in sorted(set(manifest["shard_of"])):  # every shard opens: the cache is usable here
                _STATE["shards"][name] = safe_open(os.path.join(cache_dir, name), framework="pt", device="cpu")
            report["cache"] = True
        except Exception as exc:  # noqa: BLE001 - unreadable here: the judge sends the tensors instead
            report["cache_error"] = f"{type(exc).__name__}: {exc}"[:300]
    return report


def set_encoder(config: dict, tensors: dict) -> None:
    """The encoder from its configuration and weights sent by the judge (when its folder is not readable)."""
    from transformers import AutoConfig, AutoModel

    config = dict(config)
    model_type = config.pop("model_type")
    encoder = AutoModel.from_config(AutoConfig.for_model(model_type, **config))
    encoder.load_state_dict(tensors, strict=True)
    _STATE["encoder"] = encoder.float().to(_STATE["device"]).eval()


def _strip(key: str) -> str:
    for prefix in ("module.", "_orig_mod."):  # nn.DataParallel, torch.compile
        while key.startswith(prefix):
            key = key[len(prefix):]
    return key


SAVE_ADVICE = "save the state_dict with torch.save(model.state_dict(), path)"
_NOT_TORCH_SAVE = ("unsupported operand", "invalid load key", "zip archive", "invalid magic number",
                   "pickle data was truncated", "ran out of input", "pytorchstreamreader")


def unreadable_checkpoint(exc: BaseException, size: int) -> str:
    """One line for the student on why `torch.load(..., weights_only=True)` refused their checkpoint.
    Guarantees: never quotes torch's own advice (to load with weights_only=False), never cut mid-sentence."""
    text = str(exc)
    found = re.search(r"GLOBAL ([\w.]+)", text)
    if found or "unsupported global" in text.lower():
        example = f" (e.g. {found.group(1)})" if found else ""
        return (f"the checkpoint holds Python objects other than tensors{example}: it is refused, nothing in it "
                f"was run; {SAVE_ADVICE}")
    if isinstance(exc, EOFError) or any(m in text.lower() for m in _NOT_TORCH_SAVE):
        return f"not a file written by torch.save ({size} bytes); {SAVE_ADVICE}"
    if "weights only load failed" in text.lower():
        return f"the checkpoint holds something other than tensors: it is refused, nothing in it was run; {SAVE_ADVICE}"
    first = next((line for line in text.splitlines() if line.strip() and "weights_only" not in line), "")
    return f"it could not be read ({type(exc).__name__}{': ' + first[:200] if first else ''}); {SAVE_ADVICE}"


def inspect_checkpoint(blob: torch.Tensor) -> dict:
    """Read the student's checkpoint (bytes) with weights_only=True; return its keys and shapes."""
    try:
        data = torch.load(io.BytesIO(blob.numpy().tobytes()), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable checkpoint is the student's, reported with its cause
        return {"error": unreadable_checkpoint(exc, blob.numel())}
    notes = []
    if isinstance(data, dict) and not all(isinstance(v, torch.Tensor) for v in data.values()):
        for name in ("state_dict", "model_state_dict", "model"):
            inner = data.get(name)
            if isinstance(inner, dict) and inner and all(isinstance(v, torch.Tensor) for v in inner.values()):
                notes.append(f"read the state_dict stored under {name!r}")
                data = inner
                break
    if not isinstance(data, dict) or not data or not all(isinstance(v, torch.Tensor) for v in data.values()):
        return {"error": f"it holds a {type(data).__name__}, not a state_dict (a dict of tensors); {SAVE_ADVICE}"}
    state = {}
    for key, value in data.items():
        state[_strip(str(key))] = value
    if any(_strip(str(k)) != str(k) for k in data):
        notes.append("removed a 'module.' or '_orig_mod.' prefix from the key names")
    _STATE["checkpoint"] = state
    return {"keys": {k: [list(v.shape), str(v.dtype).removeprefix("torch.")] for k, v in state.items()},
            "notes": notes}


def _encoder_prefixes(model, encoder, attr: str) -> list[str]:
    found = [name for name, m in model.named_modules(remove_duplicate=False) if m is encoder and name]
    if not found and isinstance(getattr(model, attr, None), torch.nn.Module):
        found = [attr]  # a copy of the encoder kept under the interface's name
    return found


def build_model(class_name: str, args: list, encoder_attr: str = "bert") -> dict:
    """Build the student's class around the grader's encoder; compare its state_dict with the checkpoint.
    Loads nothing yet: returns the differences and the fingerprints of the checkpoint's encoder part."""
    cls = getattr(submission, class_name)  # noqa: F821 - `submission` is the student's module in the worker
    encoder = _STATE["encoder"]
    torch.manual_seed(_STATE["seed"])
    model = cls(encoder, *args)
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"{class_name}(...) is not a torch.nn.Module")
    model = model.to(_STATE["device"]).eval()
    prefixes = _encoder_prefixes(model, encoder, encoder_attr)
    _STATE["model"], _STATE["prefixes"] = model, prefixes

    def in_encoder(key):
        return any(key.startswith(p + ".") for p in prefixes) or key.startswith(encoder_attr + ".")

    expected = {k: list(v.shape) for k, v in model.state_dict().items() if not in_encoder(k)}
    state = _STATE["checkpoint"]
    given = {k: list(v.shape) for k, v in state.items() if not in_encoder(k)}
    encoder_part = {}
    for key, value in state.items():
        if in_encoder(key):
            name = key.split(".", 1)[1] if "." in key else key
            for p in sorted(prefixes + [encoder_attr], key=len, reverse=True):
                if key.startswith(p + "."):
                    name = key[len(p) + 1:]
                    break
            if name not in encoder_part:
                t = value.to(_STATE["device"]) if value.is_floating_point() else value
                encoder_part[name] = [list(value.shape), tensor_fingerprint(t)]
    return {
        "prefixes": prefixes,
        "missing": sorted(set(expected) - set(given)),
        "unexpected": sorted(set(given) - set(expected)),
        "mismatched": sorted([k, given[k], expected[k]] for k in set(given) & set(expected) if given[k] != expected[k]),
        "encoder": encoder_part,
    }


def _buffer_like(key: str) -> bool:
    """Index buffers of the library's embeddings (position_ids, token_type_ids): persistent in some library
    versions, not in others, never trained. A checkpoint may hold them or not."""
    return key.endswith(".position_ids") or key.endswith(".token_type_ids")


def build_sequence_classifier(config: dict, num_labels: int) -> dict:
    """The library's AutoModelForSequenceClassification built from the grader's encoder configuration (no
    student code: the checkpoint holds the whole fine-tuned model); compare its state_dict with the checkpoint.
    Loads nothing yet."""
    from transformers import AutoConfig, AutoModelForSequenceClassification

    config = dict(config)
    model_type = config.pop("model_type")
    model_config = AutoConfig.for_model(model_type, **config)
    model_config.num_labels = int(num_labels)
    torch.manual_seed(_STATE["seed"])
    model = AutoModelForSequenceClassification.from_config(model_config).float().to(_STATE["device"]).eval()
    _STATE["model"], _STATE["prefixes"], _STATE["with_mask"] = model, [], True
    expected = {k: list(v.shape) for k, v in model.state_dict().items() if not _buffer_like(k)}
    given = {k: list(v.shape) for k, v in _STATE["checkpoint"].items() if not _buffer_like(k)}
    return {
        "missing": sorted(set(expected) - set(given)),
        "unexpected": sorted(set(given) - set(expected)),
        "mismatched": sorted([k, given[k], expected[k]] for k in set(given) & set(expected) if given[k] != expected[k]),
        "hidden_size": int(model_config.hidden_size),
    }


def load_weights() -> None:
    """Load the checkpoint's non-encoder weights (the encoder stays the grader's pretrained one); for a
    sequence classifier (no encoder prefixes) every weight the model has."""
    model, prefixes = _STATE["model"], _STATE["prefixes"]
    own = set(model.state_dict())
    state = {k: v for k, v in _STATE.pop("checkpoint").items() if k in own and not any(k.startswith(p + ".") for p in prefixes)}
    model.load_state_dict(state, strict=False)
    model.eval()


def _batch(number: int, ids=None, states=None, want_states: bool = False):
    """A batch's token ids (and cached states): sent by the judge, or read from the cache files."""
    if ids is None or (want_states and states is None):
        shard = _STATE["shards"][_STATE["shard_of"][number]]
        ids = shard.get_tensor(f"ids.{number}") if ids is None else ids
        if want_states and states is None:
            states = shard.get_tensor(f"states.{number}")
    return ids, states


def _forward(model, ids, mask=None):
    """Logits of one batch. A model called with an attention mask (a sequence classifier) gets it by keyword,
    as the library's models take it; the library's output object gives its .logits."""
    torch.manual_seed(_STATE["seed"])
    model.eval()
    device = _STATE["device"]
    with torch.no_grad():
        if _STATE.get("with_mask"):
            out = model(input_ids=ids.to(device), attention_mask=mask.to(device))
        else:
            out = model(ids.to(device))
    if not isinstance(out, torch.Tensor) and isinstance(getattr(out, "logits", None), torch.Tensor):
        out = out.logits
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        out = out[0]
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"the model returned a {type(out).__name__}, not a tensor of logits")
    return out.detach().float().cpu()


def logits_full(numbers: list, ids: list | None = None, masks: list | None = None) -> list:
    """The model's own forward (the real encoder, full precision) on the given batches; `masks` (1 = real
    token) for a model called with an attention mask."""
    model = _STATE["model"]
    out = []
    for i, number in enumerate(numbers):
        batch_ids, _ = _batch(number, None if ids is None else ids[i])
        out.append(_forward(model, batch_ids, None if masks is None else masks[i]))
    return out


def logits_perturbed(number: int, ids=None):
    """The forward with the encoder's token embeddings permuted: a model that uses the encoder's
    output gives other logits; one that ignores the encoder gives the same."""
    model = _STATE["model"]
    modules = [model.get_submodule(p) for p in _STATE["prefixes"]] or [_STATE["encoder"]]
    saved = []
    try:
        for m in modules:
            getter = getattr(m, "get_input_embeddings", None)
            if getter is None:
                continue
            weight = getter().weight
            saved.append((weight, weight.data.clone()))
            perm = torch.randperm(weight.shape[0], generator=torch.Generator().manual_seed(12345))
            weight.data.copy_(weight.data[perm.to(weight.device)])
        batch_ids, _ = _batch(number, ids)
        return _forward(model, batch_ids)
    finally:
        for weight, data in saved:
            weight.data.copy_(data)


def _swap_encoder(model, replacement):
    swapped = []
    for prefix in _STATE["prefixes"]:
        parent_name, _, child = prefix.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        swapped.append((parent, child, parent._modules[child]))
        parent._modules[child] = replacement
    return swapped


def logits_cached(numbers: list, ids: list | None = None, states: list | None = None, perturb: bool = False) -> dict:
    """The student's forward with the encoder answered from the grader's cached hidden states.
    Returns {"logits": [...]} or {"miss": why} when the model calls the encoder in another way.
    `perturb`: serve each review another review's states (a model that uses them changes its output)."""
    model = _STATE["model"]
    stub = _STATE.get("stub")
    if stub is None:
        stub = _STATE["stub"] = CachedEncoder(_STATE["encoder"])
    if not _STATE["prefixes"]:
        return {"miss": "the model does not hold the encoder it was given as a submodule"}
    swapped = _swap_encoder(model, stub)
    out = []
    try:
        for i, number in enumerate(numbers):
            batch_ids, batch_states = _batch(number, None if ids is None else ids[i],
                                             None if states is None else states[i], want_states=True)
            stub.expected_ids = batch_ids.to(torch.long)
            batch_states = batch_states.to(_STATE["device"], torch.float32)
            if perturb:
                batch_states = batch_states.roll(1, dims=0) if len(batch_states) > 1 else batch_states.flip(1)
            stub.states = batch_states
            stub.calls = 0
            try:
                logits = _forward(model, batch_ids)
            except Exception as exc:  # noqa: BLE001 - a CacheMiss, or the model choking on the stand-in
                why = str(exc) if isinstance(exc, CacheMiss) else f"{type(exc).__name__}: {exc}"
                return {"miss": why[:300]}
            if stub.calls == 0:
                return {"miss": "the model did not call the encoder it was given"}
            out.append(logits)
    finally:
        for parent, child, module in swapped:
            parent._modules[child] = module
        stub.states = None
    return {"logits": out}
