"""The frozen encoder the grader supplies: which one, loading it, and its fingerprints (judge side).

Default `bert-base-uncased` from the Hugging Face Hub; a local folder (for instance
../shared/data/models/all-MiniLM-L6-v2) or another hub id by argument or $BERT_ENCODER, the same
variable the notebook reads. Weights stored in float16 are loaded as float32.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from autograder.files import atomic_folder
from autograder.rubric.worker_side import tensor_fingerprint

ENCODER_ENV = "BERT_ENCODER"
DEFAULT_ENCODER = "bert-base-uncased"


def encoder_source(name: str | os.PathLike | None = None) -> str:
    """Where the encoder comes from: `name` where given, else $BERT_ENCODER, else bert-base-uncased."""
    return str(name) if name else os.environ.get(ENCODER_ENV) or DEFAULT_ENCODER


def _dtype_kwargs() -> dict:
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return {"dtype": torch.float32} if (major, minor) >= (4, 56) else {"torch_dtype": torch.float32}


@dataclass
class Encoder:
    """The grader's frozen encoder (trusted, in the judge): its model, tokenizer and configuration, from `source`."""
    source: str
    model: torch.nn.Module | None  # float32, eval mode, on `device`; None when only the configuration was loaded
    tokenizer: object
    device: torch.device
    fingerprints: dict[str, list]  # state_dict key -> [shape, fingerprint]; empty without the weights
    config: object = None  # the encoder's transformers configuration

    def __post_init__(self):
        if self.config is None and self.model is not None:
            self.config = self.model.config

    @property
    def hidden_size(self) -> int:
        """The width of its hidden states (the configuration's hidden_size)."""
        return int(self.config.hidden_size)

    def export(self, folder: Path) -> Path:
        """config.json + model.safetensors (float32) that the student's worker loads without pickle."""
        if not (folder / "config.json").is_file():
            with atomic_folder(folder) as tmp:
                self.model.save_pretrained(tmp, safe_serialization=True)
                for p in tmp.iterdir():
                    p.chmod(0o755 if p.is_dir() else 0o644)
        return folder

    def wire_config(self) -> dict:
        """The configuration as plain data, for building the encoder in a worker that cannot read the export."""
        config = self.config.to_dict()
        keep = {}
        for key, value in config.items():
            if isinstance(value, (str, int, float, bool, type(None))) or (
                    isinstance(value, (list, dict)) and _plain(value)):
                keep[key] = value
        keep["model_type"] = self.config.model_type
        keep.pop("architectures", None)
        return keep

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """Its weights, detached and on the CPU, by state_dict name: what a worker is sent to build the same encoder."""
        return {k: v.detach().cpu() for k, v in self.model.state_dict().items()}


def _plain(value) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return isinstance(value, (str, int, float, bool, type(None)))


def load_encoder(name: str | None = None, device: torch.device | str = "cpu", weights: bool = True) -> Encoder:
    """The pretrained encoder and its tokenizer (trusted grader code, in the judge process). With
    weights=False only its configuration and tokenizer (a rubric whose checkpoint holds the whole model)."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    source = encoder_source(name)
    tokenizer = AutoTokenizer.from_pretrained(source)
    if not weights:
        return Encoder(source, None, tokenizer, torch.device(device), {}, AutoConfig.from_pretrained(source))
    model = AutoModel.from_pretrained(source, **_dtype_kwargs()).float().to(device).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    prints = {k: [list(v.shape), tensor_fingerprint(v)] for k, v in model.state_dict().items()}
    return Encoder(source, model, tokenizer, torch.device(device), prints)


def compare_encoder(given: dict[str, list], reference: dict[str, list], rel: float = 5e-3) -> list[str]:
    """Encoder tensors of the student's checkpoint that differ from the pretrained ones.

    `given` and `reference` map names to [shape, fingerprint]. Names only one side has are ignored
    (buffers such as position_ids come and go between library versions). Differences of the size of
    float16 / bfloat16 rounding count as equal: a checkpoint saved from an encoder loaded in half
    precision still holds the same encoder; fine-tuned or different weights do not."""
    differ = []
    for name, (shape, fp) in given.items():
        if name not in reference:
            continue
        ref_shape, ref = reference[name]
        if list(shape) != list(ref_shape):
            differ.append(f"{name} (shape {tuple(shape)}, the pretrained encoder's is {tuple(ref_shape)})")
            continue
        n, s, sq, w = fp
        _, rs, rsq, rw = ref
        scale = max(rsq, 1e-30) ** 0.5
        if abs(s - rs) > rel * scale + 1e-9 or abs(w - rw) > rel * scale + 1e-9 or abs(sq - rsq) > rel * max(rsq, 1e-30) + 1e-12:
            differ.append(name)
    return differ
