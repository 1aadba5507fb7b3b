"""nbgrader on JupyterHub: export an assignment as an nbgrader course, and write this project's grades
into nbgrader's gradebook.

    autograder export nbgrader <name> [--course DIR] [--course-id ID]     (default DIR: ~/<course id>)
    autograder nbgrader-grade <name> [--course DIR] [--student ID ...] [--trusted-submissions]
    autograder rubric <name> DIR/submitted --out RESULTS    (the rubric's points into the same gradebook)

The export writes DIR/nbgrader_config.py and DIR/source/<name>/ (the source notebook, markers and
metadata as nbgrader reads them, plus the files the assignment ships). The source notebook gains:

- a 0-point grade cell `autograder_setup` before the first test cell, whose hidden section defines
  `reference` (the answer key's definitions) and loads the hidden test files, so the hidden parts of
  test cells that compare with `reference` run under `nbgrader autograde`;
- one grade cell per check of the hidden test files (`tests/*.py`), after its part's last test cell; for a
  part without test cells, after the last cell of the part's section (the markdown heading named like the
  part, else the only one numbered like it, "3. A tiny layer" for "3. Tiny layer"), else at the end; whose
  hidden section scores that check in the kernel and shows the points as the cell's result (nbgrader's
  partial credit).

So `nbgrader generate_assignment` and `nbgrader autograde` work on the tree as on any nbgrader course.
`nbgrader autograde` runs student code in the grading kernel, unconfined; `autograder nbgrader-grade`
grades the collected submissions (submitted/<student>/<name>/) with this project instead (student code
in confined workers, the reference in its own worker, GPU checks pending) and writes the scores into
gradebook.db, cell by cell, so formgrader (written answers, review) and `nbgrader export` (the
grades CSV) go on as usual. It also writes feedback/<student>/<name>/<notebook>.html with the files
`nbgrader release_feedback` reads beside it, and assigns late penalties as nbgrader's autograde does.
This module writes the course and the code its notebook runs in nbgrader's kernel (KernelChecks, imported
from here by exported notebooks); grading into the gradebook is autograder/export/gradebook.py.
"""
from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
import shutil
import sys
import warnings
import zlib
from pathlib import Path
from autograder.files import write_atomic
from autograder.status import points_of
from autograder.notebook.markers import cell_source, hand_graded, nbgrader_meta

SETUP_ID = "autograder_setup"
META_KEY = "autograder"
NBGRADER_KEYS = {"schema_version", "grade", "locked", "solution", "task", "grade_id", "points", "checksum",
                 "cell_type"}  # cell metadata: {"check": "<check name>"} on the cells this export adds

CONFIG_TEMPLATE = '''\
# nbgrader configuration written by `autograder export nbgrader` (safe to edit; re-export keeps it).
c = get_config()  # noqa: F821 - nbgrader defines get_config when it reads this file

c.CourseDirectory.course_id = {course!r}
# The student version stubs solutions the way `autograder build` does.
c.ClearSolutions.code_stub = {{"python": "# TODO: your code here\\nraise NotImplementedError()"}}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
# Seconds a cell may run under `nbgrader autograde`.
c.Execute.timeout = {timeout}
# Feedback must not show hidden tests: the setup cell's hidden section holds the reference solution.
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor  # noqa: E402 - nbgrader config files import after get_config()
from nbgrader.preprocessors import ClearHiddenTests, GetGrades  # noqa: E402 - (the same)

c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, CSSHTMLHeaderPreprocessor]
'''


def _slug(name: str) -> str:
    return "ag_" + (re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_").lower() or "check")


def _cell(source: str, grade_id: str, points: float, check: str | None = None):
    import nbformat

    cell = nbformat.v4.new_code_cell(source)
    cell.pop("id", None)
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": grade_id, "locked": True, "points": points,
                                 "schema_version": 3, "solution": False, "task": False}
    if check:
        cell.metadata[META_KEY] = {"check": check}
    return cell


