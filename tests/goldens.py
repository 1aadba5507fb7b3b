"""Golden grades: what a batch of submissions got, check by check, compared with a committed file.

A change that is meant to leave grading alone (a refactor, a speed-up) must leave these files as they
are. A change that is meant to alter grades refreshes them with `pytest --update-goldens`, and the diff
of the golden file shows every grade it altered.
"""
from __future__ import annotations

import json
from pathlib import Path

GOLDENS = Path(__file__).parent / "goldens"


def grades(results: dict, messages: bool = True) -> dict:
    """{"checks": the check names, "grades": {submission id: one entry per check}} less timings. An entry is
    "status score", followed by the message when there is one (and `messages`)."""
    names = list(dict.fromkeys(c.name for r in results.values() for c in r.checks))
    table = {}
    for sub_id in sorted(results):
        r = results[sub_id]
        by_name = {c.name: c for c in r.checks}
        row = []
        for name in names:
            c = by_name.get(name)
            entry = "absent" if c is None else f"{c.status} {c.score:g}"
            row.append([entry, c.message] if c is not None and messages and c.message else entry)
        if r.error:
            row.append("error: " + (r.error if messages else r.error.split(":")[0]))
        table[sub_id] = row
    return {"checks": names, "grades": table}


def compare_or_update(name: str, table: dict, update: bool) -> None:
    """Assert `table` equals goldens/<name>.json; with `update`, rewrite the file instead."""
    path = GOLDENS / f"{name}.json"
    text = json.dumps(table, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    if update or not path.exists():
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    golden = json.loads(path.read_text(encoding="utf-8"))
    assert golden["checks"] == table["checks"], f"the checks differ from tests/goldens/{name}.json"
    old, new = golden["grades"], table["grades"]
    changed = [sub for sub in sorted(set(old) | set(new)) if old.get(sub) != new.get(sub)]
    assert not changed, (f"grades differ from tests/goldens/{name}.json for {len(changed)} submission(s): "
                         f"{changed[:10]} (pytest --update-goldens refreshes the file if this is intended)")


def messages_showing(results: dict, text: str) -> list[str]:
    """"submission: check: message" for every check message of a graded corpus ({id: SubmissionResult}) that shows
    `text` (what no feedback may show: a tensor's repr, the worker's module name)."""
    return [f"{sub_id}: {c.name}: {c.message[:200]}" for sub_id, result in results.items() for c in result.checks
            if text in c.message]
