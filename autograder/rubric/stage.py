"""The accuracy rubric stage: grade a student's saved classifier by the validation accuracy the grader
measures itself.

What the checkpoint is depends on the assignment's kind (autograder.deferred.accuracy.checkpoints). The steps below are
those of the default kind, `frozen_encoder_class`; for `sequence_classifier` the checkpoint holds a whole
fine-tuned library model: the worker builds the library's class from the grader's encoder configuration
(no student code is loaded), loads the checkpoint into it, and every batch runs through its full forward
with an attention mask (no cache: every student's encoder is different).

For each submission (notebook + the checkpoint beside it):

1. The student's definitions run in a confined worker (as in `autograder grade`); the grader's helper
   code (worker_side.py) is loaded beside them. The checkpoint's bytes are sent there and read with
   `torch.load(weights_only=True)`: the judge never unpickles anything.
2. The student's class is built around the grader's frozen encoder, with the constructor arguments
   from the notebook's constants or read off the checkpoint's GRU shapes.
3. Refusals, each with its own message: the checkpoint's encoder weights differ from the pretrained
   ones; the checkpoint does not fit the class; the model's output does not depend on the encoder.
4. Logits for every validation batch come back as plain tensors; the judge, which alone holds the
   labels, computes the accuracy and the points.

Speed: the encoder's hidden states for the validation batches are computed once per run (cache.py).
The student's model then runs on them through a stand-in encoder, but only after the grader has
compared, on a sample of batches, its outputs through the cache with its own full forward; where
they differ, or the model calls the encoder some other way, the stage falls back to the full
forward. With mixed precision the logits of the sample bound the error, and the batches of reviews whose
logit is within twice that bound of the decision boundary are re-evaluated in full precision, however few:
the cache makes grading faster, never different (evaluation.py).

Without CUDA (and unless asked to use the CPU) the stage reports the rubric as pending.
"""
from __future__ import annotations

import os
import random
import re
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from autograder.judge import CheckResult
from autograder.program import Program
from autograder.notebook.extract import Extraction, extract
from autograder.notebook.load import NotebookError, read_notebook
from autograder.recording import modules_hint
from autograder.rubric.cache import HiddenStateCache, build_cache
from autograder.deferred.accuracy.config import RubricConfig, pending_message
from autograder.rubric.options import RubricOptions
from autograder.rubric.data import ValidationSet, validation_set
from autograder.rubric.evaluation import CachedEvaluation, Refused
from autograder.rubric.encoder import DEFAULT_ENCODER, Encoder, compare_encoder, load_encoder
from autograder.rubric.formula import rubric_points
from autograder.sandbox import (
    Confinement, MissingName, StudentError, WorkerError, WorkerSpec, WorkerTimeout, choose, describe_choice,
    preload_modules,
)
from autograder.status import FAILED, PENDING, status_of

HELPER_SOURCE = (Path(__file__).with_name("worker_side.py")).read_text(encoding="utf-8")


@dataclass
class RubricOutcome:
    """One submission's rubric result: the check's result and the details written beside it (notebook, checkpoint,
    measurements)."""
    check: CheckResult
    details: dict = field(default_factory=dict)


@dataclass
class Graded:
    """One submission's rubric as a run records it: its place in the batch, the outcome, where it came from."""

    index: int
    outcome: RubricOutcome
    encoder: str | None
    timings: dict


def _shape(shape) -> str:
    return "x".join(str(d) for d in shape) or "scalar"


def _names(items: list, n: int = 4) -> str:
    shown = ", ".join(str(x) for x in items[:n])
    return shown + (f" and {len(items) - n} more" if len(items) > n else "")


def worker_libraries(model_type: str) -> list[str]:
    """Library modules every rubric worker imports: transformers' auto classes and the encoder's modeling code."""
    name = str(model_type).replace("-", "_")
    return ["transformers", "transformers.models.auto.modeling_auto", f"transformers.models.{name}.modeling_{name}",
            "safetensors.torch"]


