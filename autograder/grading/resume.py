"""Resuming a grading run: DIR/<id>/.graded.json says from which notebook, which release and which version of the
grader the result in DIR/<id>/ was graded (the notebook as the checksum of the bytes graded: grading/staging.py); a
later run with the same --out skips a submission whose fingerprints match (a changed notebook, a rebuilt release or
another version of this package is graded again: a grader's fix reaches every result), unless its result is not
final for a cause of the grader's (NOT GRADED checks: a system fault, a reference that failed here), which is graded
again. A result is resumed from its record (DIR/<id>/grading.json); the files derived from it (results.json,
feedback.md) that are missing or damaged are written again from that record (restore_derived), not graded again."""
from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path

from autograder.deferred import results_files
from autograder.files import file_digest, package_digest, resolved, write_atomic
from autograder.grading.outdir import OutDirUnusable
from autograder.release import Release
from autograder.reports.results import RECORD, SubmissionResult, derived_files
from autograder.submissions import ID_ROOM, MAX_ID_BYTES, NAME_MAX, cut_to_bytes, fold, numbered_id

MARKER = ".graded.json"  # DIR/<id>/.graded.json: what was graded (notebook and release fingerprints)
# what must match for a result to stand: the bytes and the release (not the path they were given by: the same
# folder given as an absolute path, moved, or an export downloaded again under another name)
SAME = ("notebook", "release", "grader")


def submission_fingerprint(path: Path, release_id: str, digest: str | None = None) -> dict:
    """What a result was graded from: the notebook's bytes (`digest`, else read now), the release, this package's
    code, the path as given."""
    return {"notebook": digest or file_digest(path), "release": release_id, "grader": package_digest(),
            "file": str(path), "origin": _origin(path)}


def _origin(path: Path) -> str:
    """The file's absolute path, links resolved: where the bytes graded came from."""
    return str(resolved(path))


def apart_from_earlier(out_dir: Path, paths: list[Path], ids: list[str],
                       named_by_file: list[bool]) -> tuple[list[str], set[int]]:
    """Ids taken from file names, each kept apart from a result DIR holds for another file with other bytes
    (sec2/alice.ipynb graded into a folder that holds sec1/alice.ipynb's result becomes alice-2): a file's name
    does not say which student it is, and an earlier student's result is never replaced by another's. A file graded
    into DIR before keeps the id it got then, whatever the order of this run's arguments (edited: graded again in
    place); the same bytes from elsewhere are resumed. Whatever names a submission, a folder of DIR that is no
    result (`--out .` in a course folder: release/, solutions/) is never written into: that student's result goes
    to release-2. Every id fits DIR's file system (`id_bytes`) and differs from the others in more than case. The
    search for a free name ends (`_free_name`). Returns the ids and the indexes of those moved aside (alice-2 for
    alice)."""
    earlier = _earlier_ids(out_dir) if any(named_by_file) else {}
    out: list[str | None] = [None] * len(ids)
    for i, (path, by_file) in enumerate(zip(paths, named_by_file)):
        before = earlier.get(_origin(path)) if by_file else None
        if before is not None and before not in out:
            out[i] = before
    longest = id_bytes(out_dir)
    fitted = [cut_to_bytes(sub_id, longest) for sub_id in ids]
    used = {fold(name) for name in out if name is not None}
    taken, moved = used | {fold(name) for name in fitted}, set()
    tries = 2 + _entries(out_dir)
    for i, (path, base, by_file) in enumerate(zip(paths, fitted, named_by_file)):
        if out[i] is not None:
            continue
        name, aside = _free_name(out_dir, base, path if by_file else None, used, taken, longest, tries)
        out[i] = name
        used.add(fold(name))
        if aside:
            moved.add(i)
    return [name for name in out if name is not None], moved


