"""`autograder record <name>`: record the reference of a release built elsewhere, in this environment."""
from __future__ import annotations

from autograder.commands.base import Command


class RecordCommand(Command):
    starts_workers = True

    def add_arguments(self, parser) -> None:
        parser.add_argument("assignment", help="assignment name or a release folder")

    def run(self, args) -> int:
        from autograder.build import release_for
        from autograder.grading import record_release

        release = release_for(args.assignment, rebuild=False)
        recording, line = record_release(release.dir)
        print(line)
        return 0 if recording is not None else 2
