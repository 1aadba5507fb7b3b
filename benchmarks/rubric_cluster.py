"""`autograder rubric --cluster` (Ray, on this machine) against the rubric on this machine, side by side in one
run: K submissions (one notebook + checkpoint each, the same trained model) graded each way into a fresh
folder; wall time, submissions per minute and the cluster's cost per submission.

No GPU here, so both sides run on the CPU (`--device cpu`) with the encoder's hidden-state cache, and the
cluster gets one actor per CPU; on a GPU cluster it gets one per GPU (docs/scale.md). By default the encoder
and data are the tiny ones the tests build; --encoder/--imdb take real ones (../shared/data).

    python benchmarks/rubric_cluster.py                                  # tiny encoder, 40 submissions, 2 CPUs
    python benchmarks/rubric_cluster.py --encoder ../shared/data/models/all-MiniLM-L6-v2 \\
        --imdb ../shared/data/imdb/aclimdb_50k.parquet --valid-limit 512 --submissions 8
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autograder.entrypoints import command_line
from tests.test_rubric import MODEL, _submission, _train
from tests.transformers_bert.tiny_world import build_world


def rubric(submissions: list[Path], out: Path, args, *extra: str) -> float:
    start = time.monotonic()
    code = command_line(["rubric", str(out.parent / "default-rubric"), *map(str, submissions), "--out", str(out),
                         "--quiet", "--device", "cpu", "--encoder", args.encoder, "--imdb", args.imdb,
                         *(["--valid-limit", str(args.valid_limit)] if args.valid_limit else []), *extra])
    if code:
        raise SystemExit(f"rubric exited {code}")
    return time.monotonic() - start


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--submissions", type=int, default=40)
    ap.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray instance")
    ap.add_argument("--encoder", help="encoder folder (default: the tests' tiny encoder)")
    ap.add_argument("--imdb", help="IMDB parquet file (default: the tests' tiny data)")
    ap.add_argument("--valid-limit", type=int)
    args = ap.parse_args(argv)
    import ray

    with tempfile.TemporaryDirectory(prefix="ag-bench-rubric-cluster-", dir="/var/tmp") as tmp:
        work = Path(tmp)
        world = build_world(work / "world")
        args.encoder, args.imdb = args.encoder or str(world["encoder"]), args.imdb or str(world["imdb"])
        state = _train(world, MODEL, world["encoder"], steps=40) if args.encoder == str(world["encoder"]) else None
        first = _submission(work / "subs" / "s0000", state=state)
        subs = [first]
        for i in range(1, args.submissions):
            shutil.copytree(first.parent, work / "subs" / f"s{i:04d}")
            subs.append(work / "subs" / f"s{i:04d}" / first.name)
        start = time.monotonic()
        ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
        ray_start = time.monotonic() - start
        try:
            here = rubric(subs, work / "here" / "out", args)
            there = rubric(subs, work / "cluster" / "out", args, "--cluster", "local")
        finally:
            ray.shutdown()
    n = args.submissions
    print(f"rubric, {n} submissions, CPU with the encoder cache (no GPU measured); Ray's own start {ray_start:.1f} s "
          f"(not counted)")
    print(f"this machine  {here:7.1f} s  {n / here * 60:7.1f} submissions/min")
    print(f"--cluster     {there:7.1f} s  {n / there * 60:7.1f} submissions/min  ({args.cpus} actors, one cache each)")
    print(f"cluster / this machine: {here / there:.2f}x the throughput; {(there - here) / n * 1000:+.0f} ms per "
          f"submission")
    return 0


if __name__ == "__main__":
    sys.exit(main())
