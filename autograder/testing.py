"""The API hidden test files are written with.

    from autograder.testing import check, Fail, expect_close

    @check("attention: rows sum to 1", points=2, part="1. Attention")
    def rows_sum_to_one(sub, ref):
        ...

`sub` and `ref` are proxies to the submission and the reference, each in its own worker process
(see autograder/sandbox/). Checks run in the judge, which never imports student code.

Helpers for the judge's own arithmetic, shared by every assignment (documented in
docs/writing-assignments.md): `gen` and `normal` (seeded inputs and weights, the same on every run),
`close` (a tolerance stated by its arguments: rtol 1e-4, atol 1e-5 unless a check says otherwise;
NaN, inf, another shape or a non-tensor are never close), `identical` and `expect_identical` (two outputs that
must be the same, NaN or inf named as such first) and `load_weights` (seeded weights into a student's module, or
a Fail that names what did not fit).

NaN never equals anything, itself included: compared as it is, a NaN output reads as two calls giving different
outputs, or as the wrong values. So `expect_identical` names NaN or inf before it compares, and a check that fails
after `close` met NaN or inf in the student's output where the expected values are finite has that said in its
message (`nonfinite_hint`, which the judge appends), whatever the check's own words are.

Reading checks out of where they are declared (a notebook's test and hand-graded cells, the test files) is the
build's and the release's business: autograder/checkspecs.py.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Callable

import torch

from autograder.sandbox import MissingName, StudentError  # re-exported for test files
from autograder.status import MANUAL
from autograder.sandbox import (  # re-exported for test files
    Remote, keep, remote_attr, remote_isinstance, remote_items, remote_type,
)

VISIBILITIES = ("visible", "after_due_date", "after_published", "hidden")

__all__ = ["check", "manual", "Fail", "expect", "expect_close", "expect_shape", "keep", "remote_attr", "remote_isinstance",
           "remote_items", "remote_type", "worker_helpers", "StudentError", "MissingName", "Remote", "CheckSpec",
           "gen", "normal", "close", "identical", "expect_identical", "expect_finite", "nonfinite", "load_weights",
           "RTOL", "ATOL"]

# The tolerance of `close` and `expect_close` when a check states none: |actual - expected| <= ATOL + RTOL *
# |expected| elementwise, in float64. Loose enough for a student's float32 arithmetic against the judge's
# float64, tight enough that a wrong formula shows; a check that compares more steps states a looser one.
RTOL = 1e-4
ATOL = 1e-5


class Fail(AssertionError):
    """Raise with a message the student can act on; the check scores 0 (or `partial` of its points)."""

    def __init__(self, message: str, partial: float = 0.0):
        super().__init__(message)
        self.partial = partial


@dataclass
class CheckSpec:
    """One check as the build writes it and grading runs it: its name, points, part, visibility and what it needs
    (GPU, other checks' definitions, a time limit)."""
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
    pending_only: bool = False  # only ever reports pending (the accuracy rubric): decided whatever time is left
    passed_message: str = ""  # what a student reads when it passes (otter's success_message); nothing when empty

    def describe(self) -> dict:
        """Its settings as the build's manifest records them (not its function or source)."""
        said = {"passed_message": self.passed_message} if self.passed_message else {}
        return {"name": self.name, "points": self.points, "part": self.part, "visibility": self.visibility,
                "public": self.public, "gpu": self.gpu, "depends_on": list(self.depends_on), **said}


def check(name: str, points: float, part: str = "", visibility: str = "visible", gpu: bool = False,
          timeout: float | None = None, depends_on: list[str] | tuple[str, ...] = (), passed_message: str = ""):
    """Declare a graded check. See docs/writing-assignments.md. `passed_message`: what a student reads when it
    passes (nothing when empty).

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
                                 depends_on=tuple(depends_on), passed_message=passed_message)
        return fn
    return register


class Pending(Exception):
    """Raised by a check that is decided later, elsewhere (the GPU accuracy rubric, grading by hand): the check
    is reported as pending with this message, neither failed nor 0."""


def manual(name: str, points: float, part: str = "", what: str = "", visibility: str = "visible"):
    """A check graded by hand (a written answer, a plot, a free-response cell): always pending, so its points
    are in every total as pending, never as lost, and `autograder verify` lists them. Assign the result to
    a module-level name of a test file: `q4_plot = manual("q4", 1, "Question 4", "a bar plot")`."""

    def pending(sub, ref):
        raise Pending(f"{MANUAL}: {what}" if what else MANUAL)

    pending.__name__ = f"manual_{name}"
    fn = check(name, points, part, visibility)(pending)
    fn._ag_manual = what or MANUAL  # the Gradescope export lists it among the pending points
    return fn


HELPERS_ATTR = "_ag_worker_helpers"  # a test file's global listing its worker_helpers sources


def worker_helpers(source: str) -> str:
    """Declare helper code shipped into the student's worker (call it at module level of a test file).
    It runs with `submission` (the student's module) in scope; checks call `sub.helpers.NAME(...)`.
    It is visible to the student's process, so it must hold no expected values."""
    frame = sys._getframe(1)
    frame.f_globals.setdefault(HELPERS_ATTR, []).append(source)
    return source


# -- assertions with student-facing messages ----------------------------------------------------------

def expect(condition, message: str) -> None:
    """Fail with `message` (the student's message) where `condition` is false."""
    if not condition:
        raise Fail(message)


def _shape(x) -> str:
    return "x".join(str(d) for d in x.shape) if hasattr(x, "shape") else type(x).__name__


def expect_shape(actual, shape, what: str) -> None:
    """Fail unless `actual` is a tensor of exactly `shape`; the message names `what`, the shape found and the one
    expected."""
    if not isinstance(actual, torch.Tensor):
        raise Fail(f"{what} should be a tensor, got {type(actual).__name__}")
    if tuple(actual.shape) != tuple(shape):
        raise Fail(f"{what} has shape ({', '.join(map(str, actual.shape))}), expected "
                   f"({', '.join(map(str, shape))})")


def expect_close(actual, expected, message: str, atol: float = ATOL, rtol: float = RTOL) -> None:
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


# -- the judge's own arithmetic: seeded inputs and weights, comparisons, weights into a student's module ----

def gen(seed: int) -> torch.Generator:
    """A CPU generator seeded with `seed`: the judge's inputs and weights are the same on every run, and
    drawing them leaves torch's global generator (which the checks seed) alone."""
    return torch.Generator().manual_seed(seed)


def normal(generator: torch.Generator) -> Callable[..., torch.Tensor]:
    """r(*shape, s=1.0): standard-normal draws from `generator`, times `s`, in call order
    (`r = normal(gen(7)); w, b = r(4, 4), r(4, s=0.1)`)."""
    def draw(*shape: int, s: float = 1.0) -> torch.Tensor:
        return s * torch.randn(*shape, generator=generator)
    return draw


def close(actual, expected, rtol: float = RTOL, atol: float = ATOL) -> bool:
    """Whether `actual` matches `expected`: both tensors of the same shape (no broadcasting), `actual`
    finite, and |actual - expected| <= atol + rtol * |expected| elementwise, compared in float64.
    Defaults: rtol 1e-4, atol 1e-5 (RTOL, ATOL). NaN or inf in `actual` is never close, nor is anything
    compared with NaN in `expected` (NaN equals nothing, not even NaN). A complex tensor matches only a complex
    one (a real part alone never stands for the whole). NaN or inf in `actual` where `expected` is finite is
    remembered for the check's message, should the check fail (see `nonfinite_hint`)."""
    if not (isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor)
            and actual.shape == expected.shape and actual.is_complex() == expected.is_complex()):
        return False
    if not bool(torch.isfinite(actual).all()):
        if bool(torch.isfinite(expected).all()):
            _nonfinite_seen.append(nonfinite(actual))
        return False
    return torch.allclose(_wide(actual), _wide(expected), rtol=rtol, atol=atol)


def nonfinite(value) -> str:
    """What is not finite in `value`, for a message: "" for a tensor of finite values (or anything not a tensor),
    else e.g. "NaN (3 of 288 values)", "inf (1 of 16 values)", "NaN and inf (5 of 16 values)"."""
    if not isinstance(value, torch.Tensor) or not (value.is_floating_point() or value.is_complex()):
        return ""
    nan, inf = torch.isnan(value), torch.isinf(value)
    kinds = " and ".join(kind for kind, flags in (("NaN", nan), ("inf", inf)) if bool(flags.any()))
    return f"{kinds} ({int((nan | inf).sum()):,} of {value.numel():,} values)" if kinds else ""


def expect_finite(value, what: str) -> None:
    """Fail, naming NaN or inf, when the tensor `value` holds any ("what" names it: "the output in eval()")."""
    bad = nonfinite(value)
    if bad:
        raise Fail(f"{what} contains {bad}: NaN and inf make it unusable (NaN equals nothing, not even itself); "
                   "look for where they come from (a whole row filled with -inf before a softmax, a division by "
                   "zero, a log of 0)")


def identical(first, second) -> bool:
    """Whether two tensors are the same: same shape, dtype and values, NaN counting as NaN (two calls that both give
    NaN at the same places are alike; whether NaN is acceptable at all is `expect_finite`'s question)."""
    if not (isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor) and first.shape == second.shape):
        return False
    first_nan, second_nan = torch.isnan(first), torch.isnan(second)
    return torch.equal(first_nan, second_nan) and torch.equal(first.masked_fill(first_nan, 0), second.masked_fill(second_nan, 0))


