"""Opening a results folder for review: DIR/review.sqlite made or brought up to date with the assignment's
questions graded by hand and every result the folder holds (a notebook snapshot taken when it is new or its bytes
changed; the grades already given stay)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from autograder.deferred import graded_by_hand
from autograder.review.answers import answer_cells, digest, read_cells
from autograder.review.store import Store


def hand_graded_specs(release) -> list:
    """The release's checks graded by hand: the questions of the review."""
    return [spec for spec in release.checks if graded_by_hand(spec)]


def _results(out_dir: Path):
    for path in sorted(Path(out_dir).glob("*/grading.json")):
        try:
            yield json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue


def open_review(release, out_dir: Path, quiet: bool = False) -> Store:
    """DIR/review.sqlite opened and brought up to date; the caller closes it. Progress goes to stderr for classes of
    100 or more, unless `quiet`."""
    store = Store(out_dir)
    store.set_meta("title", release.config.title)
    store.set_meta("assignment", release.config.name)
    specs = hand_graded_specs(release)
    for spec in specs:
        store.add_question(spec.name, spec.part, spec.points, str(getattr(spec.fn, "_ag_manual", "")))
    known = {s["id"]: s["notebook_sha256"] for s in store.submissions()}
    results = list(_results(out_dir))
    new = 0
    with store.batch():
        for n, result in enumerate(results, start=1):
            new += _take(store, release, specs, result, known)
            if not quiet and new and (n % 100 == 0 or n == len(results)) and len(results) >= 100:
                print(f"review: {n}/{len(results)} submissions read", file=sys.stderr)
    return store


def _take(store: Store, release, specs: list, result: dict, known: dict) -> bool:
    """Snapshot one result's notebook when it is new or changed; whether it was."""
    sub_id = str(result.get("submission", ""))
    path = Path(str(result.get("file", "")))
    sha = digest(path) if path.is_file() else None
    if sub_id in known and (sha is None or sha == known[sub_id]):
        return False  # as snapshotted (or the notebook is gone since: the snapshot is what was graded)
    cells, note = read_cells(path) if sha else ([], "the notebook is no longer where it was graded from")
    messages = {c.get("name"): c.get("message", "") for c in result.get("checks", []) if isinstance(c, dict)}
    answers = {spec.name: answer_cells(cells, spec.name, str(messages.get(spec.name, "")),
                                       release.hand_graded.get(spec.name, "")) for spec in specs}
    store.put_submission(sub_id, sha, cells, note, answers)
    return True
