"""What the importers share: reading the notebook's code, and writing solutions/<name>/.

The assignment written is always: the notebook, tests/<format>_tests.py (the checks), assignment.toml
(listing the data files copied beside the notebook) and IMPORT.md (report.py). Nothing is overwritten
unless asked (`force`). Of the files beside the source notebook, only those the notebook names (or the source's
configuration lists) are shipped to students (a file of another assignment's folder only when named by its path);
IMPORT.md names each file the notebook reads (or the configuration lists) that is not there, and says how to add
one of the others.
"""
from __future__ import annotations

import ast
import builtins
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from autograder.notebook import ipython
from autograder.notebook.extract import bound_names, reads_from_outside
from autograder.importers.report import ImportReport

SKIP_DIRS = {".ipynb_checkpoints", "__pycache__", "submissions"}  # never shipped: checkpoints, students' work


class ImportFailed(ValueError):
    """The source cannot be imported at all (a message for the command line)."""


class NothingToImport(ImportFailed):
    """The source holds nothing of the format asked for (nothing_to_import)."""


def points_text(points: float) -> str:
    """"1 point", "2.5 points": points as a report's line says them."""
    return f"{points:g} point" + ("" if points == 1 else "s")


def data_files(folder: Path) -> list[Path]:
    """Every file beside the notebook (data, images, scripts), relative to `folder`; notebooks, hidden files,
    checkpoints and submissions left out."""
    return sorted(p.relative_to(folder) for p in folder.rglob("*") if p.is_file() and p.suffix != ".ipynb"
                  and not any(part in SKIP_DIRS or part.startswith(".") for part in p.relative_to(folder).parts))


def other_assignments(folder: Path) -> set[Path]:
    """Subfolders of `folder` (relative) that hold a notebook of their own: other assignments, whose files the
    notebook needs only when it names their path."""
    return {p.parent.relative_to(folder) for p in folder.rglob("*.ipynb") if p.parent != folder
            and not any(part in SKIP_DIRS or part.startswith(".") for part in p.relative_to(folder).parts)}


def _mentions(text: str, name: str) -> bool:
    """`name` occurs in `text` as a whole file name (not inside a longer name: data.csv is not in mydata.csv)."""
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?!\.?[\w-])", text) is not None


def _string_constants(sources: list[str]) -> list[str]:
    return [n.value.strip() for s in sources for n in ast.walk(parse(s) or ast.Module([], []))
            if isinstance(n, ast.Constant) and isinstance(n.value, str)]


@dataclass
class Needs:
    """What the notebook names: its text, the strings of its code, the modules it imports, the paths listed."""
    text: str
    strings: list[str]
    modules: set[str]
    listed: list[str]
    others: set[Path]  # other assignments' folders (other_assignments)


def _needed(f: Path, needs: Needs) -> bool:
    """Whether the notebook needs `f`: named by its path, by its name (in any cell: a markdown image counts; not a
    file of another assignment's folder), under a folder a string of the code names, a module (or package) the
    code imports, or under a path `listed`."""
    path, folders = f.as_posix(), [p.as_posix() for p in f.parents if p != Path(".")]
    imported = f.parts[0] in needs.modules if folders else f.suffix == ".py" and f.stem in needs.modules
    by_name = _mentions(needs.text, f.name) and not any(p in needs.others for p in f.parents)
    if imported or _mentions(needs.text, path) or by_name:
        return True
    in_strings = any(re.search(rf"(^|/){re.escape(d)}(/|$)", s.removeprefix("./")) for d in folders for s in needs.strings)
    return in_strings or any(path == x or path.startswith(x.rstrip("/") + "/") for x in needs.listed)


def needed_files(folder: Path, nb, listed: list[str] = ()) -> list[Path]:
    """The files beside the notebook it needs (_needed), relative to `folder`. `listed`: paths the source's
    configuration ships (otter's files:)."""
    sources = [c.get("source", "") for c in nb.cells]
    code = [c.get("source", "") for c in nb.cells if c.get("cell_type") == "code"]
    modules = {name.split(".")[0] for node in statements(code) if isinstance(node, (ast.Import, ast.ImportFrom))
               for name in ([a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""])}
    needs = Needs("\n".join(sources), _string_constants(code), modules, [x.strip().removeprefix("./") for x in listed],
                  other_assignments(folder))
    return [f for f in data_files(folder) if _needed(f, needs)]


