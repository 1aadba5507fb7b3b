"""`--cluster` (Ray, on this machine) against `--jobs N`, side by side in one run: N copies of an assignment's
answer key graded each way into a fresh folder; wall time, submissions per minute, and Ray's cost per task.

    python benchmarks/cluster.py                                   # transformers_bert, 200 copies, 2 CPUs
    python benchmarks/cluster.py --copies 60 --cpus 2

Ray starts a local instance with --cpus CPUs (its start-up is reported apart, not in the timings).
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

from autograder.grading import GradeOptions, build_and_record, grade
from autograder.release import load_release


def timed(release, notebooks, out: Path, **options) -> tuple[float, bool]:
    start = time.monotonic()
    results = grade(release, notebooks, GradeOptions(out, quiet=True, **options))
    return time.monotonic() - start, all(r.score == release.max_score - sum(c.max_score for c in r.pending)
                                          for r in results)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--assignment", default=str(ROOT / "solutions" / "transformers_bert"))
    ap.add_argument("--copies", type=int, default=200)
    ap.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray instance, and --jobs")
    args = ap.parse_args(argv)
    import ray

    with tempfile.TemporaryDirectory(prefix="ag-bench-cluster-") as tmp:
        work = Path(tmp)
        source = work / "course" / "solutions" / Path(args.assignment).name
        shutil.copytree(args.assignment, source)
        release = load_release(build_and_record(source).release)
        notebooks = []
        for i in range(args.copies):
            notebooks.append(work / "subs" / f"s{i:04d}.ipynb")
            notebooks[-1].parent.mkdir(exist_ok=True)
            shutil.copyfile(release.dir / "answer_key.ipynb", notebooks[-1])
        start = time.monotonic()
        ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
        ray_start = time.monotonic() - start
        try:
            rows = [("--jobs", *timed(release, notebooks, work / "jobs", jobs=args.cpus)),
                    ("--cluster", *timed(release, notebooks, work / "cluster", cluster="local"))]
        finally:
            ray.shutdown()
    print(f"{release.config.name}: {args.copies} answer keys, {args.cpus} CPUs; Ray's own start {ray_start:.1f} s "
          f"(not counted)")
    for name, seconds, ok in rows:
        print(f"{name:10s} {seconds:7.1f} s  {args.copies / seconds * 60:7.1f} submissions/min  "
              f"{'' if ok else 'ERROR: a copy did not get every point'}")
    extra = (rows[1][1] - rows[0][1]) / args.copies
    print(f"--cluster throughput = {rows[0][1] / rows[1][1]:.1%} of --jobs {args.cpus}'s")
    print(f"cluster - jobs: {extra * 1000:+.0f} ms per submission (Ray's scheduling and transfer, on one machine)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