def _mark_hand_graded(nb, release) -> None:
    """A check graded by hand (`manual(...)`) makes the answer cell it names nbgrader's manually graded answer, with
    the check's points: the cell whose grade_id is the check's name, else the first answer cell whose grade_id
    starts with it (otter's `q3_solution_3` for question q3). An imported course keeps those points in its tests."""
    from autograder.deferred import kind_of

    manual = {c.name: c.points for c in release.checks if (kind := kind_of(c)) and kind.nbgrader_hand_graded}
    metas = [(c, nbgrader_meta(c)) for c in nb.cells]
    answers = [(c, m) for c, m in metas if m.get("solution") and not m.get("task")]
    for name, points in manual.items():
        named = [(c, m) for c, m in answers if m.get("grade_id") == name] or \
            [(c, m) for c, m in answers if str(m.get("grade_id", "")).startswith(f"{name}_") and not m.get("grade")]
        if named:
            cell, meta = named[0]
            meta.update(grade=True, points=points)
            cell.metadata.setdefault(META_KEY, {})["check"] = name  # its points are the check's: no cell of its own
    for cell, meta in answers:  # nbgrader refuses a markdown answer that is not graded
        if cell.get("cell_type") == "markdown" and not meta.get("grade"):
            meta.update(grade=True, points=meta.get("points", 0))


def _complete_metadata(cell) -> None:
    """Every key nbgrader's metadata schema (version 3) requires, defaulted where the source left it out."""
    meta = nbgrader_meta(cell)
    if not meta:
        return
    meta["schema_version"] = 3
    grade_id = meta.get("grade_id")
    if isinstance(grade_id, str) and re.search(r"[^A-Za-z0-9_\-]", grade_id):  # nbgrader's pattern for ids
        cell.metadata.setdefault(META_KEY, {}).setdefault("check", grade_id)  # the check keeps its name
        meta["grade_id"] = re.sub(r"[^A-Za-z0-9_\-]", "_", grade_id)
    for key in ("grade", "solution", "locked", "task"):
        meta.setdefault(key, False)
    if meta["grade"]:
        meta.setdefault("points", 0)
    if (meta["grade"] or meta["solution"] or meta["task"]) and not meta.get("grade_id"):
        source = str(cell.get("source", "")).encode("utf-8", "surrogatepass")
        meta["grade_id"] = "cell-" + hashlib.sha256(source).hexdigest()[:12]


def nbgrader_notebook(source_nb, release, reference_source: str):
    """The source notebook as an nbgrader source notebook (see the module docstring)."""
    nb = copy.deepcopy(source_nb)
    minor = nb.get("nbformat_minor", 0)
    for cell in nb.cells:  # nbgrader's schema allows only its own keys: ours ("part", ...) move aside
        meta = cell.get("metadata", {}).get("nbgrader")
        if isinstance(meta, dict):
            ours = {k: meta.pop(k) for k in sorted(set(meta) - NBGRADER_KEYS)}
            if ours:
                cell.metadata.setdefault(META_KEY, {}).update(ours)
    _mark_hand_graded(nb, release)
    for cell in nb.cells:
        _complete_metadata(cell)
    by_hand = set(hand_graded_ids(nb))  # nbgrader grades them itself
    file_checks = [c for c in release.checks if c.fn is not None and c.name not in by_hand]
    tests = {p.name: p.read_text(encoding="utf-8") for p in sorted((release.dir / "tests").glob("*.py"))}
    # packed: a marker nbgrader reads (hidden tests, solutions) inside the reference or a test file must not
    # count as one of this cell's
    packed = base64.b64encode(zlib.compress(json.dumps([reference_source, tests, release.helpers]).encode())).decode()
    setup = ("# Grading setup: nothing to do here.\n### BEGIN HIDDEN TESTS\n"
             "from autograder.export.nbgrader import KernelChecks as _AgKernelChecks\n"
             f"_ag_checks = _AgKernelChecks.unpack({packed!r})\n"
             "reference = _ag_checks.reference\n### END HIDDEN TESTS")
    cells = list(nb.cells)
    test_positions = [i for i, c in enumerate(cells) if c.get("cell_type") == "code"
                      and c.get("metadata", {}).get("nbgrader", {}).get("grade")
                      and not c.get("metadata", {}).get("nbgrader", {}).get("solution")]
    last_of_part = {}
    for i in test_positions:
        part = str(cells[i].metadata.get(META_KEY, {}).get("part", ""))
        last_of_part[part] = i
    sections = _part_sections(cells)
    inserts: dict[int, list] = {}
    for spec in file_checks:
        where = last_of_part.get(spec.part, len(cells) - 1)
        if spec.part not in last_of_part:  # no test cell: after its section, where what it reads is defined
            end = _section_end(sections, spec.part, len(cells) - 1)
            where = end if _defined_by(spec, cells, end, release.helpers) else where
        gpu = " It needs a GPU." if spec.gpu or spec.name in release.config.gpu_checks else ""
        source = (f"# Hidden check: {spec.name} ({spec.points:g} point{'' if spec.points == 1 else 's'}). Nothing to do here.{gpu}\n"
                  f"### BEGIN HIDDEN TESTS\n_ag_checks.score({spec.name!r}, globals())\n### END HIDDEN TESTS")
        inserts.setdefault(where, []).append(_cell(source, _slug(spec.name), spec.points, spec.name))
    out = []
    # before the first cell that grades: a test cell, or the cell the first hidden checks follow
    first_test = min([*test_positions[:1], *inserts, len(cells)])
    for i, cell in enumerate(cells + [None]):
        if i == first_test:
            out.append(_cell(setup, SETUP_ID, 0))
        if cell is not None:
            out.append(cell)
            out += inserts.get(i, [])
    nb.cells = out
    if minor >= 5:  # nbformat 4.5 wants cell ids; nbgrader keeps them
        for i, cell in enumerate(nb.cells):
            cell.setdefault("id", f"autograder-{i}")
    return nb


