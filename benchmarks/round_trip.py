"""What one call into student code costs: a round trip to a confined worker, timed from the judge.

A worker is started (forked from the fork server and confined, as for a submission) with a notebook of one function,
`def f(x): return x`, and the judge times, each over --repeat calls (median of 5 batches):

- an empty request (`seed`, the cheapest request there is);
- `sub.f(1)`: a call with a number;
- `sub.f(x)` with x a (4, 8) float32 tensor, as most checks send;
- `sub.f(x)` with x a (1000, 200) int64 tensor (1.6 MB each way), as the masking checks send;
- the requests a check makes besides its calls: `seed` before it, `end_check` (or `stub_hit` and `reset`) after.

Run it with each checkout's package to compare (the figures of one machine drift by 10-20% within an hour: run
them one after the other):

    python benchmarks/round_trip.py
    (cd /tmp/before && PYTHONPATH=/tmp/before python benchmarks/round_trip.py)
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import nbformat
import torch

from autograder.program import Program
from autograder.notebook.extract import extract
from autograder.sandbox.client import WorkerSpec


def timed(fn, repeat: int) -> float:
    """Median over 5 batches of the time of one call, in µs."""
    batches = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        batches.append((time.perf_counter() - start) / repeat * 1e6)
    return statistics.median(batches)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=300, help="calls per batch (default 300)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("def f(x):\n    return x\n")])
    extraction = extract(nb)
    program = Program(extraction, WorkerSpec([u.to_wire() for u in extraction.units], import_seconds=60))
    try:
        sub, worker = program.proxy(), program.worker
        print(f"worker: {program.start().status.split(':')[0]}; {args.repeat} calls per batch, median of 5 batches")
        small = torch.randn(4, 8)
        large = torch.randint(0, 100, (1000, 200))
        assert torch.equal(sub.f(small), small) and torch.equal(sub.f(large), large)
        rows = [
            ("empty request (seed)", lambda: worker.request("seed", 0), args.repeat),
            ("sub.f(1)", lambda: sub.f(1), args.repeat),
            ("sub.f(x), x (4, 8) float32", lambda: sub.f(small), args.repeat),
            ("sub.f(x), x (1000, 200) int64", lambda: sub.f(large), max(10, args.repeat // 10)),
        ]
        if hasattr(worker, "start_check"):  # one request after each check
            rows.append(("a check's bookkeeping (end_check)", lambda: worker.end_check(0), args.repeat))
        else:  # before end_check: seed before each check, stub_hit and reset after
            rows.append(("a check's bookkeeping (seed, stub_hit, reset)",
                         lambda: (worker.request("seed", 0), worker.request("stub_hit"), worker.request("reset")),
                         args.repeat))
        for label, fn, repeat in rows:
            fn()
            print(f"{label:48s} {timed(fn, repeat):9.0f} µs")
    finally:
        program.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
