"""`autograder import nbgrader|otter SOURCE --name NAME`: another tool's assignment as solutions/<name>/, with a
report of what could not be converted (autograder/importers/)."""
from __future__ import annotations

import sys
from pathlib import Path

from autograder.commands.base import Command

FORMATS = ("nbgrader", "otter")


class ImportCommand(Command):
    def add_arguments(self, parser) -> None:
        parser.add_argument("format", choices=FORMATS, help="the source's format")
        parser.add_argument("source", help="the source notebook, or a folder of them (one assignment per notebook)")
        parser.add_argument("--name", required=True, help="the assignment's name: solutions/<name>/")
        parser.add_argument("--solutions", default="solutions", help="where to write it (default: ./solutions)")
        parser.add_argument("--force", action="store_true", help="replace solutions/<name>/ if it exists")

    def run(self, args) -> int:
        from autograder.importers import nbgrader, otter
        from autograder.importers.common import ImportFailed

        module = {"nbgrader": nbgrader, "otter": otter}[args.format]
        try:
            reports = module.import_assignment(Path(args.source), args.name, Path(args.solutions), args.force)
        except ImportFailed as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        for report in reports:
            print(report.summary())
        print("next: autograder build " + " && autograder build ".join(str(r.target) for r in reports))
        return 1 if any(r.not_converted for r in reports) else 0
