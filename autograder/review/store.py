"""Hand grades in SQLite: DIR/review.sqlite (write-ahead log), the one truth for grades given by hand.

What it holds: the questions (an assignment's checks graded by hand), the submissions of the results folder with a
snapshot of each one's notebook cells (taken by `autograder review` from the notebooks the results name, so that
no page reads outside DIR), rubric items per question (a title, a points delta, a comment), each answer's grade
(the items applied, a free comment, an optional score set by hand), and every change with its grader.

Guarantees:
- a score is computed when it is read: clamp(sum of the applied items' points, 0, the question's points), or the
  score set by hand; editing an item's points re-scores every answer that has it, in the same instant;
- every change is one transaction (BEGIN IMMEDIATE) that checks the version the grader saw: a stale write is
  refused with `Stale`, which says what changed and who changed it; nothing is overwritten silently;
- a committed change survives a killed server (SQLite's WAL, synchronous=FULL).
"""
from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

DB_FILE = "review.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS questions (name TEXT PRIMARY KEY, position INTEGER NOT NULL, part TEXT NOT NULL,
    points REAL NOT NULL, what TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS submissions (id TEXT PRIMARY KEY, position INTEGER NOT NULL, notebook_sha256 TEXT,
    cells TEXT NOT NULL, note TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS answers (submission TEXT NOT NULL, question TEXT NOT NULL, cells TEXT NOT NULL,
    PRIMARY KEY (submission, question));
CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, question TEXT NOT NULL, title TEXT NOT NULL,
    points REAL NOT NULL, comment TEXT NOT NULL, position INTEGER NOT NULL, version INTEGER NOT NULL DEFAULT 1);
CREATE TABLE IF NOT EXISTS grades (submission TEXT NOT NULL, question TEXT NOT NULL, comment TEXT NOT NULL DEFAULT '',
    override REAL, graded INTEGER NOT NULL DEFAULT 0, version INTEGER NOT NULL DEFAULT 0, grader TEXT NOT NULL DEFAULT '',
    at REAL NOT NULL DEFAULT 0, PRIMARY KEY (submission, question));
CREATE TABLE IF NOT EXISTS applied (submission TEXT NOT NULL, question TEXT NOT NULL, item INTEGER NOT NULL,
    PRIMARY KEY (submission, question, item));
CREATE INDEX IF NOT EXISTS applied_by_item ON applied (item);
CREATE TABLE IF NOT EXISTS history (id INTEGER PRIMARY KEY, submission TEXT, question TEXT, grader TEXT NOT NULL,
    at REAL NOT NULL, change TEXT NOT NULL);
"""


class Stale(Exception):
    """A write made from an out-of-date view: `current` is what is stored now, `by` who changed it last."""

    def __init__(self, what: str, current: dict, by: str):
        super().__init__(what)
        self.what, self.current, self.by = what, current, by


@dataclass
class Question:
    """A question graded by hand: `position` orders the pages (0 first), `points` is the most its answers score,
    `what` the description given to `manual()`."""

    name: str
    position: int
    part: str
    points: float
    what: str


@dataclass
class Item:
    """A rubric item of a question: applied to an answer, it adds `points` (negative takes away); `version` goes up
    with each edit, for `Store.edit_item`'s stale check."""

    id: int
    question: str
    title: str
    points: float
    comment: str
    position: int
    version: int


@dataclass
class Grade:
    """One answer's grade as stored, with its score computed from the items as they are now."""

    submission: str
    question: str
    applied: list[int] = field(default_factory=list)
    comment: str = ""
    override: float | None = None
    graded: bool = False
    version: int = 0
    grader: str = ""
    at: float = 0.0
    score: float = 0.0

    def to_dict(self) -> dict:
        """The grade as a plain dict (the page's JSON, and `Stale.current`)."""
        return dict(self.__dict__)


def clamp(value: float, points: float) -> float:
    """`value` rounded to 6 places and held between 0 and `points`."""
    return round(min(points, max(0.0, value)), 6)


