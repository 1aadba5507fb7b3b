"""The logits of every validation batch for one submission's model, running in its worker: through the encoder
states cached once per run where the model, on a sample of batches, gives through them what it gives through its
own full forward, else the full forward; with a mixed-precision cache, the batches of reviews near the decision
boundary again in full precision. The cache makes grading faster, never different. A model whose output does not
depend on the encoder is refused. (The stage, autograder/rubric/stage.py, mixes this into RubricRun.)"""
from __future__ import annotations

import time

import torch

FP32_TOLERANCE = (1e-3, 1e-3)  # (absolute, relative) agreement of cached and full logits, fp32 cache
MIXED_TOLERANCE = (0.1, 0.05)  # the same with a mixed-precision cache
PIPE_CHUNK_BYTES = 128 * 2**20
FILE_CHUNK_BATCHES = 16


class Refused(Exception):
    """The submission cannot be graded by the rubric; the message says why and what to do."""


class CachedEvaluation:
    """The evaluation half of a RubricRun (stage.py), which holds what it reads: the encoder (`encoder`), the
    validation set (`vset`), the hidden-state cache (`cache`, or None), the sample batches (`sample`), the
    checkpoint's kind (`kind`) and the assignment's rubric settings (`config`)."""

    def _ids(self, numbers, files):
        return None if files else [self.vset.token_batches[b] for b in numbers]

    def _chunks(self, numbers: list[int], files: bool) -> list[list[int]]:
        if files:
            return [numbers[i:i + FILE_CHUNK_BATCHES] for i in range(0, len(numbers), FILE_CHUNK_BATCHES)]
        chunks, current, size = [], [], 0
        for b in numbers:
            ids = self.vset.token_batches[b]
            nbytes = ids.numel() * (self.encoder.hidden_size * 4 + 8)
            if current and size + nbytes > PIPE_CHUNK_BYTES:
                chunks.append(current)
                current, size = [], 0
            current.append(b)
            size += nbytes
        return chunks + ([current] if current else [])

    def _full(self, helpers, numbers: list[int], files: bool) -> dict[int, torch.Tensor]:
        out = {}
        for chunk in self._chunks(numbers, files):
            masks = [self.vset.mask_batches[b] for b in chunk] if self.kind.attention_mask else None
            for b, logits in zip(chunk, helpers.logits_full(chunk, self._ids(chunk, files), masks)):
                out[b] = self._decision(logits, b)
        return out

    def _cached(self, helpers, numbers: list[int], files: bool, perturb: bool = False) -> dict[int, torch.Tensor] | str:
        out = {}
        for chunk in self._chunks(numbers, files):
            states = None
            if not files:
                states = [self.cache.batch(b)[1] for b in chunk]
            reply = helpers.logits_cached(chunk, self._ids(chunk, files), states, perturb)
            if "miss" in reply:
                return str(reply["miss"])
            for b, logits in zip(chunk, reply["logits"]):
                out[b] = self._decision(logits, b)
        return out

    def _decision(self, logits, b: int) -> torch.Tensor:
        """Decision values: > 0 means positive. (B, 1) or (B,) logits; (B, 2) class scores."""
        size = len(self.vset.label_batches[b])
        if not isinstance(logits, torch.Tensor):
            raise Refused(f"your model returned a {type(logits).__name__} instead of a tensor of logits")
        x = logits.double()
        if tuple(x.shape) in ((size, 1), (size,)):
            d = x.reshape(size)
        elif tuple(x.shape) == (size, 2):
            d = x[:, 1] - x[:, 0]
        else:
            expected = (f"({size}, 1): one logit per review (OUTPUT_DIM = 1)" if self.kind.student_code
                        else f"({size}, 2): a score per class")
            raise Refused(f"your model returned logits of shape ({', '.join(map(str, x.shape))}) for a batch of "
                          f"{size} reviews; expected {expected}")
        return d  # a NaN stays NaN: not > 0, so predicted negative, as the notebook's binary_accuracy does

    def _evaluate(self, helpers, files: bool, details: dict) -> tuple[torch.Tensor, list[str]]:
        n_batches = len(self.vset.token_batches)
        everything = list(range(n_batches))
        t = time.monotonic()
        exact = self._full(helpers, self.sample, files)  # full precision, the student's own forward
        probe = self.sample[0]
        notes: list[str] = []
        method = "full forward"
        decisions: dict[int, torch.Tensor] = dict(exact)
        cached = self._cached(helpers, everything, files) if self.cache is not None else None
        if isinstance(cached, dict):  # the probe below runs on the cached states too: no encoder pass
            unused = self._unchanged(self._cached(helpers, [probe], files, perturb=True), cached[probe])
        else:
            unused = self._unchanged(helpers.logits_perturbed(probe, None if files else self.vset.token_batches[probe]),
                                     exact[probe], probe)
        if unused:
            raise Refused(
                f"your model's output does not depend on the frozen encoder it is given (`{self.config.encoder_attr}`): "
                f"with the encoder's output changed it returns the same logits. Part 7's classifier must read the "
                f"encoder's last hidden states (self.{self.config.encoder_attr}(token_ids)[0]) through the GRU.")
        if cached is not None:
            reason = None
            if isinstance(cached, str):
                reason = cached
            else:
                atol, rtol = MIXED_TOLERANCE if self.cache.precision == "mixed" else FP32_TOLERANCE
                delta = max(float((cached[b] - exact[b]).abs().nan_to_num(float("inf")).max()) for b in self.sample)
                bound = max(float((atol + rtol * exact[b].abs()).min()) for b in self.sample)
                details["sample_max_difference"] = delta
                if delta > bound:
                    reason = (f"its outputs through the cached encoder states differ from its full forward by up to "
                              f"{delta:.3g} on the sample")
                else:
                    method = f"cached encoder states ({self.cache.precision})"
                    for b in everything:
                        if b not in exact:
                            decisions[b] = cached[b]
                    rechecked = self._precision_guard(helpers, decisions, exact, delta, files, details)
                    if rechecked:
                        method += f", {rechecked} batch(es) near the decision boundary re-evaluated in full precision"
            if reason is not None:
                details["fallback"] = reason
                method = "full forward (the cache could not be used: " + reason + ")"
        rest = [b for b in everything if b not in decisions]
        decisions.update(self._full(helpers, rest, files))
        details["method"] = method
        details.setdefault("phases", {})["evaluate"] = round(time.monotonic() - t, 3)
        details["eval_seconds"] = details["phases"]["evaluate"]
        return torch.cat([decisions[b] for b in everything]), notes

    def _evaluate_full(self, helpers, details: dict) -> tuple[torch.Tensor, list[str]]:
        """Every batch through the model's full forward (a fine-tuned model: no shared encoder states)."""
        t = time.monotonic()
        everything = list(range(len(self.vset.token_batches)))
        decisions = self._full(helpers, everything, files=False)
        details["method"] = "full forward" + (" with attention masks" if self.kind.attention_mask else "")
        details["transport"] = "channel"
        details.setdefault("phases", {})["evaluate"] = round(time.monotonic() - t, 3)
        details["eval_seconds"] = details["phases"]["evaluate"]
        return torch.cat([decisions[b] for b in everything]), []

    def _unchanged(self, perturbed, reference: torch.Tensor, probe: int | None = None) -> bool:
        """The model's decision values are the same with the encoder's output changed."""
        if isinstance(perturbed, str):  # the perturbed cached call missed: cannot tell, assume used
            return False
        if isinstance(perturbed, dict):
            perturbed = next(iter(perturbed.values()))
        else:
            perturbed = self._decision(perturbed, probe)
        scale = 1.0 + float(reference.abs().nan_to_num(0).max())
        return bool(torch.allclose(perturbed, reference, atol=1e-6 * scale, rtol=0, equal_nan=True))

    def _precision_guard(self, helpers, decisions, exact, delta, files, details) -> int:
        """Bound what the cache's precision can change: a prediction can flip only where the decision
        value lies within the sample's largest difference of the boundary (x2 for safety). The batches of
        such reviews are re-evaluated with the full forward, however few (skipping up to 7 of them let 2 of
        7,500 predictions flip on a GPU: a grade other than the full forward's)."""
        margin = 2 * delta + 1e-6
        uncertain = {b for b, d in decisions.items() if b not in exact and bool((d.abs() <= margin).any())}
        count = sum(int((decisions[b].abs() <= margin).sum()) for b in uncertain)
        details["near_boundary"] = count
        if not count:
            return 0
        redo = sorted(uncertain)
        decisions.update(self._full(helpers, redo, files))
        return len(redo)
