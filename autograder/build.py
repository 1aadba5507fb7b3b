"""`autograder build solutions/<name>`: source notebook in; student notebook, answer key and hidden tests out.

Outputs (byte-for-byte deterministic for a given source):
    assignments/<name>/<notebook>   student notebook: solutions stubbed, hidden tests removed, no outputs
    assignments/<name>/<files>      extra files named in assignment.toml
    release/<name>/answer_key.ipynb solutions and public tests, markers removed
    release/<name>/reference.json   the reference's extracted definitions (what the reference worker runs)
    release/<name>/reference.py     the same as a readable module
    release/<name>/tests/*.py       hidden test files
    release/<name>/files/<files>    the extra files again: workers see them, read-only, in their working folder
    release/<name>/manifest.json    config, checks (with notebook test cells' code), source hash
    release/<name>/recording.*      the reference as recorded in this environment (autograder/recording.py)
"""
from __future__ import annotations

import copy
import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from autograder.config import AssignmentConfig, load_config
from autograder.notebook.extract import extract, module_source
from autograder.notebook.markers import (
    HIDDEN, MarkerError, check_cell, is_test_cell, nbgrader_meta, notebook_language, public_lines, secret_lines,
    solution_source, student_source,
)
from autograder.reports.results import write_atomic
from autograder.testing import CheckSpec, hidden_test_files, load_test_file

MANIFEST = "manifest.json"
BUILD_FORMAT = 4  # bump when the release layout or the extraction changes: old releases are rebuilt


class BuildError(ValueError):
    pass


@dataclass
class Paths:
    source: Path  # solutions/<name>
    assignment: Path  # assignments/<name>
    release: Path  # release/<name>

    @classmethod
    def for_source(cls, source: Path, assignments_root: Path | None = None, release_root: Path | None = None):
        source = source.resolve()
        root = source.parent.parent
        return cls(source, (assignments_root or root / "assignments") / source.name,
                   (release_root or root / "release") / source.name)


@dataclass
class Transformed:
    student: dict  # nbformat NotebookNodes (nbformat is imported where notebooks are read and written)
    answer_key: dict
    cell_checks: list[CheckSpec]
    secrets: list[str]  # lines inside solution / hidden regions
    public: list[str]  # every source line outside solution and hidden regions (computed from the source)


