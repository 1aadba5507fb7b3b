"""`autograder build solutions/<name>`: source notebook in; student notebook, answer key and hidden tests out.

Outputs (byte-for-byte deterministic for a given source):
    assignments/<name>/<notebook>   student notebook: solutions stubbed, hidden tests removed, no outputs
    assignments/<name>/<files>      extra files named in assignment.toml
    release/<name>/answer_key.ipynb solutions and public tests, markers removed
    release/<name>/reference.json   the reference's extracted definitions (what the reference worker runs)
    release/<name>/reference.py     the same as a readable module
    release/<name>/tests/*.py       hidden test files
    release/<name>/files/<files>    the extra files again: workers see them, read-only, in their working folder
    release/<name>/manifest.json    config, checks (with notebook test cells' code), source hash, digests of
                                    the student notebook's code cells (to tell an untouched submission)
    release/<name>/recording.*      the reference as recorded in this environment (autograder/recording.py)
"""
from __future__ import annotations

import ast
import copy
import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from autograder.config import load_config
from autograder.kernel import GradedCell, bound_at_top, cell_caveats, defined_at_top
from autograder.notebook.extract import extract, module_source
from autograder.notebook.load import code_digests
from autograder.notebook.markers import (
    HIDDEN, MarkerError, check_cell, hand_graded, is_test_cell, locked_code, nbgrader_meta, notebook_language, public_lines, secret_lines,
    solution_source, student_source,
)
from autograder.notebook.seedvar import cell_seeding, for_grading, with_value
from autograder.files import write_atomic
from autograder.release import BUILD_FORMAT, MANIFEST, load_release, Release, ReleaseError, names_read, source_hash
from autograder.testing import CheckSpec, hand_graded_check, hidden_test_files, load_test_file, test_cell_check

class BuildError(ValueError):
    pass


@dataclass
class Paths:
    source: Path  # solutions/<name>
    assignment: Path  # assignments/<name>
    release: Path  # release/<name>
    notes: list[str] = field(default_factory=list)  # said by the build: test cells whose meaning differs
    # what the grading environment cannot do with the answer key (set once the reference is recorded:
    # grading.record.reference_load_problems); verify fails on them
    problems: list[str] = field(default_factory=list)

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
    notes: list[str] = field(default_factory=list)  # what of the test cells does not hold in the grader (kernel.py)


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
            spec = test_cell_check(cell, index + 1, where)
            spec.source = solution_source(cell, regions, keep_hidden=True)  # the judge runs the hidden part too
            spec.public = not any(r.kind == HIDDEN for r in regions)
            checks.append(spec)
        elif hand_graded(cell):  # its points stay in every total, pending, as nbgrader keeps them for grading by hand
            checks.append(_hand_graded(cell, index + 1, where))
    return Transformed(student, key, checks, secrets, public, caveats(nb, where))


def _hand_graded(cell, number: int, where: str) -> CheckSpec:
    """The manual check of a cell graded by hand. Its points must be written out, as a test cell's must: a
    written answer whose points were forgotten would otherwise be worth 0 without a word."""
    meta, kind = nbgrader_meta(cell), str(hand_graded(cell))
    if meta.get("points") is None:
        raise MarkerError(f"{where}: cell {number}: {kind} {meta.get('grade_id')!r} needs nbgrader 'points' >= 0")
    return hand_graded_check(cell, number, kind, where)


def _numbered_in(student, spec: CheckSpec) -> CheckSpec:
    """A hand-graded check names its cell by the number it has in the student notebook, which has cells of its own
    added (install, setup, each part's check cell): the cell a student finds under that number."""
    if getattr(spec.fn, "_ag_manual", None) is None:
        return spec
    for number, cell in enumerate(student.cells, start=1):
        if hand_graded(cell) and nbgrader_meta(cell).get("grade_id") == spec.name:
            return hand_graded_check(cell, number, str(hand_graded(cell)))
    return spec


