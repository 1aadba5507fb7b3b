"""Where an answer key's time goes, check by check: the judge's CPU and the student's worker's.

Grades a folder of submissions in this process (`--jobs 1`, so the judge runs here) and times every check's run
(`Judge.run_check_once`): its wall clock and this process's CPU time (the judge). Run the whole command on one CPU
(`taskset -c 0`): the judge and the worker then take turns on it, and a check's wall clock less the judge's CPU is
the worker's. Prints, per submission, the checks' total and its split, then each check's mean, slowest
first.

    mkdir -p /tmp/keys && for i in $(seq 1 10); do cp release/transformers_bert/answer_key.ipynb /tmp/keys/k$i.ipynb; done
    taskset -c 0 python benchmarks/check_split.py release/transformers_bert /tmp/keys

Other load on the same CPU inflates the worker's share: run it on a quiet machine.
"""
from __future__ import annotations

import argparse
import collections
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autograder import entrypoints, judge  # (after the path is set)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("release", help="a built release folder (release/<name>)")
    parser.add_argument("submissions", help="a folder of notebooks")
    args = parser.parse_args()
    rows: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0])
    timed = judge.Judge.run_check_once

    def run_check_once(self, spec, submission, budget_end):
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return timed(self, spec, submission, budget_end)
        finally:
            row = rows[spec.name]
            row[0] += time.perf_counter() - wall
            row[1] += time.process_time() - cpu
            row[2] += 1

    judge.Judge.run_check_once = run_check_once  # type: ignore[method-assign]
    out = Path(tempfile.mkdtemp(prefix="check-split-"))
    try:
        entrypoints.command_line(["grade", args.release, args.submissions, "--out", str(out / "o"), "--jobs", "1"])
    finally:
        shutil.rmtree(out, ignore_errors=True)
    runs = max((r[2] for r in rows.values()), default=0)
    if not runs:
        sys.exit("no check ran")
    wall = sum(r[0] for r in rows.values()) / runs
    cpu = sum(r[1] for r in rows.values()) / runs
    print(f"per submission: checks {wall * 1000:.0f} ms wall, judge {cpu * 1000:.0f} ms CPU, "
          f"worker about {(wall - cpu) * 1000:.0f} ms")
    for name, (w, c, n) in sorted(rows.items(), key=lambda item: -item[1][0] / item[1][2]):
        print(f"{w / n * 1000:7.1f} ms wall {c / n * 1000:7.1f} judge {(w - c) / n * 1000:7.1f} worker  {name[:90]}")


if __name__ == "__main__":
    main()
