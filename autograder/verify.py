"""`autograder verify <name>`: the release is sound before it reaches students.

1. The reference solution (the answer key) gets every point that can be graded here.
2. The untouched student notebook gets 0 on every check: a point it earns is a point for nothing.
3. No line of solution or hidden-test text appears anywhere in assignments/<name>/ (a solution cell
   without markers counts whole); every file the notebook reads by a literal relative path is shipped
   (assignment.toml `files`).
4. The assignment's corpus (solutions/<name>/corpus/, see autograder/corpus.py), if it has one: every
   correct variant gets every point, every wrong submission loses the points it declares, and those
   confined to a part lose none elsewhere.
5. At least one check is graded automatically (an assignment of manual points only, or of none, fails).
6. With `mutants`: how many mutants of the answer key the checks kill, part by part (autograder/mutants/).
   Survivors are reported, not counted as problems.
7. Every function and class the students write (a top-level definition of a solution cell) that no check reaches is
   listed, "not checked by any test: encode (cell 12)" (`unchecked_definitions` says what reaches): no check would
   notice it wrong, and the mutation analysis makes no mutant of it that any check could kill. Listed, not counted
   as a problem (a plotting helper may be meant to go ungraded).

Points graded by hand (nbgrader's written answers, free-response code cells and tasks, which the build makes
manual checks; `manual` checks of the test files) are listed: they are pending in every total, never lost. All submissions (answer key,
student notebook, corpus, mutants) are graded in one batch; the probes of the
surviving mutants in a second one.
"""
from __future__ import annotations

import ast
import contextlib
import dataclasses
import io
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder import corpus as corpus_module
from autograder import mutants as mutants_module
from autograder.build import _read_source_notebook, transform
from autograder.config import load_config
from autograder.grading import GradeOptions, build_and_record, grade
from autograder.notebook.assertions import label_assertions, read_label
from autograder.notebook.markers import HIDDEN, STUB_LINES, cell_source, find_regions, is_test_cell, nbgrader_meta
from autograder.notebook.opened import unshipped
from autograder.release import Release, load_release
from autograder.reports.results import pending_points_text
from autograder.status import PENDING, UNGRADED
from autograder.student import CHECK_TAG, INSTALL_TAG, SETUP_TAG
from autograder.status import MANUAL


@dataclass
class VerifyReport:
    """What `autograder verify` found: problems (any makes it fail), the lines it prints, each submission's result,
    the mutation report."""
    problems: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    results: dict = field(default_factory=dict)  # submission id -> SubmissionResult
    mutation: mutants_module.MutationReport | None = None  # with verify(mutants=True)

    @property
    def ok(self) -> bool:
        """Whether verify passes: no problem found."""
        return not self.problems


def secret_lines(source: Path) -> set[str]:
    """Stripped lines that exist only in solutions, hidden tests or hidden test files. The stubs students are
    handed in place of a solution (nbgrader's and the build's, markers.STUB_LINES) are never among them: a
    source whose answer is still the stub text would otherwise count the student notebook's stub as a leak."""
    config = load_config(source)
    out = transform(_read_source_notebook(source / config.notebook), str(source / config.notebook))
    secret = {s.strip() for s in out.secrets}
    for test_file in sorted((source / "tests").glob("*.py")):
        secret |= {s.strip() for s in test_file.read_text(encoding="utf-8").splitlines()}
    public = {s.strip() for s in out.public}
    return {s for s in secret - public - STUB_LINES if telling(s)}


def telling(line: str) -> bool:
    """Whether a line says something of a solution if found elsewhere: not a keyword line any code has (`else:`,
    `return None`, `pass`, `)`), which a shipped helper file shares with a hidden test by chance."""
    import keyword

    words = re.findall(r"[A-Za-z_][A-Za-z0-9_]*|\d+", line.strip("#").strip())
    named = "".join(w for w in words if not keyword.iskeyword(w) and w not in ("self", "cls"))
    return len(named) >= 5 or (bool(named) and len(line.strip()) >= 20)