_HEADING_LINE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_POINTS_SUFFIX = re.compile(r"\s*\(\s*\d+(?:\.\d+)?\s*points?\s*\)\s*$", re.IGNORECASE)
_SECTION_NUMBER = re.compile(r"^(\d+(?:\.\d+)*)(?:[.):]|\s|$)")
_MARKER = re.compile(r"^#+\s*(BEGIN|END)\s+(SOLUTION|HIDDEN TESTS|QUESTION|PROMPT|TESTS?)\b", re.IGNORECASE)


def _part_key(text: str) -> str:
    return " ".join(_POINTS_SUFFIX.sub("", text).split()).lower()


def _part_sections(cells) -> list[tuple[str, int]]:
    """(heading text, index of the section's last cell) for each markdown heading cell: a section runs to the cell
    before the next heading of its level or above. A marker line (`### BEGIN SOLUTION`) is no heading."""
    heads = []
    for i, cell in enumerate(cells):
        if cell.get("cell_type") != "markdown":
            continue
        found = [m for m in map(_HEADING_LINE.match, cell_source(cell).split("\n")) if m and m.group(2)
                 and not _MARKER.match(m.group(0))]
        if found:
            heads.append((i, len(found[0].group(1)), found[0].group(2)))
    sections = []
    for n, (_, level, text) in enumerate(heads):
        after = [j for j, other, _ in heads[n + 1:] if other <= level]
        sections.append((text, (after[0] if after else len(cells)) - 1))
    return sections


def _section_end(sections: list[tuple[str, int]], part: str, default: int) -> int:
    """The last cell of the part's section: the heading named like the part ("3. A tiny layer (2 points)" for "3.
    A tiny layer"), else the one heading numbered like it ("3. A tiny layer" for "3. Tiny layer"); else `default`."""
    same = [end for text, end in sections if _part_key(text) == _part_key(part)]
    if same:
        return same[-1]
    number = _SECTION_NUMBER.match(part.strip())
    numbered = [end for text, end in sections if number and (m := _SECTION_NUMBER.match(text.strip()))
                and m.group(1) == number.group(1)]
    return numbered[0] if len(numbered) == 1 else default


def _defined_by(spec, cells, index: int, helpers: list[str]) -> bool:
    """Whether the code cells up to `index` bind every name of the notebook the check reads (`sub.NAME`, `ref.NAME`,
    in its function, the test file's functions it calls and the worker helpers it calls, with every helper those
    call) that a later cell binds: the check's cell may stand there."""
    from autograder.build import _check_reads, worker_helper_reads
    from autograder.cell_names import bound_at_top

    direct = worker_helper_reads(helpers)
    closed: dict[str, set[str]] = {}
    for name in direct:  # a helper calling another helper reads what that one reads
        seen, todo = {name}, [name]
        while todo:
            for other in direct.get(todo.pop(), set()) & set(direct):
                if other not in seen:
                    seen.add(other)
                    todo.append(other)
        closed[name] = set().union(*(direct[n] for n in seen))
    reads = _check_reads(spec, closed) - {"helpers"}
    bound = [bound_at_top(cell_source(c)) if c.get("cell_type") == "code" else frozenset() for c in cells]
    before, after = frozenset().union(*bound[:index + 1]), frozenset().union(*bound[index + 1:])
    return not (reads & after) - before