def id_bytes(out_dir: Path) -> int:
    """The longest id, in bytes, that DIR's file system takes with room to spare (submissions.ID_ROOM): 200 on
    most, less where file names are shorter (eCryptfs: 143)."""
    try:
        name_max = os.pathconf(out_dir, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = NAME_MAX
    return max(1, min(MAX_ID_BYTES, name_max - ID_ROOM))


def _entries(out_dir: Path) -> int:
    try:
        with os.scandir(out_dir) as entries:
            return sum(1 for _ in entries)
    except OSError:
        return 0


def _free_name(out_dir: Path, base: str, by_file: Path | None, used: set[str], taken: set[str], longest: int,
               tries: int) -> tuple[str, bool]:
    """The first of base, base-2, base-3, ... that no other submission of this run has (`used`, `taken`: folded as a
    case-insensitive file system folds names) and that DIR leaves free for it; whether it was moved aside for
    something DIR holds. Each name DIR refuses is one of its entries: after `tries` (DIR's entries and two) none
    will do, because DIR cannot be read or takes no such name, and the run stops with OutDirUnusable saying why."""
    name, n, aside = base, 1, False
    for _ in range(tries):
        if fold(name) not in used:
            if not ((by_file and _someone_else(out_dir / name, by_file)) or not_a_result_folder(out_dir / name)):
                return name, aside
            aside = True
        n += 1
        while fold(numbered_id(base, n, longest)) in taken:
            n += 1
        name = numbered_id(base, n, longest)
        taken.add(fold(name))
    raise OutDirUnusable(f"no folder for the result of {base} can be made in {out_dir} (tried {tries} names): "
                         f"{_why_unusable(out_dir / name)}")


def _why_unusable(folder: Path) -> str:
    try:
        os.lstat(folder)
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            return exc.strerror or str(exc)
    return "each name is taken by files that are no result"


def _earlier_ids(out_dir: Path) -> dict[str, str]:
    """{the absolute path of a file graded into DIR: the id of its result there}."""
    found: dict[str, str] = {}
    try:
        folders = sorted(p for p in out_dir.iterdir() if p.is_dir())
    except OSError:
        return found
    for folder in folders:
        origin = _marker(folder).get("origin")
        if isinstance(origin, str):
            found.setdefault(origin, folder.name)
    return found


def result_files() -> tuple[str, ...]:
    """Any of them makes a result's folder; a deferred kind's file too (rubric.json, hand.json: its command recorded
    it first, `grade` merges it in)."""
    return (MARKER, RECORD, "results.json", *results_files())


def not_a_result_folder(folder: Path) -> bool:
    """Whether DIR/<id> is something other than a result's folder: a file, or a folder with files and no result."""
    try:
        os.lstat(folder)
    except FileNotFoundError:
        return False
    except OSError:  # a name too long for DIR, DIR unreadable: nothing can be written there under this name
        return True
    try:
        if not folder.is_dir():
            return folder.exists() or folder.is_symlink()
        return any(folder.iterdir()) and not any((folder / name).exists() for name in result_files())
    except OSError:
        return True


def _someone_else(folder: Path, path: Path) -> bool:
    marker = _marker(folder)
    if not marker.get("origin") or marker["origin"] == _origin(path):
        return False  # no result, one from before origins were recorded, or the same file
    return marker.get("notebook") != file_digest(path)


def _marker(folder: Path) -> dict:
    """The folder's .graded.json ({} when there is none, or it cannot be read)."""
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return marker if isinstance(marker, dict) else {}


def release_fingerprint(release: Release) -> str:
    """SHA-256 (hex) of the release's manifest (of its configuration where it has none): a result graded by another
    release is graded again."""
    manifest = release.dir / "manifest.json"
    data = manifest.read_bytes() if manifest.is_file() else json.dumps(release.config.to_dict()).encode()
    return hashlib.sha256(data).hexdigest()


def graded_by_another_version(out_dir: Path, sub_id: str, submission_print: dict) -> bool:
    """Whether the result in DIR for this id was graded from the same notebook and release by other code."""
    marker = _marker(out_dir / sub_id)
    return bool(marker) and all(marker.get(k) == submission_print[k] for k in ("notebook", "release")) \
        and marker.get("grader") != submission_print["grader"]


def previous(out_dir: Path, sub_id: str, submission_print: dict) -> SubmissionResult | None:
    """The result already in DIR for this id, if it was graded from the same notebook and release (its record,
    grading.json: the files derived from it are restore_derived's)."""
    folder = out_dir / sub_id
    marker = _marker(folder)
    if not marker or any(marker.get(key) != submission_print[key] for key in SAME):
        return None
    try:
        result = SubmissionResult.from_dict(json.loads((folder / RECORD).read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # no record to resume from: graded again
    return None if result.ungraded else result  # not graded for the grader's cause: try again


def restore_derived(out_dir: Path, result: SubmissionResult, title: str) -> list[str]:
    """A resumed result's folder made whole again from its record: each derived file (results.json, feedback.md)
    that is missing, cut short or not what the record gives (emptied by hand, another's copied over it) is written
    again; the names of those written. The record holds everything they show (`autograder rubric` merges into it
    too), so none of them needs the notebook graded again."""
    folder, written = out_dir / result.submission, []
    for name, text in derived_files(result, title).items():
        try:
            if (folder / name).read_text(encoding="utf-8") == text:
                continue
        except (OSError, ValueError):  # missing, unreadable, not UTF-8
            pass
        write_atomic(folder / name, text)
        written.append(name)
    return written
