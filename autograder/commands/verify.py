"""`autograder verify <name>`: the reference gets full marks, stubs get 0, the corpus grades as declared; with
--mutants, how many mutants of the reference the checks kill, part by part."""
from __future__ import annotations

import json
from pathlib import Path

from autograder.commands.base import Command, positive


class VerifyCommand(Command):
    starts_workers = True

    def add_arguments(self, parser) -> None:
        parser.add_argument("assignment", help="assignment name or solutions/<name> folder")
        parser.add_argument("--no-corpus", action="store_true",
                            help="skip the corpus of correct and wrong submissions")
        parser.add_argument("--jobs", "-j", type=positive(int), default=2, metavar="N", help="grading processes for the corpus")
        which = parser.add_mutually_exclusive_group()
        which.add_argument("--mutants", action="store_true", default=None,
                           help="mutation analysis: grade mutants of the reference, report killed, survived (with "
                                "their diffs) and probably equivalent mutants and the score of each part (by "
                                "default it runs when it plans at most 60 mutants, and otherwise says how long it "
                                "would take)")
        which.add_argument("--no-mutants", dest="mutants", action="store_false", help="no mutation analysis")
        parser.add_argument("--mutants-limit", type=positive(int), default=None, metavar="N",
                            help="grade at most N mutants per part (a seeded sample taking every operator in turn)")
        parser.add_argument("--mutants-seed", type=int, default=0, metavar="S", help="seed of that sample (0)")
        parser.add_argument("--mutants-json", type=Path, default=None, metavar="FILE",
                            help="also write the mutation report, every mutant with its verdict and diff, as JSON")

    def run(self, args) -> int:
        from autograder.files import write_atomic
        from autograder.verify import verify

        source = Path(args.assignment)
        if not (source / "assignment.toml").is_file():
            source = Path("solutions") / args.assignment
        report = verify(source, with_corpus=not args.no_corpus, jobs=args.jobs,
                        mutants=True if args.mutants_json is not None else args.mutants, mutants_limit=args.mutants_limit,
                        mutants_seed=args.mutants_seed)
        for line in report.lines:
            print(line)
        for problem in report.problems:
            print(f"PROBLEM: {problem}")
        if args.mutants_json is not None and report.mutation is not None:
            write_atomic(args.mutants_json, json.dumps(report.mutation.to_dict(), indent=1) + "\n")
        print("verify: OK" if report.ok else f"verify: FAILED ({len(report.problems)} problem(s))")
        return 0 if report.ok else 1