def hand_graded_ids(nb) -> dict[str, str]:
    """check name -> grade_id of each answer cell graded by hand (otter's `q4_solution_4` for the check q4)."""
    return {c.get("metadata", {}).get(META_KEY, {}).get("check", nbgrader_meta(c).get("grade_id")):
            nbgrader_meta(c).get("grade_id") for c in nb.cells if hand_graded(c)}


def check_grade_ids(nb) -> dict[str, str]:
    """check name -> nbgrader grade_id, for every autograded cell of an exported notebook."""
    out = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") == "code" and meta.get("grade") and not meta.get("solution"):
            grade_id = meta.get("grade_id")
            out[cell.get("metadata", {}).get(META_KEY, {}).get("check", grade_id)] = grade_id
    out.pop(SETUP_ID, None)
    return out


def hand_grade_ids(nb) -> dict[str, str]:
    """check name -> nbgrader grade_id, for every cell formgrader grades by hand (a written answer, a task, a
    manually graded code answer)."""
    out = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        manual = meta.get("task") or (meta.get("grade") and meta.get("solution"))
        if manual and meta.get("grade_id"):
            out[cell.get("metadata", {}).get(META_KEY, {}).get("check", meta["grade_id"])] = meta["grade_id"]
    return out


PROJECT_FILE = "autograder.json"  # in the course folder: where each exported assignment's source lies


def _source_dir(assignment: str, course: Path | None = None) -> Path:
    """solutions/<name> (or the folder given), from here or, for a course exported before, where it was
    exported from (the course's autograder.json): `nbgrader-grade` runs from the course folder too."""

    p = Path(assignment)
    if (p / "assignment.toml").is_file():
        return p.resolve()
    if (Path("solutions") / assignment / "assignment.toml").is_file():
        return (Path("solutions") / assignment).resolve()
    recorded = Path(course or ".") / PROJECT_FILE
    if recorded.is_file():
        source = json.loads(recorded.read_text(encoding="utf-8")).get("assignments", {}).get(p.name)
        if source and (Path(source) / "assignment.toml").is_file():
            return Path(source)
    raise FileNotFoundError(f"no solutions/{assignment}/assignment.toml here, and the course does not say where "
                            f"{p.name!r} was exported from: run this in the project holding solutions/, or give "
                            "the assignment's solutions folder")


def default_course(source: Path, course_id: str | None = None) -> Path:
    """Where `autograder export nbgrader` writes the course when not told: ~/<course id>, outside the project (the
    gradebook holds students' grades: it belongs to no repository); the course id defaults to the project's
    folder name."""
    project = source.resolve().parent.parent
    return Path.home() / (course_id or project.name)


def export_nbgrader(assignment: str, course: Path | None = None, course_id: str | None = None) -> Path:
    """The course tree (see the module docstring) in `course` (default: `default_course`); nbgrader_config.py
    is written once (course id: `course_id`, else the course folder's name) and kept on later exports."""
    import json

    import nbformat

    from autograder.notebook.extract import module_source
    from autograder.grading import resolve_release

    source = _source_dir(assignment)
    release = resolve_release(str(source))
    course = Path(course) if course else default_course(source, course_id)
    name, config = release.config.name, release.config
    nb = nbformat.read(source / config.notebook, as_version=4)
    out = nbgrader_notebook(nb, release, module_source(release.reference))
    target = course / "source" / name
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    nbformat.write(out, target / config.notebook)
    for f in config.files:
        (target / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / f, target / f)
    cfg = course / "nbgrader_config.py"
    if not cfg.exists():
        cfg.write_text(CONFIG_TEMPLATE.format(course=course_id or course.resolve().name,
                                              timeout=int(config.limits.submission_seconds)), encoding="utf-8")
    recorded = course / PROJECT_FILE
    known = json.loads(recorded.read_text(encoding="utf-8")) if recorded.is_file() else {}
    known.setdefault("assignments", {})[name] = str(source)
    write_atomic(recorded, json.dumps(known, indent=1, sort_keys=True) + "\n")
    return course


