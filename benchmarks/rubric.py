"""Benchmarks of the accuracy rubric (Transformers & BERT, part 7).

`train`: the reference training script. It runs the assignment's own solution code: the definitions
of solutions/transformers_bert/transformers_bert.ipynb (model, data helpers, train/evaluate loops)
and its data and model cells, then the notebook's training loop, validating `--evals-per-epoch` times
per epoch (1 = exactly the notebook's loop). It prints the time to reach 90% validation accuracy and
the final validation and test accuracy of the best checkpoint, and leaves OUT/ as a submission folder
(the notebook + bert_gru_sentiment.pt).

    python benchmarks/rubric.py train --encoder bert-base-uncased --out bench/reference          # GPU
    python benchmarks/rubric.py train --encoder ../shared/data/models/all-MiniLM-L6-v2 \\
        --imdb ../shared/data/imdb/aclimdb_50k.parquet --train-subset 1000 --max-len 128 \\
        --epochs 2 --evals-per-epoch 2 --out /var/tmp/bench/reference                          # CPU subset

`grade`: rubric time per submission with the hidden-state cache, against a naive full forward per
submission, in the same run, on the same submissions (the solution notebook with the given checkpoint
and K-1 variants of it whose GRU and output weights carry small seeded noise). Prints the time of the
first submission (which includes loading the encoder, tokenising the split and, for the cached run,
computing the cache) and of each additional one, the ratio, and each submission's accuracy both ways.

    python benchmarks/rubric.py grade --checkpoint bench/reference/bert_gru_sentiment.pt \\
        --submissions 4 --out bench/grade                                                   # GPU, 7,500 reviews
    python benchmarks/rubric.py grade --encoder ../shared/data/models/all-MiniLM-L6-v2 \\
        --imdb ../shared/data/imdb/aclimdb_50k.parquet --checkpoint /var/tmp/bench/reference/bert_gru_sentiment.pt \\
        --valid-limit 256 --submissions 3 --device cpu --out /var/tmp/bench/grade               # CPU subset

Keep --out outside /tmp: the student's worker has a private /tmp and reads the cache files from
OUT/.rubric-cache (elsewhere they are sent over its channel, which is slower).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

NOTEBOOK = ROOT / "solutions" / "transformers_bert" / "transformers_bert.ipynb"
NOTEBOOKS = {"transformers_bert": NOTEBOOK, "bert_inside": ROOT / "solutions" / "bert_inside" / "bert_inside.ipynb"}


def solution_namespace(notebook: Path, env: dict[str, str]) -> tuple[dict, list]:
    """The notebook's definitions (imports, functions, classes, settings) run here: instructor code."""
    import nbformat

    from autograder.notebook.extract import extract

    os.environ.update({k: v for k, v in env.items() if v is not None})
    nb = nbformat.read(notebook, as_version=4)
    namespace: dict = {"__name__": "reference_solution"}
    for unit in extract(nb).units:
        try:  # as the grader does: each statement on its own; a demo's leftover may fail
            exec(compile(unit.source, f"<{notebook.name} cell {unit.cell}>", "exec"), namespace)
        except Exception:  # noqa: BLE001 - as the grader does: a demo's leftover may fail
            pass
    return namespace, nb.cells


def notebook_cell(cells, marker: str) -> str:
    for cell in cells:
        if cell.cell_type == "code" and marker in cell.source:
            return cell.source
    raise SystemExit(f"the notebook has no code cell containing {marker!r}")


# -- train ---------------------------------------------------------------------------------------------