def missing_files(folder: Path, nb, shipped: list[Path], listed: list[str], report: ImportReport) -> None:
    """Name what the notebook reads (or the configuration lists) that is not in its folder: `verify` fails on it."""
    from autograder.notebook.opened import unshipped

    cells = nb.cells
    for opened in unshipped(nb, [f.as_posix() for f in shipped]):
        kind = "an image the notebook shows" if cells[opened.cell - 1].get("cell_type") == "markdown" else \
            "a file the notebook reads"
        report.refuse(f"imported notebook, cell {opened.cell}, line {opened.line}", f"`{opened.path}` ({kind})",
                      f"not in {folder}, so not shipped: put it there and import again, or copy it into "
                      f"{report.target} and add it to `files` in assignment.toml (`autograder verify` fails until then)")
    for path in listed:
        if not (folder / path).exists():
            report.refuse("ASSIGNMENT CONFIG", f"files: {path}", f"not in {folder}, so not shipped")


# -- the notebook's code -----------------------------------------------------------------------------------

def parse(source: str):
    """The cell's syntax tree, IPython lines (%magic, !shell, where IPython reads them: notebook/ipython.py) read
    as blank; None when it is not Python."""
    try:
        return ast.parse(ipython.blanked(source, replacement=""))
    except SyntaxError:
        return None


def top_level_bindings(node) -> set[str]:
    """The module-level names a top-level statement binds (extract.bound_names: inside its blocks too, `with
    torch.no_grad(): acc = ...`, never inside the functions, classes and comprehensions it holds)."""
    return set(bound_names(node))


def loaded_names(tree) -> set[str]:
    """Every name read (ast.Load) anywhere in `tree`."""
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def statements(sources: list[str]):
    """The top-level statements of each source in turn (a source that is not Python gives none)."""
    for source in sources:
        tree = parse(source)
        yield from tree.body if tree else []


def notebook_imports(sources: list[str]) -> list[str]:
    """The import statements of the notebook's code (the judge runs them for the tests)."""
    return list(dict.fromkeys(ast.unparse(node) for node in statements(sources)
                              if isinstance(node, (ast.Import, ast.ImportFrom))))


def notebook_names(sources: list[str]) -> set[str]:
    """Names the notebook's code binds at top level (the student's, in grading)."""
    return {name for node in statements(sources) for name in top_level_bindings(node)}


def notebook_names_tests_read(tests: list[str], defined: set[str]) -> set[str]:
    """Notebook names the tests read: read by a test before it, or an earlier test, binds them itself (a test's
    `model, losses = train(X, y)` does not make the notebook's own `model = train(...)` run when it is loaded)."""
    read: set[str] = set()
    bound: set[str] = set()  # by the tests so far (test cells share their variables in notebook order)
    for source in tests:
        read |= reads_from_outside(source) - bound
        bound |= {name for node in (parse(source) or ast.Module([], [])).body for name in top_level_bindings(node)}
    return {name for name in read if name in defined and not hasattr(builtins, name)}


# -- writing ---------------------------------------------------------------------------------------------------

def literal(text: str) -> str:
    """`text` as a readable Python string literal."""
    if "'''" in text or text.endswith(("\\", "'")):  # either would end the triple-quoted string early
        return repr(text)
    return "'''\\\n" + text.replace("\\", "\\\\") + "'''"


def tests_header(docstring: str, runner: str, imports: list[str], seed: str = "") -> list[str]:
    """The start of a tests file; `seed`: what runs before a question's cases (importers/cells.py), shipped into the
    workers."""
    seeding = ["worker_helpers(SEEDING_HELPERS)", f"SEED = {seed!r}  # run before a question's cases, as otter seeds "
               "the cell that checks it", ""] if seed else []
    return [f'"""{docstring}"""',
            f"from autograder.importers.cells import {'SEEDING_HELPERS, ' if seed else ''}{runner}",
            f"from autograder.testing import manual{', worker_helpers' if seed else ''}", "", *seeding,
            f"IMPORTS = {imports!r}  # the notebook's imports, run in the grader when a test uses them", ""]


