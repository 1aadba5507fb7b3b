"""`autograder import nbgrader SOURCE --name NAME`: an nbgrader source notebook, or a folder of them, as an assignment.

Writes solutions/<name>/ (a folder of several notebooks: one assignment per notebook, <name>_<notebook>):
- the notebook: nbgrader's solution and hidden-test delimiters, which nbgrader finds anywhere in a line,
  rewritten as this project's exact markers; each test cell left to students as plain code (its public part,
  tagged skip-grading), since its check now lives in tests/;
- tests/nbgrader_tests.py: one check per test cell, which runs the whole cell (hidden tests included) as
  nbgrader's kernel would (autograder/importers/cells.py), and one `manual` check per item nbgrader grades
  by hand (written answers, free-response code cells, tasks), so its points stay in every total as pending; a
  task's mark scheme (`=== BEGIN MARK SCHEME ===` ... END), instructor-only text nbgrader removes from the
  student version, is in neither notebook (student, answer key) but a comment above the task's check;
- the folder's files the notebook names (data, images, modules it imports), listed in assignment.toml `files`;
- IMPORT.md: what was converted, what was not and why.
Every grade_id and every point of the source becomes a check, a manual check or a line of the report. What
cannot be converted (AUTOTEST, markers of other tools) stays in the notebook, where `build` refuses it by name.
A notebook whose nbgrader metadata nbgrader itself refuses (a grade_id blank or used twice, a grade cell without
points, a mark scheme outside a task cell or unbalanced) is refused whole, before anything is written, naming the
cells.
"""
from __future__ import annotations

import ast
import builtins
import copy
import re
from dataclasses import dataclass, field
from pathlib import Path

from autograder.importers.common import (
    ImportFailed, NothingToImport, literal, loaded_names, notebook_names_tests_read, nbgrader_cells, nothing_to_import, notebook_imports,
    notebook_names, parse, points_text, prepare, reads_function, tests_header, top_level_bindings, write_assignment,
)
from autograder.config import Limits
from autograder.importers.report import ImportReport
from autograder.cell_names import earlier_cells
from autograder.notebook import ipython
from autograder.notebook.foreign import AUTOTEST, OWN, find_foreign
from autograder.notebook.markers import (
    HIDDEN, MarkerError, cell_source, find_regions, hand_graded, is_solution_cell, is_test_cell, nbgrader_meta,
)

TESTS_FILE = "nbgrader_tests.py"
SKIP_TAG = "skip-grading"
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")
_POINTS = re.compile(r"\s*\(\s*\d+(\.\d+)?\s+points?\s*\)\s*$", re.I)