def expect_identical(first, second, message: str, what: str = "the output") -> None:
    """Two outputs that must be the same (one call made twice, in eval()): NaN or inf in either is named first, as
    itself (NaN never equals NaN, so compared as it is a NaN output would read as two different outputs); then
    `message` when they differ."""
    expect_finite(first, what)
    expect_finite(second, f"{what} (the second call)")
    if not identical(first, second):
        raise Fail(message)


def _wide(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.complex128) if t.is_complex() else t.double()


_notes: list[str] = []
_nonfinite_seen: list[str] = []  # what `close` met in the check being run (NaN or inf where finite was expected)


def note(text: str) -> None:
    """Add a line to the message of the check being run, shown whether it passes or not (how the grader had to
    adapt to the student's code, e.g. weights loaded by position)."""
    _notes.append(str(text))


def take_notes() -> list[str]:
    """The notes of the check just run, and forget them (the judge calls it around every check); forgets what
    `close` met too (see `nonfinite_hint`)."""
    taken = list(_notes)
    _notes.clear()
    _nonfinite_seen.clear()
    return taken


def nonfinite_hint(message: str) -> str:
    """The line the judge adds to a failed check's `message` when `close` met NaN or inf in the student's output
    where the expected values were finite during the check and the message does not say so already: the check's
    words ("wrong values", "does not match") are then about NaN, which equals nothing. "" otherwise. Forgets
    what it read (the judge calls it once a check, as take_notes)."""
    seen = list(_nonfinite_seen)
    _nonfinite_seen.clear()
    if not seen or re.search(r"\bnan\b|\binf\b|not finite|non-finite", message, re.IGNORECASE):
        return ""
    return (f"(an output of yours compared here contains {seen[0]}, which matches no finite expected value: NaN "
            "equals nothing, not even itself; find where it comes from first)")


def load_weights(sub, module, state: dict, what: str, names: str = "", *, helper: str) -> None:
    """Copy `state` (name -> tensor) into the student's `module` (a proxy kept in the worker), or raise Fail.

    `helper` names the assignment's worker helper (see `worker_helpers`) that does the copying there:
    `helper(module, state)` loads the tensors and returns what did not fit (names the module lacks, wrong
    shapes) as a list of strings, loading nothing then; or, as `autograder.sandbox.weights.load_state` does
    (by name, else by structure), {"problems": [...], "notes": [...]}, the notes added to the check's message. `what` names the module in messages
    ("MultiHeadAttention(16, 4, 0.0)"); `names` lists the documented attribute names to name when some
    do not fit."""
    try:
        problems = getattr(sub.helpers, helper)(module, state)
    except StudentError as exc:
        raise Fail(f"the grader could not read the parameters of your {what}: {exc.message}") from None
    if isinstance(problems, dict):
        for line in problems.get("notes") or []:
            note(f"{what}: {line}")
        problems = problems.get("problems") or []
    if problems:
        raise Fail(f"the grader could not load weights into your {what} by the documented attribute names"
                   + (f" ({names})" if names else "") + ": " + "; ".join(problems[:4]))