def caveats(nb, where: str) -> list[str]:
    """`where: cell N, line L: ...` for each test cell of the source notebook whose meaning in the grader differs."""
    cells, names, definitions = [], set(), set()
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code":
            continue
        if is_test_cell(cell):
            meta = nbgrader_meta(cell)
            cells.append(GradedCell(index + 1, str(meta.get("grade_id")), str(meta.get("part", "")), cell["source"]))
        else:
            names |= bound_at_top(cell["source"])
            definitions |= defined_at_top(cell["source"])
    return [f"{where}: cell {number}, line {line}: test cell {what}"
            for number, line, what in cell_caveats(cells, names, definitions)]


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
    except Exception as exc:  # noqa: BLE001 - nbformat's validation and JSON errors have no common base
        raise BuildError(f"{path}: not a valid notebook: {exc}") from None


def build(source: Path, assignments_root: Path | None = None, release_root: Path | None = None) -> Paths:
    """Write the student notebook and the release bundle of `source` (see the module's docstring). Recording
    the reference, which runs it, is the grading layer's (autograder.grading.build_and_record)."""
    paths = Paths.for_source(Path(source), assignments_root, release_root)
    config = load_config(paths.source)
    nb_path = paths.source / config.notebook
    out = transform(_read_source_notebook(nb_path), str(nb_path))
    if "student" in config.seed:  # the seed variable as students get it (otter's student_value)
        out.student = with_value(out.student, config.seed["variable"], config.seed["student"])
    if config.student:  # in-notebook checks and the install cell (autograder.student); tagged skip-grading
        from autograder.student import add_student_cells
        add_student_cells(out.student, config.student, config.title)
        add_student_cells(out.answer_key, config.student, config.title, public_from=out.student)
        out.cell_checks = [_numbered_in(out.student, spec) for spec in out.cell_checks]

    file_checks, helpers = [], []
    for test_file in hidden_test_files(paths.source / "tests"):
        checks, file_helpers = _load_test_file(test_file)
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

    test_sources = [p.read_text(encoding="utf-8") for p in sorted((paths.source / "tests").glob("*.py"))]
    used = names_read([c.source for c in out.cell_checks], test_sources)
    reference = extract(for_grading(out.answer_key, config.seed), used, each_cell=cell_seeding(config.seed))
    if paths.assignment.is_dir():  # generated whole: a file dropped from `files` leaves it too
        shutil.rmtree(paths.assignment)
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
        "helpers": helpers, "student_code": sorted(set(code_digests(out.student))),
        "locked": locked_code(out.answer_key),  # read-only cells as handed out: restored in every submission
        "checks": [{**c.describe(), "file": f, "source": c.source, "timeout": c.timeout, **_manual(f, c)}
                   for f, c in checks],
    }
    write_atomic(paths.release / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))
    where = f"{paths.source.name}/{config.notebook}"
    paths.notes = out.notes + loops_not_run(reference, where, used) + plain_class_dependencies(checks, reference, where)
    return paths


def plain_class_dependencies(checks, reference, where: str) -> list[str]:
    """A check's depends_on naming a class of the notebook that is not a torch nn.Module: the grader stands in for
    functions and nn.Module classes only (sandbox/standins.py), so such a check runs the student's own class."""
    bases: dict[str, list[str]] = {}
    for unit in reference.units:
        try:
            body = ast.parse(unit.source).body
        except SyntaxError:
            continue
        bases.update({n.name: [ast.unparse(b) for b in n.bases] for n in body if isinstance(n, ast.ClassDef)})

    def is_module(name: str, seen: frozenset = frozenset()) -> bool:
        return any(b.rpartition(".")[2] == "Module" or (b in bases and b not in seen and is_module(b, seen | {name}))
                   for b in bases.get(name, []))

    users: dict[str, list[str]] = {}
    for _, spec in checks:
        for name in [n for n in spec.depends_on if n in bases and not is_module(n)]:
            users.setdefault(name, []).append(spec.name)
    return [f"{where}: depends_on names `{name}` ({len(names)} check(s): {', '.join(map(repr, names[:3]))}"
            f"{', ...' if len(names) > 3 else ''}), a class that is not an nn.Module: the grader stands in for "
            f"functions and nn.Module classes only, so these checks run the student's own `{name}` (where that is "
            "broken, they fail with it)" for name, names in users.items()]


