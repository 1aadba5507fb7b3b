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

from autograder.errors import UserError
from autograder.config import load_config
from autograder.cell_names import GradedCell, bound_at_top, cell_caveats, defined_at_top
from autograder.notebook.extract import extract, module_source
from autograder.notebook.load import code_digests
from autograder.notebook.markers import (
    MarkerError, answer_digest, cell_source, check_cell, hand_graded, heading_above, is_locked_code, is_test_cell, locked_code, nbgrader_meta,
    notebook_language, public_lines, secret_lines, solution_source, student_source,
)
from autograder.notebook.seedvar import cell_seeding, for_grading, record_cells, with_value
from autograder.files import write_atomic
from autograder.release import BUILD_FORMAT, MANIFEST, load_release, Release, ReleaseError, names_checks_read, source_hash
from autograder.checkspecs import cell_check, hand_graded_check, hidden_test_files, load_test_file
from autograder.testing import CheckSpec
from autograder.deferred import graded_by_hand

class BuildError(UserError, ValueError):
    """A source assignment the build refuses (markers, metadata, configuration): the message says what to fix."""
    pass


@dataclass
class Paths:
    """The folders of one assignment's build: its source, the student assignment and the release, and what the build
    noted."""
    source: Path  # solutions/<name>
    assignment: Path  # assignments/<name>
    release: Path  # release/<name>
    notes: list[str] = field(default_factory=list)  # said by the build: test cells whose meaning differs
    # what the grading environment cannot do with the answer key (set once the reference is recorded:
    # grading.record_reference.reference_load_problems); verify fails on them
    problems: list[str] = field(default_factory=list)

    @classmethod
    def for_source(cls, source: Path, assignments_root: Path | None = None, release_root: Path | None = None):
        """The default folders for `source` (solutions/<name>): assignments/<name> and release/<name> beside
        solutions/, unless roots are given."""
        source = source.resolve()
        root = source.parent.parent
        return cls(source, (assignments_root or root / "assignments") / source.name,
                   (release_root or root / "release") / source.name)


@dataclass
class Transformed:
    """The source notebook transformed: the student notebook, the answer key, the checks of its test cells and the
    secret lines (for the leak check)."""
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
        if is_locked_code(cell) and not regions:  # read-only: handed out, and put back, exactly as written
            student.cells[index]["source"] = key.cells[index]["source"] = cell_source(cell)
        else:
            student.cells[index]["source"] = student_source(cell, regions, language, loc)
            key.cells[index]["source"] = solution_source(cell, regions, keep_hidden=False)
        _clean(student.cells[index])
        _clean(key.cells[index])
        spec = cell_check(cell, index + 1, regions, where)
        if spec is not None:
            checks.append(spec)
    return Transformed(student, key, checks, secrets, public, caveats(nb, where))


def _numbered_in(student, spec: CheckSpec) -> CheckSpec:
    """A hand-graded check names its cell by the number it has in the student notebook, which has cells of its own
    added (install, setup, each part's check cell): the cell a student finds under that number."""
    if not graded_by_hand(spec):
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
        nb = nbformat.reads(with_cell_ids(path.read_text(encoding="utf-8")), as_version=4)
        nbformat.validate(nb)
        return nb
    except FileNotFoundError:
        raise BuildError(f"{path}: the notebook named in assignment.toml does not exist") from None
    except Exception as exc:  # noqa: BLE001 - nbformat's validation and JSON errors have no common base
        raise BuildError(f"{path}: not a valid notebook: {exc}") from None


def with_cell_ids(text: str) -> str:
    """A notebook of format 4.5 or later whose cells lack the ids that format requires (one written by a script or
    an older tool), with ids made from each cell's position: nbformat would make random ones, and the same source
    would not build to the same bytes. Anything else is returned as it is, for nbformat to read or refuse."""
    try:
        nb = json.loads(text)
        if nb.get("nbformat") != 4 or nb.get("nbformat_minor", 0) < 5 or not isinstance(nb.get("cells"), list):
            return text
    except (ValueError, AttributeError):
        return text
    cells = [c for c in nb["cells"] if isinstance(c, dict)]
    taken = {c["id"] for c in cells if isinstance(c.get("id"), str)}
    for index, cell in enumerate(cells):
        if "id" not in cell:
            cell["id"] = _free_id(f"cell-{index}", taken)
            taken.add(cell["id"])
    return json.dumps(nb)