class RubricRun(CachedEvaluation):
    """One grading run: the encoder, the validation set and the hidden-state cache, shared by all
    submissions (trusted grader code, in this process); each submission gets its own worker."""

    def __init__(self, config: RubricConfig | None = None, options: RubricOptions | None = None,
                 cuda: bool | None = None, out_dir: Path | None = None, log=None):
        self.config = config or RubricConfig()
        self.kind = self.config.checkpoint_kind
        self.options = options or RubricOptions()
        self.cuda = torch.cuda.is_available() if cuda is None else cuda
        if self.options.device == "cpu":
            self.device = torch.device("cpu")
        elif self.options.device == "cuda" or (self.options.device == "auto" and self.cuda):
            if not self.cuda:
                raise RuntimeError("--device cuda: CUDA is not available here")
            self.device = torch.device("cuda")
        else:
            self.device = None  # pending
        self.precision = self.options.precision
        if self.precision == "auto":
            self.precision = "mixed" if self.device is not None and self.device.type == "cuda" else "fp32"
        self.out_dir = Path(out_dir) if out_dir else None
        self.cache_root = Path(self.options.cache_dir) if self.options.cache_dir else \
            (self.out_dir / ".rubric-cache" if self.out_dir else None)
        self.log = log or (lambda msg: None)
        self.threads = self.options.threads or torch.get_num_threads()
        self.encoder: Encoder | None = None
        self.vset: ValidationSet | None = None
        self.cache: HiddenStateCache | None = None
        self.encoder_dir: Path | None = None
        self.sample: list[int] = []
        self.timings: dict = {}
        self._level: str | None = None  # the workers' confinement level, once chosen

    @property
    def pending(self) -> bool:
        """Whether no device can grade here (the rubric needs a GPU this machine lacks): every submission is then
        pending."""
        return self.device is None

    # -- once per run ---------------------------------------------------------------------------
    def prepare(self) -> None:
        """Load the encoder, the validation set and the hidden-state cache once, with `threads` torch threads; later
        calls do nothing."""
        if self.encoder is not None:
            return
        threads = torch.get_num_threads()
        torch.set_num_threads(self.threads)
        try:
            self._prepare()
        finally:
            torch.set_num_threads(threads)

    def _prepare(self) -> None:
        start = time.monotonic()
        # a frozen encoder is the grader's own (weights, fingerprints, cache); a checkpoint holding the whole
        # model needs only the encoder's configuration and tokenizer
        self.encoder = load_encoder(self.options.encoder, self.device, weights=self.kind.frozen_encoder)
        self.timings["encoder_load"] = time.monotonic() - start
        # imported once by the fork server rather than by every student's worker (seconds each on a GPU
        # machine): the encoder's modeling code, and what the assignment's reference imports
        preload_modules(worker_libraries(self.encoder.config.model_type) + modules_hint(self.config.assignment),
                        wait=False)
        start = time.monotonic()
        c = self.config
        self.vset = validation_set(self.encoder.tokenizer, self.options.imdb, c.max_len, c.batch_size,
                                   c.bucket_batches, c.split_seed, c.valid_fraction, self.options.valid_limit)
        self.timings["data"] = time.monotonic() - start
        if not self.kind.frozen_encoder:
            return
        self.sample = self._sample_batches()
        if self.cache_root is not None:
            self.cache_root.mkdir(parents=True, exist_ok=True)
            os.chmod(self.cache_root, 0o755)
            name = "encoder-" + _safe(self.encoder.source)[-40:] + "-" + _digest(self.encoder.fingerprints)
            self.encoder_dir = self.encoder.export(self.cache_root / name)
        if self.options.cache:
            if self.cache_root is None:
                raise ValueError("the hidden-state cache needs a folder: give cache_dir or out_dir")
            self.log(f"rubric: computing the encoder's hidden states for {self.vset.n} validation reviews "
                     f"({len(self.vset.token_batches)} batches, {self.precision}) on {self.device}")
            self.cache = build_cache(self.encoder, self.vset, self.cache_root, self.precision, self.log)
            self.timings["cache_build"] = self.cache.seconds

    def _sample_batches(self) -> list[int]:
        """The batches with the most padding (where a model that treats the encoder differently shows
        it most) and a few seeded random ones: 2 for small sets, up to `sample_batches` (4 of the 235
        batches of the 7,500 IMDB validation reviews)."""
        n = len(self.vset.token_batches)
        k = max(min(2, n), min(self.options.sample_batches, n // 16))
        pad_id = self.encoder.tokenizer.pad_token_id or 0
        padding = [float((ids == pad_id).float().mean()) for ids in self.vset.token_batches]
        by_padding = sorted(range(n), key=lambda b: -padding[b])[: max(1, k // 2)]
        rest = [b for b in range(n) if b not in by_padding]
        chosen = by_padding + random.Random(0).sample(rest, min(k - len(by_padding), len(rest)))
        return sorted(chosen)

    # -- one submission -------------------------------------------------------------------------
    def grade(self, notebook: Path, checkpoint: Path) -> RubricOutcome:
        """Grade one submission's `checkpoint` (with its `notebook` where the kind loads student code) in its own
        worker; pending where the run has no device. A refused or failing submission gets a failed check saying why."""
        c = self.config
        check = CheckResult(c.name, c.part, c.points, 0.0, FAILED, "", c.visibility)
        start = time.monotonic()
        details: dict = {"notebook": str(notebook), "checkpoint": str(checkpoint)}
        if self.pending:
            check.status, check.message = PENDING, pending_message(c, cuda=False)
            return RubricOutcome(check, details)
        try:
            extraction = Extraction([], [])  # a library model: none of the student's code is needed
            if self.kind.student_code:
                try:
                    nb, _ = read_notebook(Path(notebook))
                except NotebookError as exc:
                    raise Refused(f"your notebook could not be read: {exc}") from None
                extraction = extract(nb)
            if not Path(checkpoint).is_file():
                raise Refused(f"no saved model: the rubric grades `{c.checkpoint}` (the notebook's CHECKPOINT, "
                              f"saved by the training loop) handed in next to the notebook; it was not found")
            problem = checkpoint_problem(Path(checkpoint))
            if problem:
                raise Refused(f"your `{c.checkpoint}` {problem}: it is not read")
            self.prepare()
            accuracy, correct, n, notes = self._grade_in_worker(extraction, Path(checkpoint), details)
        except Refused as exc:
            check.message = str(exc)
            details["refused"] = str(exc)
        except (StudentError, MissingName) as exc:
            check.message = exc.describe() if isinstance(exc, StudentError) else str(exc)
        except WorkerTimeout:
            check.message = (f"the rubric did not finish within {self.options.timeout:.0f} s (an endless loop in "
                             f"your model, or far too slow?)")
        except WorkerError as exc:
            check.message = f"the process running your model failed: {exc}"
        else:
            points = rubric_points(accuracy, c.points, c.floor, c.full)
            check.score = points
            check.status = status_of(points, c.points)
            subset = "" if n == self.vset.n_total else f" (the first {n} of its {self.vset.n_total} reviews)"
            check.message = (
                f"validation accuracy {accuracy:.2%} ({correct}/{n} reviews of the seeded validation split{subset}), "
                f"measured by the grader from your `{c.checkpoint}` {self._model_words()}: {points:g}/{c.points:g} "
                f"points = {c.points:g} x clamp((accuracy - {c.floor:g}) / {c.full - c.floor:g}, 0, 1).")
            if notes:
                check.message += "\n" + "\n".join(notes)
            details.update(accuracy=accuracy, correct=correct, n=n, points=points)
        check.seconds = round(time.monotonic() - start, 3)
        details["seconds"] = check.seconds
        return RubricOutcome(check, details)

    def _model_words(self) -> str:
        if self.kind.frozen_encoder:
            return f"on the pretrained encoder {self.encoder.source}"
        return f"(a fine-tuned {self.encoder.source} sequence classifier, called with attention masks)"

    def _confinement(self) -> Confinement:
        """The student's worker sees, besides what every worker sees, the encoder export and the hidden-state
        cache (both under cache_root) when the checkpoint's kind uses them, read-only."""
        cuda = self.device.type == "cuda"
        shared = self.cache_root if self.kind.frozen_encoder else None
        conf = Confinement(file_bytes=64 * 2**20, memory_bytes=0 if cuda else self.options.memory_mb * 2**20,
                           cuda=cuda, expose=[str(shared)] if shared else [])
        if self._level is None:  # the strongest level this machine allows, chosen once (sandbox/ladder.py)
            choice = choose(conf, self.options.trusted)
            if choice.weaker:
                self.log(describe_choice(choice))
            self._level = choice.level
        return replace(conf, level=self._level)

    def _grade_in_worker(self, extraction, checkpoint: Path, details: dict):
        c, o = self.config, self.options
        spec = WorkerSpec([u.to_wire() for u in extraction.units], confinement=self._confinement(),
                          import_seconds=min(o.timeout, 300), threads=self.threads)
        program = Program(extraction, spec, [HELPER_SOURCE])
        deadline = time.monotonic() + o.timeout
        program.worker.deadline = deadline
        try:
            sub = program.proxy()
            t = time.monotonic()
            if self.kind.student_code and not sub.defines(c.model_class):
                raise Refused(program.explain_missing(c.model_class) + "; the rubric builds that class")
            program.worker.deadline = deadline
            helpers = sub.helpers
            phases = details.setdefault("phases", {})
            phases["load_notebook"] = round(time.monotonic() - t, 3)
            t = time.monotonic()
            pipe = o.transport == "pipe" or not self.kind.frozen_encoder
            report = helpers.setup(str(self.device), self.threads,
                                   None if pipe or not self.encoder_dir else str(self.encoder_dir),
                                   None if pipe or not self.cache else str(self.cache.folder))
            if self.kind.frozen_encoder and not report["encoder"]:
                helpers.set_encoder(self.encoder.wire_config(), self.encoder.state_tensors())
            files = bool(report["cache"])
            details["transport"] = "files" if files else "channel"
            phases["encoder_in_worker"] = round(time.monotonic() - t, 3)
            t = time.monotonic()
            blob = torch.frombuffer(bytearray(checkpoint.read_bytes()), dtype=torch.uint8)
            info = helpers.inspect_checkpoint(blob)
            del blob
            phases["read_checkpoint"] = round(time.monotonic() - t, 3)
            t = time.monotonic()
            if "error" in info:
                raise Refused(f"your `{c.checkpoint}` could not be read as a state_dict: {info['error']}.")
            notes = list(info.get("notes", []))
            if self.kind.student_code:
                built, args, arg_note = self._build(sub, helpers, info["keys"])
                if arg_note:
                    notes.append(arg_note)
                details["constructor"] = args
            else:
                self._build_library_classifier(helpers)
            helpers.load_weights()
            phases["build_and_check"] = round(time.monotonic() - t, 3)
            if self.kind.frozen_encoder:
                decisions, how = self._evaluate(helpers, files, details)
            else:
                decisions, how = self._evaluate_full(helpers, details)
            notes += how
        finally:
            program.close()
        labels = self.vset.labels
        predictions = (decisions > 0).long()
        correct = int((predictions == labels).sum())
        return correct / len(labels), correct, len(labels), notes

    # -- building the student's model ----------------------------------------------------------
    def _notebook_args(self, sub) -> list | None:
        values = []
        for name in self.config.constants:
            if not sub.defines(name):
                return None
            values.append(getattr(sub, name))
        kinds = [int, int, int, bool, (int, float)]
        for value, kind in zip(values, kinds):
            if isinstance(value, bool) and kind is not bool:
                return None
            if not isinstance(value, kind):
                return None
        return values

    def _inferred_args(self, keys: dict) -> list | None:
        rnn, out = self.config.rnn_attr, self.config.out_attr
        hh = keys.get(f"{rnn}.weight_hh_l0")
        ow = keys.get(f"{out}.weight")
        if not hh or not ow or len(hh[0]) != 2 or len(ow[0]) != 2:
            return None
        layers = [k for k in keys if re.fullmatch(rf"{re.escape(rnn)}\.weight_ih_l\d+", k)]
        bidirectional = f"{rnn}.weight_ih_l0_reverse" in keys
        return [hh[0][1], ow[0][0], len(layers), bidirectional, 0.0]

    def _build(self, sub, helpers, keys: dict):
        c = self.config
        names = ("hidden_dim", "output_dim", "n_layers", "bidirectional", "dropout")
        from_notebook = self._notebook_args(sub)
        inferred = self._inferred_args(keys)
        if inferred is not None and from_notebook is not None:
            inferred[4] = from_notebook[4]
        candidates = [(a, w) for a, w in ((from_notebook, "your notebook's constants"),
                                          (inferred, "the shapes in your checkpoint")) if a is not None]
        if not candidates:
            raise Refused(f"the rubric cannot tell how to build your {c.model_class}: define the notebook "
                          f"constants {', '.join(c.constants)} (as in the given settings cell), or keep the "
                          f"attribute names `{c.rnn_attr}` (the GRU) and `{c.out_attr}` (the output layer)")
        first = None
        for args, where in candidates:
            if first is not None and args == first[1]:
                continue
            built = helpers.build_model(c.model_class, args, c.encoder_attr)
            if first is None:
                first = (built, args, where)
                differ = compare_encoder(built["encoder"], self.encoder.fingerprints)
                if differ:
                    raise Refused(self._encoder_message(built["encoder"], differ))
            if not (built["missing"] or built["unexpected"] or built["mismatched"]):
                note = ""
                if first[1] != args:
                    note = (f"Note: your notebook's constants ({_args_text(first[1], names)}) do not fit your "
                            f"checkpoint; graded with the checkpoint's ({_args_text(args, names)}).")
                return built, dict(zip(names, args)), note
        built, args, where = first
        raise Refused(
            f"your `{c.checkpoint}` does not fit your {c.model_class} built with {_args_text(args, names)} "
            f"(from {where}) around the grader's encoder: {_fit_problems(built)}. Hand in the state_dict of the "
            f"model you trained (torch.save(model.state_dict(), CHECKPOINT)), with the class and the constants "
            f"as they were when you trained it.")

    def _build_library_classifier(self, helpers) -> None:
        """Kind sequence_classifier: the library's class from the grader's encoder configuration; refuse a
        checkpoint that does not fit it (another encoder size, another number of classes, another model)."""
        c = self.config
        built = helpers.build_sequence_classifier(self.encoder.wire_config(), c.num_labels)
        if not (built["missing"] or built["unexpected"] or built["mismatched"]):
            return
        name = self.encoder.source
        widths = sorted({shape[-1] for _, shape, model in built["mismatched"]
                         if len(shape) == 2 and model[-1] == built["hidden_size"] and shape[-1] != model[-1]})
        if widths:
            raise Refused(
                f"your `{c.checkpoint}` holds a model of another size than the encoder {name} the rubric grades "
                f"with (hidden size {widths[0]} instead of {built['hidden_size']}; {_fit_problems(built)}): fine-tune "
                f"the encoder the notebook loads by default (ENCODER = \"{DEFAULT_ENCODER}\") and hand in its state_dict.")
        raise Refused(
            f"your `{c.checkpoint}` does not fit AutoModelForSequenceClassification built from {name}'s configuration "
            f"with num_labels={c.num_labels}: {_fit_problems(built)}. Hand in the fine-tuned model's state_dict "
            f"(torch.save(model.state_dict(), CHECKPOINT)) of an AutoModelForSequenceClassification with "
            f"num_labels={c.num_labels}.")

    def _encoder_message(self, given: dict, differ: list[str]) -> str:
        hidden = self.encoder.hidden_size
        shapes = [d for d in differ if "(shape" in d]
        name = self.encoder.source
        if shapes:
            return (f"your `{self.config.checkpoint}` holds a different encoder than the pretrained {name} the "
                    f"rubric grades with ({_names(shapes, 2)}; its hidden size is {hidden}): train your classifier "
                    f"on the encoder the notebook loads by default (ENCODER = \"bert-base-uncased\").")
        return (f"the encoder weights in your `{self.config.checkpoint}` differ from the pretrained {name} "
                f"({len(differ)} of {len(given)} tensors, e.g. {_names(differ, 2)}): the encoder must stay frozen "
                f"(requires_grad False, never updated) and be the pretrained one. The rubric grades your GRU and "
                f"output layer on the grader's copy of the pretrained encoder.")


def _fit_problems(built: dict) -> str:
    """What differs between a checkpoint's keys and shapes and the model's (from the worker's comparison)."""
    problems = []
    if built["missing"]:
        problems.append(f"missing from the checkpoint: {_names(built['missing'])}")
    if built["unexpected"]:
        problems.append(f"in the checkpoint but not in the model: {_names(built['unexpected'])}")
    if built["mismatched"]:
        problems.append("different shapes: " + _names(
            [f"{k} (checkpoint {_shape(a)}, model {_shape(b)})" for k, a, b in built["mismatched"]], 3))
    return "; ".join(problems)


def _args_text(args, names) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in zip(names, args))


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "encoder"


def _digest(prints: dict) -> str:
    import hashlib
    import json

    return hashlib.sha256(json.dumps(sorted(prints.items())).encode()).hexdigest()[:12]


MAX_CHECKPOINT_BYTES = 4 << 30  # the largest checkpoint read (a whole BERT-large classifier is some 1.3 GB)


def checkpoint_problem(checkpoint: Path) -> str:
    """Why a submitted checkpoint is not read, or "": a link to a file outside its folder (the grader's files, another
    student's model, /dev/zero) or a file larger than any model the rubric grades (its bytes are held in memory)."""
    try:
        folder, target = checkpoint.parent.resolve(), checkpoint.resolve()
        if folder not in target.parents:
            return f"is a link to a file outside the folder it was handed in ({target})"
        size = target.stat().st_size
    except (OSError, RuntimeError) as exc:  # (RuntimeError: a loop of links)
        return f"cannot be read ({exc})"
    if size > MAX_CHECKPOINT_BYTES:
        return f"is {size / 2**30:.1f} GiB, larger than the {MAX_CHECKPOINT_BYTES / 2**30:.0f} GiB the rubric reads"
    return ""
