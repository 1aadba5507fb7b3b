"""`autograder check NOTEBOOK...`: a notebook's public checks, as a student runs them (autograder/check.py)."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from autograder.commands.base import Command


class CheckCommand(Command):
    starts_workers = True

    def add_arguments(self, parser) -> None:
        parser.add_argument("notebooks", nargs="+", metavar="SUBMISSION.ipynb")
        parser.add_argument("--part", help="only this part's checks: its number ('1', 'part1') or its name "
                            "('1. Normalize')")
        parser.add_argument("--json", action="store_true", help="machine-readable verdicts")

    def assignment_to_preload(self, args) -> str | None:
        return None

    def run(self, args) -> int:
        from autograder.selfcheck import describe, run_checks

        start = time.monotonic()
        code = 0
        for notebook in args.notebooks:
            run = run_checks(Path(notebook), args.part)
            print(json.dumps(run.to_dict(), indent=1) if args.json else describe(run))
            if run.error:
                code = max(code, 2)
            elif not run.ok:
                code = max(code, 1)
        if not args.json and len(args.notebooks) > 1:
            print(f"({time.monotonic() - start:.1f} s)", file=sys.stderr)
        return code
