"""The two programs the judge holds (autograder/judge.py): a notebook's definitions running in its worker, seen
through a module-like proxy (`sub.NAME`, `ref.NAME`, `sub.helpers`), with what it remembers between checks (the
definitions that hung one, why a name is missing); and the reference notebook's import statements, run in the
judge on first use. The judge process never imports student code: the proxy's values are handles in the worker."""
from __future__ import annotations

import ast
import functools
import re
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

from autograder.cell_names import definitions_at_top
from autograder.notebook.extract import Extraction
from autograder.sandbox import HELPERS_LABEL, Child, Handle, Hang, MissingName, Remote, WorkerProcess, WorkerSpec


@dataclass
class RememberedHang:
    """A definition of the notebook that made a check time out: the candidates sent to its workers (innermost
    frame first, see standins.tripwire), the check and its message; `label`: what the worker replaced."""

    candidates: list[list]  # [name, function] or [name, function, line, file] (see standins.tripwire)
    check: str
    message: str  # why the earlier check stopped it (a timeout's "did not finish within 10 s", a limit's message)
    label: str = ""
    how: str = "did not finish in"  # ... an earlier check: or "was stopped in", "ended its process in"

    def later(self, owner: str) -> str:
        """What a later check that would call it says: it was not run, and why (never that this check timed out)."""
        what = self.how
        return (f"not run: {owner} {self.label} {what} an earlier check, {self.check!r} ({self.message}): it is not "
                "run again, so this check fails too")


class Program:
    """A notebook's definitions running in a worker, seen through a module-like proxy."""

    def __init__(self, extraction: Extraction, spec: WorkerSpec, helpers: Sequence[str] = (),
                 worker: WorkerProcess | None = None):
        self.extraction = extraction
        self.worker = worker or WorkerProcess(spec)  # `worker`: one prestarted for this spec's confinement
        self.worker.spec = spec
        self.worker.explain_name = self.explain_unbound
        self.worker.explain_hang = self.hang_message
        self._hints: dict[str, str] | None = None
        self._kinds: dict[str, str] | None = None  # see definition_kinds
        self.helpers = list(helpers)
        self.helper_callables = _defined_callables(tuple(self.helpers))
        self._helpers_loaded_in: subprocess.Popen | Child | None = None  # the worker process they were loaded in
        self.hangs: list[RememberedHang] = []  # definitions that hung a check: they raise at once in later ones
        self.stood_in: frozenset[str] = frozenset()  # names the reference answers for in the current check's run
        self._tripwires_in: tuple = (None, 0)  # (worker process, hangs) the tripwires were last installed for

    def binds_all(self, names) -> bool:
        """Whether the notebook binds every one of `names` with a statement the grader runs (read, no worker)."""
        bound = {name for unit in self.extraction.units if unit.kind != "import" for name in unit.names}
        return set(names) <= bound

    def definition_kinds(self) -> dict[str, str]:
        """{name: "class" or "function"} for the classes and functions the notebook defines at its top level."""
        if self._kinds is None:
            self._kinds = {}
            for unit in self.extraction.units:
                if unit.kind == "definition":
                    self._kinds.update(definitions_at_top(unit.source))
        return self._kinds

    def start(self):
        """Start its worker where it is not running (loading the definitions), then its helper code and tripwires;
        returns the worker's LoadReport. Cheap when all is already in place: each check calls it."""
        report = self.worker.ensure_started()
        if self.helpers and self._helpers_loaded_in is not self.worker.proc and \
                not getattr(self.worker, "manages_helpers", False):  # a replaying worker loads them when it goes live
            self._helpers_loaded_in = self.worker.proc
            deadline, self.worker.deadline = self.worker.deadline, time.monotonic() + self.worker.spec.import_seconds
            try:
                for source in self.helpers:
                    self.worker.request("helpers", source, what="loading the grader's helper code")
            finally:
                self.worker.deadline = deadline
        if self.hangs and self._tripwires_in != (self.worker.proc, len(self.hangs)):
            self._tripwires_in = (self.worker.proc, len(self.hangs))
            labels = self.worker.request("tripwire", [h.candidates for h in self.hangs], what="preparing the check")
            for hang, label in zip(self.hangs, labels if isinstance(labels, list) else []):
                hang.label = label if isinstance(label, str) else hang.label
        return report

    def remember_hang(self, hang: Hang, check: str, message: str) -> None:
        """A request of `check` timed out (or its worker was stopped, or ended by itself: `hang.why`): the
        definition it hung in (where its stack was, else the function the check called) raises at once in every
        later check, saying so with `message`, why it was stopped."""
        if hang.sampled:
            candidates = [[name, function, line, file] for file, line, function in hang.frames
                          for name in self._defining(file, line)]
        else:
            candidates = [[hang.target, hang.target]] if hang.target else []
        if candidates:
            how = "ended its process in" if hang.ended else "was stopped in" if hang.why else "did not finish in"
            self.hangs.append(RememberedHang(candidates, check, message, how=how))

    def _defining(self, file: str, line: int) -> list[str]:
        """The names bound by the statement of the notebook that holds line `line` of `file` ("<cell N>")."""
        cell = file[len("<cell "):-1]
        for unit in self.extraction.units:
            if str(unit.cell) == cell and unit.line <= line <= unit.line + unit.source.count("\n"):
                return list(unit.names)
        return []

    def hang_message(self, label: str) -> str | None:
        """The message of a check that called `label`, a definition which hung an earlier check (or None)."""
        for hang in self.hangs:
            if hang.label and hang.label == label:
                return hang.later(self.worker.spec.owner)
        return None

    def proxy(self) -> "ProgramProxy":
        """A new module-like proxy to it: what a check gets as `sub` or `ref`."""
        return ProgramProxy(self)

    def explain_unbound(self, name: str) -> str | None:
        """Why a global the notebook binds is not there for its functions (a NameError), or None."""
        failed = self._failed_binding(name)
        if failed:
            return failed
        if self._hints is None:
            self._hints = self.extraction.unbound_hints()
        return self._hints.get(name)

    def _failed_binding(self, name: str, depth: int = 0) -> str | None:
        report = self.worker.report
        for index, unit in enumerate(self.extraction.units):
            if name in unit.names and report and index in report.errors:
                why = report.errors[index]
                found = f"`{name}` is not available: cell {unit.cell} (line {unit.line}) failed when the grader ran it: {why}"
                # it failed for want of a name an earlier statement did not bind (it hung, say): that one is the cause
                missing = re.search(r"NameError: name '(\w+)' is not defined", why)
                cause = self._failed_binding(missing.group(1), depth + 1) if missing and depth < 5 else None
                return f"{found}; {cause}" if cause else found
        return None

    def explain_missing(self, name: str) -> str:
        """The message for a name a check asks of it that is not there: why the notebook's binding failed, or that it
        does not define it."""
        owner = self.worker.spec.owner
        return self.explain_unbound(name) or f"{owner} notebook does not define `{name}`"

    def close(self) -> None:
        """Kill its worker (a later start() starts a fresh one)."""
        self.worker.kill()


