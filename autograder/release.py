"""A built release bundle (release/<name>/) loaded for grading: checks, reference, limits."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from autograder.build import BUILD_FORMAT, MANIFEST, build, source_hash
from autograder.config import AssignmentConfig, load_config
from autograder.notebook.extract import Extraction, Unit
from autograder.testing import CheckSpec, load_test_file


class ReleaseError(ValueError):
    pass


@dataclass
class Release:
    dir: Path
    config: AssignmentConfig
    checks: list[CheckSpec]
    reference: Extraction
    helpers: list[str]

    manifest_digest: str = ""  # sha256 of manifest.json, read with it (the release may be deleted once loaded)
    _recording: object = None

    @property
    def max_score(self) -> float:
        return sum(c.points for c in self.checks)

    def recording(self):
        """The recording of the reference next to the release (recording.py), read once and kept, or None."""
        if self._recording is None:
            from autograder.recording import Recording

            self._recording = Recording.read(self.dir) or False
        return self._recording or None

    def names_read_from_submissions(self) -> set[str]:
        """Names the checks read from a submission (see `names_read`)."""
        return names_read([c.source for c in self.checks if c.fn is None],
                          [p.read_text(encoding="utf-8") for p in sorted((self.dir / "tests").glob("*.py"))])


def names_read(cell_sources: list[str], test_sources: list[str]) -> set[str]:
    """Names checks read from a submission: every name a notebook test cell uses, and every `sub.NAME` of the
    hidden test files. Extraction runs the assignments that bind them (notebook/extract.py)."""
    import ast

    def walk(source: str):
        try:
            return ast.walk(ast.parse(source))
        except SyntaxError:
            return []

    names = {node.id for source in cell_sources for node in walk(source)
             if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    names |= {node.attr for source in test_sources for node in walk(source)
              if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "sub"}
    return names


def load_release(release_dir: Path) -> Release:
    manifest_path = release_dir / MANIFEST
    if not manifest_path.is_file():
        raise ReleaseError(f"{release_dir}: no {MANIFEST}; build the assignment first (autograder build)")
    manifest_bytes = manifest_path.read_bytes()
    manifest = json.loads(manifest_bytes)
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
        else:
            spec = CheckSpec(c["name"], c["points"], c["part"], c["visibility"], None, c["source"], c["public"],
                             depends_on=tuple(c.get("depends_on", ())))
        spec.gpu = c["gpu"]
        spec.timeout = c.get("timeout")
        checks.append(spec)
    units = [Unit(**u) for u in json.loads((release_dir / "reference.json").read_text(encoding="utf-8"))]
    return Release(release_dir, config, checks, Extraction(units, []), manifest.get("helpers", []),
                   hashlib.sha256(manifest_bytes).hexdigest())


def resolve_release(name_or_path: str, root: Path | None = None, rebuild: bool = True) -> Release:
    """`name` -> release/<name> (rebuilt from solutions/<name> when missing or out of date), or a path to
    a release folder or a solutions folder."""
    root = root or Path.cwd()
    p = Path(name_or_path)
    if (p / MANIFEST).is_file() and not (p / "assignment.toml").is_file():
        return load_release(p)
    source = p if (p / "assignment.toml").is_file() else root / "solutions" / name_or_path
    release_dir = source.resolve().parent.parent / "release" / source.name
    if source.is_dir() and rebuild:
        manifest = release_dir / MANIFEST
        built = json.loads(manifest.read_text()) if manifest.is_file() else {}
        current = built.get("format") == BUILD_FORMAT and \
            built.get("source_hash") == source_hash(source, load_config(source))
        if not current:
            build(source)
        return load_release(release_dir)
    if (root / "release" / name_or_path / MANIFEST).is_file():
        return load_release(root / "release" / name_or_path)
    raise ReleaseError(f"no assignment {name_or_path!r}: looked for solutions/{name_or_path}/ and "
                       f"release/{name_or_path}/ under {root}")