def reads_function(reads: set[str]) -> list[str]:
    """A function naming the notebook statements the tests need (extraction runs what checks read as sub.NAME)."""
    if not reads:
        return []
    return ["", "", "def names_the_tests_read(sub):",
            '    """Not a check: names the notebook statements the tests need (see release.names_checks_read)."""',
            f"    return {', '.join(f'sub.{n}' for n in sorted(reads))}"]


def prepare(target: Path, force: bool) -> None:
    """Make an empty target folder with tests/; one already there is replaced only with `force` (ImportFailed
    otherwise)."""
    if target.exists():
        if not force:
            raise ImportFailed(f"{target} exists: choose another --name, or --force to replace it")
        shutil.rmtree(target)
    (target / "tests").mkdir(parents=True)


def write_assignment(report: ImportReport, nb, tests: str, title: str, tests_file: str, listed: list[str] = (),
                     settings: str = "") -> None:
    """The notebook, its checks, assignment.toml (`settings`: its tables from the source's configuration) and the
    files beside the source the notebook needs (needed_files; `listed`: what the source's configuration ships); then
    IMPORT.md, naming the files it needs that are missing (missing_files)."""
    import nbformat

    source, target = report.source, report.target
    files = needed_files(source.parent, nb, listed)
    nbformat.write(nb, target / source.name)
    (target / "tests" / tests_file).write_text(tests, encoding="utf-8")
    shipped = ", ".join(f'"{f.as_posix()}"' for f in files)
    (target / "assignment.toml").write_text(
        f"# Imported from {report.fmt}: {source} (autograder import {report.fmt}; see IMPORT.md)\n"
        f'title = "{title}"\nnotebook = "{source.name}"\nfiles = [{shipped}]\n' + (settings + "\n" if settings else ""),
        encoding="utf-8")
    for f in files:
        (target / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source.parent / f, target / f)
    report.convert(f"{len(files)} file(s) shipped with the notebook: {', '.join(f.as_posix() for f in files) or 'none'}")
    missing_files(source.parent, nb, files, listed, report)
    if len(files) < len(data_files(source.parent)):
        report.note(f"the other files of {source.parent.resolve()} are not shipped, as the notebook does not name them "
                    f"(nor the source's configuration): to ship one, copy it into {target} and add it to `files` in "
                    "assignment.toml")
    report.write()


# -- which tool's notebook it is (an import of the other tool's notebook says so) ---------------------------------

def nbgrader_cells(nb) -> int:
    """How many cells nbgrader grades or hands out as answers (metadata solution, grade or task)."""
    from autograder.notebook.markers import nbgrader_meta

    return sum(1 for c in nb.get("cells", []) if any(nbgrader_meta(c).get(k) for k in ("solution", "grade", "task")))


def otter_markers(nb) -> int:
    """How many cells hold a marker of otter-grader's format (either version)."""
    from autograder.notebook.foreign import OTTER, OTTER_OLD, find_foreign

    count = 0
    for cell in nb.get("cells", []):
        source = cell.get("source", "")
        lines = ("".join(source) if isinstance(source, list) else str(source)).split("\n")
        if any(m.style in (OTTER, OTTER_OLD) for m in find_foreign(lines, cell.get("cell_type", ""))):
            count += 1
    return count


def nothing_to_import(nb, source: Path, fmt: str, found: str) -> NothingToImport:
    """The error of an import that found nothing of its format (`found`: what it looked for), naming the other
    format's command when the notebook is in that format."""
    other, count = ("otter", otter_markers(nb)) if fmt == "nbgrader" else ("nbgrader", nbgrader_cells(nb))
    what = "otter-grader marker" if other == "otter" else "nbgrader metadata (solution, grade or task)"
    hint = (f": it looks like an {other} notebook ({count} cell(s) with {what}); import it with `autograder import "
            f"{other} {source} --name NAME`" if count else "")
    return NothingToImport(f"{source}: no {found} found, nothing to import{hint}")
