"""`autograder check SUBMISSION.ipynb`: run a notebook's public checks from a shell.

The public checks are the notebook's own test cells (as students see them: hidden sections are not
in their copy). They run exactly as the grader runs them: the notebook's definitions are extracted
and loaded in a worker process, and each test cell runs in the judge against them, so a check passes
here exactly when its public code passes in grading. The worker is confined as strongly as the machine
allows, down to resource limits only (it is the student's own code on the student's own machine), and the
output says so once when that is less than full. Hidden checks are not run (a student's copy
does not have them), so passing every public check does not mean full marks. An assignment's `[seed] cells`
(otter's seeding of every cell) applies here as in grading: the build records it in the student notebook
(autograder/notebook/seedvar.py), and the extraction runs the same seeding statement before each cell's statements.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from autograder.config import Limits
from autograder.judge import CheckResult, Judge
from autograder.program import Program, judge_imports
from autograder.notebook.extract import Extraction, extract
from autograder.notebook.load import NotebookError, read_notebook
from autograder.notebook.markers import MarkerError, is_test_cell
from autograder.notebook.seedvar import cell_seeding, notebook_seed
from autograder.release import names_checks_read
from autograder.sandbox import Choice, Confinement, WorkerSpec, choose
from autograder.student import resolve_part
from autograder.checkspecs import test_cell_check
from autograder.testing import CheckSpec
from autograder.status import PASSED


@dataclass
class CheckRun:
    """The outcome of `autograder check` on one notebook: each public check's result, notes on the load, or the error
    that stopped it."""
    notebook: str
    results: list[CheckResult]
    notes: list[str]
    error: str = ""

    @property
    def ok(self) -> bool:
        """Whether every public check passed and nothing stopped the run."""
        return not self.error and all(r.status == PASSED for r in self.results)

    def to_dict(self) -> dict:
        """It as the JSON `autograder check --json` prints: each check's name, part, status and message."""
        return {"notebook": self.notebook, "error": self.error, "notes": self.notes,
                "results": [{"name": r.name, "part": r.part, "status": r.status, "message": r.message}
                            for r in self.results]}


def public_specs(nb) -> list[CheckSpec]:
    """The notebook's test cells as checks (their code is public: it is in the notebook)."""
    return [test_cell_check(cell, number, "the notebook") for number, cell in enumerate(nb.cells, start=1)
            if cell.get("cell_type") == "code" and is_test_cell(cell)]


_chosen: dict[tuple[int, int], Choice] = {}  # the ladder's choice, probed once per process and limits


def student_confinement(limits: Limits) -> tuple[Confinement, str]:
    """The strongest confinement this machine allows (sandbox/ladder.py), down to none: the student's own code
    on the student's own machine may run unconfined. Returns it, and a note the first time it is weaker than
    full (said once per process)."""
    conf = Confinement(memory_bytes=limits.memory_mb * 2**20, file_bytes=limits.output_mb * 2**20)
    key = (conf.memory_bytes, conf.file_bytes)
    first = key not in _chosen
    if first:
        _chosen[key] = choose(conf, trusted=True)
    choice = _chosen[key]
    note = ""
    if first and choice.weaker:
        note = (f"your notebook ran with {choice.level} confinement, the strongest this machine allows "
                f"({choice.status}): enough for your own code on your own machine (the grader confines submissions on its own)")
    return replace(conf, level=choice.level), note


def files_beside(path: Path, nb) -> dict[str, str]:
    """The files the notebook reads by a literal relative path that lie beside it (data/iris.csv): visible to its
    worker, read-only, at the same relative paths, as the grader ships them."""
    from autograder.notebook.opened import files_read, normal_path, path_literals

    found = {}
    # read by a literal, or by a name bound to one (`DATA_PATH = "data/points.csv"`): the student's own files
    for literal in [o.path for o in files_read(nb)] + path_literals(nb):
        name = normal_path(literal)
        target = Path(path).resolve().parent / name
        if name and ".." not in name.split("/") and target.is_file():
            found[name] = str(target)
    return found


