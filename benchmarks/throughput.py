"""Grading throughput and the cost of isolation, measured in one run.

1. Throughput: N copies of a correct submission (the assignment's answer key) graded by
   `autograder.grade.grade` with --jobs 1 and with --jobs 2, each into a fresh results folder; wall
   clock from the call to its return (grading processes, fork servers and reference workers starting
   included), as submissions per minute.
2. Isolation overhead, per submission, the same checks on the same submission:
   a. isolated, as `grade` does it: a worker process per submission (forked from the fork server,
      confined: namespaces, mounts, rlimits), every call into student code a message over a pipe.
      Taken from the --jobs 1 run (`execution_time` of each result);
   b. in-process, same judge: `Grader.grade_one` with the workers replaced by the worker code running
      inside this process (`LoopbackWorker`): requests and replies still encoded and decoded exactly
      as over the pipe, but no process, no pipe, no confinement;
   c. in-process, direct: the definitions exec'd into a module and the checks called on it, no
      protocol at all. Only for assignments whose checks need nothing worker-specific (keep(),
      remote_isinstance()...); otherwise reported as n/a.
   The ratios a / b and a / c are what isolation costs per submission.

    python benchmarks/throughput.py                       # the example assignment, 100 copies
    python benchmarks/throughput.py --assignment solutions/transformers_bert
    python benchmarks/throughput.py --assignment solutions/transformers_bert --only-jobs 2   # 1. with --jobs 2 alone

Every graded copy must get every point gradable here (GPU checks and the accuracy rubric pending), else the numbers mean
nothing and the exit status is 1.
"""
from __future__ import annotations

import argparse
import contextlib
import io
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

import torch

from autograder.grading import build_and_record
import autograder.program
from autograder.grading import GradeOptions, Grader, grade
from autograder.judge import _fraction, _run_cell_check
from autograder.program import judge_imports
from autograder.notebook.extract import extract
from autograder.notebook.load import read_notebook
from autograder.release import load_release
from autograder.sandbox import WorkerDied, WorkerProcess
from autograder.sandbox.forkserver import shutdown_fork_server
from autograder.sandbox.protocol import read_message
from autograder.testing import Fail

EXAMPLE = ROOT / "tests" / "example_course" / "solutions" / "vectors"


class _NotAProcess:
    pid = None

    @staticmethod
    def poll():
        return None


class _Inbox:
    """A stream the in-process worker writes its replies to; they queue up as parsed messages."""

    def __init__(self):
        self.buf = bytearray()
        self.messages: list = []

    def write(self, data) -> None:
        self.buf += data

    def flush(self) -> None:
        while len(self.buf) >= 8:
            n_head = int.from_bytes(self.buf[:8], "little")
            if len(self.buf) < 16 + n_head:
                return
            n_blob = int.from_bytes(self.buf[8 + n_head:16 + n_head], "little")
            n = 16 + n_head + n_blob
            if len(self.buf) < n:
                return
            self.messages.append(read_message(io.BytesIO(bytes(self.buf[:n]))))
            del self.buf[:n]


class LoopbackWorker(WorkerProcess):
    """The worker code run inside this process: the same requests and replies, encoded and decoded
    as over the pipe, with no process, pipe or confinement. For measuring, never for grading."""

    def _spawn(self) -> str:
        from autograder.sandbox import worker as worker_module

        self._inbox = _Inbox()
        self._worker = worker_module.Worker(self._inbox)
        self._stdin = self  # write_message(self._stdin, ...) lands in write()/flush() below
        self._request = bytearray()
        self.proc = _NotAProcess()
        return "in-process (no isolation)"

    def write(self, data) -> None:
        self._request += data

    def flush(self) -> None:
        header, tensors = read_message(io.BytesIO(bytes(self._request)))
        self._request.clear()
        sys.modules["submission"] = self._worker.module  # each worker's own, as in its process
        self._worker.handle(header, tensors)
        self._inbox.flush()

    def _next(self, deadline: float, doing: str):
        if not self._inbox.messages:
            raise WorkerDied(f"no reply while {doing}")
        return self._inbox.messages.pop(0)

    def kill(self) -> None:
        self.proc = None

    close = kill


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


