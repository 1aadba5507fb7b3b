"""What `autograder review` does, from its options (no argparse below the command line)."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from autograder.files import write_atomic
from autograder.review.server import ReviewError


@dataclass(frozen=True)
class ReviewOptions:
    """The options of `autograder review`, as commands/review.py takes them from the command line. At most one of
    `export`, `import_` and `merge`; with none, the page is served."""

    assignment: str
    out: str
    host: str = "127.0.0.1"
    port: int = 8750
    graders: str | None = None
    anonymous: bool = False
    export: str | None = None
    import_: str | None = None
    merge: bool = False
    quiet: bool = False


def run(options: ReviewOptions) -> int:
    """Bring DIR/review.sqlite up to date with the results folder, then export, import, merge or serve; the exit
    status. Raises ReviewError when the folder holds no results."""
    from autograder.grading import resolve_release
    from autograder.review.session import open_review

    out = Path(options.out)
    if not any(out.glob("*/grading.json")):
        raise ReviewError(f"{out} holds no results: run `autograder grade {options.assignment} SUBMISSIONS... "
                          f"--out {out}` first")
    release = resolve_release(options.assignment)
    store = open_review(release, out, options.quiet)
    try:
        if options.export:
            return _export(store, Path(options.export))
        if options.import_:
            return _import(store, Path(options.import_))
        if options.merge:
            return _merge(store, out)
        return _serve(options, out)
    finally:
        store.close()


def _export(store, path: Path) -> int:
    from autograder.review.spreadsheet import export_csv

    write_atomic(path, export_csv(store))
    print(f"hand grades written to {path}")
    return 0


def _import(store, path: Path) -> int:
    from autograder.review.spreadsheet import import_csv

    changed, conflicts = import_csv(store, path.read_text(encoding="utf-8-sig"), grader=f"import of {path.name}")
    print(f"{changed} answer(s) changed from {path}")
    for line in conflicts:
        print(f"conflict: {line}", file=sys.stderr)
    return 1 if conflicts else 0


def _merge(store, out: Path) -> int:
    from autograder.review.merge import merge_hand_grades

    changed = merge_hand_grades(store, out, store.meta("title", ""))
    print(f"hand grades written into {changed} submission(s) of {out}")
    return 0


def _serve(options: ReviewOptions, out: Path) -> int:
    from autograder.review.app import ReviewConfig, make_app
    from autograder.review.server import access, address, bind, serve

    graders, made_here = access(options.host, options.graders)
    sock = bind(options.host, options.port)
    url = address(sock, options.host)
    if made_here:
        print(f"review: open {url}/?token={next(iter(graders))}", flush=True)
    else:
        print(f"review: serving {url}/ ; each grader opens {url}/?token=<their token>", flush=True)
    print("review: Ctrl-C stops it; every change is saved as it is made (in "
          f"{out / 'review.sqlite'}); `--merge` writes the grades into the results", flush=True)
    try:
        serve(make_app(ReviewConfig(out, graders, options.anonymous)), sock)
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP: how a server is stopped, not a failure
        pass
    print("review: stopped; every change made was saved", flush=True)
    return 0
