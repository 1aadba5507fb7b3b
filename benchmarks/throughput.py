"""Grading throughput and the cost of isolation, measured in one run.

1. Throughput: N copies of a correct submission (the assignment's answer key) graded by
   `autograder.grade.grade` with --jobs 1 and with --jobs 2, each into a fresh results folder; wall
   clock from the call to its return (grading processes, fork servers and reference workers starting
   included), as submissions per minute.
2. Isolation overhead: the same checks on the same submission, per submission,
   a. graded as `grade` does it: a worker process per submission (forked from the fork server,
      confined: namespaces, mounts, rlimits), every call to student code a message over a pipe;
   b. in-process: the submission's definitions and the reference exec'd into modules of this
      process, the checks called on them directly with the same seeding. No isolation at all.
   The ratio a / b is what isolation costs per submission. (a) is taken from the --jobs 1 run.

    python benchmarks/throughput.py                       # the example assignment, 100 copies
    python benchmarks/throughput.py --copies 20 --assignment solutions/transformers_bert

Every graded copy must get full marks, else the numbers mean nothing and the exit status is 1.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from autograder.build import build  # noqa: E402
from autograder.grade import GradeOptions, grade  # noqa: E402
from autograder.judge import _fraction, _run_cell_check, judge_imports  # noqa: E402
from autograder.notebook.extract import extract  # noqa: E402
from autograder.notebook.load import read_notebook  # noqa: E402
from autograder.release import load_release  # noqa: E402
from autograder.sandbox.client import shutdown_fork_server  # noqa: E402
from autograder.testing import Fail  # noqa: E402

EXAMPLE = ROOT / "tests" / "example_course" / "solutions" / "vectors"


class InProcess:
    """A notebook's definitions exec'd into a module of this process, seen like a ProgramProxy."""

    def __init__(self, units, helpers: list[str]):
        self.module = types.ModuleType("submission_in_process")
        for u in units:
            exec(compile("\n" * (u.line - 1) + u.source, f"<cell {u.cell}>", "exec"), self.module.__dict__)
        self.helpers = types.ModuleType("helpers_in_process")
        self.helpers.submission = self.module
        for source in helpers:
            exec(compile(source, "<helpers>", "exec"), self.helpers.__dict__)

    def __getattr__(self, name):
        return getattr(self.module, name)


def grade_in_process(release, notebook: Path, base: dict, ref: InProcess) -> float:
    """The release's checks on `notebook` with no worker (`ref`: the reference, loaded once, as the
    reference worker is): the score."""
    nb, _ = read_notebook(notebook)
    sub = InProcess(extract(nb).units, release.helpers)
    score = 0.0
    for spec in release.checks:
        random.seed(0)
        torch.manual_seed(0)
        try:
            value = spec.fn(sub, ref) if spec.fn is not None else _run_cell_check(spec, sub, ref, base)
            score += _fraction(value) * spec.points
        except Fail as exc:
            score += exc.partial * spec.points
        except Exception:  # noqa: BLE001 - a failing check scores 0, as in the judge
            pass
    return score


def prepare(assignment: Path, work: Path, copies: int):
    source = work / "solutions" / assignment.name
    shutil.copytree(assignment, source)
    paths = build(source)
    release = load_release(paths.release)
    subs = work / "submissions"
    subs.mkdir()
    key = paths.release / "answer_key.ipynb"
    notebooks = []
    for i in range(copies):
        target = subs / f"student{i:03d}.ipynb"
        shutil.copy(key, target)
        notebooks.append(target)
    return release, notebooks


def timed_grade(release, notebooks, out: Path, jobs: int):
    shutdown_fork_server()  # every run starts from scratch
    start = time.perf_counter()
    results = grade(release, notebooks, GradeOptions(out, quiet=True, jobs=jobs, summary=False))
    seconds = time.perf_counter() - start
    shutdown_fork_server()
    full = all(r.score == r.max_score and not r.error for r in results)
    per_check = [sum(c.seconds for c in r.checks) for r in results]
    return seconds, full, results, per_check


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--assignment", default=str(EXAMPLE), help="solutions/<name> folder (default: the example)")
    ap.add_argument("--copies", type=int, default=100, help="copies of the correct submission (default 100)")
    ap.add_argument("--in-process-repeats", type=int, default=0,
                    help="submissions graded in-process for (b) (default: --copies)")
    args = ap.parse_args(argv)
    assignment = Path(args.assignment).resolve()
    torch.set_num_threads(1)  # as the judge and the workers do
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="ag-bench-") as tmp:
        work = Path(tmp)
        release, notebooks = prepare(assignment, work, args.copies)
        print(f"assignment: {release.config.name} ({len(release.checks)} checks, {release.max_score:g} points); "
              f"{args.copies} copies of the answer key; {os.cpu_count()} CPUs; load average before "
              f"{load[0]:.2f}", flush=True)

        t1, ok1, results1, checks1 = timed_grade(release, notebooks, work / "out-jobs1", 1)
        print(f"--jobs 1: {t1:7.1f} s  {len(notebooks) / t1 * 60:7.1f} submissions/min", flush=True)
        t2, ok2, _, _ = timed_grade(release, notebooks, work / "out-jobs2", 2)
        print(f"--jobs 2: {t2:7.1f} s  {len(notebooks) / t2 * 60:7.1f} submissions/min", flush=True)

        base = judge_imports(release.reference)
        ref = InProcess(release.reference.units, release.helpers)
        repeats = args.in_process_repeats or len(notebooks)
        grade_in_process(release, notebooks[0], base, ref)  # warm up: imports, first calls
        times, scores = [], []
        for nb in (notebooks * (repeats // len(notebooks) + 1))[:repeats]:
            start = time.perf_counter()
            scores.append(grade_in_process(release, nb, base, ref))
            times.append(time.perf_counter() - start)
        ok3 = all(s == release.max_score for s in scores)

        isolated = [r.execution_time for r in results1]
        in_process = statistics.median(times)
        print(f"per submission, isolated (--jobs 1, median of {len(isolated)}): {statistics.median(isolated) * 1000:8.1f} ms"
              f"   (checks alone: {statistics.median(checks1) * 1000:.1f} ms)")
        print(f"per submission, in-process (median of {len(times)}):          {in_process * 1000:8.1f} ms")
        print("ratios, this run:")
        print(f"  throughput --jobs 2 / --jobs 1:                 {t1 / t2:6.2f}")
        print(f"  isolation overhead (isolated / in-process):     {statistics.median(isolated) / in_process:6.1f}")
        print(f"  whole run --jobs 1 per submission / in-process: {t1 / len(notebooks) / in_process:6.1f}")
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        if not (ok1 and ok2 and ok3):
            print("ERROR: a copy of the answer key did not get full marks; the timings mean nothing")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
