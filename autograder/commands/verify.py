"""`autograder verify <name>`: the reference gets full marks, stubs get 0, the corpus grades as declared."""
from __future__ import annotations

from pathlib import Path

from autograder.commands.base import Command


class VerifyCommand(Command):
    starts_workers = True

    def add_arguments(self, parser) -> None:
        parser.add_argument("assignment", help="assignment name or solutions/<name> folder")
        parser.add_argument("--no-corpus", action="store_true",
                            help="skip the corpus of correct and wrong submissions")
        parser.add_argument("--jobs", "-j", type=int, default=2, metavar="N", help="grading processes for the corpus")

    def run(self, args) -> int:
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
