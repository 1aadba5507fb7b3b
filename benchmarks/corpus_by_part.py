"""Grade an assignment's corpus (or some of it) and show, per item, what it costs in every part.

    python benchmarks/corpus_by_part.py solutions/transformers_bert [--only REGEX] [--jobs 2] [--json OUT]

Prints, for each corpus item whose outcome differs from what it declares, the problems `autograder verify`
would name; then a table: one row per item, one column per part, the points lost there (pending checks
left out). Items confined to a part that lose points elsewhere are the cross-part (cascading) losses.
The source folder is copied, so nothing is written next to it.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from autograder import corpus as corpus_module
from autograder.grading import build_and_record
from autograder.release import load_release
from autograder.verify import corpus_notebooks, grade_batch


def part_key(part: str) -> str:
    match = re.match(r"(\d+)\.", part or "")
    return match.group(1) if match else (part or "?")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("--only", default="", help="regular expression on item ids (variant-NAME, bug-NAME)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path, help="write {item: {part: points lost, check: message}} here")
    args = parser.parse_args(argv)

    corpus = corpus_module.load_corpus(args.source)
    items = [(sub_id, item) for sub_id, item in corpus.items() if re.search(args.only, sub_id)]
    with tempfile.TemporaryDirectory(prefix="ag-corpus-") as tmp:
        copy = Path(tmp) / "solutions" / args.source.resolve().name
        shutil.copytree(args.source, copy)
        paths = build_and_record(copy)
        release = load_release(paths.release)
        student = paths.assignment / release.config.notebook
        folder = Path(tmp) / "corpus"
        subset = corpus_module.Corpus([i for _, i in items if isinstance(i, corpus_module.Variant)],
                                      [i for _, i in items if isinstance(i, corpus_module.Bug)])
        subs = corpus_notebooks(release, subset, folder, student)
        start = time.monotonic()
        results = grade_batch(release, subs, Path(tmp) / "out", jobs=args.jobs)
        wall = time.monotonic() - start
    names = {c.name for c in release.checks}
    parts = sorted({part_key(c.part) for c in release.checks if c.part}, key=lambda p: (len(p), p))
    report, bad = {}, 0
    for sub_id, item in items:
        result = results[sub_id]
        for problem in corpus_module.problems(item, result, names):
            bad += 1
            print("PROBLEM", problem)
        lost = {}
        for part, points in corpus_module.points_lost_by_part(result).items():
            lost[part_key(part)] = lost.get(part_key(part), 0) + points
        report[sub_id] = {"lost_by_part": lost, "lost": corpus_module.lost_points(result), "error": result.error}
    width = max([len(s) for s, _ in items] + [4])
    print(f"\n{'item':{width}} " + " ".join(f"{'p' + p:>5}" for p in parts))
    for sub_id, _ in items:
        row = report[sub_id]["lost_by_part"]
        print(f"{sub_id:{width}} " + " ".join(f"{row.get(p, 0):>5g}" if row.get(p) else f"{'.':>5}" for p in parts))
    print(f"\n{len(items)} items graded in {wall:.0f} s with {args.jobs} jobs; {bad} problems")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