FRAMEWORK_TAGS = {SETUP_TAG, CHECK_TAG, INSTALL_TAG}


def find_leaks(assignment_dir: Path, secrets: set[str]) -> list[str]:
    """Lines of `secrets` (solutions, hidden tests) found in a built assignment's files, one message per file and
    line; the cells the build adds are not searched, their outputs are."""
    leaks = []
    for f in sorted(p for p in assignment_dir.rglob("*") if p.is_file()):
        text = f.read_bytes().decode("utf-8", errors="replace")
        if f.suffix == ".ipynb":
            nb = nbformat.reads(text, as_version=4)
            # the cells the build adds (autograder.student) hold the framework's own code and public checks only
            cells = [c for c in nb.cells if not set(c.get("metadata", {}).get("tags", [])) & FRAMEWORK_TAGS]
            candidates = [line for c in cells for line in "".join(c.source).split("\n")]
            candidates += [line for c in nb.cells for o in c.get("outputs", []) for line in str(o).split("\n")]
        else:
            candidates = text.splitlines()
        for line in {c.strip() for c in candidates} & secrets:
            leaks.append(f"{f.relative_to(assignment_dir)}: contains {line[:70]!r}")
    return leaks


def corpus_notebooks(release: Release, corpus: corpus_module.Corpus, folder: Path,
                     student: Path | None = None) -> dict[str, Path]:
    """Write every corpus item as a notebook into `folder`: {submission id: path}."""
    key = release.dir / "answer_key.ipynb"
    return {sub_id: corpus_module.make_notebook(folder / f"{sub_id}.ipynb", key, item, student)
            for sub_id, item in corpus.items()}


def grade_batch(release: Release, submissions: dict[str, Path], out: Path, jobs: int = 2, cuda=None,
                use_recording: bool = True) -> dict:
    """Grade {id: notebook} in one batch: {id: SubmissionResult}."""
    results = grade(release, list(submissions.values()),
                    GradeOptions(out, quiet=True, cuda=cuda, jobs=jobs, summary=False, ids=list(submissions),
                                 use_recording=use_recording))
    return dict(zip(submissions, results))


AUTO_MUTANTS = 60  # with mutants=None, mutation analysis runs when it plans at most this many mutants