def source_hash(source: Path, config: AssignmentConfig) -> str:
    h = hashlib.sha256()
    files = [source / "assignment.toml", source / config.notebook, *sorted((source / "tests").glob("*.py")),
             *(source / f for f in config.files)]
    for f in files:
        if f.is_file():
            h.update(f.relative_to(source).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def _clean(cell) -> None:
    if cell.get("cell_type") == "code":
        cell["outputs"] = []
        cell["execution_count"] = None


def transform(nb, where: str) -> Transformed:
    """Check every marker, then derive the student notebook, the answer key and the test-cell checks."""
    student, key = copy.deepcopy(nb), copy.deepcopy(nb)
    checks, secrets, public, seen_ids = [], [], [], {}
    language = notebook_language(nb)  # a whole solution cell becomes nbgrader's stub for it
    for index, cell in enumerate(nb.cells):
        loc = f"{where}: cell {index + 1}"
        regions = check_cell(cell, loc)
        meta = nbgrader_meta(cell)
        grade_id = meta.get("grade_id")
        if meta.get("grade") or meta.get("solution"):
            if not grade_id:
                raise MarkerError(f"{loc}: nbgrader cell without a grade_id")
            if grade_id in seen_ids:
                raise MarkerError(f"{loc}: grade_id {grade_id!r} is also used by cell {seen_ids[grade_id]}")
            seen_ids[grade_id] = index + 1
        secrets += secret_lines(cell, regions)
        public += public_lines(cell, regions)
        student.cells[index]["source"] = student_source(cell, regions, language, loc)
        key.cells[index]["source"] = solution_source(cell, regions, keep_hidden=False)
        _clean(student.cells[index])
        _clean(key.cells[index])
        if cell.get("cell_type") == "code" and is_test_cell(cell):
            points = meta.get("points")
            if not isinstance(points, (int, float)) or points < 0:
                raise MarkerError(f"{loc}: test cell {grade_id!r} needs nbgrader 'points' >= 0")
            depends_on = meta.get("depends_on", [])
            if not isinstance(depends_on, list) or not all(isinstance(n, str) and n.isidentifier() for n in depends_on):
                raise MarkerError(f"{loc}: nbgrader 'depends_on' must be a list of names the notebook defines")
            checks.append(CheckSpec(
                name=grade_id, points=float(points), part=str(meta.get("part", "")),
                visibility=str(meta.get("visibility", "visible")),
                source=solution_source(cell, regions, keep_hidden=True), public=True, depends_on=tuple(depends_on)))
            if any(r.kind == HIDDEN for r in regions):
                checks[-1].public = False
    return Transformed(student, key, checks, secrets, public)


def _write_notebook(path: Path, nb) -> None:
    import nbformat  # only here and below: its import costs a second that grading runs do not pay

    write_atomic(path, nbformat.writes(nb, version=4) + "\n")


def _read_source_notebook(path: Path):
    import nbformat

    try:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        return nb
    except FileNotFoundError:
        raise BuildError(f"{path}: the notebook named in assignment.toml does not exist") from None
    except Exception as exc:  # nbformat's validation and JSON errors
        raise BuildError(f"{path}: not a valid notebook: {exc}") from None


def build(source: Path, assignments_root: Path | None = None, release_root: Path | None = None,
          record: bool = True, log=None) -> Paths:
    """`record`: also record the reference (autograder/recording.py), so that grading runs in this environment
    need no reference worker; `log(line)` hears how that went."""
    paths = Paths.for_source(Path(source), assignments_root, release_root)
    config = load_config(paths.source)
    nb_path = paths.source / config.notebook
    out = transform(_read_source_notebook(nb_path), str(nb_path))

    file_checks, helpers = [], []
    for test_file in hidden_test_files(paths.source / "tests"):
        checks, file_helpers = load_test_file(test_file)
        for c in checks:
            c.part = c.part or test_file.stem
        file_checks += [(test_file.name, c) for c in checks]
        helpers += file_helpers
    checks = [("", c) for c in out.cell_checks] + file_checks
    names = [c.name for _, c in checks]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise BuildError(f"{paths.source}: check names must be unique; repeated: {dupes}")
    unknown_gpu = set(config.gpu_checks) - set(names)
    if unknown_gpu:
        raise BuildError(f"{paths.source / 'assignment.toml'}: [gpu] checks names unknown checks {sorted(unknown_gpu)}")

    if config.student:  # in-notebook checks and the install cell (autograder.student); tagged skip-grading
        from autograder.student import add_student_cells
        add_student_cells(out.student, config.student, config.title)
        add_student_cells(out.answer_key, config.student, config.title, public_from=out.student)
    from autograder.release import names_read

    test_sources = [p.read_text(encoding="utf-8") for p in sorted((paths.source / "tests").glob("*.py"))]
    reference = extract(out.answer_key, names_read([c.source for c in out.cell_checks], test_sources))
    _write_notebook(paths.assignment / config.notebook, out.student)
    for name in config.files:
        _copy(paths.source / name, paths.assignment / name)
    if paths.release.exists():
        shutil.rmtree(paths.release)
    paths.release.mkdir(parents=True)
    paths.release.chmod(0o700)  # private to the grader's user
    _write_notebook(paths.release / "answer_key.ipynb", out.answer_key)
    write_atomic(paths.release / "reference.py", module_source(reference))
    write_atomic(paths.release / "reference.json",
                 json.dumps([u.to_wire() for u in reference.units], indent=1, sort_keys=True))
    for name in config.files:
        _copy(paths.source / name, paths.release / "files" / name)
    for test_file in sorted((paths.source / "tests").glob("*.py")):  # helper modules (_*.py) too
        _copy(test_file, paths.release / "tests" / test_file.name)
    manifest = {
        "format": BUILD_FORMAT, "config": config.to_dict(), "source_hash": source_hash(paths.source, config),
        "helpers": helpers,
        "checks": [{**c.describe(), "file": f, "source": c.source, "timeout": c.timeout} for f, c in checks],
    }
    write_atomic(paths.release / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))
    if record:
        from autograder.recording import record_release

        _, line = record_release(paths.release)
        if log is not None:
            log(line)
    return paths


def _copy(src: Path, dst: Path) -> None:
    if not src.is_file():
        raise BuildError(f"{src}: listed in assignment.toml but missing")
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
