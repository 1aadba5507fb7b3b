"""`autograder nbgrader-grade <name> --course DIR`: an nbgrader course's submitted/ tree into its gradebook."""
from __future__ import annotations

import sys
from pathlib import Path

from autograder.commands.base import Command


class NbgraderGradeCommand(Command):
    starts_workers = True

    def add_arguments(self, parser) -> None:
        parser.add_argument("assignment", help="assignment name (solutions/<name>) or its solutions folder")
        parser.add_argument("--course", required=True, help="the nbgrader course folder (holds gradebook.db)")
        parser.add_argument("--student", action="append", help="only this student; repeatable")
        parser.add_argument("--quiet", action="store_true")

    def run(self, args) -> int:
        from autograder.export.nbgrader import grade_into_gradebook

        scores = grade_into_gradebook(args.assignment, Path(args.course), args.student, quiet=args.quiet)
        for student, score in sorted(scores.items()):
            print(f"{student}: {score:g}")
        print(f"{len(scores)} submission(s) graded into {Path(args.course) / 'gradebook.db'}", file=sys.stderr)
        return 3 if scores.not_final else 0
