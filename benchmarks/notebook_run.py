"""Run an assignment notebook top to bottom in a fresh Jupyter kernel and time it.

The default is the Transformers & BERT answer key (release/transformers_bert/answer_key.ipynb) with the
offline data of ../shared/data and the notebook's quick CPU setting, the check that the release notebook
runs end to end on a CPU in minutes:

    python benchmarks/notebook_run.py --train-subset 2000 --epochs 1

`--assignment bert_inside` runs the BERT-from-the-inside answer key instead, with its quick setting:

    python benchmarks/notebook_run.py --assignment bert_inside --train-subset 2000 --epochs 1 --max-len 128 \
        --batch-size 16 --learning-rate 1e-4

It prints the wall time of the whole run and of the slowest cells, and the lines of the notebook's output
that report accuracy. The notebook runs in a scratch folder (its checkpoint lands there), with the settings
passed as the environment variables the notebooks read (BERT_ENCODER, IMDB_PATH, TRAIN_SUBSET, EPOCHS, MAX_LEN,
BATCH_SIZE, LEARNING_RATE).
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("notebook", nargs="?", type=Path, default=None,
                   help="default: release/<assignment>/answer_key.ipynb")
    p.add_argument("--assignment", default="transformers_bert", help="whose answer key runs when no notebook is given")
    p.add_argument("--encoder", default=str(SHARED / "models" / "all-MiniLM-L6-v2"))
    p.add_argument("--imdb", default=str(SHARED / "imdb" / "aclimdb_50k.parquet"))
    p.add_argument("--train-subset", type=int, default=2000)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--max-len", type=int, default=None, help="MAX_LEN; default: the notebook's own")
    p.add_argument("--batch-size", type=int, default=None, help="BATCH_SIZE; default: the notebook's own")
    p.add_argument("--learning-rate", type=float, default=None, help="LEARNING_RATE (bert_inside); default: the notebook's own")
    p.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS of the kernel; default: all cores")
    p.add_argument("--timeout", type=int, default=3600, help="seconds for one cell")
    args = p.parse_args(argv)
    if args.notebook is None:
        args.notebook = ROOT / "release" / args.assignment / "answer_key.ipynb"
    return args


def kernel_env(args) -> dict[str, str]:
    env = {"BERT_ENCODER": args.encoder, "IMDB_PATH": args.imdb,
           "TRAIN_SUBSET": str(args.train_subset), "EPOCHS": str(args.epochs)}
    if args.max_len:
        env["MAX_LEN"] = str(args.max_len)
    if args.batch_size:
        env["BATCH_SIZE"] = str(args.batch_size)
    if args.learning_rate:
        env["LEARNING_RATE"] = repr(args.learning_rate)
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    return env


class TimedClient(NotebookClient):
    """NotebookClient that records each code cell's wall time."""

    def __init__(self, nb, **kw):
        super().__init__(nb, **kw)
        self.cell_seconds: list[tuple[int, float]] = []

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        start = time.monotonic()
        try:
            return await super().async_execute_cell(cell, cell_index, execution_count, store_history)
        finally:
            if cell.cell_type == "code":
                self.cell_seconds.append((cell_index, time.monotonic() - start))


def output_text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def main(argv=None) -> int:
    args = parse_args(argv)
    nb = nbformat.read(args.notebook, as_version=4)
    os.environ.update(kernel_env(args))  # the kernel inherits the environment
    with tempfile.TemporaryDirectory(prefix="notebook-run-") as workdir:
        client = TimedClient(nb, timeout=args.timeout, kernel_name="python3", resources={"metadata": {"path": workdir}})
        start = time.monotonic()
        try:
            client.execute()
        except Exception as exc:  # noqa: BLE001 - CellExecutionError and friends: report, keep the timings
            print(f"FAILED: {type(exc).__name__}: {str(exc)[-2000:]}", file=sys.stderr)
            return 1
        finally:
            wall = time.monotonic() - start
            print(f"notebook {args.notebook.name}: {wall:.0f} s wall, {len(client.cell_seconds)} code cells run "
                  f"(settings: {kernel_env(args)})")
            for index, seconds in sorted(client.cell_seconds, key=lambda x: -x[1])[:5]:
                first = nb.cells[index].source.strip().splitlines()[0][:70] if nb.cells[index].source.strip() else ""
                print(f"  cell {index:3d}: {seconds:7.1f} s  {first}")
    for cell in nb.cells:
        for line in output_text(cell).splitlines():
            if re.search(r"acc|reviews|first loss|ours - library", line):
                print("  |", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