def verify(source: Path, cuda: bool | None = None, with_corpus: bool = True, jobs: int = 2,
           mutants: bool | None = False, mutants_limit: int | None = None, mutants_seed: int = 0) -> VerifyReport:
    """`mutants`: True runs the mutation analysis, False does not, None runs it when it is small enough to be
    fast (AUTO_MUTANTS, after the limit) and otherwise says how long it would take."""
    report = VerifyReport()
    paths = build_and_record(source)
    report.problems += paths.problems  # the answer key's statements that fail to load here (grading.record_reference)
    release = load_release(paths.release)
    config = release.config
    corpus = corpus_module.load_corpus(paths.source) if with_corpus else corpus_module.Corpus([], [])
    student = paths.assignment / config.notebook
    key = release.dir / "answer_key.ipynb"
    part_order = parts_in_order(c.part for c in release.checks)
    with tempfile.TemporaryDirectory(prefix="ag-verify-") as tmp:
        folder = Path(tmp) / "corpus"
        submissions = {"answer_key": key, "student_notebook": student,
                       **corpus_notebooks(release, corpus, folder, student)}
        planned: list[mutants_module.Mutant] = []
        deferred = ""  # why the mutation analysis did not run by default
        started = time.monotonic()
        if mutants is not False:
            definitions, skipped = mutants_module.graded_definitions(paths.source / config.notebook, key,
                                                                     release.checks, release.helpers)
            planned, generated = mutants_module.plan(definitions, part_order, mutants_limit, mutants_seed)
            mutants = mutants is True or len(planned) <= AUTO_MUTANTS
            if mutants:
                submissions.update(mutants_module.mutant_notebooks(planned, key, Path(tmp) / "mutants"))
        batch = len(submissions) > 2
        results = grade_batch(release, submissions, Path(tmp) / "out", jobs=jobs if batch else 1, cuda=cuda)
        if mutants:
            outcomes = mutants_module.classify(planned, results, results["answer_key"])
            survivors = [o.mutant for o in outcomes if o.verdict == mutants_module.SURVIVED]
            probe_release = mutants_module.without_substitution(release)  # one job: this process grades it
            if survivors:
                books = mutants_module.probe_notebooks(survivors, key, Path(tmp) / "probes")
                probes = grade_batch(probe_release, books, Path(tmp) / "probes-out", jobs=1, cuda=cuda)
                candidates = mutants_module.settle_same(outcomes, results, probes)
                if candidates:
                    books, reach_of = mutants_module.reach_notebooks([o.mutant for o in candidates], key,
                                                                      Path(tmp) / "reach")
                    probes = grade_batch(probe_release, books, Path(tmp) / "reach-out", jobs=1, cuda=cuda)
                    mutants_module.settle_reach(candidates, probes, reach_of, results["answer_key"])
            report.mutation = mutants_module.report(outcomes, generated, part_order, skipped,
                                                    time.monotonic() - started, mutants_limit, mutants_seed)
        elif planned:
            deferred = _deferred_mutants(len(planned), results, jobs, source)
        located = locate_failures(release, key, paths.source / config.notebook, results["answer_key"],
                                  Path(tmp) / "located", cuda)
    report.results = results
    ref_result, stub_result = results["answer_key"], results["student_notebook"]
    report.problems += reference_problems(ref_result, report.lines, located)
    report.problems += untouched_problems(stub_result)
    report.problems += manual_and_automatic(ref_result, report.lines)
    stubbed = sum(1 for c in stub_result.checks if c.stub_hit)
    report.lines.append(f"reference: {ref_result.score:g}/{ref_result.max_score:g} "
                        f"({pending_points_text(ref_result)} pending); untouched student notebook: "
                        f"{stub_result.score:g}/{stub_result.max_score:g} ({stubbed} checks hit a stub)")
    if len(corpus):
        names = {c.name for c in release.checks}
        found = [p for sub_id, item in corpus.items() for p in corpus_module.problems(item, results[sub_id], names)]
        report.problems += [f"corpus: {p}" for p in found]
        report.lines.append(f"corpus: {len(corpus.variants)} correct variants, {len(corpus.bugs)} wrong submissions "
                            f"({sum(1 for b in corpus.bugs if b.confined_to)} confined to one part): "
                            f"{len(found)} problem(s)")
    report.problems += unshipped_problems(paths.source / config.notebook, config.files)
    report.lines += unchecked_lines(unchecked_definitions(release, paths.source / config.notebook))
    report.lines += [f"note: {line}" for line in loads_by_name(paths.source / "tests")]
    report.lines += [f"note: {note}" for note in paths.notes]
    leaks = find_leaks(paths.assignment, secret_lines(paths.source))
    report.problems += [f"leak: {leak}" for leak in leaks]
    report.lines.append(f"leak check: {len(leaks)} leaked line(s) in {paths.assignment}")
    if report.mutation is not None:
        report.lines += report.mutation.lines()
    if deferred:
        report.lines.append(deferred)
    return report


def _deferred_mutants(count: int, results: dict, jobs: int, source: Path) -> str:
    """What the mutation analysis would cost, from this run's grading time per notebook."""
    times = [r.execution_time for r in results.values() if r.execution_time]
    per = sum(times) / len(times) if times else 1.0
    return (f"mutants: {count} planned, more than verify runs by default ({AUTO_MUTANTS}); about "
            f"{about(count * per / max(1, jobs))} "
            f"at {per:.1f} s per notebook: autograder verify {source} --mutants --jobs {jobs} "
            f"(or --mutants-limit N for a sample)")