@functools.lru_cache(maxsize=8)  # the release's helpers: the same for every submission of a run
def _defined_callables(sources: tuple[str, ...]) -> frozenset:
    """Names the grader's helper code binds with `def`, `class` or `import` (a module) at its top level."""
    names = set()
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Import):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


class ProgramProxy:
    """`sub.NAME` is the notebook's NAME in its worker; `sub.helpers` the grader's helper code there."""

    def __init__(self, program: Program):
        object.__setattr__(self, "_program", program)

    def __getattr__(self, name: str):
        program = object.__getattribute__(self, "_program")
        report = program.start()
        worker = program.worker
        if name == "helpers":
            return Remote(worker, Handle(1, "helpers"), HELPERS_LABEL, program.helper_callables)
        if name in program.stood_in:  # the reference's, in this run (depends_on): defined by the submission or not
            return Remote(worker, Handle(0, "module", name), name)
        if name.startswith("__") or name not in report.defined:
            raise MissingName(program.explain_missing(name))
        if report.defined[name] in ("callable", "module"):  # a handle in any case: looked up where it is used
            return Remote(worker, Handle(0, "module", name), name)
        module = Remote(worker, Handle(0, "module"), "")
        return worker.request("getattr", module, name, what=f"{worker.spec.owner} {name}", child_label=name)

    def defines(self, name: str) -> bool:
        """Whether the notebook defines `name` (or a stand-in answers for it); starts the worker to find out."""
        program = object.__getattribute__(self, "_program")
        return name in program.stood_in or name in program.start().defined

    def binds_at_top(self, name: str) -> bool:
        """Whether the notebook binds `name` with a statement the grader runs, read from its source (no worker)."""
        return object.__getattribute__(self, "_program").binds_all([name])


class JudgeImports:
    """The reference notebook's import statements, run in the judge (instructor code, trusted) when a test
    cell first uses a name one of them binds: a judge whose test cells never use `transformers` never
    imports it."""

    def __init__(self, reference: Extraction):
        self.units = {name: unit for unit in reference.units if unit.kind == "import" for name in unit.names}
        self.namespace: dict = {}
        self.tried: set[int] = set()

    def binds(self, name: str) -> bool:
        """Whether one of the reference's import statements binds `name`."""
        return name in self.units

    def resolve(self, name: str):
        """The object `name` is bound to by the reference's import, run on first use (at most once per statement);
        KeyError where none binds it or the import failed in the judge (the name is then the submission's)."""
        if name not in self.namespace:
            unit = self.units.get(name)
            if unit is None or id(unit) in self.tried:
                raise KeyError(name)
            self.tried.add(id(unit))
            try:
                exec(compile("\n" * (unit.line - 1) + unit.source, f"<reference cell {unit.cell}>", "exec"),
                     self.namespace)
            except Exception:  # noqa: BLE001 - an import the judge lacks: the name is then the submission's
                pass
        if name not in self.namespace:
            raise KeyError(name)
        return self.namespace[name]


def judge_imports(reference: Extraction) -> JudgeImports:
    """The reference's imports, to run in the judge on first use (see JudgeImports)."""
    return JudgeImports(reference)