@dataclass(frozen=True)
class CourseSettings:
    """What a course's nbgrader configuration (nbgrader_config.py) changes in how its notebooks read: the delimiters
    nbgrader finds anywhere in a line (ClearSolutions, ClearHiddenTests, ClearMarkScheme), and the seconds a cell
    may run (Execute.timeout, or ExecutePreprocessor.timeout, which it inherits). nbgrader's own defaults
    otherwise."""
    solution: tuple[str, str] = ("BEGIN SOLUTION", "END SOLUTION")
    hidden_tests: tuple[str, str] = ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
    mark_scheme: tuple[str, str] = ("BEGIN MARK SCHEME", "END MARK SCHEME")
    timeout: int | None = None  # only where the configuration sets it (nbgrader's default is 30 s a cell)
    source: str = ""  # the course's nbgrader_config.py the settings were read from, if any
    unread: str = ""  # why the configuration could not be read (nbgrader's defaults are used instead)

    @property
    def own_markers(self) -> dict[str, str]:
        """Each delimiter -> the marker of this project it becomes."""
        return dict(zip((*self.solution, *self.hidden_tests),
                        ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")))


NBGRADER_DEFAULTS = CourseSettings()


def course_settings(nb_path: Path) -> CourseSettings:
    """The settings nbgrader would grade `nb_path` with: its configuration as nbgrader reads it in the course's
    folder, the nearest folder above the notebook with an nbgrader_config.py (the user's and the system's Jupyter
    configuration folders first). nbgrader's defaults, and why, when it cannot be read here (a syntax error, a
    plugin of a package this environment lacks)."""
    from autograder.export.gradebook import nbgrader_config

    course = next((p for p in nb_path.resolve().parents if (p / "nbgrader_config.py").is_file()), None)
    try:
        config = nbgrader_config(course or nb_path.resolve().parent)
    except Exception as exc:  # noqa: BLE001 - the file is Python: anything can go wrong in it
        where = str(course / "nbgrader_config.py") if course else "the Jupyter configuration's nbgrader_config.py"
        return CourseSettings(unread=f"{where} could not be read ({type(exc).__name__}: {exc})")
    d = NBGRADER_DEFAULTS
    timeout = config.Execute.get("timeout", config.ExecutePreprocessor.get("timeout"))
    return CourseSettings(
        solution=_delimiters(config.ClearSolutions, "solution", d.solution),
        hidden_tests=_delimiters(config.ClearHiddenTests, "test", d.hidden_tests),
        mark_scheme=_delimiters(config.ClearMarkScheme, "mark_scheme", d.mark_scheme),
        timeout=timeout if isinstance(timeout, int) and not isinstance(timeout, bool) else None,
        source=str(course / "nbgrader_config.py") if course else "")


def _delimiters(section, what: str, default: tuple[str, str]) -> tuple[str, str]:
    """A preprocessor's begin_<what>_delimeter and end_<what>_delimeter (nbgrader's spelling), else `default`."""
    return (str(section.get(f"begin_{what}_delimeter", default[0])), str(section.get(f"end_{what}_delimeter", default[1])))


@dataclass
class Check:
    """One graded item of an nbgrader notebook as it becomes a check: a test cell (`source`), or a manual check
    (`what`, the mark scheme)."""
    name: str
    points: float
    part: str
    source: str = ""  # a test cell's code, markers kept
    what: str = ""  # a manual check (and only a manual check): what is graded by hand
    scheme: list[str] = field(default_factory=list)  # a task's mark scheme (instructor-only), lines
    cell: int = 0  # its cell's number in the source notebook (1-based)
    magics: list[tuple[int, str]] = field(default_factory=list)  # IPython lines not converted: (line, text)
    depends_on: list[str] = field(default_factory=list)  # its nbgrader metadata's "depends_on", as a source notebook's

    @property
    def manual(self) -> bool:
        """Whether it is graded by hand (nbgrader's manually graded answer or task), not by a test cell."""
        return bool(self.what)


@dataclass
class Conversion:
    """One nbgrader notebook's conversion: the student notebook, its checks, the test cells moved to tests/, what the
    judge needs."""
    notebook: dict
    checks: list[Check] = field(default_factory=list)
    test_cells: set[int] = field(default_factory=set)  # indices of the cells whose checks moved to tests/
    imports: list[str] = field(default_factory=list)  # the notebook's import statements (the judge runs them)
    reads: set[str] = field(default_factory=set)  # notebook names the test cells read
    settings: str = ""  # assignment.toml's tables from the course's configuration (its timeout)


def source_notebooks(source: Path) -> list[Path]:
    """The notebooks to import: `source` itself, or the *.ipynb of a folder in name order; ImportFailed where there
    is none."""
    if source.is_file():
        return [source]
    if not source.is_dir():
        raise ImportFailed(f"{source}: no such notebook or folder")
    found = sorted(p for p in source.glob("*.ipynb"))
    if not found:
        raise ImportFailed(f"{source}: no notebook (*.ipynb) in this folder")
    return found


# -- what nbgrader itself refuses ------------------------------------------------------------------------------

def valid_points(value) -> float | None:
    """nbgrader's points as a number >= 0 (nbgrader reads them with float()), None when they are not."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        points = float(value)
    except (TypeError, ValueError):
        return None
    return points if points >= 0 else None


def mark_scheme(source: str, delimiters: tuple[str, str] = NBGRADER_DEFAULTS.mark_scheme
                ) -> tuple[str, list[str] | None, str]:
    """(the source without nbgrader's mark scheme regions, their lines or None when there is none, what nbgrader
    refuses in them or ""): ClearMarkScheme removes each region, its delimiter lines included."""
    kept, scheme, inside = [], None, False
    for line in source.split("\n"):
        if delimiters[0] in line:
            if inside:
                return source, None, "a mark scheme begins inside another"
            inside, scheme = True, scheme or []
        elif delimiters[1] in line:
            inside = False
        elif inside:
            scheme.append(line)
        else:
            kept.append(line)
    if inside:
        return source, None, f"a mark scheme without {delimiters[1]}"
    if scheme is None:
        return source, None, ""
    return "\n".join(kept).strip("\n"), "\n".join(scheme).strip("\n").split("\n"), ""


def _mark_scheme_problem(cell, delimiters: tuple[str, str]) -> str:
    """What nbgrader refuses about the cell's mark scheme: unbalanced, or outside a task cell."""
    _, scheme, problem = mark_scheme(cell_source(cell), delimiters)
    if not problem and scheme is not None and not nbgrader_meta(cell).get("task"):
        problem = "a mark scheme outside a task cell ('Manually graded task')"
    return problem


# nbgrader's cell metadata format (nbgrader.nbgraderformat.SCHEMA_VERSION: 3 in nbgrader 0.9): an older one it
# upgrades, a newer one it refuses ("Schema version is too new")
NBGRADER_SCHEMA_VERSION = 3


def _schema_problem(meta: dict) -> str:
    version = meta.get("schema_version", 0)
    if isinstance(version, (int, float)) and not isinstance(version, bool) and version > NBGRADER_SCHEMA_VERSION:
        return (f"nbgrader metadata of schema_version {version:g}, newer than nbgrader's own "
                f"({NBGRADER_SCHEMA_VERSION}), which nbgrader cannot read (\"Schema version is too new\") and whose "
                "cells' meaning is not known here")
    return ""


def metadata_problems(nb, settings: CourseSettings = NBGRADER_DEFAULTS) -> list[str]:
    """`cell N: ...` for each grade_id blank or used by an earlier cell, each grade cell or task without valid
    points, each mark scheme unbalanced or outside a task cell, each cell whose metadata is of a schema_version newer
    than nbgrader's: nbgrader refuses such a notebook, and converting it would drop or invent a check (or show a
    mark scheme to students)."""
    problems, seen = [], {}
    for index, cell in enumerate(nb.cells):
        meta, loc = nbgrader_meta(cell), f"cell {index + 1}"
        if "nbgrader" in cell.get("metadata", {}):
            problems += [f"{loc}: {p}" for p in [_schema_problem(meta)] if p]
        if any(d in cell_source(cell) for d in settings.mark_scheme):
            problems += [f"{loc}: {p}" for p in [_mark_scheme_problem(cell, settings.mark_scheme)] if p]
        if not (meta.get("grade") or meta.get("solution") or meta.get("task")):
            continue
        grade_id = meta.get("grade_id")
        if not isinstance(grade_id, str) or not grade_id.strip():
            problems.append(f"{loc}: nbgrader cell without a grade_id")
            continue
        if grade_id in seen:
            problems.append(f"{loc}: grade_id {grade_id!r} is also used by cell {seen[grade_id]}")
        seen.setdefault(grade_id, index + 1)
        if (meta.get("grade") or meta.get("task")) and valid_points(meta.get("points")) is None:
            problems.append(f"{loc}: grade cell {grade_id!r} needs nbgrader 'points' >= 0")
    return problems


def refuse_invalid(nb, nb_path: Path, settings: CourseSettings = NBGRADER_DEFAULTS) -> None:
    """Raise ImportFailed, one line per problem, when nbgrader itself would refuse the notebook's metadata."""
    problems = metadata_problems(nb, settings)
    if problems:
        raise ImportFailed("\n".join(f"{nb_path}: {p} (nbgrader refuses this notebook too: fix the cell (its nbgrader "
                                      "metadata, or its delimiters) and import again)" for p in problems))


# -- one notebook ------------------------------------------------------------------------------------------

def normalize_delimiters(source: str, settings: CourseSettings = NBGRADER_DEFAULTS) -> str:
    """nbgrader's delimiters (found anywhere in a line; the course's own where its configuration sets them) as this
    project's exact markers, indentation kept."""
    lines, markers = source.split("\n"), settings.own_markers
    for i, line in enumerate(lines):
        found = [marker for d, marker in markers.items() if d in line]
        if found:
            lines[i] = line[: len(line) - len(line.lstrip())] + "### " + found[0]
    return "\n".join(lines)


def heading(cell) -> str | None:
    """The last heading of a markdown cell, without nbgrader's "(N points)". A marker line (`### BEGIN SOLUTION`,
    `### END HIDDEN TESTS`, another tool's `# BEGIN QUESTION`) is no heading, though markdown reads it as one: a part
    is never named after a marker."""
    if cell.get("cell_type") != "markdown":
        return None
    lines = cell_source(cell).split("\n")
    markers = {m.line for m in find_foreign(lines, "markdown")} | {i for i, line in enumerate(lines) if OWN.match(line)}
    titles = [m.group(1) for i, m in enumerate(map(_HEADING.match, lines)) if m and i not in markers]
    return _POINTS.sub("", titles[-1]).strip() if titles else None


def public_part(source: str, where: str) -> str:
    """A test cell's source without its hidden-tests regions: what the students' notebook keeps. `where` names the
    cell in errors."""
    lines = source.split("\n")
    hidden = {i for r in find_regions(lines, where) if r.kind == HIDDEN for i in range(r.begin, r.end + 1)}
    return "\n".join(line for i, line in enumerate(lines) if i not in hidden).rstrip("\n")


def convert(nb, where: str, report: ImportReport, settings: CourseSettings = NBGRADER_DEFAULTS) -> Conversion:
    """The notebook with this project's markers, and the checks of its test and hand-graded cells."""
    out = Conversion(copy.deepcopy(nb))
    part = Path(where).stem
    for index, cell in enumerate(out.notebook.cells):
        loc = f"cell {index + 1}"
        part = heading(cell) or part
        cell["source"], scheme, _ = mark_scheme(normalize_delimiters(cell_source(cell), settings), settings.mark_scheme)
        foreign = find_foreign(cell["source"].split("\n"), cell.get("cell_type", ""))
        if foreign:
            _refuse_foreign(cell, loc, foreign[0], report)
        elif cell.get("cell_type") == "code" and is_test_cell(cell):
            out.checks.append(_test_cell(cell, loc, part, report))
            out.test_cells.add(index)
        elif hand_graded(cell):
            out.checks.append(_hand_graded(cell, loc, part, report, scheme or []))
        elif is_solution_cell(cell):
            report.convert(f"{loc}: solution cell {nbgrader_meta(cell).get('grade_id')!r}")
        elif nbgrader_meta(cell).get("grade"):
            report.refuse(loc, f"{cell.get('cell_type')} grade cell {nbgrader_meta(cell).get('grade_id')!r}",
                          "nbgrader grades no such cell (a grade cell is code, or a solution); its points are left out")
    out.imports = notebook_imports(code_sources(out))
    out.reads = notebook_names_tests_read([c.source for c in out.checks if not c.manual], notebook_names(code_sources(out)))
    caveats(out, report)
    return out


def _refuse_foreign(cell, loc: str, marker, report: ImportReport) -> None:
    meta = nbgrader_meta(cell)
    what = f"test cell {meta.get('grade_id')!r} ({points_text(meta.get('points', 0))})" if meta.get("grade") else "cell"
    why = ("nbgrader's AUTOTEST is not implemented: write its tests out as assert statements"
           if marker.style is AUTOTEST else f"{marker.text.strip()!r} is a marker of {marker.style.name}")
    report.refuse(loc, what, f"{why}; the cell is left as it is, and `autograder build` refuses it until then")


def _test_cell(cell, loc: str, part: str, report: ImportReport) -> Check:
    meta = nbgrader_meta(cell)
    name, points = str(meta.get("grade_id")), valid_points(meta.get("points")) or 0.0
    source, converted, left = without_magics(cell["source"])
    cell["source"] = public_part(cell["source"], loc)  # students run it in a kernel, magics included
    cell["metadata"].pop("nbgrader", None)
    cell["metadata"]["tags"] = sorted(set(cell["metadata"].get("tags", [])) | {SKIP_TAG})
    report.convert(f"{loc}: test cell {name!r} ({points_text(points)}) -> check {name!r} in tests/{TESTS_FILE}")
    for line, before, after in converted:
        report.convert(f"{loc}, line {line}: IPython line `{before}` of test cell {name!r} -> "
                       + (f"`{after}` in its check (run once)" if after else "dropped from its check (display only)"))
    depends_on = meta.get("depends_on")
    names = [n for n in depends_on if isinstance(n, str) and n.isidentifier()] if isinstance(depends_on, list) else []
    return Check(name, points, part, source=source, cell=int(loc.split()[-1]), magics=left, depends_on=names)


_TIMEIT_OPTIONS = re.compile(r"^(?:-[nrp]\s*\d+\s+|-[qoct]\s+)*")  # %timeit's options, before its statement
_DROPPED_MAGICS = ("matplotlib",)  # display settings: nothing to run in the grader


def without_magics(source: str) -> tuple[str, list[tuple[int, str, str]], list[tuple[int, str]]]:
    """A test cell's IPython lines converted for the grader, each on its own line (numbers kept): `%time stmt` and
    `%%time` -> the statement; `%timeit [options] stmt` and `%%timeit` -> the statement, run once (an expression's
    value assigned to `_`, as %timeit gives the cell no value); `%matplotlib ...` dropped. Returns (the source,
    [(line, the magic, what replaced it)], [(line, an IPython line left as it is)])."""
    lines, converted, left = source.split("\n"), [], []
    for escape in ipython.escapes(lines):  # where IPython reads them: never a line black starts with `!=`
        number, text = escape.first + 1, escape.text
        indent = escape.indent
        word, _, rest = text.lstrip("%").partition(" ")
        cell_magic = text.startswith("%%")
        if cell_magic and number == 1 and word in ("time", "timeit") and not rest.strip():
            after = ""
        elif not cell_magic and text.startswith("%") and word in ("time", "timeit") and rest.strip():
            stmt = _TIMEIT_OPTIONS.sub("", rest.strip() + " ").strip() if word == "timeit" else rest.strip()
            after = f"_ = {stmt}" if word == "timeit" and _is_expression(stmt) else stmt
        elif not cell_magic and text.startswith("%") and word in _DROPPED_MAGICS:
            after = ""
        else:
            left.append((number, text))
            continue
        lines[number - 1] = indent + (after or ("pass" if indent else ""))
        for continued in range(escape.first + 1, escape.last + 1):
            lines[continued] = ""
        converted.append((number, text, after))
    return "\n".join(lines), converted, left


def _is_expression(code: str) -> bool:
    try:
        ast.parse(code, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _hand_graded(cell, loc: str, part: str, report: ImportReport, scheme: list[str]) -> Check:
    """A manual check keeps the points; the cell keeps only what makes it a solution (stubbed for students). A
    task's mark scheme (nbgrader's instructor-only text) is out of both notebooks, above the check in tests/."""
    meta = nbgrader_meta(cell)
    kind, name, points = hand_graded(cell), str(meta.get("grade_id")), valid_points(meta.get("points")) or 0.0
    for key in ("grade", "points", "task"):
        meta.pop(key, None)
    if meta.get("solution") is False:
        meta.pop("solution")
    report.convert(f"{loc}: {kind} {name!r} ({points_text(points)}) -> manual check {name!r} (pending, graded by hand)")
    if scheme:
        report.convert(f"{loc}: mark scheme of {kind} {name!r} -> out of the student notebook and the answer key, a "
                       f"comment above its manual check in tests/{TESTS_FILE} (for whoever grades it)")
    return Check(name, points, part, what=f"{kind}, nbgrader {loc}", scheme=scheme)


# -- what the test cells need, and what of them cannot hold ------------------------------------------------

def code_sources(out: Conversion) -> list[str]:
    """The notebook's own code (the test cells left out: they run in the grader)."""
    return [cell_source(cell) for index, cell in enumerate(out.notebook.cells)
            if cell.get("cell_type") == "code" and index not in out.test_cells]


def caveats(out: Conversion, report: ImportReport) -> None:
    """Report each test cell whose meaning here differs from its meaning in nbgrader's kernel."""
    defined, earlier = notebook_names(code_sources(out)), {}
    for c in (c for c in out.checks if not c.manual):
        tree = parse(c.source)
        if tree is None:
            report.refuse(c.name, "test cell", "not valid Python: the check fails for every notebook (`verify` says "
                          "so); rewrite the cell")
            continue
        for line, text in c.magics:
            report.refuse(f"cell {c.cell}, line {line}", f"IPython line `{text}` of test cell {c.name!r}", "the check "
                          "runs in the grader, not in a kernel, and this line has no Python equivalent here: rewrite "
                          "it in Python (the check fails for every notebook until then)")
        _rebinds(c, tree, defined, report)
        _foreign_exceptions(c, tree, report)
        _earlier_variables(c, tree, defined, earlier, report)
        for node in tree.body:
            for name in top_level_bindings(node):
                earlier.setdefault(name, c)


def _rebinds(c: Check, tree, defined: set[str], report: ImportReport) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and not isinstance(node.value, ast.Name):
            for name in {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)} & defined:
                report.note(f"test cell {c.name!r} binds `{name}`, which the notebook defines: in the grader this "
                            "changes the test's name only; the student's functions keep calling their own")


def _is_builtin_exception(name: str) -> bool:
    value = getattr(builtins, name, None)
    return isinstance(value, type) and issubclass(value, BaseException)


def _foreign_exceptions(c: Check, tree, report: ImportReport) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            types = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
            odd = [ast.unparse(t) for t in types if not _is_builtin_exception(ast.unparse(t))]
            if odd:
                report.note(f"test cell {c.name!r} catches `{odd[0]}`: the student's exceptions arrive as the first "
                            "class of their type's MRO the grader has loaded (a built-in one at least), so this catches "
                            "the student's exception only when the grader has the module that defines it loaded")
                return


def _earlier_variables(c: Check, tree, defined: set[str], earlier: dict[str, Check], report: ImportReport) -> None:
    """A variable of a test cell under another heading: that cell runs first when this one is graded (replayed, as
    the kernel kept its variables: cell_names.earlier_cells); said, since its failure then fails this check too."""
    own = {name for node in tree.body for name in top_level_bindings(node)}
    for name in sorted(loaded_names(tree) - own - defined):
        if name in earlier and earlier[name].part != c.part:
            report.note(f"test cell {c.name!r} reads `{name}`, set by test cell {earlier[name].name!r} of another "
                        f"question ({earlier[name].part!r}): that cell runs first when {c.name!r} is graded, as in "
                        "nbgrader's kernel (where it fails, this check fails too)")
            return


# -- writing the assignment ----------------------------------------------------------------------------------

def tests_module(out: Conversion, notebook: str) -> str:
    """The text of the tests module for a converted notebook: one check per test cell (run whole, hidden tests
    included) and one manual check per item graded by hand."""
    lines = tests_header(f"Checks imported from nbgrader's {notebook} (autograder import nbgrader).\n\n"
                         "Each test cell runs whole (hidden tests included) in the grader, with the meaning it has in "
                         "nbgrader's\nkernel (autograder/importers/cells.py); each item nbgrader grades by hand is a "
                         "manual check (pending).\n", "notebook_cell", out.imports)
    variables = dict(zip([c.name for c in out.checks], variable_names([c.name for c in out.checks])))
    # the earlier test cells each one shares variables with: its question's, and those binding a name it reads
    shares = earlier_cells([(c.name, c.part, c.source) for c in out.checks if not c.manual])
    for c, variable in zip(out.checks, variables.values()):
        if c.manual:
            scheme = [f"# Mark scheme of {c.name!r} (nbgrader's, for whoever grades it by hand; not in the notebooks):",
                      *(f"#   {line}".rstrip() for line in c.scheme)] if c.scheme else []
            lines += ["", *scheme, f"check_{variable} = manual({c.name!r}, {c.points:g}, {c.part!r}, {c.what!r})"]
            continue
        earlier = [f"({name!r}, SOURCE_{variables[name]})" for name, _ in shares.get(c.name, [])]
        shared = f", earlier=({''.join(e + ', ' for e in earlier)})" if earlier else ""
        lines += ["", f"SOURCE_{variable} = {literal(c.source)}",
                  f"check_{variable} = notebook_cell({c.name!r}, {c.points:g}, {c.part!r}, IMPORTS, SOURCE_{variable}"
                  f"{shared}, cell={c.cell}{f', depends_on={c.depends_on!r}' if c.depends_on else ''})"]
    return "\n".join(lines + reads_function(out.reads)) + "\n"


def variable_names(names: list[str]) -> list[str]:
    """A distinct Python name per check (grade_ids such as 'a-b' and 'a_b' would otherwise share one, and the
    later check would replace the earlier in the tests module)."""
    out: list[str] = []
    for name in names:
        base = re.sub(r"\W", "_", name)
        variable, n = base, 2
        while variable in out:
            variable, n = f"{base}_{n}", n + 1
        out.append(variable)
    return out


def convert_notebook(nb_path: Path, target: Path) -> tuple[ImportReport, Conversion]:
    """The conversion of one notebook, nothing written; ImportFailed when nbgrader itself would refuse it."""
    import nbformat

    nb = nbformat.read(nb_path, as_version=4)
    if not nbgrader_cells(nb):
        raise nothing_to_import(nb, nb_path, "nbgrader", "nbgrader cell (metadata solution, grade or task)")
    settings = course_settings(nb_path)
    refuse_invalid(nb, nb_path, settings)
    report = ImportReport("nbgrader", nb_path, target)
    try:
        out = convert(nb, str(nb_path), report, settings)
    except MarkerError as exc:  # nbgrader itself would refuse it: an unclosed region, say
        raise ImportFailed(f"{nb_path}: {exc}") from None
    out.settings = "\n\n".join(t for t in (course_notes(report, settings), grading_environment(report)) if t)
    add_notes(report, out)
    return report, out


# what nbgrader's autograde sets while it runs a notebook (nbgrader/converters/autograde.py), which its cells may read
AUTOGRADE_ENVIRONMENT = {"NBGRADER_EXECUTION": "autograde"}


def grading_environment(report: ImportReport) -> str:
    """assignment.toml's [environment]: the variables nbgrader's autograde sets, set while grading here too, in the
    workers and around the checks, so that a cell reading them behaves as under nbgrader."""
    lines = [f'{name} = "{value}"' for name, value in AUTOGRADE_ENVIRONMENT.items()]
    report.convert(f"nbgrader's autograde sets {', '.join(lines)} while it grades -> [environment] in assignment.toml "
                   "(set while grading here too)")
    return "\n".join(["[environment]  # as nbgrader's autograde sets them while it grades", *lines])


def course_notes(report: ImportReport, settings: CourseSettings) -> str:
    """The report's lines on what the course's configuration changed, and assignment.toml's [limits] for its
    timeout (timeout_limits)."""
    changed = [f"{what} {pair[0]!r} / {pair[1]!r}" for what, pair, default in (
        ("solution delimiters", settings.solution, NBGRADER_DEFAULTS.solution),
        ("hidden-test delimiters", settings.hidden_tests, NBGRADER_DEFAULTS.hidden_tests),
        ("mark scheme delimiters", settings.mark_scheme, NBGRADER_DEFAULTS.mark_scheme)) if pair != default]
    if changed:
        report.convert(f"the course's {', '.join(changed)} ({settings.source or 'Jupyter configuration'}) -> this "
                       "project's markers")
    if settings.unread:
        report.note(f"{settings.unread}: nbgrader's own delimiters and this project's time limits are used (a "
                    "delimiter of the course's own is then refused by name below); fix it, or install what it imports, "
                    "and import again")
    return "" if settings.timeout is None else timeout_limits(report, settings.timeout)


def timeout_limits(report: ImportReport, timeout: int) -> str:
    """assignment.toml's [limits] for the seconds nbgrader gives every cell: each check (one test cell) and the
    notebook's loading get at least as many, never less than this project's own; the report says which."""
    defaults = Limits()
    ours = (f"here a check may take {defaults.check_min_seconds:g} to {defaults.check_seconds:g} s and loading the "
            f"notebook {defaults.import_seconds:g} s (assignment.toml [limits])")
    if timeout <= 0:  # nbclient's "no limit"
        report.note(f"nbgrader runs cells without a time limit (Execute.timeout = {timeout}); {ours}")
        return ""
    # nbgrader gives every cell its timeout: so does every check here (one test cell), however fast the reference
    wanted = {key: max(getattr(defaults, key), timeout)
              for key in ("check_min_seconds", "check_seconds", "import_seconds")}
    changed_limits = {key: value for key, value in wanted.items() if value != getattr(defaults, key)}
    if not changed_limits:
        report.note(f"nbgrader stops a cell after {timeout} s (Execute.timeout); {ours}")
        return ""
    lines = [f"{key} = {value:g}" for key, value in changed_limits.items()]
    report.convert(f"the course's Execute.timeout of {timeout} s a cell -> {', '.join(lines)} in "
                   "assignment.toml [limits]")
    return "\n".join(["[limits]", *lines])


def write_notebook(report: ImportReport, out: Conversion, title: str, force: bool) -> ImportReport:
    """Write the converted assignment (notebook, tests module, settings) to `report.target`; a folder already
    there is replaced only with `force` (ImportFailed otherwise)."""
    prepare(report.target, force)
    write_assignment(report, out.notebook, tests_module(out, report.source.name), title, TESTS_FILE,
                     settings=out.settings)
    return report


def add_notes(report: ImportReport, out: Conversion) -> None:
    """Note in the report what grades differently from nbgrader (stderr costs nothing here; no test cell means
    nothing graded automatically)."""
    automatic = [c for c in out.checks if not c.manual]
    if not automatic:
        report.note("no test cell: nothing is graded automatically, and `autograder verify` fails until a check "
                    "is added (tests/*.py) or the notebook is graded by hand")
    report.note("nbgrader gives 0 to a test cell that writes to stderr; here only a failed test costs points")


def import_assignment(source: Path, name: str, solutions: Path, force: bool = False) -> list[ImportReport]:
    """Import a notebook, or every notebook of a folder, into solutions/<name>[_<notebook>]/. Every notebook is
    converted before anything is written: a refused one (ImportFailed) leaves the solutions folder as it was."""
    notebooks = source_notebooks(source)
    single = len(notebooks) == 1
    converted, empty = [], []
    for nb_path in notebooks:
        target = solutions / (name if single else f"{name}_{nb_path.stem}")
        if target.exists() and not force:
            raise ImportFailed(f"{target} exists: choose another --name, or --force to replace it")
        try:
            converted.append((*convert_notebook(nb_path, target),
                              nb_path.stem if single else f"{source.name} {nb_path.stem}"))
        except NothingToImport as exc:  # a folder's notebook without nbgrader cells: not an assignment
            if single:
                raise
            empty.append(str(exc))
    if not converted:
        raise ImportFailed("; ".join(empty))
    for why in empty:
        converted[0][0].note(f"not imported: {why}")
    return [write_notebook(report, out, title, force) for report, out, title in converted]