def loopback(release, notebooks, out: Path, full: float) -> tuple[list[float], bool]:
    """Per-submission time of Grader.grade_one with LoopbackWorker in place of worker processes."""
    saved = autograder.program.WorkerProcess
    autograder.program.WorkerProcess = LoopbackWorker
    # what student code prints (progress bars...) would land in this process's output
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        try:
            grader = Grader(release, GradeOptions(out, quiet=True))
            grader.grade_one(notebooks[0], "warm-up")
            times, ok = [], True
            for i, nb in enumerate(notebooks):
                result = grader.grade_one(nb, f"s{i}")
                times.append(result.execution_time)
                ok = ok and result.score == full and not result.error
            grader.close()
        finally:
            autograder.program.WorkerProcess = saved
    return times, ok


def direct(release, notebooks, repeats: int, full: float) -> tuple[list[float], bool]:
    """Per-submission time of the checks called directly on exec'd modules; ok False when the
    assignment's checks cannot run that way."""
    base = judge_imports(release.reference)
    try:
        ref = InProcess(release.reference.units, release.helpers)
        grade_in_process(release, notebooks[0], base, ref)  # warm up: imports, first calls
        times, ok = [], True
        for nb in (notebooks * (repeats // len(notebooks) + 1))[:repeats]:
            start = time.perf_counter()
            ok = ok and grade_in_process(release, nb, base, ref) >= full
            times.append(time.perf_counter() - start)
        return times, ok
    except Exception:  # noqa: BLE001 - such an assignment simply has no direct baseline
        return [], False


def prepare(assignment: Path, work: Path, copies: int):
    source = work / "solutions" / assignment.name
    shutil.copytree(assignment, source)
    paths = build_and_record(source)
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
    full = all(not r.error and all(c.score == c.max_score for c in r.checks if c.status != "pending")
               for r in results)
    per_check = [sum(c.seconds for c in r.checks) for r in results]
    return seconds, full, results, per_check


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--assignment", default=str(EXAMPLE), help="solutions/<name> folder (default: the example)")
    ap.add_argument("--copies", type=int, default=100, help="copies of the correct submission (default 100)")
    ap.add_argument("--in-process-repeats", type=int, default=0,
                    help="submissions for the direct in-process baseline (c) (default: --copies)")
    ap.add_argument("--only-jobs", type=int, metavar="N",
                    help="time only the throughput with --jobs N (short runs, to interleave checkouts)")
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

        if args.only_jobs:
            t, ok, _, _ = timed_grade(release, notebooks, work / "out", args.only_jobs)
            print(f"--jobs {args.only_jobs}: {t:7.1f} s  {len(notebooks) / t * 60:7.1f} submissions/min", flush=True)
            if not ok:
                print("ERROR: a copy of the answer key did not get every point; the timings mean nothing")
            return 0 if ok else 1
        t1, ok1, results1, checks1 = timed_grade(release, notebooks, work / "out-jobs1", 1)
        print(f"--jobs 1: {t1:7.1f} s  {len(notebooks) / t1 * 60:7.1f} submissions/min", flush=True)
        t2, ok2, _, _ = timed_grade(release, notebooks, work / "out-jobs2", 2)
        print(f"--jobs 2: {t2:7.1f} s  {len(notebooks) / t2 * 60:7.1f} submissions/min", flush=True)

        full = release.max_score - sum(c.max_score for c in results1[0].pending)  # what a CPU run can give
        loopback_times, loopback_ok = loopback(release, notebooks, work / "out-loopback", full)
        direct_times, direct_ok = direct(release, notebooks, args.in_process_repeats or len(notebooks), full)

        isolated = statistics.median(r.execution_time for r in results1)
        print(f"per submission, isolated (--jobs 1, median of {len(results1)}):      {isolated * 1000:9.1f} ms"
              f"   (in its checks: {statistics.median(checks1) * 1000:.1f} ms)")
        print(f"per submission, in-process, same judge (median of {len(loopback_times)}): "
              f"{statistics.median(loopback_times) * 1000:9.1f} ms")
        if direct_ok:
            print(f"per submission, in-process, direct (median of {len(direct_times)}):    "
                  f"{statistics.median(direct_times) * 1000:9.1f} ms")
        else:
            print("per submission, in-process, direct: n/a (the checks need a worker: keep(), remote_isinstance()...)")
        print("ratios, this run:")
        print(f"  throughput --jobs 2 / --jobs 1:                      {t1 / t2:7.2f}")
        print(f"  isolation overhead, isolated / in-process same judge: {isolated / statistics.median(loopback_times):7.1f}")
        if direct_ok:
            print(f"  isolation overhead, isolated / in-process direct:     "
                  f"{isolated / statistics.median(direct_times):7.1f}")
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        if not (ok1 and ok2 and loopback_ok):
            print("ERROR: a copy of the answer key did not get every point; the timings mean nothing")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