def cmd_train(args) -> int:
    if args.assignment == "bert_inside":
        return cmd_train_inside(args)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    env = {"BERT_ENCODER": args.encoder, "IMDB_PATH": args.imdb, "TRAIN_SUBSET": str(args.train_subset),
           "MAX_LEN": str(args.max_len) if args.max_len else None, "EPOCHS": str(args.epochs),
           "BATCH_SIZE": str(args.batch_size) if args.batch_size else None, "TQDM_DISABLE": "1"}
    ns, cells = solution_namespace(Path(args.notebook), env)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    exec(notebook_cell(cells, "train_valid_split(train_texts"), ns)  # the notebook's data cell
    data_seconds = time.monotonic() - start
    exec(notebook_cell(cells, "BERTGRUSentiment(bert, HIDDEN_DIM"), ns)  # the notebook's model cell
    model, device = ns["model"], ns["DEVICE"]
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=ns["LEARNING_RATE"])
    criterion = torch.nn.BCEWithLogitsLoss()
    checkpoint = out / ns["CHECKPOINT"]
    loader = ns["train_loader"]
    batches_per_epoch = len(loader.batch_sampler)
    print(f"encoder {ns['ENCODER']} on {device}; train {len(ns['splits']['train'][0])}, valid "
          f"{len(ns['splits']['valid'][0])}, test {len(ns['splits']['test'][0])} reviews; MAX_LEN {ns['MAX_LEN']}, "
          f"batch {ns['BATCH_SIZE']}, {ns['EPOCHS']} epoch(s), validation {args.evals_per_epoch}x per epoch; "
          f"data prepared in {data_seconds:.0f} s", flush=True)
    best, history, reached = float("inf"), [], None
    train_seconds = eval_seconds = 0.0
    wall_start = time.monotonic()
    for epoch in range(1, ns["EPOCHS"] + 1):
        batches = list(loader.batch_sampler)  # one epoch's shuffled batches, cut into evaluation periods
        k = max(1, args.evals_per_epoch)
        for part in range(k):
            chunk = batches[part * len(batches) // k:(part + 1) * len(batches) // k]
            part_loader = torch.utils.data.DataLoader(loader.dataset, batch_sampler=chunk, collate_fn=loader.collate_fn)
            t = time.monotonic()
            train_loss, train_acc = ns["train_epoch"](model, part_loader, optimizer, criterion, device)
            train_seconds += time.monotonic() - t
            t = time.monotonic()
            valid_loss, valid_acc = ns["evaluate"](model, ns["valid_loader"], criterion, device)
            eval_seconds += time.monotonic() - t
            if valid_loss < best:
                best = valid_loss
                torch.save(model.state_dict(), checkpoint)
            point = {"epoch": round(epoch - 1 + (part + 1) / k, 3), "train_seconds": round(train_seconds, 1),
                     "wall_seconds": round(time.monotonic() - wall_start, 1), "train_loss": train_loss,
                     "train_acc": train_acc, "valid_loss": valid_loss, "valid_acc": valid_acc}
            history.append(point)
            if reached is None and valid_acc >= args.target:
                reached = point
            print(f"epoch {point['epoch']:.2f}: train {train_seconds:.0f} s (wall {point['wall_seconds']:.0f} s) | "
                  f"train loss {train_loss:.3f} acc {train_acc:.2%} | valid loss {valid_loss:.3f} acc {valid_acc:.2%}",
                  flush=True)
    model.load_state_dict(torch.load(checkpoint, map_location=device, weights_only=True))
    valid_loss, valid_acc = ns["evaluate"](model, ns["valid_loader"], criterion, device)
    test_loss, test_acc = ns["evaluate"](model, ns["test_loader"], criterion, device)
    shutil.copy(args.notebook, out / Path(args.notebook).name)
    summary = {"encoder": ns["ENCODER"], "device": str(device), "train_subset": ns["TRAIN_SUBSET"],
               "max_len": ns["MAX_LEN"], "epochs": ns["EPOCHS"], "batches_per_epoch": batches_per_epoch,
               "threads": torch.get_num_threads(), "target": args.target, "time_to_target": reached,
               "final_valid_acc": valid_acc, "final_test_acc": test_acc, "valid_n": len(ns["splits"]["valid"][0]),
               "test_n": len(ns["splits"]["test"][0]), "history": history, "data_seconds": data_seconds,
               "train_seconds": train_seconds, "eval_seconds": eval_seconds}
    (out / "train.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    if reached:
        print(f"time to {args.target:.0%} validation accuracy: {reached['train_seconds']:.0f} s of training "
              f"({reached['wall_seconds']:.0f} s wall with validation passes), at epoch {reached['epoch']:.2f}")
    else:
        print(f"time to {args.target:.0%} validation accuracy: not reached in {ns['EPOCHS']} epoch(s) "
              f"(best {max(p['valid_acc'] for p in history):.2%}; {train_seconds:.0f} s of training)")
    print(f"best checkpoint: valid acc {valid_acc:.2%} ({summary['valid_n']} reviews), test acc {test_acc:.2%} "
          f"({summary['test_n']} reviews); encoder {ns['ENCODER']}, device {device}; saved {checkpoint}")
    return 0


def cmd_train_inside(args) -> int:
    """BERT from the inside, part 8: the notebook's own fine-tuning cells (data, encoding, training loop with
    validation after each epoch, the best epoch's state_dict saved to CHECKPOINT, then the test set), run as
    they are in OUT/, each timed."""
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    env = {"BERT_ENCODER": args.encoder, "IMDB_PATH": args.imdb, "TRAIN_SUBSET": str(args.train_subset),
           "MAX_LEN": str(args.max_len) if args.max_len else None, "EPOCHS": str(args.epochs),
           "BATCH_SIZE": str(args.batch_size) if args.batch_size else None,
           "LEARNING_RATE": str(args.learning_rate) if args.learning_rate else None, "TQDM_DISABLE": "1"}
    notebook = Path(args.notebook).resolve()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ns, cells = solution_namespace(notebook, env)
    os.chdir(out)  # the notebook saves CHECKPOINT relative to its working directory
    seconds = {}
    for label, marker in (("settings", "FLOAT32 = "), ("data", "train_valid_split(train_texts"),
                          ("encode", "encoded = {name: encode_reviews"),
                          ("fine-tune", "AutoModelForSequenceClassification.from_pretrained(ENCODER"),
                          ("test", "model.load_state_dict(torch.load(CHECKPOINT")):
        source = notebook_cell(cells, marker)
        if label == "settings":  # only the dtype line of that cell: the rest loads a second model
            source = next(line for line in source.splitlines() if line.startswith("FLOAT32 = "))
        start = time.monotonic()
        print(f"-- {label}", flush=True)
        exec(compile(source, f"<{notebook.name}: {label} cell>", "exec"), ns)
        seconds[label] = round(time.monotonic() - start, 1)
        print(f"   {label}: {seconds[label]} s", flush=True)
    shutil.copy(notebook, out / notebook.name)
    summary = {"encoder": ns["ENCODER"], "device": str(ns["DEVICE"]), "train_subset": ns["TRAIN_SUBSET"],
               "max_len": ns["MAX_LEN"], "epochs": ns["EPOCHS"], "batch_size": ns["BATCH_SIZE"],
               "learning_rate": ns["LEARNING_RATE"], "best_valid_acc": ns["best_accuracy"],
               "test_metrics": ns["metrics"], "seconds": seconds,
               "valid_n": len(ns["splits"]["valid"][0]), "test_n": len(ns["splits"]["test"][0])}
    (out / "train.json").write_text(json.dumps(summary, indent=1, default=str), encoding="utf-8")
    print(f"best checkpoint: valid acc {ns['best_accuracy']:.2%} ({summary['valid_n']} reviews), test acc "
          f"{ns['metrics']['accuracy']:.2%} ({summary['test_n']} reviews); fine-tuning {seconds['fine-tune']} s; "
          f"saved {out / ns['CHECKPOINT']}")
    return 0


# -- grade ---------------------------------------------------------------------------------------------

def make_submissions(args, out: Path, checkpoint: str, frozen_encoder: bool) -> list[Path]:
    """K submission folders: the solution notebook with the checkpoint (student 1), and variants of it whose
    weights carry seeded noise growing with k (student k+1: k x NOISE of each tensor's spread), so that the
    class's accuracies spread from the reference's down. The frozen encoder's weights (`bert.`) stay exact, as
    the rubric requires; a fine-tuned model's embeddings stay exact too. `checkpoint`: the assignment's file name."""
    import torch

    if args.checkpoint:
        base = torch.load(args.checkpoint, map_location="cpu", weights_only=True)
    elif not frozen_encoder:  # the pretrained encoder with an untrained head: for timing only
        import transformers

        base = transformers.AutoModelForSequenceClassification.from_pretrained(
            args.encoder or "bert-base-uncased", num_labels=2, dtype=torch.float32).state_dict()
    else:  # an untrained classifier from the notebook's class: for timing only
        from autograder.rubric.encoder import load_encoder

        ns, _ = solution_namespace(Path(args.notebook), {"BERT_ENCODER": args.encoder})
        encoder = load_encoder(args.encoder).model
        torch.manual_seed(0)
        base = ns["BERTGRUSentiment"](encoder, ns["HIDDEN_DIM"], ns["OUTPUT_DIM"], ns["N_LAYERS"], ns["BIDIRECTIONAL"],
                                      ns["DROPOUT"]).state_dict()

    def kept(key: str) -> bool:
        return key.startswith("bert.") if frozen_encoder else "embeddings" in key

    paths = []
    for k in range(args.submissions):
        folder = out / "submissions" / f"student{k + 1:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(args.notebook, folder / Path(args.notebook).name)
        state = {}
        g = torch.Generator().manual_seed(k)
        for key, value in base.items():
            if k and not kept(key) and value.is_floating_point() and value.numel() > 1:
                value = value + k * args.noise * value.std() * torch.randn(value.shape, generator=g)
            state[key] = value
        torch.save(state, folder / checkpoint)
        paths.append(folder / Path(args.notebook).name)
    return paths


def timed_runs(runs: dict, notebooks: list[Path], checkpoint: str, repeat: int, partial: Path) -> dict:
    """Grade every submission with each run, interleaved (submission 1 with each run, then 2, ...), so
    that a machine whose load drifts affects the runs alike. A run's first submission includes its
    preparation: loading the encoder, tokenising the split and (cached run) computing the cache. The first
    submission is graded `repeat` more times right after it (its accuracy must not change). What is
    measured so far is in `partial` after every submission, for a run stopped by a time limit."""
    import torch

    report = {label: {"times": [], "accuracy": [], "methods": [], "phases": [], "repeats": []} for label in runs}
    for label, run in runs.items():
        start = time.monotonic()
        run.prepare()
        report[label]["prepare"] = time.monotonic() - start
        report[label]["timings"] = dict(run.timings)
        if torch.cuda.is_available():
            report[label]["gpu_memory_after_prepare_mib"] = torch.cuda.max_memory_allocated() / 2**20
    jobs = [(0, notebooks[0])] + [(None, notebooks[0])] * repeat + [(i, nb) for i, nb in enumerate(notebooks) if i]
    for i, nb in jobs:
        for label, run in runs.items():
            t = time.monotonic()
            outcome = run.grade(nb, nb.parent / checkpoint)
            seconds = time.monotonic() - t + (report[label]["prepare"] if i == 0 else 0.0)
            d = outcome.details
            r = report[label]
            if i is None:
                r["repeats"].append(d.get("accuracy"))
            else:
                r["times"].append(seconds)
                r["accuracy"].append(d.get("accuracy"))
                r["methods"].append(d.get("method"))
                r["phases"].append(d.get("phases"))
            which = f"submission {i + 1}" if i is not None else "submission 1 again"
            print(f"  {which:20s} {label:12s} {seconds:7.1f} s  accuracy {d.get('accuracy', float('nan'))!r}  "
                  f"{d.get('method', outcome.check.message[:100])}  phases {d.get('phases')}", flush=True)
        partial.write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    if torch.cuda.is_available():
        for r in report.values():
            r["gpu_memory_peak_judge_mib"] = torch.cuda.max_memory_allocated() / 2**20
    return report


def _grading_runs(args, config, kind, device: str, cuda: bool, limit, out: Path) -> dict:
    """The rubric runs to compare: with a frozen encoder, the shared cache against a full forward per
    submission (and, if asked, a float32 cache); a fine-tuned model has only the full forward."""
    import torch

    from autograder.rubric import RubricOptions
    from autograder.rubric.stage import RubricRun

    common = dict(encoder=args.encoder, imdb=args.imdb, device=device, valid_limit=limit or None,
                  threads=args.threads or torch.get_num_threads(), timeout=args.timeout)
    if not kind.frozen_encoder:
        return {"full": RubricRun(config, RubricOptions(cache=False, precision="fp32", cache_dir=out / "cache-full",
                                                        **common), cuda=cuda)}
    shutil.rmtree(out / "cache", ignore_errors=True)  # time the cache's computation, not a reused one
    runs = {"cached": RubricRun(config, RubricOptions(cache=True, precision=args.precision, cache_dir=out / "cache",
                                                      **common), cuda=cuda),
            "naive": RubricRun(config, RubricOptions(cache=False, precision="fp32", cache_dir=out / "cache-naive",
                                                     **common), cuda=cuda)}
    if args.fp32_cache_too and args.precision != "fp32" and device == "cuda":
        shutil.rmtree(out / "cache-fp32", ignore_errors=True)
        runs["cached_fp32"] = RubricRun(config, RubricOptions(cache=True, precision="fp32", cache_dir=out / "cache-fp32",
                                                              **common), cuda=cuda)
    return runs


def cmd_grade(args) -> int:
    import torch

    from autograder.rubric.command import assignment_rubric

    if args.threads:
        torch.set_num_threads(args.threads)
    out = Path(args.out)
    if out.resolve().is_relative_to("/tmp"):
        print("warning: --out under /tmp: workers cannot read the cache files there; they get them over their "
              "channel (slower)", file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    config = assignment_rubric(str(ROOT / "solutions" / args.assignment))[0]
    if args.max_len:
        config = replace(config, max_len=args.max_len)
    kind = config.checkpoint_kind
    notebooks = make_submissions(args, out, config.checkpoint, kind.frozen_encoder)
    cuda = torch.cuda.is_available()
    device = args.device if args.device != "auto" else ("cuda" if cuda else "cpu")
    limit = args.valid_limit if args.valid_limit is not None else (None if device == "cuda" else 256)
    print(f"rubric benchmark: {args.assignment} ({kind.name}), {len(notebooks)} submissions, device {device}, "
          f"{'all' if not limit else limit} validation reviews, max_len {config.max_len}", flush=True)
    runs = timed_runs(_grading_runs(args, config, kind, device, cuda, limit, out), notebooks,
                      config.checkpoint, args.repeat, out / "benchmark.partial.json")
    report = {"assignment": args.assignment, "kind": kind.name, "device": device,
              "gpu": torch.cuda.get_device_name() if cuda else None, "torch": torch.__version__,
              "torch_threads": args.threads or torch.get_num_threads(),
              "encoder": args.encoder or "bert-base-uncased", "validation_reviews": limit or "all",
              "max_len": config.max_len, "submissions": len(notebooks), "noise": args.noise, "runs": runs}
    for r in runs.values():
        extra = r["times"][1:] or [float("nan")]
        r["first"], r["additional_mean"], r["additional_median"] = r["times"][0], statistics.mean(extra), \
            statistics.median(extra)
        r["deterministic"] = all(a == r["accuracy"][0] for a in r["repeats"])
    if "naive" in runs:
        c, n = runs["cached"], runs["naive"]
        report["ratio_additional"] = n["additional_mean"] / c["additional_mean"]
        report["ratio_additional_median"] = n["additional_median"] / c["additional_median"]
        report["ratio_total"] = sum(n["times"]) / sum(c["times"])
        report["same_accuracy"] = c["accuracy"] == n["accuracy"]
    if "cached_fp32" in runs:
        report["mixed_vs_fp32_points"] = [100 * abs(a - b) for a, b in zip(runs["cached"]["accuracy"],
                                                                            runs["cached_fp32"]["accuracy"])]
    (out / "benchmark.json").write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    _print_grade_report(report, runs)
    return 0


def _print_grade_report(report: dict, runs: dict) -> None:
    print()
    for label, r in runs.items():
        prepared = ", ".join(f"{k} {v:.1f} s" for k, v in r["timings"].items() if isinstance(v, (int, float)))
        print(f"{label:12s} first submission {r['first']:7.1f} s (includes preparing the run: {prepared}); "
              f"each additional: median {r['additional_median']:.2f} s, mean {r['additional_mean']:.2f} s")
        print(f"{'':12s} accuracies: {', '.join(f'{a:.4f}' if a is not None else 'none' for a in r['accuracy'])}")
        if r["repeats"]:
            print(f"{'':12s} submission 1 graded {1 + len(r['repeats'])} times: {r['accuracy'][0]!r}, "
                  f"{', '.join(repr(a) for a in r['repeats'])} -> deterministic: {r['deterministic']}")
        if "gpu_memory_peak_judge_mib" in r:
            print(f"{'':12s} GPU memory of the grading process: {r['gpu_memory_after_prepare_mib']:.0f} MiB after "
                  f"preparing, peak {r['gpu_memory_peak_judge_mib']:.0f} MiB")
    if "ratio_additional" in report:
        print(f"per additional submission: naive / cached = {report['ratio_additional']:.2f} (means), "
              f"{report['ratio_additional_median']:.2f} (medians); all submissions: {report['ratio_total']:.2f}")
        print(f"same accuracy with and without the cache: {report['same_accuracy']}")
    if "mixed_vs_fp32_points" in report:
        print(f"mixed precision vs fp32 cache, accuracy difference in points: "
              f"{', '.join(f'{x:.3f}' for x in report['mixed_vs_fp32_points'])}")


# -- pack ----------------------------------------------------------------------------------------------

def cmd_pack(args) -> int:
    """A compact offline bundle for a machine without hub access: the encoder's weights in float16 and
    only the IMDB splits needed, each file small enough for a 64 MiB transfer."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from safetensors.torch import load_file, save_file

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sizes = {}
    if args.encoder:
        src = Path(args.encoder)
        dst = out / src.name
        dst.mkdir(exist_ok=True)
        for f in src.iterdir():
            if f.is_file() and f.suffix != ".safetensors" and f.name not in ("pytorch_model.bin", "tf_model.h5"):
                shutil.copy(f, dst / f.name)
        weights = load_file(str(src / "model.safetensors"))
        save_file({k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in weights.items()},
                  str(dst / "model.safetensors"), metadata={"format": "pt"})
        sizes[str(dst)] = sum(f.stat().st_size for f in dst.iterdir())
    if args.imdb:
        import pyarrow as pa

        table = pq.read_table(args.imdb, columns=["orig_split", "label", "review"])
        splits = args.splits.split(",")
        part = table.filter(pc.is_in(table["orig_split"], value_set=pa.array(splits)))
        if args.test_sample and "test" in splits:  # a seeded sample of the test reviews, the rest whole
            test = part.filter(pc.equal(part["orig_split"], "test"))
            keep = sorted(random.Random(0).sample(range(test.num_rows), min(args.test_sample, test.num_rows)))
            part = pa.concat_tables([part.filter(pc.not_equal(part["orig_split"], "test")), test.take(pa.array(keep))])
        path = out / (args.name or f"imdb-{'-'.join(splits)}.parquet")
        pq.write_table(part, path, compression="zstd", compression_level=19)
        sizes[str(path)] = path.stat().st_size
    for path, size in sizes.items():
        print(f"{size / 2**20:7.1f} MiB  {path}")
    print("on the other machine: BERT_ENCODER=<encoder folder> IMDB_PATH=<parquet file> (the rubric needs only the "
          "train split; the notebook's training reads train and test)")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="the reference training script: time to 90%% validation accuracy")
    t.add_argument("--assignment", choices=sorted(NOTEBOOKS), default="transformers_bert")
    t.add_argument("--notebook", help="default: the assignment's solution notebook")
    t.add_argument("--encoder", help="hub id or folder (default: $BERT_ENCODER or bert-base-uncased)")
    t.add_argument("--imdb", help="parquet file (default: $IMDB_PATH or the hub)")
    t.add_argument("--train-subset", type=int, default=0, help="the notebook's TRAIN_SUBSET (0: all 17,500)")
    t.add_argument("--max-len", type=int, help="the notebook's MAX_LEN (default: the notebook's, 256)")
    t.add_argument("--epochs", type=int, default=4)
    t.add_argument("--batch-size", type=int)
    t.add_argument("--learning-rate", type=float, help="bert_inside: the notebook's LEARNING_RATE")
    t.add_argument("--evals-per-epoch", type=int, default=1)
    t.add_argument("--target", type=float, default=0.90)
    t.add_argument("--threads", type=int)
    t.add_argument("--out", required=True)
    t.set_defaults(run=cmd_train)
    g = sub.add_parser("grade", help="rubric time per submission: cache vs naive full forward")
    g.add_argument("--assignment", choices=sorted(NOTEBOOKS), default="transformers_bert")
    g.add_argument("--notebook", help="default: the assignment's solution notebook")
    g.add_argument("--encoder")
    g.add_argument("--imdb")
    g.add_argument("--checkpoint", help="a trained bert_gru_sentiment.pt (default: an untrained classifier)")
    g.add_argument("--submissions", type=int, default=3)
    g.add_argument("--valid-limit", type=int, help="first N validation reviews (default: all on CUDA, 256 on CPU)")
    g.add_argument("--max-len", type=int, help="default: the assignment's rubric setting (256)")
    g.add_argument("--noise", type=float, default=0.01,
                   help="student k+1's weights get k x NOISE of each tensor's spread as seeded noise (default 0.01)")
    g.add_argument("--repeat", type=int, default=1, help="grade submission 1 this many more times (determinism)")
    g.add_argument("--fp32-cache-too", action="store_true", help="CUDA: also a float32 cache, to compare accuracies")
    g.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    g.add_argument("--precision", choices=("auto", "fp32", "mixed"), default="auto")
    g.add_argument("--threads", type=int)
    g.add_argument("--timeout", type=float, default=3600)
    g.add_argument("--out", required=True)
    g.set_defaults(run=cmd_grade)
    k = sub.add_parser("pack", help="float16 encoder + only the needed IMDB splits, for an offline machine")
    k.add_argument("--encoder", help="encoder folder (config, tokenizer files, model.safetensors)")
    k.add_argument("--imdb", help="the IMDB parquet file")
    k.add_argument("--splits", default="train,test", help="orig_split values to keep (default: train,test; the "
                   "rubric alone needs train)")
    k.add_argument("--test-sample", type=int, help="keep only this many test reviews, a seeded sample (the notebooks' "
                   "test accuracy; the rubric needs none)")
    k.add_argument("--name", help="the parquet file's name (default: imdb-<splits>.parquet)")
    k.add_argument("--out", required=True)
    k.set_defaults(run=cmd_pack)
    args = p.parse_args(argv)
    if getattr(args, "notebook", "") is None:
        args.notebook = str(NOTEBOOKS[args.assignment])
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
