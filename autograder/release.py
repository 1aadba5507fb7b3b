"""A built release bundle (release/<name>/) loaded for grading: checks, reference, limits."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from autograder.errors import UserError
from autograder.config import AssignmentConfig
from autograder.recording import Recording
from autograder.notebook.extract import Extraction, Unit
from autograder.checkspecs import load_test_file, manual_spec
from autograder.testing import CheckSpec


MANIFEST = "manifest.json"
BUILD_FORMAT = 6  # bump when the release layout or the extraction changes: old releases are rebuilt


class ReleaseError(UserError, ValueError):
    """A built release that cannot be used (missing or unreadable manifest): build the assignment again."""
    pass


def source_hash(source: Path, config: AssignmentConfig) -> str:
    """SHA-256 (hex) of an assignment's sources: assignment.toml, the notebook, tests/*.py and its shipped files,
    names and contents; what tells a build out of date."""
    h = hashlib.sha256()
    files = [source / "assignment.toml", source / config.notebook, *sorted((source / "tests").glob("*.py")),
             *(source / f for f in config.files)]
    for f in files:
        if f.is_file():
            h.update(f.relative_to(source).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


@dataclass
class Release:
    """A built assignment as grading loads it: its folder, configuration, checks and the reference's extracted
    definitions."""
    dir: Path
    config: AssignmentConfig
    checks: list[CheckSpec]
    reference: Extraction
    helpers: list[str]

    manifest_digest: str = ""  # sha256 of manifest.json, read with it (the release may be deleted once loaded)
    # digests of the student notebook's code cells as handed out (notebook.load.code_digests): what tells a
    # submitted notebook with no work in it from one with the student's (submissions.pick_notebook)
    student_code: frozenset[str] = frozenset()
    # {grade_id: source} of the read-only code cells as handed out (notebook.markers.locked_code); None: a release
    # built before the manifest held them (the answer key says)
    locked: dict[str, str] | None = None
    # {name: heading above its cell} of the notebook's hand-graded checks (notebook.markers.cite_own_cell)
    hand_graded: dict[str, str] = field(default_factory=dict)
    # {name: answer_digest of its cell as handed out} of the notebook's hand-graded answer cells (tasks have none): a
    # cell submitted unchanged is not answered, 0, as nbgrader grades it
    handed_out: dict[str, str] = field(default_factory=dict)
    _recording: object = None

    @property
    def max_score(self) -> float:
        """The points of all its checks together."""
        return sum(c.points for c in self.checks)

    def recording(self):
        """The recording of the reference next to the release (recording.py), read once and kept, or None."""
        if self._recording is None:
            self._recording = Recording.read(self.dir) or False
        return self._recording or None

    def names_read_from_submissions(self) -> set[str]:
        """Names the checks read from a submission (see `names_checks_read`)."""
        return names_checks_read([c.source for c in self.checks if c.fn is None],
                          [p.read_text(encoding="utf-8") for p in sorted((self.dir / "tests").glob("*.py"))])


def names_checks_read(cell_sources: list[str], test_sources: list[str]) -> set[str]:
    """Names checks read from a submission: every name a notebook test cell reads before binding it itself
    (a test cell's own `batch = ...` does not make the notebook's `batch` a dependency), and every `sub.NAME`
    of the hidden test files. Extraction runs the assignments that bind them (notebook/extract.py)."""
    import ast

    from .notebook.extract import reads_from_outside

    def walk(source: str):
        try:
            return ast.walk(ast.parse(source))
        except SyntaxError:
            return []

    names = {name for source in cell_sources for name in reads_from_outside(source)}
    names |= {node.attr for source in test_sources for node in walk(source)
              if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "sub"}
    return names


def load_release(release_dir: Path) -> Release:
    """The release built in `release_dir`; ReleaseError (saying to build again) where it has no manifest or one that
    cannot be read."""
    manifest_path = release_dir / MANIFEST
    if not manifest_path.is_file():
        raise ReleaseError(f"{release_dir}: no {MANIFEST}; build the assignment first (autograder build)")
    manifest_bytes = manifest_path.read_bytes()
    try:
        return _release(release_dir, manifest_bytes)
    except ReleaseError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # (json's errors are ValueErrors)
        what = f"{type(exc).__name__}: {exc}" if not isinstance(exc, KeyError) else f"no {exc} in it"
        raise ReleaseError(f"{release_dir}: its {MANIFEST} cannot be read ({what}); build the assignment again "
                           "(autograder build)") from None


def _release(release_dir: Path, manifest_bytes: bytes) -> Release:
    manifest = json.loads(manifest_bytes)
    if manifest.get("format") != BUILD_FORMAT:
        raise ReleaseError(f"{release_dir}: built in release format {manifest.get('format')!r}, this version reads "
                           f"format {BUILD_FORMAT}; build the assignment again with this version (autograder build)")
    config = AssignmentConfig.from_dict(manifest["config"])
    file_checks: dict[tuple[str, str], CheckSpec] = {}
    for file in sorted({c["file"] for c in manifest["checks"] if c["file"]}):
        for spec in load_test_file(release_dir / "tests" / file)[0]:
            file_checks[(file, spec.name)] = spec
    checks = []
    for c in manifest["checks"]:
        if c["file"]:
            spec = file_checks.get((c["file"], c["name"]))
            if spec is None:
                raise ReleaseError(f"{release_dir}: check {c['name']!r} is gone from tests/{c['file']}; rebuild")
            spec.part = c["part"]
        elif c.get("manual"):  # a cell of the notebook graded by hand
            spec = manual_spec(c["name"], c["points"], c["part"], c["manual"], c["visibility"])
        else:
            spec = CheckSpec(c["name"], c["points"], c["part"], c["visibility"], None, c["source"], c["public"],
                             depends_on=tuple(c.get("depends_on", ())), passed_message=c.get("passed_message", ""))
        spec.gpu = c["gpu"]
        spec.timeout = c.get("timeout")
        checks.append(spec)
    units = [Unit(**u) for u in json.loads((release_dir / "reference.json").read_text(encoding="utf-8"))]
    return Release(release_dir, config, checks, Extraction(units, []), manifest.get("helpers", []),
                   hashlib.sha256(manifest_bytes).hexdigest(), frozenset(manifest.get("student_code", ())),
                   _locked(manifest.get("locked")),
                   {c["name"]: str(c.get("heading", "")) for c in manifest["checks"] if not c["file"] and c.get("manual")},
                   {c["name"]: str(c["handed_out"]) for c in manifest["checks"]
                    if c.get("handed_out")})


def _locked(value) -> dict[str, str] | None:
    if value is None:
        return None
    if not (isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())):
        raise ReleaseError("its read-only cells are not a table of grade ids and sources; build the assignment again")
    return dict(value)
