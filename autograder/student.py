"""In-notebook checks for students, build side: the cells the build adds to a student notebook so that
`check("1")` (or "part1", or "1. Normalize") runs the public checks of a part in the student's kernel.

An assignment opts in with a `[student]` table in its assignment.toml:

    [student]
    checks = true       # a setup cell near the top, and a `check("<part>")` cell after each part
    install = ["torch", {module = "sklearn", pip = "scikit-learn"}]

`install` prepends a first cell that pip-installs whatever of the list is missing (Colab, a fresh
JupyterHub image) and does nothing where everything is installed. It never installs this project:
`check` needs nothing installed.

The public checks are the student notebook's own test cells (what a student can read). The setup cell
carries them and the code of `check` itself (autograder/student_checks.py, standard library only), both
packed: `check` works from the notebook alone, with neither this project installed, nor the notebook file,
nor a server, in Jupyter, JupyterLab, Colab, VS Code or a script. Each check runs in a copy of the kernel's
globals (its variables do not overwrite the student's), with random generators seeded as the grader seeds
them and restored afterwards. Verdicts match the public part of grading: a check fails here exactly when the
same public code fails in the grader, given the same definitions.
"""
from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path

from autograder import student_checks
from autograder.student_checks import Checks, Verdict, resolve_part, run_public_check  # noqa: F401 - the kernel side, re-exported

SKIP_TAG = "skip-grading"  # the grader never runs these cells (see autograder.notebook.extract)
SETUP_TAG, CHECK_TAG, INSTALL_TAG = "autograder-setup", "autograder-check", "autograder-install"

SETUP_SOURCE = '''\
# Sets up check("<part>"): run this cell once. Each check("...") cell below runs that part's public checks.
# Nothing to install: the code of check() (Python's standard library only) and the public checks are packed
# below; print(_checks_code) shows that code.
import base64 as _base64, types as _types, zlib as _zlib
_checks_code = _zlib.decompress(_base64.b64decode("{code}")).decode("utf-8")
_checks_module = _types.ModuleType("student_checks")
exec(compile(_checks_code, "student_checks.py", "exec"), _checks_module.__dict__)
check = _checks_module.Checks.decode("{blob}")'''


def packed_checks_code() -> str:
    """The source of autograder/student_checks.py, compressed as the setup cell carries it (deterministic)."""
    code = Path(student_checks.__file__).read_text(encoding="utf-8")
    return base64.b64encode(zlib.compress(code.encode("utf-8"), 9)).decode("ascii")


INSTALL_SOURCE = '''\
# Installs what this notebook needs when it is missing (Colab, a fresh environment); does nothing otherwise.
import importlib.util, shlex
_needed = {needed}
_missing = " ".join(shlex.quote(pip) for module, pip in _needed if importlib.util.find_spec(module) is None)
if _missing:
    %pip install -q {{_missing}}'''


# -- build side ----------------------------------------------------------------------------------

def public_checks(nb) -> list[dict]:
    """The notebook's test cells as students see them (hidden sections already removed)."""
    from autograder.notebook.markers import is_test_cell  # imported here: the kernel side never needs them
    from autograder.checkspecs import test_cell_check

    specs = [test_cell_check(cell, number, "the student notebook") for number, cell in enumerate(nb.cells, start=1)
             if cell.get("cell_type") == "code" and is_test_cell(cell)]
    return [{"name": s.name, "part": s.part, "points": s.points, "source": s.source} for s in specs]


def encode(checks: list[dict], title: str = "") -> str:
    """The public checks and the title packed for the setup cell: JSON, zlib-compressed, base64 (ASCII); the
    notebook's check() unpacks it."""
    data = json.dumps({"title": title, "checks": checks}, sort_keys=True, separators=(",", ":")).encode()
    return base64.b64encode(zlib.compress(data, 9)).decode("ascii")


def _new_cell(nb, source: str, tags: list[str], cell_id: str):
    import nbformat

    cell = nbformat.v4.new_code_cell(source, metadata={"tags": tags, "editable": False, "deletable": False})
    if nb.get("nbformat", 4) == 4 and nb.get("nbformat_minor", 0) >= 5:
        cell["id"] = cell_id  # deterministic: the build's output is byte-for-byte reproducible
    else:
        cell.pop("id", None)
    return cell


def add_student_cells(nb, options: dict, title: str = "", public_from=None) -> None:
    """Insert (in place) the install cell, the setup cell and a check("part") cell after each part's
    last test cell. `public_from` is the notebook whose test cells are the public checks (the student
    notebook); defaults to `nb`."""
    if not options:
        return
    checks = public_checks(public_from if public_from is not None else nb)
    cells = list(nb.cells)
    if options.get("checks") and checks:
        last_of_part: dict[str, int] = {}
        for index, cell in enumerate(cells):
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if cell.get("cell_type") == "code" and meta.get("grade") and not meta.get("solution") and meta.get("part"):
                last_of_part[str(meta["part"])] = index
        for number, (part, index) in enumerate(sorted(last_of_part.items(), key=lambda kv: -kv[1])):
            source = f"check({json.dumps(part, ensure_ascii=False)})  # runs the public checks of this part"
            cells.insert(index + 1, _new_cell(nb, source, [SKIP_TAG, CHECK_TAG],
                                              f"autograder-check-{len(last_of_part) - number}"))
        first_code = next((i for i, c in enumerate(cells) if c.get("cell_type") == "code"), len(cells))
        cells.insert(first_code, _new_cell(nb, SETUP_SOURCE.replace("{code}", packed_checks_code()).replace("{blob}", encode(checks, title)),
                                           [SKIP_TAG, SETUP_TAG], "autograder-setup"))
    if options.get("install"):
        needed = json.dumps([tuple(x) for x in options["install"]])
        cells.insert(0, _new_cell(nb, INSTALL_SOURCE.format(needed=needed), [SKIP_TAG, INSTALL_TAG],
                                  "autograder-install"))
    nb.cells = cells