def loops_not_run(reference, where: str, used) -> list[str]:
    """A loop or `with` block the grader does not run that changes what the checks read (`a = np.zeros(...)` kept,
    the loop filling `a` not): the checks would see the value from before the loop, and the reference fail them."""
    kept = {name for unit in reference.units for name in unit.names} & set(used)
    notes = []
    for skipped in reference.not_run:
        changed = sorted(set(skipped.changes) & kept)
        if changed:
            names = ", ".join(f"`{n}`" for n in changed)
            notes.append(f"{where}: cell {skipped.cell}, line {skipped.line}: {skipped.reason}, but it changes {names}, "
                         f"which the grader keeps: the checks see {names} as before it; build {names} in one "
                         "statement (a comprehension, np.fromfunction) or in a function the notebook calls")
    return notes


def _load_test_file(path: Path) -> tuple[list[CheckSpec], list[str]]:
    """`load_test_file`, with any error while importing or collecting the file (a SyntaxError, `@check` without
    points=, a failing import) raised as one BuildError naming the file and line, never a traceback."""
    try:
        return load_test_file(path)
    except Exception as exc:  # noqa: BLE001 - whatever the instructor's code raises is the instructor's to fix
        raise BuildError(test_file_error(path, exc)) from None


def test_file_error(path: Path, exc: BaseException) -> str:
    """`tests/x.py, line L: Type: message` for an error raised while loading the test file `path`: the line is
    the innermost one of the error in a file of the tests folder (the test file or a helper module it imports);
    the path is relative to the working folder when it is inside it."""
    folder = path.parent.resolve()
    where, line = path, None
    if isinstance(exc, SyntaxError) and exc.filename and Path(exc.filename).resolve().parent == folder:
        where, line = Path(exc.filename), exc.lineno
    else:
        import traceback

        for frame in reversed(traceback.extract_tb(exc.__traceback__)):
            if Path(frame.filename).resolve().parent == folder:
                where, line = Path(frame.filename), frame.lineno
                break
    return f"{_shown(where)}{f', line {line}' if line else ''}: {_error_text(exc)}"


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:  # outside the working folder
        return str(path)


def _error_text(exc: BaseException) -> str:
    """The error in words. `@check(...)` without points= says what is missing rather than Python's wording."""
    if isinstance(exc, TypeError) and "check() missing" in str(exc) and "'points'" in str(exc):
        return "check() needs points= (the points the check is worth)"
    if isinstance(exc, SyntaxError):
        return f"{type(exc).__name__}: {exc.msg}"
    return f"{type(exc).__name__}: {exc}"


def _manual(file: str, spec: CheckSpec) -> dict:
    """A notebook's hand-graded check has no code to load: the manifest says what is graded by hand."""
    what = getattr(spec.fn, "_ag_manual", None)
    return {"manual": what} if not file and what else {}


def _copy(src: Path, dst: Path) -> None:
    if not src.is_file():
        raise BuildError(f"{src}: listed in assignment.toml but missing")
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)


def resolve_release(name_or_path: str, root: Path | None = None, rebuild: bool = True,
                    after_build=None) -> Release:
    """`name` -> release/<name> (rebuilt from solutions/<name> when missing or out of date), or a path to
    a release folder or a solutions folder. `after_build(release_dir)` runs after a rebuild (the grading
    layer records the reference there)."""
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
        if not current:  # said: a source edited since the last build changes what is graded
            why = "is out of date with" if built else "is not built yet from"
            print(f"{release_dir} {why} {source}: building it", file=sys.stderr, flush=True)
            build(source)
            if after_build is not None:
                after_build(release_dir)
        return load_release(release_dir)
    if (root / "release" / name_or_path / MANIFEST).is_file():
        return load_release(root / "release" / name_or_path)
    raise ReleaseError(f"no assignment {name_or_path!r}: looked for solutions/{name_or_path}/ and "
                       f"release/{name_or_path}/ under {root}")
