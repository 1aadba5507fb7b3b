"""The encoder's hidden states for the validation batches, computed once per grading run (judge side).

The encoder is frozen and identical for every student, so `encoder(token_ids).last_hidden_state` for
each validation batch is the same for every submission. The grader computes it once and stores it in
safetensors shards with a manifest; each student's worker memory-maps the shards (or, when it cannot
read the folder, receives the batches over its channel) and runs only the student's own layers on
them. Whether a student's model really consumes the states that way is checked per submission on a
sample against its full forward (autograder.rubric.evaluation).

Precision: "fp32" computes and stores float32; "mixed" runs the encoder under autocast (float16 on
CUDA, bfloat16 on CPU) and stores float16, half the memory and transfer. The stage bounds the
effect on accuracy per submission (see evaluation.py: reviews near the decision boundary are re-checked).
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from autograder.files import atomic_folder
from autograder.rubric.data import ValidationSet
from autograder.rubric.encoder import Encoder

SHARD_BYTES = 512 * 2**20
FORMAT = 1


def cache_key(encoder: Encoder, vset: ValidationSet, precision: str) -> str:
    """Same encoder weights, same token batches, same precision and device type: same states."""
    h = hashlib.sha256()
    h.update(json.dumps([FORMAT, precision, encoder.device.type, sorted(encoder.fingerprints.items())]).encode())
    for ids in vset.token_batches:
        h.update(str(tuple(ids.shape)).encode())
        h.update(ids.numpy().tobytes())
    return h.hexdigest()[:24]


def autocast_dtype(device: torch.device) -> torch.dtype:
    """The autocast dtype of mixed precision on `device`: float16 on CUDA, bfloat16 on the CPU."""
    return torch.float16 if device.type == "cuda" else torch.bfloat16


@dataclass
class HiddenStateCache:
    """The encoder's last hidden states for every validation batch, in shard files in `folder`; one folder per
    encoder, validation set and precision (cache_key), reused by any later run with the same three."""
    folder: Path
    shard_of: list[str]  # batch number -> shard file name
    precision: str
    seconds: float  # time it took to compute (0 when reused from an earlier run)
    reused: bool

    def batch(self, number: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(token ids, states) of one batch, read in the judge (to send to a worker that cannot read the files)."""
        from safetensors import safe_open

        with safe_open(self.folder / self.shard_of[number], framework="pt", device="cpu") as f:
            return f.get_tensor(f"ids.{number}"), f.get_tensor(f"states.{number}")

    @classmethod
    def open(cls, folder: Path) -> "HiddenStateCache | None":
        """The cache already in `folder`; None where it is missing, of another format, or a shard is gone (it is then
        computed again)."""
        try:
            manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if manifest.get("format") != FORMAT or not all((folder / s).is_file() for s in set(manifest["shard_of"])):
            return None
        return cls(folder, manifest["shard_of"], manifest["precision"], 0.0, True)


def build_cache(encoder: Encoder, vset: ValidationSet, root: Path, precision: str = "fp32",
                log=None) -> HiddenStateCache:
    """Compute (or reuse from `root`) the states of every validation batch."""
    key = cache_key(encoder, vset, precision)
    folder = root / f"states-{key}"
    existing = HiddenStateCache.open(folder)
    if existing is not None:
        return existing
    start = time.monotonic()
    with atomic_folder(folder) as tmp:  # another run that finished the same cache first keeps its copy
        shard_of, seconds = _write_states(tmp, encoder, vset, precision, key, start, log)
    return HiddenStateCache(folder, shard_of, precision, seconds, False)


def _write_states(tmp: Path, encoder: Encoder, vset: ValidationSet, precision: str, key: str, start: float,
                  log) -> tuple[list[str], float]:
    """Every validation batch's states as safetensors shards in `tmp`, then its manifest: (shard of each
    batch, seconds taken)."""
    from safetensors.torch import save_file

    mixed = precision == "mixed"
    store = torch.float16 if mixed else torch.float32
    shard: dict[str, torch.Tensor] = {}
    size, shard_of, names = 0, [], []

    def flush():
        nonlocal shard, size
        if shard:
            name = f"shard-{len(names):05d}.safetensors"
            save_file(shard, str(tmp / name))
            (tmp / name).chmod(0o644)
            names.append(name)
            shard, size = {}, 0

    with torch.inference_mode():
        for number, ids in enumerate(vset.token_batches):
            with torch.autocast(encoder.device.type, dtype=autocast_dtype(encoder.device), enabled=mixed):
                states = encoder.model(ids.to(encoder.device))[0]  # exactly the reference's call: no mask
            shard[f"ids.{number}"] = ids.contiguous()
            shard[f"states.{number}"] = states.to(store).cpu().contiguous()
            size += shard[f"states.{number}"].numel() * shard[f"states.{number}"].element_size()
            shard_of.append(f"shard-{len(names):05d}.safetensors")
            if size >= SHARD_BYTES:
                flush()
            if log and (number + 1) % 50 == 0:
                log(f"rubric cache: {number + 1}/{len(vset.token_batches)} batches")
    flush()
    seconds = time.monotonic() - start
    (tmp / "manifest.json").write_text(json.dumps({
        "format": FORMAT, "key": key, "precision": precision, "encoder": encoder.source,
        "batches": len(shard_of), "shard_of": shard_of, "seconds": round(seconds, 3)}), encoding="utf-8")
    (tmp / "manifest.json").chmod(0o644)
    return shard_of, seconds
