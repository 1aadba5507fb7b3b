"""In-notebook checks for students: `check("1")` (or "part1", or "1. Normalize") runs the public checks of a part.

An assignment opts in with a `[student]` table in its assignment.toml:

    [student]
    checks = true       # a setup cell near the top, and a `check("<part>")` cell after each part
    install = ["torch", {module = "autograder", pip = "torchgrade @ git+https://example.org/course/autograder"}]

`install` prepends a first cell that pip-installs whatever of the list is missing (Colab, a fresh
JupyterHub image) and does nothing where everything is installed.

The public checks are the student notebook's own test cells (what a student can read). The build
packs their code into the setup cell, so `check` needs neither the notebook file nor a server: it
works the same in Jupyter, JupyterLab, Colab, VS Code or a script. Each check runs in a copy of the
kernel's globals (its variables do not overwrite the student's), with random generators seeded as
the grader seeds them and restored afterwards. Verdicts match the public part of grading: a check
fails here exactly when the same public code fails in the grader, given the same definitions.

This module imports only the standard library: it must load in any student kernel.
"""
from __future__ import annotations

import base64
import json
import random
import re
import sys
import traceback
import zlib
from dataclasses import dataclass

SKIP_TAG = "skip-grading"  # the grader never runs these cells (see autograder.notebook.extract)
SETUP_TAG, CHECK_TAG, INSTALL_TAG = "autograder-setup", "autograder-check", "autograder-install"

SETUP_SOURCE = '''\
# Sets up check("<part>"): run this cell once. Each check("...") cell below runs that part's public checks.
try:
    from autograder.student import Checks
    check = Checks.decode("{blob}")
except ImportError:
    def check(part=None):
        print("The checks need the `autograder` package in this Python environment: run the first cell, "
              "or `pip install` it, then run the cell defining `check` again.")'''

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
    from autograder.notebook.markers import is_test_cell  # build side only: this module loads in student kernels
    from autograder.testing import test_cell_check

    specs = [test_cell_check(cell, number, "the student notebook") for number, cell in enumerate(nb.cells, start=1)
             if cell.get("cell_type") == "code" and is_test_cell(cell)]
    return [{"name": s.name, "part": s.part, "points": s.points, "source": s.source} for s in specs]


def encode(checks: list[dict], title: str = "") -> str:
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
        cells.insert(first_code, _new_cell(nb, SETUP_SOURCE.replace("{blob}", encode(checks, title)),
                                           [SKIP_TAG, SETUP_TAG], "autograder-setup"))
    if options.get("install"):
        needed = json.dumps([tuple(x) for x in options["install"]])
        cells.insert(0, _new_cell(nb, INSTALL_SOURCE.format(needed=needed), [SKIP_TAG, INSTALL_TAG],
                                  "autograder-install"))
    nb.cells = cells


# -- kernel side ---------------------------------------------------------------------------------

_NUMBER = re.compile(r"^\s*(?:part\s*)?(\d+)\s*[.:)]?\s*$", re.IGNORECASE)  # "1", "1.", "part1", "Part 1"
_LEADING_NUMBER = re.compile(r"^\s*(?:part\s*)?(\d+)(?!\d)", re.IGNORECASE)  # "1. Attention", "Part 2: MHA"


def resolve_part(requested: str, parts: list[str]) -> str:
    """The part `requested` names: its full name (any case), its number ("1", "part1", "Part 1"), or the start
    of its name, with or without its number, when only one part starts so. ValueError, listing the parts, when it names none or several."""
    wanted = " ".join(str(requested).split()).lower()
    for how in ("exact", "number", "prefix"):
        if how == "exact":
            found = [p for p in parts if " ".join(p.split()).lower() == wanted]
        elif how == "number":
            number = _NUMBER.match(wanted)
            found = [p for p in parts if number and (m := _LEADING_NUMBER.match(p)) and
                     int(m.group(1)) == int(number.group(1))]
        else:  # the start of the name, its number left out or not ("Multi", "2. Multi")
            found = [p for p in parts if wanted and any(
                " ".join(name.split()).lower().startswith(wanted)
                for name in (p, _LEADING_NUMBER.sub("", p).lstrip(" .:)-")))]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise ValueError(f"{requested!r} names several parts: {found}; give the full name")
    listed = ", ".join(repr(p) for p in parts)
    raise ValueError(f"no part {requested!r}; the parts with checks are {listed} (a part's number, e.g. "
                     f"'1' or 'part1', or its full name)")


