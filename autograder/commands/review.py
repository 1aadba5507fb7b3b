"""`autograder review <name> --out DIR`: grade the checks graded by hand (written answers) on a local web page, by
question with rubric items or by submission; `--export`/`--import` a CSV; `--merge` the grades into the results
(autograder/review does the work)."""
from __future__ import annotations

from autograder.commands.base import Command


class ReviewCommand(Command):
    def add_arguments(self, parser) -> None:
        parser.add_argument("assignment", help="assignment name (solutions/<name>) or a release/solutions folder")
        parser.add_argument("--out", required=True, help="the results folder of `autograder grade`")
        parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; another "
                            "needs --graders)")
        parser.add_argument("--port", type=int, default=8750, help="port (default 8750; 0: any free port)")
        parser.add_argument("--graders", metavar="FILE", help="one grader a line, `name token`: each change is "
                            "recorded with its grader")
        parser.add_argument("--anonymous", action="store_true", help="hide students' names from every grader")
        what = parser.add_mutually_exclusive_group()
        what.add_argument("--export", metavar="CSV", help="write every answer's hand grade to CSV, then stop")
        what.add_argument("--import", dest="import_", metavar="CSV", help="take hand grades from CSV (a row changed "
                          "in the review since it was exported is a conflict, reported, not applied), then stop")
        what.add_argument("--merge", action="store_true", help="write the hand grades into the results (results.json, "
                          "feedback, grades.csv, summary), then stop")
        parser.add_argument("--quiet", action="store_true")

    def run(self, args) -> int:
        from autograder.review.command import ReviewOptions, run

        return run(ReviewOptions(assignment=args.assignment, out=args.out, host=args.host, port=args.port,
                                 graders=args.graders, anonymous=args.anonymous, export=args.export,
                                 import_=args.import_, merge=args.merge, quiet=args.quiet))