# -- in the grading kernel (nbgrader autograde) ----------------------------------------------------

class _Local:
    """`sub`/`ref` for a check running in the kernel: names from a namespace, helpers beside them."""

    def __init__(self, namespace: dict, helpers: list[str], owner: str):
        self._ns, self._helper_sources, self._owner, self._helpers = namespace, helpers, owner, None

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        if name == "helpers":
            if self._helpers is None:
                import types

                ns = {"submission": self, "__name__": "helpers"}
                for source in self._helper_sources:
                    exec(compile(source, "<grader helpers>", "exec"), ns)
                self._helpers = types.SimpleNamespace(**{k: v for k, v in ns.items() if not k.startswith("__")})
            return self._helpers
        if name not in self._ns:
            from autograder.sandbox import MissingName

            raise MissingName(f"{self._owner} notebook does not define `{name}`")
        return self._ns[name]

    def defines(self, name: str) -> bool:
        return name in self._ns


def _resolve(dotted: str):
    import importlib

    module, _, attr = dotted.rpartition(".")
    return getattr(importlib.import_module(module), attr) if module else __builtins__[attr]


def _local_module(name: str, text: str, filename: str):
    """A test file or helper module run in the kernel. Values are local here, not proxies: the remote
    helpers act on them directly."""
    import types

    module = types.ModuleType(name)
    exec(compile(text, filename, "exec"), module.__dict__)
    module.keep = lambda fn, *args, **kwargs: fn(*args, **kwargs)
    module.remote_isinstance = lambda obj, dotted: isinstance(obj, _resolve(dotted))
    module.remote_items = lambda obj: list(obj.items()) if hasattr(obj, "items") else list(obj)
    return module


class KernelChecks:
    """The hidden test files' checks, run in the notebook's kernel (nbgrader autograde)."""

    def __init__(self, reference_source: str, test_files: dict[str, str], helpers: list[str]):
        import types

        from autograder.checkspecs import is_helper_module, scoped_modules

        self.reference = types.ModuleType("reference")
        exec(compile(reference_source, "<reference>", "exec"), self.reference.__dict__)
        self.helpers = helpers
        self.specs = {}
        shared = {Path(f).stem: text for f, text in sorted(test_files.items()) if is_helper_module(Path(f))}
        with scoped_modules(shared):
            for name, text in shared.items():  # helper modules (tests/_name.py), importable by the test files
                sys.modules[name] = _local_module(name, text, f"{name}.py")
            for filename, text in test_files.items():
                if is_helper_module(Path(filename)):
                    continue
                module = _local_module(f"_ag_kernel_{Path(filename).stem}", text, filename)
                for obj in vars(module).values():
                    if hasattr(obj, "_ag_check"):
                        self.specs[obj._ag_check.name] = obj._ag_check

    @classmethod
    def unpack(cls, packed: str) -> "KernelChecks":
        """From what the exported notebook's setup cell holds: [reference source, test files, helpers], packed."""
        reference_source, test_files, helpers = json.loads(zlib.decompress(base64.b64decode(packed)))
        return cls(reference_source, test_files, helpers)

    def score(self, name: str, namespace: dict) -> float:
        """Points for one check (shown as the cell's result: nbgrader's partial credit); says why when short."""
        import random

        import torch

        from autograder.judge import _fraction
        from autograder.testing import Fail

        spec = self.specs[name]
        sub = _Local(namespace, self.helpers, "your")
        ref = _Local(vars(self.reference), self.helpers, "the reference's")
        random.seed(0)
        torch.manual_seed(0)
        message = ""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # nbgrader gives 0 to a cell that writes to stderr
            try:
                fraction = _fraction(spec.fn(sub, ref))
            except Fail as exc:
                fraction, message = exc.partial, str(exc)
            except NotImplementedError:
                fraction, message = 0.0, "your code is not implemented yet (it raised NotImplementedError)"
            except AttributeError as exc:
                fraction, message = 0.0, str(exc)
            except AssertionError as exc:
                fraction, message = 0.0, str(exc) or "a hidden check failed"
            except Exception as exc:  # noqa: BLE001 - student code failing is a failed check
                fraction, message = 0.0, f"{type(exc).__name__}: {exc}"
        fraction = min(1.0, max(0.0, float(fraction)))
        if message:
            print(f"{name}: {message}")
        return points_of(fraction, spec.points)
