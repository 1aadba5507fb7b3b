"""`autograder nbgrader-grade <name> [--course DIR]`: an nbgrader course's submitted/ tree into its gradebook."""
from __future__ import annotations

import sys
from pathlib import Path

from autograder.commands.base import Command


class NbgraderGradeCommand(Command):
    starts_workers = True

    def add_arguments(self, parser) -> None:
        parser.add_argument("assignment", help="assignment name (solutions/<name>) or its solutions folder")
        parser.add_argument("--course", help="the nbgrader course folder (holds nbgrader_config.py and gradebook.db; "
                            "default: this folder, when it is one)")
        parser.add_argument("--student", action="append", help="only this student; repeatable")
        parser.add_argument("--trusted-submissions", action="store_true",
                            help="grade even where student code cannot be confined at all here (neither namespaces "
                                 "nor a file allowlist): only for submissions you trust, whose code then sees what "
                                 "the grader's user may read")
        parser.add_argument("--quiet", action="store_true")

    def run(self, args) -> int:
        from autograder.export.gradebook import grade_into_gradebook

        course = Path(args.course) if args.course else Path.cwd()
        if not (course / "nbgrader_config.py").is_file():
            raise FileNotFoundError(f"{course} is not an nbgrader course (no nbgrader_config.py): give --course DIR, "
                                    "the folder `autograder export nbgrader` wrote")
        scores = grade_into_gradebook(args.assignment, course, args.student, quiet=args.quiet,
                                      trusted=args.trusted_submissions)
        for student, score in sorted(scores.items()):
            late = scores.late.get(student)
            print(f"{student}: {score:g}" + (f" (late: nbgrader's late penalty {late:g})" if late else ""))
        print(f"{len(scores)} submission(s) graded into the gradebook of {course}", file=sys.stderr)
        missing = sorted(set(args.student or ()) - set(scores))
        if missing:  # a name asked for by hand and not graded is most often a typo: not a silent success
            print(f"error: nothing graded for {', '.join(missing)} (asked for with --student; see the warnings "
                  f"above)", file=sys.stderr)
            return 2
        return 3 if scores.not_final else 0
