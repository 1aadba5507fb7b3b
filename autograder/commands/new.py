"""`autograder new NAME`: a working assignment to start from (autograder/scaffold.py)."""
from __future__ import annotations

import sys
from pathlib import Path

from autograder.commands.base import Command


class NewCommand(Command):
    def add_arguments(self, parser) -> None:
        parser.add_argument("name", help="the assignment's name (letters, digits, _)")
        parser.add_argument("--title", help="shown to students (default: from the name)")
        parser.add_argument("--solutions", default="solutions", help="where to write it (default: ./solutions)")

    def run(self, args) -> int:
        from autograder.scaffold import ScaffoldError, new_assignment

        try:
            target = new_assignment(args.name, Path(args.solutions), args.title)
        except ScaffoldError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"wrote {target}: edit {target / (args.name + '.ipynb')}, tests/test_hidden.py and corpus/cases.py\n"
              f"next: autograder build {target} && autograder verify {target}\n"
              f"(build writes {target.parent.parent / 'assignments' / args.name} for students and "
              f"{target.parent.parent / 'release' / args.name} for the grader)")
        return 0
