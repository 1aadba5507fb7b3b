"""`autograder build solutions/<name>`: the student notebook and the release, then the reference recorded."""
from __future__ import annotations

from pathlib import Path

from autograder.commands.base import Command


class BuildCommand(Command):
    starts_workers = True  # recording runs the reference

    def add_arguments(self, parser) -> None:
        parser.add_argument("source", help="solutions/<name> folder")
        parser.add_argument("--no-record", action="store_true",
                            help="do not record the reference (grading then starts a live reference worker)")

    def run(self, args) -> int:
        from autograder.build import build
        from autograder.grading import build_and_record

        source = Path(args.source)
        paths = build(source) if args.no_record else build_and_record(source, log=print)
        for note in paths.notes:
            print(f"note: {note}")
        for problem in paths.problems:
            print(f"PROBLEM: {problem}")
        print(f"student notebook: {paths.assignment}\nrelease bundle:   {paths.release}")
        return 0

    def assignment_to_preload(self, args) -> str | None:
        return args.source