def about(seconds: float) -> str:
    """A duration as an estimate reads: `40 s` under a minute, else `3 min` (never `0 min`)."""
    return f"{max(1, round(seconds)):.0f} s" if seconds < 59.5 else f"{seconds / 60:.0f} min"


# -- definitions no check reaches ---------------------------------------------------------------------------------

def unchecked_definitions(release: Release, notebook: Path) -> list[tuple[str, int]]:
    """(name, cell number) of each function and class a solution cell of the source notebook defines at its top
    level that no check reaches, in the notebook's order.

    A check reaches a name it reads itself (a test cell's names read from outside, `sub.NAME` in its test file's
    function and the file's functions it calls, what the worker helpers it calls read: build._check_reads), a name
    any test file or worker helper reads as `sub.NAME` / `submission.NAME` or names in a string of its own (whole:
    `getattr(sub, "EncoderLayer")`, `build(sub, "EncoderLayer")`), and every name of the answer key that a reached
    definition or statement reads in turn (a helper class used only by a checked function is reached). What a
    check reaches is all it can see: whether it tests a reached name well is the mutation analysis's question."""
    from autograder.build import _check_reads, _free_reads, worker_helper_reads
    from autograder.cell_names import definitions_at_top
    from autograder.notebook.markers import SOLUTION
    from autograder.release import names_checks_read

    helper_reads = worker_helper_reads(release.helpers)
    test_sources = [p.read_text(encoding="utf-8") for p in sorted((release.dir / "tests").glob("*.py"))]
    reached: set[str] = set()
    for spec in release.checks:
        reached |= _check_reads(spec, helper_reads)
    reached |= names_checks_read([], test_sources) | _named_in_strings([*test_sources, *release.helpers])
    reached |= {name for names in helper_reads.values() for name in names}
    reads: dict[str, set[str]] = {}  # a name of the answer key -> the globals its code reads
    for unit in release.reference.units:
        for name in unit.names:
            reads.setdefault(name, set()).update(_free_reads(unit.source))
    todo = sorted(reached)
    while todo:
        for name in sorted(reads.get(todo.pop(), set()) - reached):
            reached.add(name)
            todo.append(name)
    unchecked = []
    for index, cell in enumerate(_read_source_notebook(notebook).cells):
        if cell.get("cell_type") != "code" or is_test_cell(cell):
            continue
        source = cell_source(cell)
        if nbgrader_meta(cell).get("solution") or any(r.kind == SOLUTION for r in find_regions(
                source.split("\n"), f"cell {index + 1}")):
            unchecked += [(name, index + 1) for name in definitions_at_top(source) if name not in reached]
    return unchecked


def _named_in_strings(sources: list[str]) -> set[str]:
    """Every string constant of the sources that is a whole identifier: a name the code looks up by its text."""

    names = set()
    for text in sources:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        names |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                  and n.value.isidentifier()}
    return names


def unchecked_lines(unchecked: list[tuple[str, int]]) -> list[str]:
    """verify's line for the definitions no check reaches (none: a line that says so)."""
    if not unchecked:
        return ["every function and class of the solution cells is reached by a check"]
    return ["not checked by any test: " + ", ".join(f"{name} (cell {cell})" for name, cell in unchecked)
            + ": no check calls them or a checked definition that uses them, so a wrong one goes unnoticed (and no "
            "mutant of theirs can be killed)"]


