"""An assignment's checks read from where they are declared, as CheckSpecs (autograder/testing.py): a notebook's
test cells and hand-graded cells, and the hidden test files of its tests/ folder.

The build reads the source notebook's cells and the test files (autograder/build.py); a release reads its test
files and rebuilds its hand-graded checks (autograder/release.py); `autograder check` and the student notebook's
check() read the test cells of a student notebook. One reading of a cell's nbgrader metadata for all of them:
what the build writes is what grading and the student's own check run. Test files are instructor code: they are
imported here, in the judge or the build, never in a student's process.
"""
from __future__ import annotations

import importlib.util
import sys
from contextlib import contextmanager
from pathlib import Path

from autograder.notebook.markers import (
    HIDDEN, MarkerError, Region, cell_source, hand_graded, is_test_cell, nbgrader_meta, solution_source,
)
from autograder.testing import HELPERS_ATTR, CheckSpec, manual


def cell_check(cell, number: int, regions: list[Region], where: str) -> CheckSpec | None:
    """The check a cell of the source notebook declares (`regions`: its marker regions, markers.check_cell), or
    None: a test cell's, whose source keeps its hidden part (the judge runs it); a hand-graded cell's, pending."""
    if cell.get("cell_type") == "code" and is_test_cell(cell):
        spec = test_cell_check(cell, number, where)
        spec.source = solution_source(cell, regions, keep_hidden=True)  # the judge runs the hidden part too
        spec.public = not any(r.kind == HIDDEN for r in regions)
        return spec
    if hand_graded(cell):  # its points stay in every total, pending, as nbgrader keeps them for grading by hand
        return _hand_graded(cell, number, where)
    return None


def _hand_graded(cell, number: int, where: str) -> CheckSpec:
    """The manual check of a cell graded by hand. Its points must be written out, as a test cell's must: a
    written answer whose points were forgotten would otherwise be worth 0 without a word."""
    meta, kind = nbgrader_meta(cell), str(hand_graded(cell))
    if meta.get("points") is None:
        raise MarkerError(f"{where}: cell {number}: {kind} {meta.get('grade_id')!r} needs nbgrader 'points' >= 0")
    return hand_graded_check(cell, number, kind, where)


def test_cell_check(cell, number: int, where: str = "notebook") -> CheckSpec:
    """The check a notebook test cell declares: the one reading of its metadata, for the build (source notebook),
    `autograder check` and the student notebook's check() (student notebooks). nbgrader's grade_id and points,
    this project's part, visibility and depends_on; the source is the cell's as it stands. Raises MarkerError
    naming `where: cell <number>` when the metadata is not valid."""
    meta, loc = nbgrader_meta(cell), f"{where}: cell {number}"
    grade_id, points = meta.get("grade_id"), meta.get("points")
    if not isinstance(grade_id, str) or not grade_id:
        raise MarkerError(f"{loc}: test cell without an nbgrader grade_id")
    if isinstance(points, bool) or not isinstance(points, (int, float)) or points < 0:
        raise MarkerError(f"{loc}: test cell {grade_id!r} needs nbgrader 'points' >= 0")
    depends_on, passed = meta.get("depends_on", []), meta.get("passed_message", "")
    if not isinstance(passed, str):
        raise MarkerError(f"{loc}: nbgrader 'passed_message' must be text (what a student reads when it passes)")
    if not isinstance(depends_on, list) or not all(isinstance(n, str) and n.isidentifier() for n in depends_on):
        raise MarkerError(f"{loc}: nbgrader 'depends_on' must be a list of names the notebook defines")
    return CheckSpec(name=grade_id, points=float(points), part=str(meta.get("part", "")),
                     visibility=str(meta.get("visibility", "visible")), source=cell_source(cell), public=True,
                     depends_on=tuple(depends_on), passed_message=passed)


HAND_GRADED_PART = "Graded by hand"  # the part of a notebook's hand-graded cell whose metadata names none


def hand_graded_check(cell, number: int, kind: str, where: str = "notebook") -> CheckSpec:
    """The manual check of a cell nbgrader grades by hand (`kind`: written answer, code answer, task): pending in
    every total with the cell's points, graded by no code. Part: the cell's nbgrader `part`, else HAND_GRADED_PART."""
    meta = nbgrader_meta(cell)
    points = meta.get("points", 0) or 0
    if isinstance(points, bool) or not isinstance(points, (int, float)) or points < 0:
        raise MarkerError(f"{where}: cell {number}: hand-graded cell {meta.get('grade_id')!r} needs nbgrader 'points' >= 0")
    return manual_spec(str(meta.get("grade_id")), float(points), str(meta.get("part") or HAND_GRADED_PART),
                       f"{kind}, notebook cell {number}")


def manual_spec(name: str, points: float, part: str, what: str, visibility: str = "visible") -> CheckSpec:
    """The CheckSpec of `manual(...)` (a release rebuilds a notebook's hand-graded checks with it)."""
    return manual(name, points, part, what, visibility)._ag_check


def is_helper_module(path: Path) -> bool:
    """`tests/_name.py`: code shared by the test files of one assignment, imported by them, never scanned for
    checks. Shipped with the release like the test files (it stays on the grader's side)."""
    return path.name.startswith("_")


def hidden_test_files(folder: Path) -> list[Path]:
    """The test files of an assignment's tests/ folder, in name order (helper modules left out)."""
    return [p for p in sorted(folder.glob("*.py")) if not is_helper_module(p)]


@contextmanager
def scoped_modules(names):
    """Inside the block, these module names are free for an assignment's helper modules; afterwards they
    leave sys.modules and whatever held the names before is back. So two assignments may each have a
    `_common.py` (each test file keeps the module it imported)."""
    saved = {name: sys.modules.pop(name) for name in names if name in sys.modules}
    try:
        yield
    finally:
        for name in names:
            sys.modules.pop(name, None)
        sys.modules.update(saved)


@contextmanager
def _importable_helpers(folder: Path):
    """While a test file loads, `import _name` finds folder/_name.py."""
    with scoped_modules({p.stem for p in folder.glob("_*.py")}):
        sys.path.insert(0, str(folder))
        try:
            yield
        finally:
            sys.path.remove(str(folder))


def load_test_file(path: Path) -> tuple[list[CheckSpec], list[str]]:
    """Import a hidden test file (instructor code, in the judge) and list its checks in file order."""
    module_name = f"_ag_tests_{path.stem}_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None  # a .py file's location always has a loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    with _importable_helpers(path.parent):
        spec.loader.exec_module(module)
    checks = [obj._ag_check for obj in vars(module).values() if hasattr(obj, "_ag_check")]
    return checks, list(getattr(module, HELPERS_ATTR, []))
