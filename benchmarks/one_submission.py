"""One submission, whole process: README's quick-start grading command, timed, with the peak memory of its whole
process tree; several checkouts of this project side by side (the same machine, the same minutes).

For each checkout, in turn (alternating, after --warmup untimed runs): `autograder build <source>` once, then
`autograder grade <name> <submission> --out <tmp>` --runs times, each run a fresh results folder. Per run:
wall clock (start to exit), CPU time (user + system of the command and the descendants it waited for), and the
peak of the summed proportional set size (PSS: shared pages split between the processes that share them) of the
command and all its descendants (grading process, fork server, workers), sampled every --memory-every seconds
(reading it costs CPU: 0 measures time alone, with no sampling). Prints the
median, min and max of each, and the score of every run (which must not change).

    python benchmarks/one_submission.py                                   # this checkout, the Transformers sample
    python benchmarks/one_submission.py --checkout /tmp/before --checkout .   # side by side
    python benchmarks/one_submission.py --source solutions/transformers_bert \\
        --submission samples/transformers_bert_submission.ipynb --runs 5

A checkout runs with its own package (PYTHONPATH and the working directory set to it) and builds its own release.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autograder.sandbox.processes import memory_of, process_table, process_tree


class PeakMemory(threading.Thread):
    """Samples the summed PSS of a process and its descendants until stopped; `.peak` in bytes."""

    def __init__(self, pid: int, every: float = 0.02):
        super().__init__(daemon=True)
        self.pid, self.every, self.peak, self.done = pid, every, 0, threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.peak = max(self.peak, sum(memory_of(p) for p in process_tree(self.pid, process_table())))
            time.sleep(self.every)


def timed(command: list[str], cwd: Path, env: dict, every: float) -> tuple[float, float, int, int]:
    """(wall s, CPU s, peak PSS bytes, exit status) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    watch = PeakMemory(proc.pid, every)
    if every > 0:
        watch.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - start
    watch.done.set()
    if every > 0:
        watch.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode not in (0, 3):
        sys.stderr.write(err.decode(errors="replace")[-3000:])
    return wall, cpu, watch.peak, proc.returncode


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkout", action="append", type=Path, help="a checkout of this project (repeatable; "
                    "default: this one)")
    ap.add_argument("--source", default="solutions/transformers_bert")
    ap.add_argument("--submission", default="samples/transformers_bert_submission.ipynb")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--memory-every", type=float, default=0.05, help="seconds between memory samples (0: none)")
    args = ap.parse_args(argv)
    checkouts = [c.resolve() for c in (args.checkout or [ROOT])]
    name = Path(args.source).name
    load = os.getloadavg()[0]
    rows: dict[Path, list] = {c: [] for c in checkouts}
    scores: dict[Path, list] = {c: [] for c in checkouts}
    with tempfile.TemporaryDirectory(prefix="ag-one-") as tmp:
        envs = {}
        for c in checkouts:
            env = {**os.environ, "PYTHONPATH": str(c)}
            envs[c] = env
            subprocess.run([sys.executable, "-m", "autograder", "build", args.source], cwd=c, env=env, check=True,
                           stdout=subprocess.DEVNULL)
        for i in range(args.warmup + args.runs):
            for c in checkouts:
                out = Path(tmp) / f"{c.name}-{i}"
                command = [sys.executable, "-m", "autograder", "grade", name, args.submission, "--out", str(out),
                           "--quiet"]
                wall, cpu, peak, code = timed(command, c, envs[c], args.memory_every)
                result = json.loads(next(out.glob("*/grading.json")).read_text())
                scores[c].append(result["score"])
                if i >= args.warmup:
                    rows[c].append((wall, cpu, peak))
    print(f"{name}: {args.submission}, whole process, {args.runs} timed run(s) after {args.warmup} warm-up, "
          f"alternating; {os.cpu_count()} CPUs, 1-min load average {load:.2f} before, {os.getloadavg()[0]:.2f} after")
    print(f"{'checkout':30s} {'wall median (min-max) s':>26s} {'CPU median s':>13s} {'peak PSS median MB':>19s}  scores")
    for c in checkouts:
        walls, cpus, peaks = zip(*rows[c])
        memory = f"{statistics.median(peaks) / 2**20:19.0f}" if args.memory_every else f"{'not sampled':>19s}"
        print(f"{str(c)[-30:]:30s} {statistics.median(walls):9.2f} ({min(walls):.2f}-{max(walls):.2f})      "
              f"{statistics.median(cpus):13.2f} {memory}  "
              f"{sorted(set(scores[c]))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