def _free_id(base: str, taken: set[str]) -> str:
    """`base`, or `base-1`, `base-2`... where a cell of the source already holds it."""
    candidate, n = base, 0
    while candidate in taken:
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def build(source: Path, assignments_root: Path | None = None, release_root: Path | None = None) -> Paths:
    """Write the student notebook and the release bundle of `source` (see the module's docstring). Recording
    the reference, which runs it, is the grading layer's (autograder.grading.build_and_record)."""
    paths = Paths.for_source(Path(source), assignments_root, release_root)
    config = load_config(paths.source)
    nb_path = paths.source / config.notebook
    out = transform(_read_source_notebook(nb_path), str(nb_path))
    if "student" in config.seed:  # the seed variable as students get it (otter's student_value)
        out.student = with_value(out.student, config.seed["variable"], config.seed["student"])
    record_cells(out.student, config.seed)  # `autograder check` seeds each cell as grading does
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
    used = names_checks_read([c.source for c in out.cell_checks], test_sources)
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
        "checks": [{**c.describe(), "file": f, "source": c.source, "timeout": c.timeout, **_manual(f, c, out.student)}
                   for f, c in checks],
    }
    write_atomic(paths.release / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))
    where = f"{paths.source.name}/{config.notebook}"
    paths.notes = out.notes + loops_not_run(reference, where, used) + plain_class_dependencies(checks, reference, where)
    paths.notes += calls_into_other_parts(_read_source_notebook(nb_path), checks, reference, helpers, where)
    return paths


DEPENDS_ON_DOC = "docs/writing-assignments.md#parts-that-call-other-parts-depends_on"