class Store:
    """DIR/review.sqlite. One connection per thread of the server (sqlite3 objects are not shared across threads)."""

    def __init__(self, out_dir: Path):
        self.path = Path(out_dir) / DB_FILE
        self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("PRAGMA foreign_keys=ON")
        self.db.executescript(SCHEMA)

    def close(self) -> None:
        """Close this thread's connection; every committed change is already on disk."""
        self.db.close()

    # -- transactions -------------------------------------------------------------------------------------------

    def _write(self):
        return _Transaction(self.db)

    def batch(self):
        """Many writes as one transaction (reading a class: one commit, not one per submission)."""
        return _Transaction(self.db)

    def _log(self, submission: str | None, question: str | None, grader: str, change: dict) -> None:
        self.db.execute("INSERT INTO history (submission, question, grader, at, change) VALUES (?, ?, ?, ?, ?)",
                        (submission, question, grader, time.time(), json.dumps(change, sort_keys=True)))

    # -- what is graded -----------------------------------------------------------------------------------------

    def set_meta(self, key: str, value: str) -> None:
        """Set one value of the folder's meta table (the title, the assignment), replacing any earlier one."""
        with self._write():
            self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def meta(self, key: str, default: str = "") -> str:
        """One value of the meta table; `default` when it was never set."""
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row["value"] if row else default

    def add_question(self, name: str, part: str, points: float, what: str, default_items: bool = True) -> None:
        """A question (kept as it is when it exists: its items and grades are the graders'), with a starting rubric."""
        with self._write():
            if self.db.execute("SELECT 1 FROM questions WHERE name = ?", (name,)).fetchone():
                return
            position = self.db.execute("SELECT COUNT(*) FROM questions").fetchone()[0]
            self.db.execute("INSERT INTO questions VALUES (?, ?, ?, ?, ?)", (name, position, part, points, what))
            if default_items:
                for i, (title, share) in enumerate((("Correct", 1.0), ("Partly correct", 0.5), ("Incorrect or missing", 0.0))):
                    self.db.execute("INSERT INTO items (question, title, points, comment, position) VALUES (?, ?, ?, ?, ?)",
                                    (name, title, round(points * share, 6), "", i))

    def put_submission(self, sub_id: str, digest: str | None, cells: list, note: str,
                       answers: dict[str, list]) -> None:
        """A submission's notebook snapshot and its answer cells per question (replaced: the notebook may be new)."""
        with self._write():
            row = self.db.execute("SELECT position FROM submissions WHERE id = ?", (sub_id,)).fetchone()
            position = row["position"] if row else self.db.execute("SELECT COUNT(*) FROM submissions").fetchone()[0]
            self.db.execute("INSERT OR REPLACE INTO submissions VALUES (?, ?, ?, ?, ?)",
                            (sub_id, position, digest, json.dumps(cells), note))
            for question, answer in answers.items():
                self.db.execute("INSERT OR REPLACE INTO answers VALUES (?, ?, ?)", (sub_id, question, json.dumps(answer)))

    def questions(self) -> list[Question]:
        """Every question, in page order."""
        return [Question(**dict(r)) for r in self.db.execute("SELECT * FROM questions ORDER BY position")]

    def question(self, position: int) -> Question | None:
        """The question at `position` (0-based, as in the page's URLs); None when there is none."""
        row = self.db.execute("SELECT * FROM questions WHERE position = ?", (position,)).fetchone()
        return Question(**dict(row)) if row else None

    def submissions(self) -> list[dict]:
        """Every submission (id, position, notebook_sha256, note), in page order, without its cells."""
        return [dict(r) for r in self.db.execute(
            "SELECT id, position, notebook_sha256, note FROM submissions ORDER BY position")]

    def submission(self, position: int) -> dict | None:
        """The submission at `position` (0-based) with its snapshot cells; None when there is none."""
        row = self.db.execute("SELECT * FROM submissions WHERE position = ?", (position,)).fetchone()
        return {**dict(row), "cells": json.loads(row["cells"])} if row else None

    def answer(self, sub_id: str, question: str) -> list:
        """The snapshot cells holding a submission's answer to `question`; empty when none was found."""
        row = self.db.execute("SELECT cells FROM answers WHERE submission = ? AND question = ?",
                              (sub_id, question)).fetchone()
        return json.loads(row["cells"]) if row else []

    # -- rubric items -------------------------------------------------------------------------------------------

    def items(self, question: str) -> list[Item]:
        """A question's rubric items, in the order they were added."""
        return [Item(**dict(r)) for r in self.db.execute(
            "SELECT * FROM items WHERE question = ? ORDER BY position, id", (question,))]

    def item(self, item_id: int) -> Item | None:
        """The rubric item with this id; None when there is none."""
        row = self.db.execute("SELECT * FROM items WHERE id = ?", (item_id,)).fetchone()
        return Item(**dict(row)) if row else None

    def add_item(self, question: str, title: str, points: float, comment: str, grader: str) -> Item:
        """A new rubric item at the end of the question's list, logged under `grader`. KeyError when there is no such
        question."""
        with self._write():
            if not self.db.execute("SELECT 1 FROM questions WHERE name = ?", (question,)).fetchone():
                raise KeyError(question)
            position = self.db.execute("SELECT COUNT(*) FROM items WHERE question = ?", (question,)).fetchone()[0]
            cur = self.db.execute("INSERT INTO items (question, title, points, comment, position) VALUES (?, ?, ?, ?, ?)",
                                  (question, title, points, comment, position))
            self._log(None, question, grader, {"item added": cur.lastrowid, "title": title, "points": points})
        item = self.item(int(cur.lastrowid or 0))
        assert item is not None
        return item

    def edit_item(self, item_id: int, version: int, grader: str, title: str, points: float, comment: str) -> tuple[Item, int]:
        """Change an item; returns it and how many answers it re-scores. Stale when another grader changed it first."""
        with self._write():
            item = self.item(item_id)
            if item is None:
                raise KeyError(item_id)
            if item.version != version:
                raise Stale(f"rubric item {item.title!r} was changed meanwhile", item.__dict__, self._last_item_grader(item_id))
            self.db.execute("UPDATE items SET title = ?, points = ?, comment = ?, version = version + 1 WHERE id = ?",
                            (title, points, comment, item_id))
            self._log(None, item.question, grader, {"item edited": item_id, "title": title, "points": points,
                                                    "was": {"title": item.title, "points": item.points}})
            affected = self.db.execute("SELECT COUNT(*) FROM applied WHERE item = ?", (item_id,)).fetchone()[0]
        new = self.item(item_id)
        assert new is not None
        return new, affected

    def _last_item_grader(self, item_id: int) -> str:
        row = self.db.execute("SELECT grader FROM history WHERE change LIKE ? ORDER BY id DESC LIMIT 1",
                              (f'%"item edited": {item_id},%',)).fetchone()
        return row["grader"] if row else ""

    # -- grades -------------------------------------------------------------------------------------------------

    def grade(self, sub_id: str, question: str) -> Grade:
        """One answer's grade, scored from its items as they are now (a default, ungraded Grade when none was given)."""
        q = self.db.execute("SELECT points FROM questions WHERE name = ?", (question,)).fetchone()
        row = self.db.execute("SELECT * FROM grades WHERE submission = ? AND question = ?", (sub_id, question)).fetchone()
        items = self.db.execute("SELECT a.item, i.points FROM applied a JOIN items i ON i.id = a.item "
                                "WHERE a.submission = ? AND a.question = ? ORDER BY i.position, i.id",
                                (sub_id, question)).fetchall()
        return self._grade_of(sub_id, question, q["points"] if q else 0.0, row, [(r[0], r[1]) for r in items])

    def change(self, sub_id: str, question: str, version: int, grader: str, *, toggle: int | None = None,
               items: list[int] | None = None, comment: str | None = None, override: float | None | str = "keep",
               graded: bool | None = None) -> Grade:
        """One change to an answer's grade, made from the view at `version`. Stale if it moved on since."""
        with self._write():
            current = self.grade(sub_id, question)
            if current.version != version:
                raise Stale("this answer was graded meanwhile", current.to_dict(), current.grader)
            change: dict = {}
            if toggle is not None:
                change.update(self._toggle(sub_id, question, toggle))
            if items is not None and sorted(items) != sorted(current.applied):
                change.update(self._set_items(sub_id, question, items))
            if comment is not None and comment != current.comment:
                change["comment"] = comment
            if override != "keep" and override != current.override:
                change["score set by hand"] = override
            new_override = current.override if override == "keep" else override
            is_graded = bool(change) or current.graded if graded is None else graded
            if graded is not None and graded != current.graded:
                change["graded"] = graded
            self.db.execute("INSERT OR REPLACE INTO grades VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            (sub_id, question, current.comment if comment is None else comment, new_override,
                             int(is_graded), version + 1, grader, time.time()))
            self._log(sub_id, question, grader, change)
        return self.grade(sub_id, question)

    def _toggle(self, sub_id: str, question: str, item_id: int) -> dict:
        item = self.item(item_id)
        if item is None or item.question != question:
            raise KeyError(item_id)
        key = (sub_id, question, item_id)
        if self.db.execute("SELECT 1 FROM applied WHERE submission = ? AND question = ? AND item = ?", key).fetchone():
            self.db.execute("DELETE FROM applied WHERE submission = ? AND question = ? AND item = ?", key)
            return {"item removed": item.title}
        self.db.execute("INSERT INTO applied VALUES (?, ?, ?)", key)
        return {"item applied": item.title}

    def _set_items(self, sub_id: str, question: str, item_ids: list[int]) -> dict:
        for item_id in item_ids:
            item = self.item(item_id)
            if item is None or item.question != question:
                raise KeyError(item_id)
        self.db.execute("DELETE FROM applied WHERE submission = ? AND question = ?", (sub_id, question))
        self.db.executemany("INSERT INTO applied VALUES (?, ?, ?)", [(sub_id, question, i) for i in set(item_ids)])
        return {"items set": sorted(set(item_ids))}

    def grades(self, question: str | None = None) -> list[Grade]:
        """Every answer's grade (of one question, when given), in question then submission order: three queries,
        whatever the size of the class."""
        where, args = ("WHERE q.name = ? ", (question,)) if question else ("", ())
        pairs = self.db.execute("SELECT s.id, q.name, q.points FROM submissions s CROSS JOIN questions q " + where
                                + "ORDER BY q.position, s.position", args).fetchall()
        stored = {(r["submission"], r["question"]): r for r in self.db.execute(
            "SELECT * FROM grades" + (" WHERE question = ?" if question else ""), args)}
        applied: dict[tuple[str, str], list[tuple[int, float]]] = {}
        for r in self.db.execute("SELECT a.submission, a.question, a.item, i.points FROM applied a JOIN items i "
                                 "ON i.id = a.item" + (" WHERE a.question = ?" if question else "")
                                 + " ORDER BY i.position, i.id", args):
            applied.setdefault((r[0], r[1]), []).append((r[2], r[3]))
        return [self._grade_of(sub, q, points, stored.get((sub, q)), applied.get((sub, q), []))
                for sub, q, points in pairs]

    @staticmethod
    def _grade_of(sub_id: str, question: str, points: float, row, items: list[tuple[int, float]]) -> Grade:
        grade = Grade(sub_id, question) if row is None else Grade(
            sub_id, question, comment=row["comment"], override=row["override"], graded=bool(row["graded"]),
            version=row["version"], grader=row["grader"], at=row["at"])
        grade.applied = [item for item, _ in items]
        grade.score = clamp(grade.override if grade.override is not None else sum(p for _, p in items), points)
        return grade

    def graded_flags(self, question: str) -> dict[str, bool]:
        """Which answers of a question are graded, by submission."""
        return {r[0]: bool(r[1]) for r in self.db.execute(
            "SELECT submission, graded FROM grades WHERE question = ?", (question,))}

    def progress(self, question: str) -> tuple[int, int]:
        """(answers graded, answers) of a question."""
        total = self.db.execute("SELECT COUNT(*) FROM submissions").fetchone()[0]
        done = self.db.execute("SELECT COUNT(*) FROM grades WHERE question = ? AND graded = 1", (question,)).fetchone()[0]
        return done, total

    def history(self, sub_id: str, question: str) -> list[dict]:
        """Every change made to one answer's grade, oldest first: grader, time (seconds since the epoch), the change."""
        return [{**dict(r), "change": json.loads(r["change"])} for r in self.db.execute(
            "SELECT grader, at, change FROM history WHERE submission = ? AND question = ? ORDER BY id",
            (sub_id, question))]


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on any error: a write is whole or absent. Inside another one (a batch:
    `Store.batch`), it is part of that one."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db
        self.outer = db.in_transaction

    def __enter__(self):
        if not self.outer:
            self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, kind, value, tb):
        if not self.outer:
            self.db.execute("COMMIT" if kind is None else "ROLLBACK")
        return False
