"""`autograder import nbgrader|otter SOURCE --name NAME`: the command line of the importers."""
from __future__ import annotations

import sys
from pathlib import Path

FORMATS = ("nbgrader", "otter")


def cmd_import(args) -> int:
    from autograder.importers import nbgrader, otter

    importers = {"nbgrader": nbgrader, "otter": otter}
    module = importers[args.format]
    try:
        reports = module.import_assignment(Path(args.source), args.name, Path(args.solutions), args.force)
    except module.ImportFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for report in reports:
        print(report.summary())
    print("next: autograder build " + " && autograder build ".join(str(r.target) for r in reports))
    return 1 if any(r.not_converted for r in reports) else 0


def add_arguments(p) -> None:
    p.add_argument("format", choices=FORMATS, help="the source's format")
    p.add_argument("source", help="the source notebook, or a folder of them (one assignment per notebook)")
    p.add_argument("--name", required=True, help="the assignment's name: solutions/<name>/")
    p.add_argument("--solutions", default="solutions", help="where to write it (default: ./solutions)")
    p.add_argument("--force", action="store_true", help="replace solutions/<name>/ if it exists")


def add_parser(sub) -> None:
    p = sub.add_parser("import", help="an nbgrader or otter assignment as solutions/<name>/, with a report of "
                                      "what could not be converted")
    add_arguments(p)
    p.set_defaults(run=cmd_import)