def _free_reads(source: str) -> set[str]:
    """The names a top-level statement reads that it does not bind itself (parameters, locals): the notebook's
    globals its code may call."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    loaded, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    top = {name for stmt in tree.body for name in _bound_at(stmt)}
    return loaded - (bound - top)


def _bound_at(stmt) -> list[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    return [n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]


def _check_reads(spec, helper_reads: dict[str, set[str]]) -> set[str]:
    """The names of the submission a check reads itself: a test cell's names read from outside; a test file's
    `sub.NAME` (in its function and the test file's functions it calls) and what the worker helpers it calls
    (`sub.helpers.NAME`) read."""
    from autograder.notebook.extract import reads_from_outside

    if spec.fn is None:
        return reads_from_outside(spec.source or "")
    import inspect

    reads, seen, todo = set(), set(), [spec.fn]
    while todo:
        fn = todo.pop()
        if fn in seen:
            continue
        seen.add(fn)
        try:
            tree = ast.parse(inspect.getsource(fn).lstrip() if not isinstance(fn, str) else fn)
        except (OSError, TypeError, SyntaxError, IndentationError):
            continue
        free = _free_reads(ast.unparse(tree))  # a local named as a function of the file is not that function
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("sub", "ref"):
                reads.add(node.attr)
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == "helpers":
                reads |= helper_reads.get(node.attr, set())
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in free:
                called = getattr(fn, "__globals__", {}).get(node.id)
                if inspect.isfunction(called) and getattr(called, "__module__", None) == getattr(fn, "__module__", 0) \
                        and not hasattr(called, "_ag_check"):  # the test file's own helpers, not another check
                    todo.append(called)
        for text in [c.cell_contents for c in (getattr(fn, "__closure__", None) or ())
                     if isinstance(getattr(c, "cell_contents", None), str)]:  # an imported test cell's code
            reads |= reads_from_outside(text)
    return reads


def definition_parts(nb, checks, direct: dict[str, set[str]]) -> tuple[dict[str, str], dict[str, str]]:
    """({name: part}, {name: the part its heading names}) for the functions and classes of the notebook's solution
    cells (what students write), by autograder/notebook/parts.py's rule (the mutation analysis's too): the one part
    whose checks read it, else the part the markdown heading above it names, else the part of the first test cell
    after it (each when that part's checks read it or none do), else the first part whose checks read it."""
    from autograder.notebook.markers import SOLUTION, cell_source, find_regions
    from autograder.notebook.parts import definition_part, heading_parts

    all_parts = list(dict.fromkeys(spec.part for _, spec in checks if spec.part))
    under = heading_parts(nb.cells, all_parts)
    position: dict[str, str] = {}
    heading: dict[str, str] = {}
    pending: list[str] = []
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code":
            continue
        if is_test_cell(cell):
            part = str(nbgrader_meta(cell).get("part") or "")
            position.update({name: part for name in pending if part})
            pending = [name for name in pending if not part]
            continue
        source = cell_source(cell)
        regions = find_regions(source.split("\n"), f"cell {index + 1}")
        if nbgrader_meta(cell).get("solution") or any(r.kind == SOLUTION for r in regions):
            for name in defined_at_top(source):
                if name not in heading and name not in position and name not in pending:
                    pending.append(name)
                    if under[index]:
                        heading[name] = under[index]
    out = {}
    for name in set(position) | set(pending):
        reading = [spec.part for _, spec in checks if name in direct.get(spec.name, ())]
        out[name] = definition_part(reading, heading.get(name), position.get(name), all_parts)
    return {name: part for name, part in out.items() if part}, heading


def worker_helper_reads(helpers: list[str]) -> dict[str, set[str]]:
    """{worker helper function: the globals it reads and the `submission.NAME` it reads} (its own code only)."""
    helper_reads: dict[str, set[str]] = {}
    for text in helpers:
        try:
            body = ast.parse(text).body
        except SyntaxError:
            continue
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                src = ast.unparse(node)
                helper_reads[node.name] = _free_reads(src) | {
                    n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                    and n.value.id == "submission"}
    return helper_reads


def calls_into_other_parts(nb, checks, reference, helpers: list[str], where: str) -> list[str]:
    """One note per check that calls (itself, or through its own part's code) a function or class students write in
    another part without `depends_on` covering it: a broken one there costs this part's points too."""
    helper_reads = worker_helper_reads(helpers)
    calls: dict[str, set[str]] = {}  # a name of the reference -> the globals its code reads
    for unit in reference.units:
        for name in unit.names:
            calls.setdefault(name, set()).update(_free_reads(unit.source))
    direct = {spec.name: _check_reads(spec, helper_reads) for _, spec in checks if not graded_by_hand(spec)}
    parts, heading = definition_parts(nb, checks, direct)
    notes = []
    for file, spec in checks:
        if spec.name not in direct or not spec.part:
            continue
        other: dict[str, str] = {}  # a name of another part it reaches -> that part
        seen, todo = set(), sorted(direct[spec.name])
        while todo:
            name = todo.pop(0)
            if name in seen or name in spec.depends_on:
                continue
            seen.add(name)
            part = parts.get(name)
            if part and part != spec.part and heading.get(name) != spec.part:  # never for a name its own part defines
                other[name] = part  # stood in for once declared: what it calls is no longer this check's
            else:
                todo += sorted(calls.get(name, set()) - seen)
        if not other:
            continue
        named = ", ".join(f"`{n}` defined in part {p!r}" for n, p in sorted(other.items()))
        declared = ", ".join(f'"{n}"' for n in [*spec.depends_on, *sorted(other)])
        imported = bool(file and spec.fn is not None and spec.fn.__name__.startswith("cell_"))  # nbgrader's test cell
        how = (f"add depends_on=[{declared}] to its notebook_cell({spec.name!r}, ...) line" if imported else
               f"declare depends_on=[{declared}]" if file else
               f'add "depends_on": [{declared}] to the test cell\'s nbgrader metadata')
        broken = " or ".join(f"`{n}`" for n in sorted(other))
        # the advice changes grades: an imported course's author must know it moves them away from nbgrader's
        differs = (f"; this changes scores away from nbgrader's, which runs the student's own {broken} in this test "
                   f"cell: a submission with a broken {broken} then gets points here that nbgrader does not give "
                   "(leave it out to keep nbgrader's scores)") if imported else ""
        notes.append(f"{f'tests/{file}' if file else where}: check {spec.name!r} (part {spec.part!r}) calls {named}; "
                     f"{how} so that a broken {broken} does not cost this part's points{differs} ({DEPENDS_ON_DOC})")
    return notes


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


def _manual(file: str, spec: CheckSpec, student) -> dict:
    """A notebook's hand-graded check has no code to load: the manifest says what is graded by hand, and the
    heading above its cell in the student notebook (feedback names the cell by it where a submission's cells
    cannot be told apart by grade_id)."""
    what = getattr(spec.fn, "_ag_manual", None)
    if not what:
        return {}
    cells = student.cells
    if file:  # a tests file's (an imported notebook's written answer): its answer cell as handed out, if it has one
        answer = next((c for c in cells if nbgrader_meta(c).get("grade_id") == spec.name and
                       nbgrader_meta(c).get("solution") and not nbgrader_meta(c).get("task")), None)
        return {"handed_out": answer_digest(answer)} if answer is not None else {}
    index = next((i for i, c in enumerate(cells) if hand_graded(c) and nbgrader_meta(c).get("grade_id") == spec.name),
                 None)
    if index is None:
        return {"manual": what, "heading": ""}
    answer = {"handed_out": answer_digest(cells[index])} if hand_graded(cells[index]) != "task" else {}
    return {"manual": what, "heading": heading_above(cells, index), **answer}


def _copy(src: Path, dst: Path) -> None:
    if not src.is_file():
        raise BuildError(f"{src}: listed in assignment.toml but missing")
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)


def release_for(name_or_path: str, root: Path | None = None, rebuild: bool = True,
                after_build=None) -> Release:
    """`name` -> release/<name> (rebuilt from solutions/<name> when missing or out of date), or a path to
    a release folder or a solutions folder. `after_build(release_dir)` runs after a rebuild: the build records
    nothing; grading.resolve_release is this with the reference recorded after a rebuild."""
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
