"""`autograder export gradescope|nbgrader <name>`: package an assignment for a platform (autograder/export/)."""
from __future__ import annotations

import sys
from pathlib import Path

from autograder.commands.base import Command


class ExportCommand(Command):
    def add_arguments(self, parser) -> None:
        targets = parser.add_subparsers(dest="target", required=True)
        g = targets.add_parser("gradescope", help="release/<name>/gradescope-autograder.zip (setup.sh, run_autograder)")
        g.add_argument("assignment", help="assignment name (solutions/<name>) or a release/solutions folder")
        g.add_argument("--out", help="zip to write (default: release/<name>/gradescope-autograder.zip)")
        g.add_argument("--pip", action="append", metavar="REQUIREMENT",
                       help="another package grading needs (pinned to the installed version); repeatable")
        n = targets.add_parser("nbgrader", help="an nbgrader course tree: nbgrader_config.py, source/<name>/")
        n.add_argument("assignment", help="assignment name (solutions/<name>) or its solutions folder")
        n.add_argument("--course", help="course folder to write into (default: ~/<course id>, outside the project)")
        n.add_argument("--course-id", help="nbgrader's course id (default: the course folder's name)")

    def run(self, args) -> int:
        return self._gradescope(args) if args.target == "gradescope" else self._nbgrader(args)

    def _gradescope(self, args) -> int:
        from autograder.export.gradescope import export_gradescope, points_summary
        from autograder.grading import resolve_release

        release = resolve_release(args.assignment)
        try:
            out, warnings = export_gradescope(release, Path(args.out) if args.out else None, args.pip or [])
        except ValueError as exc:  # a --pip requirement that is not one, or not installed here (packaging's errors too)
            said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if type(exc).__name__ == "InvalidRequirement":
                said = f"--pip {' '.join(args.pip or [])}: not a requirement pip understands ({said})"
            print(f"error: {said}", file=sys.stderr)
            return 2
        for w in warnings:
            print(f"warning: {w}", file=sys.stderr)
        print(f"Gradescope autograder: {out} ({out.stat().st_size / 1024:.0f} KiB); upload it under "
              "Configure Autograder > Zip file upload")
        for line in points_summary(release):
            print(line)
        limits = release.config.limits
        minutes = -(-(10 + 2 * limits.import_seconds + limits.submission_seconds) // 60)
        print(f"Set Gradescope's autograder timeout (Autograder settings; 10 minutes by default) to at least "
              f"{minutes:.0f} minutes: this assignment allows {limits.submission_seconds:g} s of checks and "
              f"{limits.import_seconds:g} s per statement loaded (docs/platforms.md, 'The Gradescope timeout')")
        return 0

    def _nbgrader(self, args) -> int:
        from autograder.export.nbgrader import export_nbgrader

        course = export_nbgrader(args.assignment, Path(args.course) if args.course else None, args.course_id)
        name = Path(args.assignment).name
        print(f"nbgrader course: {course}\nnext, in that folder: nbgrader generate_assignment {name}; nbgrader "
              f"release_assignment {name}; ... nbgrader collect {name}; autograder nbgrader-grade {name}; nbgrader "
              f"release_feedback {name}")
        return 0
