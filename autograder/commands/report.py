"""`autograder report RESULTS_DIR`: HTML feedback per submission and a class report (autograder/reports/html.py)."""
from __future__ import annotations

import sys
from pathlib import Path

from autograder.commands.base import Command


class ReportCommand(Command):
    def add_arguments(self, parser) -> None:
        parser.add_argument("results", help="the --out folder of autograder grade")
        parser.add_argument("--title", help="title shown on the pages (default: the folder's name)")
        parser.add_argument("--png", action="store_true", help="also render each page to PNG (needs Chromium)")

    def run(self, args) -> int:
        from autograder.reports.html import load_results, render_png, write_reports

        results_dir = Path(args.results)
        results = load_results(results_dir)
        if not results:
            print(f"error: no */grading.json under {results_dir} (run autograder grade --out {results_dir} first)",
                  file=sys.stderr)
            return 2
        pages = write_reports(results_dir, args.title or results_dir.resolve().name, results)
        print(f"{len(pages) - 1} feedback page(s) and {results_dir / 'class-report.html'}")
        if args.png:
            for page in pages:
                render_png(page, page.with_suffix(".png"))
            print(f"PNG renderings beside each page ({len(pages)})")
        return 0
