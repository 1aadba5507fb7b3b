"""`autograder grade <name> SUBMISSIONS... --out DIR`: grade notebooks into DIR (autograder/grading/run.py)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from autograder.commands.base import Command, positive


class GradeCommand(Command):
    starts_workers = True

    def add_arguments(self, parser) -> None:
        parser.add_argument("assignment", help="assignment name (solutions/<name>) or a release/solutions folder")
        parser.add_argument("submissions", nargs="+", help="submitted .ipynb files, folders of them, a Gradescope "
                            "export (folder or .zip) or an nbgrader submitted/ tree")
        parser.add_argument("--out", required=True, help="folder for results")
        parser.add_argument("--quiet", action="store_true", help="no progress lines")
        parser.add_argument("--jobs", "-j", type=positive(int), default=1, metavar="N",
                            help="grade N submissions side by side (each still in its own worker); default 1")
        parser.add_argument("--trusted-submissions", action="store_true",
                            help="grade even where student code cannot be confined at all here (neither namespaces "
                                 "nor a file allowlist): only for submissions you trust, whose code then sees what "
                                 "the grader's user may read")
        parser.add_argument("--cluster", metavar="ADDRESS",
                            help="grade on a Ray cluster (an address as `ray.init` takes it, e.g. ray://head:10001 or "
                                 "auto; `local` starts one here); needs the cluster extra; see docs/scale.md")
        parser.add_argument("--regrade", action="store_true",
                            help="grade again submissions that --out already holds results for (default: skip them)")

    def assignment_to_preload(self, args) -> str | None:
        # with --jobs N the grading processes' fork servers import the workers' modules: this one would only
        # take a core from them
        return args.assignment if args.jobs <= 1 and not args.cluster else None

    def run(self, args) -> int:
        from autograder.grading import claim, resolve_release

        if not args.out.strip():  # `--out "$OUT"` with OUT unset: never the current folder by accident
            print("error: --out is empty: give the folder to write the results into", file=sys.stderr)
            return 2
        typos = [p for p in args.submissions if not os.path.lexists(p) and not p.endswith(".ipynb")]
        if typos:  # a folder or a zip that is not there is a typo, never a student's row
            print(f"error: no such folder or file: {', '.join(typos)} (nothing graded)", file=sys.stderr)
            return 2
        release = resolve_release(args.assignment)
        with claim(Path(args.out)):  # before .inputs/ is unpacked: a second command on DIR stops here
            return self._discover_and_grade(args, release)

    def _discover_and_grade(self, args, release) -> int:
        """In the claimed --out: the submissions found in what was given, graded, and what to do next said."""
        from autograder.grading import GradeOptions, grade
        from autograder.submissions import discover

        missing = [p for p in args.submissions if not os.path.lexists(p)]
        if missing:
            print(f"warning: not found, graded as missing: {', '.join(missing)}", file=sys.stderr)
        out = Path(args.out)
        inputs = discover(args.submissions, release.config.notebook, release.config.name, unpack_dir=out / ".inputs",
                          released=release.student_code)
        for line in inputs.layouts if not args.quiet else []:
            print(line, file=sys.stderr)
        for problem in inputs.problems:
            print(f"warning: {problem}", file=sys.stderr)
        jobs = jobs_for_this_machine(args.jobs, args.cluster)
        options = GradeOptions(out, quiet=args.quiet, jobs=jobs, regrade=args.regrade,
                               trusted=args.trusted_submissions, cluster=args.cluster)
        results = grade(release, inputs.submissions, options)
        print(f"graded {len(results)} submission(s): results in {out}/<submission>/results.json, "
              f"table in {out / 'grades.csv'}")
        for line in pending_advice(release, results, args.submissions, str(out)):
            print(line, file=sys.stderr)
        if any(r.ungraded for r in results):
            return 3  # the grader could not decide some checks here: see GRADER PROBLEM on stderr
        return 0 if inputs.submissions and len(results) == len(inputs.submissions) else 1


def jobs_for_this_machine(jobs: int, cluster: bool) -> int:
    """At most one grading process per CPU this process may use: each holds a judge, a reference worker and a fork
    server (about 1 GB), and more of them than CPUs only wait on each other (64 jobs on 2 CPUs: 16x slower, 12 GB).
    A cluster's jobs are its own."""
    import os

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if cluster or jobs <= cpus:
        return jobs
    print(f"note: --jobs {jobs} on {cpus} CPU(s): {cpus} grading process(es) (more would only wait on each other "
          "and hold memory)", file=sys.stderr)
    return cpus


def pending_advice(release, results, submissions: list[str], out: str) -> list[str]:
    """What the instructor does about pending points (the students' messages do not say it): each deferred kind's
    advice (autograder.deferred), the GPU checks' regrade, then any other pending check by name."""
    import shlex

    from autograder.deferred import AdviceContext, advice
    from autograder.status import PENDING

    pending = {c.name for r in results for c in r.checks if c.status == PENDING}
    lines, left = advice(release.checks, pending, AdviceContext(release.config.name, tuple(submissions), out))
    gpu = sorted(left & ({c.name for c in release.checks if c.gpu} | set(release.config.gpu_checks)))
    if gpu:
        lines.append(f"pending: {len(gpu)} check(s) need a GPU ({', '.join(gpu)}); on a machine with CUDA: autograder "
                     f"grade {shlex.quote(release.config.name)} {' '.join(map(shlex.quote, submissions))} --out "
                     f"{shlex.quote(out)} --regrade")
    other = sorted(left - set(gpu))
    if other:
        lines.append(f"pending: {len(other)} other check(s) not graded here (graded by hand): " + ", ".join(other))
    return lines
