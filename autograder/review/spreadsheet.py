"""Hand grades as CSV, for teams that grade in a spreadsheet: the same truth as the review page (review.sqlite).

Export: a row per answer (submission, question, score, items, comment, score_set_by_hand, version, grader).
Import: a row changes its answer when the answer's version is still the one exported; one changed in the review
since is a conflict, reported and not applied (never overwritten silently). `items` lists rubric item titles
separated by " | " (an unknown title is a conflict); a `score` that differs from what the items give, with no
`score_set_by_hand`, is taken as a score set by hand.
"""
from __future__ import annotations

import csv
import io

from autograder.review.store import Stale, Store

COLUMNS = ["submission", "question", "score", "points", "items", "comment", "score_set_by_hand", "version", "grader"]
SEPARATOR = " | "


def export_csv(store: Store) -> str:
    """Every answer's hand grade as CSV text (COLUMNS), in question then submission order; `score` is empty for an
    answer not graded yet."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    points = {q.name: q.points for q in store.questions()}
    for grade in store.grades():
        titles = {i.id: i.title for i in store.items(grade.question)}
        writer.writerow([grade.submission, grade.question, f"{grade.score:g}" if grade.graded else "",
                         f"{points[grade.question]:g}", SEPARATOR.join(titles[i] for i in grade.applied),
                         grade.comment, "" if grade.override is None else f"{grade.override:g}", grade.version,
                         grade.grader])
    return buf.getvalue()


def _number(text: str) -> float | None:
    return float(text) if text.strip() else None


def import_csv(store: Store, text: str, grader: str) -> tuple[int, list[str]]:
    """(answers changed, conflicts: one line each)."""
    changed, conflicts = 0, []
    for n, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        try:
            changed += _import_row(store, row, grader)
        except Stale as stale:
            conflicts.append(f"line {n}: {row.get('submission')} / {row.get('question')}: {stale.what} "
                             f"(by {stale.by or 'someone'}): not applied")
        except (KeyError, ValueError) as exc:
            conflicts.append(f"line {n}: {row.get('submission')} / {row.get('question')}: {exc}: not applied")
    return changed, conflicts


def _import_row(store: Store, row: dict, grader: str) -> int:
    sub_id, question = row.get("submission", ""), row.get("question", "")
    if question not in {q.name for q in store.questions()} or sub_id not in {s["id"] for s in store.submissions()}:
        raise KeyError("no such submission or question in this review")
    current = store.grade(sub_id, question)
    version = int(row.get("version") or 0)
    by_title = {i.title: i.id for i in store.items(question)}
    titles = [t.strip() for t in (row.get("items") or "").split(SEPARATOR.strip()) if t.strip()]
    unknown = [t for t in titles if t not in by_title]
    if unknown:
        raise KeyError(f"unknown rubric item(s) {unknown}")
    override = _number(row.get("score_set_by_hand") or "")
    score = _number(row.get("score") or "")
    items = [by_title[t] for t in titles]
    wanted = (sorted(items), row.get("comment") or "", override)
    if wanted == (sorted(current.applied), current.comment, current.override) and score in (None, current.score):
        return 0
    if version != current.version:
        raise Stale("changed in the review since this file was exported", current.to_dict(), current.grader)
    new = store.change(sub_id, question, version, grader, items=items, comment=wanted[1], override=override,
                       graded=True)
    if override is None and score is not None and abs(score - new.score) > 1e-9:
        store.change(sub_id, question, new.version, grader, override=score)
    return 1