def loads_by_name(tests: Path) -> list[str]:
    """Each call to `load_state_dict` in the hidden test files, by file and line: it copies weights by attribute name,
    so a correct module whose layers the student named otherwise (an nn.Sequential, `self.linear1`) fails the check
    unless the notebook states the names. `testing.load_weights` with `sandbox.weights.load_state` in a worker helper
    copies by name, else by structure."""
    found = []
    for path in sorted(tests.glob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue  # the build has said why a test file cannot be read
        found += [f"tests/{path.name}, line {node.lineno}" for node in ast.walk(tree) if isinstance(node, ast.Call)
                  and isinstance(node.func, ast.Attribute) and node.func.attr == "load_state_dict"]
    return [f"{where}: load_state_dict copies weights by attribute name: a correct module whose layers are named "
            f"otherwise (an nn.Sequential, other attribute names) fails there unless the notebook states the names; "
            f"load_weights copies by name, else by structure (docs/writing-assignments.md)" for where in found]


def unshipped_problems(notebook: Path, shipped: list[str]) -> list[str]:
    """Each file the notebook reads by a literal relative path that the assignment does not ship beside it: the
    student's copy would fail there (autograder/notebook/opened.py says what is found)."""
    nb = nbformat.read(notebook, as_version=4)
    return [f"{notebook.name}: cell {o.cell}, line {o.line}: reads {o.path!r}, which is not shipped: list it in "
            "`files` of assignment.toml (or read it from where students have it)" for o in unshipped(nb, shipped)]


def parts_in_order(parts) -> list[str]:
    """The parts as the assignment numbers them ("2. ..." before "10. ..."), else in the order first met (the
    notebook's test cells come before the tests/ files' checks, which need not follow the notebook's order)."""
    seen = list(dict.fromkeys(parts))
    numbers = [re.match(r"\s*(\d+)[.)]", p) for p in seen]
    if all(numbers):
        return sorted(seen, key=lambda p: (int(re.match(r"\s*(\d+)", p).group(1)), seen.index(p)))
    return seen


def is_manual(check) -> bool:
    """Whether a check result is a manual check's: pending, with the message a hand-graded check starts with."""
    return check.status == PENDING and check.message.startswith(MANUAL)


def reference_problems(ref_result, lines: list[str], located: dict[str, str] | None = None) -> list[str]:
    """What the reference loses; `located`: {check: where its failing assertion is} (locate_failures)."""
    problems, located = [], located or {}
    for c in ref_result.checks:
        at = f" (failing assertion: {located[c.name]})" if c.name in located else ""
        if c.status == PENDING and not is_manual(c):
            lines.append(f"reference   {c.name}: pending (needs a GPU)")
        elif c.status == UNGRADED:  # graded as a submission, it did not pass: Judge.confirm says how
            problems.append(f"{c.name}: {c.grader_problem}{at}")
        elif corpus_module.loses(c):
            problems.append(f"the reference gets {c.score:g}/{c.max_score:g} on {c.name}: {c.message}{at}")
    return problems


# -- where a test cell fails on the answer key (for the instructor: students never see these lines) ----------

def locate_failures(release: Release, key: Path, notebook: Path, ref_result, out: Path, cuda=None) -> dict[str, str]:
    """{check: `cell N, line L: <the line>` (and the assertion's message)} for each of the notebook's own test
    cells that the answer key fails on an assertion. A hidden assertion
    tells the key's result only that a hidden test failed: the key is graded once more, live, with each
    assertion of those cells labelled with its line (notebook/assertions.py). Nothing when no test cell fails."""
    failing = {c.name for c in ref_result.checks if c.status == UNGRADED or corpus_module.loses(c)}
    cells = _test_cells(notebook)
    labelled = {spec.name: _labelled(spec, cells) for spec in release.checks if spec.name in failing}
    labelled = {name: found for name, found in labelled.items() if found is not None}
    if not labelled:
        return {}
    probe = dataclasses.replace(release, checks=[labelled[c.name][0] if c.name in labelled else c
                                                 for c in release.checks])
    with contextlib.redirect_stderr(io.StringIO()):  # its GRADER PROBLEM lines repeat the first run's, labelled
        result = grade_batch(probe, {"answer_key": key}, out, jobs=1, cuda=cuda, use_recording=False)["answer_key"]
    located = {}
    for c in result.checks:
        label = read_label(c.grader_problem) or read_label(c.message) if c.name in labelled else None
        if label is not None:
            line, message = label
            located[c.name] = labelled[c.name][1](line) + (f" ({message})" if message else "")
    return located


def _test_cells(notebook: Path) -> dict[str, tuple[int, list[str], list[int]]]:
    """{grade_id: (cell number, the cell's lines, the cell's line number of each line of the check's source)}
    for the notebook's test cells: the check runs the cell with its SOLUTION marker lines taken out (its HIDDEN
    TESTS markers stay)."""
    cells = {}
    for index, cell in enumerate(_read_source_notebook(notebook).cells):
        if cell.get("cell_type") == "code" and is_test_cell(cell):
            lines = cell_source(cell).split("\n")
            markers = {i for r in find_regions(lines, str(notebook)) if r.kind != HIDDEN for i in (r.begin, r.end)}
            kept = [i + 1 for i in range(len(lines)) if i not in markers]
            cells[str(nbgrader_meta(cell).get("grade_id"))] = (index + 1, lines, kept)
    return cells


def _labelled(spec, cells: dict) -> tuple | None:
    """(the check with its assertions labelled, its _Place), or None for a check that is not a test cell."""
    if spec.fn is None and spec.name in cells:  # the notebook's own test cell
        number, lines, kept = cells[spec.name]
        source = label_assertions(_unhidden(spec.source))
        if source is None:
            return None
        return dataclasses.replace(spec, source=source), _Place(f"cell {number}", lines, kept)
    return None  # a hidden test file's check, or an imported cell: its own message says what failed


def _unhidden(source: str) -> str:
    """A test cell's source with its HIDDEN TESTS marker lines turned into plain comments: every line keeps its
    number, and a labelled assertion's message reaches the instructor (on a hidden line a student reads only that
    a hidden test failed)."""
    lines = source.split("\n")
    for region in find_regions(lines, "test cell"):
        if region.kind == HIDDEN:
            lines[region.begin] = lines[region.end] = "# (hidden tests)"
    return "\n".join(lines)


@dataclass
class _Place:
    """A test cell in words: `cell`, its lines, and the cell's line number of each line of the source it runs."""
    cell: str
    lines: list[str]
    numbers: list[int]

    def __call__(self, line: int) -> str:
        """`cell N, line L: <the line>` for line `line` of the source run."""
        if not 0 < line <= len(self.numbers):
            return self.cell
        number = self.numbers[line - 1]
        return f"{self.cell}, line {number}: {self.lines[number - 1].strip()}"


def untouched_problems(stub_result) -> list[str]:
    """Every point the student notebook earns as handed out is a point given for nothing."""
    problems = []
    for c in stub_result.checks:
        if c.score > 0:
            why = "which runs into a stub" if c.stub_hit else \
                "without running into a stub: does the check test anything the student writes?"
            problems.append(f"the untouched student notebook gets {c.score:g} on {c.name}, {why}")
    return problems


def manual_checks(ref_result) -> list[tuple[str, float]]:
    """The reference's manual checks as (a line naming the check, what it grades and its points, its points)."""
    return [(f"check {c.name} ({c.message[len(MANUAL):].strip(': ') or 'manual'}, {c.max_score:g})", c.max_score)
            for c in ref_result.checks if is_manual(c)]


def manual_and_automatic(ref_result, lines: list[str]) -> list[str]:
    """Lists the points graded by hand (manual checks: the notebook's hand-graded cells and `manual` in test
    files); a problem when no check is graded automatically."""
    checks = manual_checks(ref_result)
    if checks:
        lines.append(f"manual: {sum(p for _, p in checks):g} point(s) graded by hand, pending in every total: "
                     + "; ".join(w for w, _ in checks))
    if not any(not is_manual(c) for c in ref_result.checks):
        return ["no check is graded automatically: add test cells (nbgrader metadata grade: true) or tests/*.py"
                + (" (every point here is graded by hand)" if checks else "")]
    return []
