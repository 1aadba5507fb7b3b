"""The API hidden test files are written with.

    from autograder.testing import check, Fail, expect_close

    @check("attention: rows sum to 1", points=2, part="1. Attention")
    def rows_sum_to_one(sub, ref):
        ...

`sub` and `ref` are proxies to the submission and the reference, each in its own worker process
(see autograder/sandbox/). Checks run in the judge, which never imports student code.
"""
from __future__ import annotations

import importlib.util
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from autograder.sandbox.client import MissingName, StudentError  # re-exported for test files
from autograder.sandbox.remote import (  # re-exported for test files
    Remote, keep, remote_attr, remote_isinstance, remote_items, remote_type,
)

VISIBILITIES = ("visible", "after_due_date", "after_published", "hidden")

__all__ = ["check", "manual", "Fail", "expect", "expect_close", "expect_shape", "keep", "remote_attr",
           "remote_isinstance", "remote_items", "remote_type", "worker_helpers", "StudentError", "MissingName", "Remote", "CheckSpec"]


class Fail(AssertionError):
    """Raise with a message the student can act on; the check scores 0 (or `partial` of its points)."""

    def __init__(self, message: str, partial: float = 0.0):
        super().__init__(message)
        self.partial = partial


@dataclass
class CheckSpec:
    name: str  # unique within the assignment; the column name in grades.csv
    points: float
    part: str = ""  # groups checks in reports ("1. Attention")
    visibility: str = "visible"  # Gradescope's visibility of this result
    fn: Callable | None = None  # (sub, ref) -> None | bool | fraction; None for notebook test cells
    source: str = ""  # notebook test cells: the cell's code (public + hidden), run in the judge
    public: bool = False  # the code of this check is in the student notebook
    gpu: bool = False  # needs CUDA; reported as pending on a machine without it
    timeout: float | None = None  # overrides the assignment's check_seconds
    depends_on: tuple[str, ...] = ()  # other graded parts the checked code calls (see `check`)

    def describe(self) -> dict:
        return {"name": self.name, "points": self.points, "part": self.part, "visibility": self.visibility,
                "public": self.public, "gpu": self.gpu, "depends_on": list(self.depends_on)}


def check(name: str, points: float, part: str = "", visibility: str = "visible", gpu: bool = False,
          timeout: float | None = None, depends_on: list[str] | tuple[str, ...] = ()):
    """Declare a graded check. See docs/writing-assignments.md.

    `depends_on`: names the submission defines for other graded parts that the checked code calls (a
    multi-head attention calls `scaled_dot_product`). When the check does not give full marks with the
    student's own versions, it runs again with the reference answering those calls, and the better score
    counts: a part's mistakes cost points in that part only."""
    if visibility not in VISIBILITIES:
        raise ValueError(f"visibility must be one of {VISIBILITIES}")
    if points < 0:
        raise ValueError("points must be >= 0")
    if isinstance(depends_on, str) or not all(isinstance(n, str) and n.isidentifier() for n in depends_on):
        raise ValueError("depends_on must be a list of names the submission defines")

    def register(fn):
        fn._ag_check = CheckSpec(name, float(points), part, visibility, fn, gpu=gpu, timeout=timeout,
                                 depends_on=tuple(depends_on))
        return fn
    return register


MANUAL = "graded by hand"  # how a manual check's pending message starts (autograder verify counts them)


def manual(name: str, points: float, part: str = "", what: str = "", visibility: str = "visible"):
    """A check graded by hand (a written answer, a plot, a free-response cell): always pending, so its points
    are in every total as pending, never as lost, and `autograder verify` lists them. Assign the result to
    a module-level name of a test file: `q4_plot = manual("q4", 1, "Question 4", "a bar plot")`."""

    def pending(sub, ref):
        from autograder.judge import Pending  # the judge imports this module: imported when a check runs

        raise Pending(f"{MANUAL}: {what}" if what else MANUAL)

    pending.__name__ = f"manual_{name}"
    return check(name, points, part, visibility)(pending)


_HELPERS_ATTR = "_ag_worker_helpers"


def worker_helpers(source: str) -> str:
    """Declare helper code shipped into the student's worker (call it at module level of a test file).
    It runs with `submission` (the student's module) in scope; checks call `sub.helpers.NAME(...)`.
    It is visible to the student's process, so it must hold no expected values."""
    frame = sys._getframe(1)
    frame.f_globals.setdefault(_HELPERS_ATTR, []).append(source)
    return source


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
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    with _importable_helpers(path.parent):
        spec.loader.exec_module(module)
    checks = [obj._ag_check for obj in vars(module).values() if hasattr(obj, "_ag_check")]
    return checks, list(getattr(module, _HELPERS_ATTR, []))


# -- assertions with student-facing messages ----------------------------------------------------------

def expect(condition, message: str) -> None:
    if not condition:
        raise Fail(message)


def _shape(x) -> str:
    return "x".join(str(d) for d in x.shape) if hasattr(x, "shape") else type(x).__name__


def expect_shape(actual, shape, what: str) -> None:
    if not isinstance(actual, torch.Tensor):
        raise Fail(f"{what} should be a tensor, got {type(actual).__name__}")
    if tuple(actual.shape) != tuple(shape):
        raise Fail(f"{what} has shape ({', '.join(map(str, actual.shape))}), expected "
                   f"({', '.join(map(str, shape))})")


def expect_close(actual, expected, message: str, atol: float = 1e-5, rtol: float = 1e-4) -> None:
    """Values match the expected ones; the message never shows the expected values."""
    if not isinstance(actual, torch.Tensor):
        raise Fail(f"{message}: expected a tensor, got {type(actual).__name__}")
    if actual.shape != expected.shape:
        raise Fail(f"{message}: shape {_shape(actual)} instead of {_shape(expected)}")
    a, e = actual.detach().double(), expected.detach().double()
    if not torch.isfinite(a).all() and torch.isfinite(e).all():
        raise Fail(f"{message} (the result contains NaN or inf)")
    if not torch.allclose(a, e, atol=atol, rtol=rtol):
        raise Fail(message)
