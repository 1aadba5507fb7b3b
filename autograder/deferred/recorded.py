"""Results a deferred kind's command recorded in DIR/<submission>/, and how they go into a result.

A recorded file names the bytes it was decided from (`notebook_sha256`, and for the accuracy rubric the
checkpoint's); `decided_from` compares them with the files being graded now. `put_check` is the one merge:
`autograder grade`, `autograder rubric` and any other kind's command replace a check the same way.
"""
from __future__ import annotations

import json
from pathlib import Path

from autograder import files
from autograder.judge import CheckResult


def file_digest(path: Path) -> str | None:
    """sha256 of the file's bytes, read in blocks (a checkpoint may be gigabytes); None when it cannot be read."""
    digest = files.file_digest(Path(path))
    return None if digest.startswith("unreadable") else digest


def read_json(path: Path) -> dict | None:
    """The recorded file's data; None when it is missing, unreadable or not an object."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def decided_from(recorded: dict, notebook: Path, also: tuple[str, ...] = ()) -> bool:
    """Whether `notebook` has the bytes `recorded` was decided from, and so do the files it names under each key of
    `also` (`<key>` the path, `<key>_sha256` the digest). A record without a digest matches when the notebook it
    names (`notebook`) has the same bytes as `notebook`."""
    if "notebook_sha256" not in recorded:
        return file_digest(Path(str(recorded.get("notebook", "")))) == file_digest(notebook) is not None
    return (recorded["notebook_sha256"] == file_digest(notebook) is not None
            and all(recorded.get(f"{key}_sha256") == file_digest(Path(str(recorded.get(key, "")))) for key in also))


def check_result(data: object) -> CheckResult | None:
    """A CheckResult from its recorded dict; None when it is not one."""
    try:
        return CheckResult(**data) if isinstance(data, dict) else None
    except TypeError:
        return None


def put_check(checks: list[CheckResult], check: CheckResult) -> None:
    """Put `check` in place of the check of the same name (keeping that one's part, when it has one, and its
    visibility), or at the end when there is none."""
    for i, old in enumerate(checks):
        if old.name == check.name:
            check.part = old.part or check.part
            check.visibility = old.visibility
            checks[i] = check
            return
    checks.append(check)
