"""`autograder similarity <name> SUBMISSIONS... --out DIR [--past FOLDER...]`: similar submissions, per part
(autograder/similarity/). Writes DIR/similarity/ only; runs no student code."""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from autograder.commands.base import Command, positive


class SimilarityCommand(Command):
    def add_arguments(self, parser) -> None:
        parser.add_argument("assignment", help="assignment name (solutions/<name>) or a release/solutions folder")
        parser.add_argument("submissions", nargs="+", help="submissions as `grade` takes them (notebooks, folders, a "
                            "Gradescope export, an nbgrader submitted/ tree), or a results folder of `grade`")
        parser.add_argument("--out", required=True, help="folder to write similarity/ into (a grading --out is fine)")
        parser.add_argument("--past", nargs="+", default=[], metavar="FOLDER",
                            help="earlier terms' submissions: compared with this class, never with each other")
        parser.add_argument("--threshold", type=positive(float), default=None,
                            help="a part's score (0-1) from which a pair is listed as similar (default 0.6)")
        parser.add_argument("--quiet", action="store_true", help="no progress lines")

    def run(self, args) -> int:
        import importlib.util

        from autograder.build import release_for  # (built when stale, never recorded: nothing here runs code)

        if importlib.util.find_spec("scipy") is None:
            print("error: autograder similarity needs scipy: pip install 'torchgrade[similarity]'", file=sys.stderr)
            return 2
        from autograder.similarity import Settings, find_similar, layout
        from autograder.similarity.report import write_report

        if not args.out.strip():
            print("error: --out is empty: give the folder to write the report into", file=sys.stderr)
            return 2
        release = release_for(args.assignment)
        student_nb = _student_notebook(release)
        lay = layout(sorted({c.part for c in release.checks if c.part}), student_nb, release.dir / "answer_key.ipynb")
        settings = Settings()
        if args.threshold is not None:
            settings.threshold = min(1.0, args.threshold)
        with tempfile.TemporaryDirectory(prefix="similarity-") as unpack:
            entries = _entries(args.submissions, release, Path(unpack), "current", args.quiet)
            for folder in args.past:
                entries += _entries([folder], release, Path(unpack) / "past", "past", args.quiet,
                                    prefix=f"{Path(folder).name}/")
            if not entries:
                print("error: no submissions found", file=sys.stderr)
                return 2
            comparison = find_similar(entries, lay, release.dir / "answer_key.ipynb", settings, args.quiet)
            index = write_report(Path(args.out), release.config.name, comparison, lay)
        flagged = sum(p.flagged for p in comparison.pairs)
        problems = sum(bool(s.problem) for s in comparison.sources)
        print(f"{flagged} similar pair(s), {len(comparison.groups)} group(s) of three or more, "
              f"{len(comparison.key_flagged)} close to the answer key, {problems} not compared: {index}")
        return 0


def _student_notebook(release) -> Path | None:
    """The student notebook as handed out: assignments/<name>/<notebook> beside the release."""
    for root in (release.dir.parent.parent, Path.cwd()):
        path = root / "assignments" / release.config.name / release.config.notebook
        if path.is_file():
            return path
    return None


def _entries(args: list[str], release, unpack: Path, kind: str, quiet: bool, prefix: str = "") -> list:
    from autograder.similarity import Entry
    from autograder.submissions import discover, is_output_folder

    out = []
    given = []
    for arg in args:
        if Path(arg).is_dir() and is_output_folder(Path(arg)):
            out += _graded(Path(arg), kind, prefix)
        else:
            given.append(arg)
    if given:
        inputs = discover(given, release.config.notebook, release.config.name, unpack_dir=unpack,
                          released=release.student_code)
        for line in inputs.layouts if not quiet else []:
            print(line, file=sys.stderr)
        for problem in inputs.problems:
            print(f"warning: {problem}", file=sys.stderr)
        out += [Entry(prefix + s.student, s.path, kind, s.refused or ("" if s.path.exists() else
                                                                     f"{s.path.name}: no such file"))
                for s in inputs.submissions]
    return out


def _graded(results: Path, kind: str, prefix: str) -> list:
    """A results folder of `grade`: each result's notebook as it was given (grading.json's `file`)."""
    from autograder.similarity import Entry

    out = []
    for record in sorted(results.glob("*/grading.json")):
        try:
            data = json.loads(record.read_text(encoding="utf-8"))
            student, file = str(data["submission"]), Path(data["file"])
        except (OSError, ValueError, KeyError, TypeError):
            out.append(Entry(prefix + record.parent.name, None, kind, "its grading.json cannot be read"))
            continue
        out.append(Entry(prefix + student, file, kind, "" if file.is_file() else f"{file} is no longer there"))
    return out
