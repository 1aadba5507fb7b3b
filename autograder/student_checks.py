"""The in-notebook `check("<part>")`: runs a part's public checks in the student's kernel and prints verdicts.

This module is what a student's notebook carries: the build packs its source, with the public checks, into the
notebook's setup cell (autograder.student), which runs it as a module of its own. So `check()` works from what
the assignment ships, the notebook alone, in any kernel (Jupyter, JupyterLab, Colab, VS Code, a script) where
nothing of this project is installed and nothing is installed for it.

Guarantees: it imports only Python's standard library (tests/test_check.py reads its imports), reads no file
and no network, and imports nothing of the `autograder` package; a student's notebook never needs `autograder`.
torch and numpy are used only where the kernel has already imported them (to seed and restore their generators).
"""
from __future__ import annotations

import base64
import json
import random
import re
import sys
import traceback
import zlib

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


class Verdict:
    """One public check's outcome. (A plain class: the setup cell runs this module outside sys.modules, where
    dataclasses would have no module to resolve annotations in on some Python versions.)"""

    def __init__(self, name: str, part: str, status: str, message: str):
        self.name, self.part, self.message = name, part, message
        self.status = status  # passed | failed

    def __repr__(self) -> str:
        return f"Verdict({self.name!r}, {self.part!r}, {self.status!r}, {self.message!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Verdict) and self.to_dict() == other.to_dict()

    def to_dict(self) -> dict:
        return {"name": self.name, "part": self.part, "status": self.status, "message": self.message}


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