def run_checks(path: Path, part: str | None = None, limits: Limits | None = None) -> CheckRun:
    """Run the public checks of the notebook at `path` (of one `part` where given) under `limits`, as grading runs
    them. A notebook that cannot be read, or an unknown part, gives a CheckRun whose `error` says so; one without
    test cells an empty CheckRun."""
    limits = limits or Limits()
    try:
        nb, notes = read_notebook(path)
    except NotebookError as exc:
        return CheckRun(str(path), [], [], str(exc))
    try:
        every = public_specs(nb)
    except MarkerError as exc:  # a test cell's metadata edited by hand
        return CheckRun(str(path), [], notes, str(exc))
    if not every:  # nothing to run: no worker, no load notes (describe says why)
        return CheckRun(str(path), [], notes)
    if part is not None:  # "1", "part1" or the full name (autograder.student.resolve_part)
        try:
            part = resolve_part(part, list(dict.fromkeys(s.part for s in every)))
        except ValueError as exc:
            return CheckRun(str(path), [], notes, f"no public checks to run: {exc}")
    specs = [s for s in every if part is None or s.part == part]
    # each cell seeded as grading seeds it ([seed] cells, recorded in the student notebook by the build)
    extraction = extract(nb, names_checks_read([s.source for s in specs], []), each_cell=cell_seeding(notebook_seed(nb)))
    notes += [f"cell {s.cell} was not run: {s.reason}" for s in extraction.skipped if "tagged" not in s.reason]
    confinement, said = student_confinement(limits)
    confinement = replace(confinement, inputs=files_beside(path, nb))
    if said:
        notes.append(said)
    spec = WorkerSpec([u.to_wire() for u in extraction.units], confinement=confinement,
                      import_seconds=limits.import_seconds)
    program = Program(extraction, spec)
    # The public checks never use `reference`; an empty program stands in for it.
    reference = Program(Extraction([], []), WorkerSpec([], label="the reference", owner="the reference's",
                                                       confinement=confinement))
    # Test cells see the notebook's own imports as real modules, as they see the reference's in grading.
    judge = Judge(specs, reference, limits, judge_imports(extraction), cuda=False, inputs=confinement.inputs)
    try:
        results = judge.grade(program)
        report = program.worker.report
        if report:
            for index, why in sorted(report.errors.items()):
                unit = extraction.units[index]
                notes.append(f"cell {unit.cell}, line {unit.line} ({', '.join(unit.names) or 'statement'}): {why}")
    finally:
        program.close()
        reference.close()
        judge.close()
    return CheckRun(str(path), results, notes)


NO_PUBLIC_CHECKS = ("{notebook} has no public checks: none of its cells is a test cell (nbgrader metadata "
                    "`grade: true`), so nothing was run. Is it the student notebook of an assignment built with "
                    "autograder? (Grading runs hidden checks too: whatever this says, it is not your score.)")


def describe(run: CheckRun) -> str:
    """The CheckRun as the text `autograder check` prints: notes, then per part how many public checks pass and each
    one's first line."""
    if run.error:
        return f"{run.notebook}: could not be checked: {run.error}"
    lines = []
    for note in run.notes:
        lines.append(f"note: {note}")
    parts: dict[str, list[CheckResult]] = {}
    for r in run.results:
        parts.setdefault(r.part or "Checks", []).append(r)
    for part, results in parts.items():
        passed = sum(r.status == PASSED for r in results)
        lines.append(f"{part}: {passed} of {len(results)} public check(s) pass")
        for r in results:
            lines.append(f"  [{'PASS' if r.status == 'passed' else 'FAIL'}] {r.name}" +
                         (f": {r.message.splitlines()[0]}" if r.message else ""))
            lines += [f"      {more}" for more in r.message.splitlines()[1:]]
    if not run.results:  # never "0 of 0 public checks pass"
        lines.append(NO_PUBLIC_CHECKS.format(notebook=run.notebook))
        return "\n".join(lines)
    total = sum(r.status == PASSED for r in run.results)
    lines.append(f"{total} of {len(run.results)} public checks pass. "
                 "Grading also runs hidden checks, so this is not your score.")
    return "\n".join(lines)