@dataclass
class Verdict:
    name: str
    part: str
    status: str  # passed | failed
    message: str

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _seeded(seed: int = 0):
    """Seed the generators as the grader does before each check; returns a function that restores them."""
    state = random.getstate()
    torch = sys.modules.get("torch")
    numpy = sys.modules.get("numpy")
    torch_state = torch.random.get_rng_state() if torch is not None else None
    numpy_state = numpy.random.get_state() if numpy is not None else None
    random.seed(seed)
    if torch is not None:
        torch.manual_seed(seed)
    if numpy is not None:
        numpy.random.seed(seed)

    def restore():
        random.setstate(state)
        if torch_state is not None:
            torch.random.set_rng_state(torch_state)
        if numpy_state is not None:
            numpy.random.set_state(numpy_state)
    return restore


def _student_frame(tb, check_file: str):
    """The innermost frame of the traceback outside the check's own code: the student's function."""
    frames = traceback.extract_tb(tb)
    inside = [f for f in frames if f.filename != check_file]
    return inside[-1] if inside else None


def run_public_check(check: dict, namespace: dict) -> Verdict:
    """Run one public check's code in a copy of `namespace`; plain-language verdict."""
    filename = f"<check {check['name']}>"
    ns = dict(namespace)
    ns["__name__"] = "__check__"
    restore = _seeded(0)
    try:
        exec(compile(check["source"], filename, "exec"), ns)
        return Verdict(check["name"], check["part"], "passed", "")
    except AssertionError as exc:
        text = str(exc) or "an assertion in this check failed"
        return Verdict(check["name"], check["part"], "failed", text)
    except NotImplementedError as exc:
        frame = _student_frame(exc.__traceback__, filename)
        what = f"`{frame.name}`" if frame and frame.name != "<module>" else "your code"
        return Verdict(check["name"], check["part"], "failed",
                       f"{what} is not implemented yet (it raised NotImplementedError)")
    except NameError as exc:
        name = getattr(exc, "name", None) or str(exc)
        return Verdict(check["name"], check["part"], "failed",
                       f"`{name}` is not defined: run the cell that defines it (and the cells above it) first")
    except Exception as exc:  # noqa: BLE001 - whatever student code raises is a failed check with its reason
        frame = _student_frame(exc.__traceback__, filename)
        where = f" in `{frame.name}`, line {frame.lineno}" if frame and frame.name != "<module>" else ""
        return Verdict(check["name"], check["part"], "failed", f"{type(exc).__name__}{where}: {exc}".rstrip(": "))
    finally:
        restore()


class Checks:
    """Callable: `check("1. Normalize")` runs and prints that part's public checks; `check()` runs all."""

    def __init__(self, checks: list[dict], title: str = ""):
        self.checks = checks
        self.title = title
        self.last: list[Verdict] = []

    @classmethod
    def decode(cls, blob: str) -> "Checks":
        data = json.loads(zlib.decompress(base64.b64decode(blob)).decode("utf-8"))
        return cls(data["checks"], data.get("title", ""))

    @property
    def parts(self) -> list[str]:
        return list(dict.fromkeys(c["part"] for c in self.checks))

    def run(self, part: str | None = None, namespace: dict | None = None) -> list[Verdict]:
        if namespace is None:
            namespace = sys._getframe(1).f_globals
        if part is not None:
            part = resolve_part(part, self.parts)
        self.last = [run_public_check(c, namespace) for c in self.checks if part is None or c["part"] == part]
        return self.last

    def __call__(self, part: str | int | None = None) -> None:
        """`check("1")`, `check("part1")`, `check(1)` or `check("1. Normalize")`; `check()` runs every part."""
        try:
            name = None if part is None else resolve_part(str(part), self.parts)
        except ValueError as exc:
            print(exc)
            return
        self.run(name, sys._getframe(1).f_globals)
        print(self.describe(name))

    def describe(self, part: str | None = None) -> str:
        verdicts = self.last
        passed = sum(v.status == "passed" for v in verdicts)
        head = part or "All parts"
        lines = [f"{head}: {passed} of {len(verdicts)} public check(s) pass"]
        for v in verdicts:
            mark = "PASS" if v.status == "passed" else "FAIL"
            lines.append(f"  [{mark}] {v.name}" + (f": {v.message}" if v.message else ""))
        if verdicts and passed == len(verdicts):
            lines.append("  All public checks of this part pass. The grader also runs hidden checks.")
        elif verdicts:
            lines.append("  Fix the failing checks above, re-run the cells you changed, then this cell.")
        return "\n".join(lines)

    def results(self) -> list[dict]:
        return [v.to_dict() for v in self.last]

