"""The `autograder` command line: one subcommand per verb, each implemented in its own module."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path



def _user_errors() -> tuple:
    """Errors that are the user's to fix: a message, no traceback. Imported when needed: what a command
    does not use, it does not import (`grade` pays neither nbformat's import nor the build's)."""
    from autograder.build import BuildError
    from autograder.config import ConfigError
    from autograder.grade import ConfinementUnavailable
    from autograder.notebook.markers import MarkerError
    from autograder.release import ReleaseError

    return (BuildError, ConfigError, MarkerError, ReleaseError, FileNotFoundError, ConfinementUnavailable)


def cmd_build(args) -> int:
    from autograder.build import build

    paths = build(Path(args.source), record=not args.no_record, log=print)
    print(f"student notebook: {paths.assignment}\nrelease bundle:   {paths.release}")
    return 0


def cmd_record(args) -> int:
    from autograder.recording import record_release
    from autograder.release import resolve_release

    release = resolve_release(args.assignment, rebuild=False)
    recording, line = record_release(release.dir)
    print(line)
    return 0 if recording is not None else 2


def cmd_grade(args) -> int:
    from autograder.grade import GradeOptions, grade
    from autograder.release import resolve_release
    from autograder.submissions import discover

    release = resolve_release(args.assignment)
    missing = [p for p in args.submissions if not Path(p).exists()]
    if missing:
        print(f"warning: not found, graded as missing: {', '.join(missing)}", file=sys.stderr)
    out = Path(args.out)
    inputs = discover(args.submissions, release.config.notebook, release.config.name, unpack_dir=out / ".inputs")
    for line in inputs.layouts if not args.quiet else []:
        print(line, file=sys.stderr)
    for problem in inputs.problems:
        print(f"warning: {problem}", file=sys.stderr)
    options = GradeOptions(out, quiet=args.quiet, jobs=args.jobs, regrade=args.regrade,
                           trusted=args.trusted_submissions)
    results = grade(release, inputs.submissions, options)
    print(f"graded {len(results)} submission(s): results in {out}/<submission>/results.json, table in {out / 'grades.csv'}")
    if any(r.ungraded for r in results):
        return 3  # the grader could not decide some checks here: see GRADER PROBLEM on stderr
    return 0 if inputs.submissions and len(results) == len(inputs.submissions) else 1


def cmd_verify(args) -> int:
    from autograder.verify import verify

    source = Path(args.assignment)
    if not (source / "assignment.toml").is_file():
        source = Path("solutions") / args.assignment
    report = verify(source, with_corpus=not args.no_corpus, jobs=args.jobs)
    for line in report.lines:
        print(line)
    for problem in report.problems:
        print(f"PROBLEM: {problem}")
    print("verify: OK" if report.ok else f"verify: FAILED ({len(report.problems)} problem(s))")
    return 0 if report.ok else 1


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="autograder", description="Build, verify and grade notebook assignments.")
    sub = p.add_subparsers(dest="verb", required=True)
    b = sub.add_parser("build", help="source notebook -> assignments/<name>/ and release/<name>/")
    b.add_argument("source", help="solutions/<name> folder")
    b.add_argument("--no-record", action="store_true",
                   help="do not record the reference (grading then starts a live reference worker)")
    b.set_defaults(run=cmd_build)
    r = sub.add_parser("record", help="record the reference of a built release in this environment "
                                      "(what `build` does; for a release built elsewhere)")
    r.add_argument("assignment", help="assignment name or a release folder")
    r.set_defaults(run=cmd_record)
    g = sub.add_parser("grade", help="grade submitted notebooks")
    g.add_argument("assignment", help="assignment name (solutions/<name>) or a release/solutions folder")
    g.add_argument("submissions", nargs="+", help="submitted .ipynb files, folders of them, a Gradescope export "
                   "(folder or .zip) or an nbgrader submitted/ tree")
    g.add_argument("--out", required=True, help="folder for results")
    g.add_argument("--quiet", action="store_true", help="no progress lines")
    g.add_argument("--jobs", "-j", type=int, default=1, metavar="N",
                   help="grade N submissions side by side (each still in its own worker); default 1")
    g.add_argument("--trusted-submissions", action="store_true",
                   help="grade even where the kernel refuses the namespaces that confine student code (only for "
                        "submissions you trust: the worker then sees what the grader's user may read)")
    g.add_argument("--regrade", action="store_true",
                   help="grade again submissions that --out already holds results for (default: skip them)")
    g.set_defaults(run=cmd_grade)
    v = sub.add_parser("verify", help="reference gets full marks, stubs get 0, nothing leaks")
    v.add_argument("assignment", help="assignment name or solutions/<name> folder")
    v.add_argument("--no-corpus", action="store_true", help="skip the corpus of correct and wrong submissions")
    v.add_argument("--jobs", "-j", type=int, default=2, metavar="N", help="grading processes for the corpus")
    v.set_defaults(run=cmd_verify)
    from autograder import check, export
    from autograder.reports import html
    for module in (check, export, html):  # check; export gradescope|nbgrader, nbgrader-grade; report
        module.add_parser(sub)
    from autograder.rubric import command as rubric_command

    rubric_command.add_parser(sub)  # rubric: the GPU accuracy rubric, merged into earlier results
    from autograder.importers.command import add_parser as add_import; add_import(sub)  # import nbgrader|otter
    from autograder.scaffold import add_parser as add_new; add_new(sub)  # new NAME: a skeleton that verifies
    return p


GRADING_VERBS = ("grade", "verify", "check", "nbgrader-grade", "build", "record")  # verbs that start workers


def main(argv: list[str] | None = None, resume_fd: int | None = None) -> int:
    code = _run(argv, resume_fd)
    if resume_fd is not None:
        # A restarted grading process (forkserver.restart_clean) is a command line's alone, and everything it
        # wrote is closed: it ends here, without the interpreter's teardown of torch (half a second).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _grades_in_a_pool(words: list[str]) -> bool:
    """`autograder grade ... --jobs N` with N > 1, read before the arguments are parsed (see grade._grade_in_pool)."""
    if words[0] != "grade":
        return False
    for i, word in enumerate(words):
        value = None
        if word in ("--jobs", "-j") and i + 1 < len(words):
            value = words[i + 1]
        elif word.startswith("--jobs="):
            value = word.split("=", 1)[1]
        elif word.startswith("-j") and len(word) > 2:
            value = word[2:]
        if value is not None:
            return value.isdigit() and int(value) > 1
    return False


def _run(argv: list[str] | None, resume_fd: int | None) -> int:
    from autograder.sandbox import forkserver

    if resume_fd is not None:  # restarted clean: the fork server is forked already (forkserver.restart_clean)
        argv = forkserver.resume_clean(resume_fd)
    words = sys.argv[1:] if argv is None else argv
    early = bool(words) and words[0] in GRADING_VERBS and "-h" not in words and "--help" not in words
    if early and argv is None and os.environ.get("AUTOGRADER_FORK_SERVER", "1") != "0":
        # A grading command: start again as a process that holds nothing of this one's environment and command
        # line, and forks its fork server (one torch import) before it reads them. Does not return.
        try:
            forkserver.restart_clean(words)
        except OSError:
            pass
    if early and resume_fd is None:
        forkserver.start_early()  # in a process that is not a clean command: its torch import beside ours
    if early and len(words) > 1 and not _grades_in_a_pool(words):
        # the fork server imports what the workers will need while this process goes on (with --jobs N, the
        # grading processes' fork servers do: this one would only take a core from them)
        from autograder.recording import modules_hint

        forkserver.preload_modules(modules_hint(words[1]), wait=False)
    try:
        args = parser().parse_args(argv)
        return args.run(args)
    except _user_errors() as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; results written so far are kept", file=sys.stderr)
        return 130
    finally:
        if early:  # the command is done: its fork server and the workers it started end with it
            from autograder.sandbox.forkserver import shutdown_fork_server

            shutdown_fork_server()


if __name__ == "__main__":
    sys.exit(main())
