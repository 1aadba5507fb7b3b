"""`autograder export gradescope <name>`: release/<name>/gradescope-autograder.zip for Gradescope.

The zip follows Gradescope's autograder specification. Gradescope unpacks it into /autograder/source,
runs `setup.sh` once to build the image, then for each submission copies `run_autograder` to
/autograder/run_autograder, puts the student's files in /autograder/submission and reads
/autograder/results/results.json.

    setup.sh            Python >= 3.11 venv in /autograder/venv: CPU-only torch and the grader's pinned
                        dependencies (and whatever the notebook imports). No Jupyter, browser or conda.
    run_autograder      grades the submitted notebook, whatever its file name; always leaves a
                        results.json, one that says so when the grader itself failed
    requirements.txt    exact versions, taken from the environment that exported the zip, less torch's CUDA
                        build requirements (nvidia-*, cuda-*, triton) when that environment has CUDA torch;
                        torch itself at the project's one pin (autograder/pins.py; the export warns when
                        the environment has another torch)
    autograder/         this package (the grader), source only
    release/<name>/     manifest, reference definitions, hidden tests: what grading reads

The runner side is `python -m autograder.entrypoints gradescope run` (called by run_autograder; main below).
"""
from __future__ import annotations

import argparse
import ast
import importlib.metadata
import io
import json
import shutil
import stat
import sys
import tempfile
import time
import traceback
import zipfile
from pathlib import Path

from autograder.files import write_atomic
from autograder.pins import TORCH_VERSION

ZIP_NAME = "gradescope-autograder.zip"
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
RELEASE_FILES = ("manifest.json", "reference.json")  # plus tests/*.py: all that load_release reads
_FIXED_TIME = (2020, 1, 1, 0, 0, 0)  # zip entries get a fixed time: the zip is reproducible

RESULT_KEYS = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
               "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
TEST_KEYS = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format", "tags",
             "visibility", "extra_data"}
VISIBILITIES = {"visible", "hidden", "after_due_date", "after_published"}
FORMATS = {"text", "html", "simple_format", "md", "ansi"}

SETUP_SH = r'''#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image for "@TITLE@".
# The grading runtime is lean: a Python >= 3.11 virtual environment with CPU-only torch and the
# grader's pinned dependencies. No Jupyter, no browser, no conda: notebooks are read, never opened.
set -euo pipefail

ROOT="${AUTOGRADER_ROOT:-/autograder}"
SOURCE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$ROOT/venv"
# PyPI's Linux torch wheels pull in about 3 GB of CUDA libraries that a grader without a GPU never
# uses; PyTorch's CPU index serves the same version without them.
TORCH_PIP_ARGS="${AUTOGRADER_TORCH_PIP_ARGS:---index-url @TORCH_INDEX@}"
TORCH_REQUIREMENT="@TORCH@"

find_python() {
    for py in python3.13 python3.12 python3.11 python3; do
        if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$py"; return 0
        fi
    done
    return 1
}

PY="$(find_python || true)"
if [ -z "$PY" ] || ! "$PY" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    # Gradescope's Ubuntu 22.04 image has Python 3.10; Debian and Ubuntu ship venv support separately.
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "setup.sh: needs Python >= 3.11 with the venv module, and there is no apt-get to install it" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    if [ -z "$PY" ]; then
        apt-get install -y -qq --no-install-recommends python3.11 python3.11-venv
        PY=python3.11
    else
        apt-get install -y -qq --no-install-recommends "$("$PY" -c 'import sys; print("python%d.%d-venv" % sys.version_info[:2])')"
    fi
    rm -rf /var/lib/apt/lists/*
fi

"$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check --no-input)
# shellcheck disable=SC2086  # TORCH_PIP_ARGS is a list of pip options
"${PIP[@]}" install --no-cache-dir --no-deps $TORCH_PIP_ARGS "$TORCH_REQUIREMENT"
"${PIP[@]}" install --no-cache-dir -r "$SOURCE/requirements.txt"
PYTHONPATH="$SOURCE" "$VENV/bin/python" -c 'import torch, nbformat, autograder.grading; print("grading runtime ready: torch", torch.__version__)'
# The reference recorded in this image: each submission is then graded without a reference worker, and the
# reference's verdicts are known (autograder/recording.py). Without it grading is the same, only slower.
(cd "$SOURCE" && PYTHONPATH="$SOURCE" "$VENV/bin/python" -m autograder record "$SOURCE/release/@NAME@") || \
    echo "setup.sh: the reference could not be recorded here; each submission will start a live reference"
'''

RUN_AUTOGRADER = r'''#!/usr/bin/env bash
# Gradescope runs this for every submission of "@TITLE@". It grades the notebook in
# /autograder/submission (whatever its file name) and always leaves /autograder/results/results.json:
# when the grader itself fails, that file says so instead of going missing.
ROOT="${AUTOGRADER_ROOT:-/autograder}"
SOURCE="$ROOT/source"
RESULTS="$ROOT/results"
mkdir -p "$RESULTS"
PY="$ROOT/venv/bin/python"
[ -x "$PY" ] || PY="$(command -v python3 || echo python3)"
cd "$SOURCE" 2>/dev/null || cd "$ROOT" || true
PYTHONPATH="$SOURCE${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m autograder.entrypoints gradescope run \
    --root "$ROOT" --release "$SOURCE/release/@NAME@" --forget-release
status=$?
if [ ! -s "$RESULTS/results.json" ] || grep -q '"provisional": true' "$RESULTS/results.json"; then
    cat > "$RESULTS/results.json" <<JSON
{"score": 0.0, "output": "The autograder itself failed (exit status $status) before it finished grading this submission. This is not your grade: your instructor will look into it and re-run it.", "visibility": "visible", "stdout_visibility": "hidden", "extra_data": {"grader_error": true, "exit_status": $status}}
JSON
fi
exit 0
'''


# -- export side ---------------------------------------------------------------------------------

def _packaging():
    try:
        from packaging.markers import default_environment
        from packaging.requirements import Requirement
        from packaging.utils import canonicalize_name
    except ImportError:  # pip always carries a copy
        from pip._vendor.packaging.markers import default_environment
        from pip._vendor.packaging.requirements import Requirement
        from pip._vendor.packaging.utils import canonicalize_name
    return Requirement, canonicalize_name, default_environment


def core_requirements() -> list[str]:
    """The grader's own dependencies: pyproject.toml beside the package, else the installed metadata."""
    import importlib.metadata
    import tomllib

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    if pyproject.is_file():
        return list(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"])
    from autograder import DISTRIBUTION

    return [r for r in importlib.metadata.requires(DISTRIBUTION) or [] if "extra ==" not in r]


def top_level_imports(sources: list[str]) -> set[str]:
    """The top-level module names that the import statements of `sources` import (sources that do not parse
    are skipped)."""
    modules = set()
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules.add(node.module.split(".")[0])
    return modules


def notebook_distributions(import_sources: list[str]) -> tuple[list[str], list[str]]:
    """Installed distributions providing the modules the notebook imports; and modules found nowhere."""
    import importlib.metadata

    modules = top_level_imports(import_sources)
    providers = importlib.metadata.packages_distributions()
    dists, unknown = [], []
    for module in sorted(modules - set(sys.stdlib_module_names) - {"autograder", "__future__"}):
        if module in providers:
            dists += providers[module]
        else:
            unknown.append(module)
    return sorted(set(dists)), unknown


# torch's requirements that only its CUDA build has: PyPI's Linux torch wheel (and those of PyTorch's cuXXX
# indexes) requires these on Linux, about 3 GB; the CPU wheel that setup.sh installs requires none of them (its
# Requires-Dist is filelock, typing-extensions, setuptools, sympy, networkx, jinja2, fsspec and the extras).
# The package metadata cannot tell a CUDA requirement from a CPU one, so these are the families by name:
# NVIDIA's CUDA libraries (nvidia-cublas, nvidia-cudnn-cu13, ...), the CUDA toolkit and its Python bindings
# (cuda-toolkit, cuda-bindings, cuda-pathfinder), and Triton, the GPU kernel compiler (triton, pytorch-triton).
CUDA_BUILD_PREFIXES = ("nvidia-", "cuda-", "pytorch-triton")
CUDA_BUILD_NAMES = frozenset({"triton"})
TORCH_DISTRIBUTIONS = frozenset({"torch"})


def cuda_build_requirement(name: str) -> bool:
    """Whether a requirement of torch, by canonical name, belongs to its CUDA build (the families above)."""
    return name in CUDA_BUILD_NAMES or name.startswith(CUDA_BUILD_PREFIXES)


def pinned_closure(roots: list[str]) -> list[str]:
    """`name==version` for every distribution `roots` need, as installed here (extras and markers honoured).

    torch's own CUDA-build requirements are left out (cuda_build_requirement), and with them whatever only
    they need: the bundle installs the CPU build of torch, which requires none of them. Whatever else needs
    one of them (a root, or a package other than torch) still gets it."""
    import importlib.metadata

    Requirement, canonicalize_name, default_environment = _packaging()
    env = default_environment()
    pins: dict[str, str] = {}
    queue = [(Requirement(r), "") for r in roots]
    seen: set[tuple[str, frozenset]] = set()
    while queue:
        req, extra = queue.pop()
        if req.marker is not None and not req.marker.evaluate({**env, "extra": extra}):
            continue
        name = canonicalize_name(req.name)
        key = (name, frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = importlib.metadata.distribution(req.name)
        except importlib.metadata.PackageNotFoundError:
            raise ValueError(f"{req.name} is needed for grading but not installed here; install it and export "
                             "again (versions are pinned to what is installed)") from None
        pins[name] = dist.version
        for sub in dist.requires or []:
            sub_req = Requirement(sub)
            if name in TORCH_DISTRIBUTIONS and cuda_build_requirement(canonicalize_name(sub_req.name)):
                continue
            if sub_req.marker is None or "extra" not in str(sub_req.marker):
                queue.append((sub_req, ""))
            else:
                queue += [(sub_req, e) for e in req.extras]
    return [f"{n}=={v}" for n, v in sorted(pins.items())]


def _public_version(version: str) -> str:
    return version.split("+", 1)[0]


def requirements(release, extra: list[str] = ()) -> tuple[list[str], str, list[str]]:
    """(pinned requirements.txt lines, the torch requirement, notebook modules with no installed provider)."""
    imports = [u.source for u in release.reference.units if u.kind == "import"]
    dists, unknown = notebook_distributions(imports)
    lines = pinned_closure([*core_requirements(), *dists, *extra])
    torch_line = next(line for line in lines if line.startswith("torch=="))
    torch_req = f"torch=={TORCH_VERSION}"  # the one pin (autograder/pins.py), as the CI workflow installs it
    lines = [torch_req if line == torch_line else line for line in lines]
    return lines, torch_req, unknown


# services no grading on Gradescope uses (the hand-grading page, the similarity report): left out of the bundle
NOT_SHIPPED = ("review", "similarity")


def _package_files() -> list[tuple[str, Path]]:
    package = Path(__file__).resolve().parents[1]
    return sorted((f"autograder/{p.relative_to(package).as_posix()}", p) for p in package.rglob("*.py")
                  if "__pycache__" not in p.parts and p.relative_to(package).parts[0] not in NOT_SHIPPED)


def _add(zf: zipfile.ZipFile, name: str, data: bytes, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, _FIXED_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = ((0o755 if executable else 0o644) | stat.S_IFREG) << 16
    zf.writestr(info, data)


def pending_on_gradescope(release) -> list[tuple[str, float, str]]:
    """(check, points, why) for every check Gradescope cannot score: the accuracy rubric and GPU checks (it has
    no GPU) and checks graded by hand. Their points are not in the autograder's score."""
    from autograder.deferred import why_pending

    out = []
    for spec in release.checks:
        why = why_pending(spec)
        if why:
            pass
        elif spec.gpu or spec.name in release.config.gpu_checks:
            why = "needs a GPU: `autograder grade` on a GPU machine scores it"
        else:
            continue
        out.append((spec.name, spec.points, why))
    return out


def points_summary(release) -> list[str]:
    """What the instructor sets on Gradescope: the autograder's points, and a manual question for the rest."""
    pending = pending_on_gradescope(release)
    held = sum(p for _, p, _ in pending)
    total = release.max_score
    lines = [f"Autograder points (Gradescope: Settings > Autograder points): {total - held:g}"
             + (f" of the assignment's {total:g}" if held else "")]
    if held:
        lines.append(f"Pending on Gradescope, not in the autograder's score: {held:g} points")
        lines += [f"  - {name}: {points:g} points, {why}" for name, points, why in pending]
        lines.append(f"  Add a manually graded question worth {held:g} points to the assignment and enter these "
                     "points there once they are known (docs/platforms.md, Gradescope: the pending points). "
                     "Students see them as pending, not as lost.")
    return lines


def export_gradescope(release, out: Path | None = None, extra: list[str] = ()) -> tuple[Path, list[str]]:
    """Write the autograder zip; returns its path and warnings for the instructor."""
    name = release.config.name
    out = out or release.dir / ZIP_NAME
    lines, torch_req, unknown = requirements(release, list(extra))
    warnings = [f"the notebook imports {m!r}, which no installed package provides: students' code using it "
                f"will fail on Gradescope unless you add it with --pip" for m in unknown]
    installed = _public_version(importlib.metadata.version("torch"))  # CPU builds carry a +cpu tag
    if installed != TORCH_VERSION:
        warnings.append(f"torch {installed} is installed here, and the bundle installs torch {TORCH_VERSION} (the "
                        "pin of autograder/pins.py, which the CI workflow installs too): the answer key was checked "
                        f"with {installed}; install torch=={TORCH_VERSION} here, or change the pin, so that both agree")
    fill = lambda text: (text.replace("@TITLE@", release.config.title.replace('"', "'")).replace("@NAME@", name)  # noqa: E731 - one template filler
                         .replace("@TORCH_INDEX@", TORCH_INDEX).replace("@TORCH@", torch_req))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        _add(zf, "setup.sh", fill(SETUP_SH).encode(), executable=True)
        _add(zf, "run_autograder", fill(RUN_AUTOGRADER).encode(), executable=True)
        _add(zf, "requirements.txt", ("# pinned from the exporting environment; torch is the CPU build\n"
                                      + "\n".join(lines) + "\n").encode())
        for arcname, path in _package_files():
            _add(zf, arcname, path.read_bytes())
        for file in RELEASE_FILES:
            _add(zf, f"release/{name}/{file}", (release.dir / file).read_bytes())
        for test in sorted((release.dir / "tests").glob("*.py")):
            _add(zf, f"release/{name}/tests/{test.name}", test.read_bytes())
        for file in release.config.files:  # the assignment's input files: the workers see them
            _add(zf, f"release/{name}/files/{file}", (release.dir / "files" / file).read_bytes())
    write_atomic(out, buf.getvalue())
    return out, warnings


# -- Gradescope side -----------------------------------------------------------------------------

def notes_at_submission(release, notebook: Path) -> dict[str, str]:
    """What the deferred checks tell a student now, by check name (a saved model the accuracy rubric will measure
    that is not beside the notebook): said while the student can still submit again."""
    from autograder.deferred import student_notes

    return student_notes(release.checks, notebook)


def validate_results(data) -> list[str]:
    """Problems with a results.json against Gradescope's specification (empty list: valid)."""
    problems = []
    if not isinstance(data, dict):
        return ["results.json must hold a JSON object"]
    problems += [f"unknown top-level field {k!r}" for k in sorted(set(data) - RESULT_KEYS)]
    tests = data.get("tests", [])
    if not isinstance(tests, list):
        problems.append("tests must be a list")
        tests = []
    if "score" not in data and not all(isinstance(t, dict) and "score" in t for t in tests):
        problems.append("a score is needed: top-level, or on every test")
    for key in ("score", "execution_time"):
        if key in data and (isinstance(data[key], bool) or not isinstance(data[key], (int, float))):
            problems.append(f"{key} must be a number")
    for key in ("visibility", "stdout_visibility"):
        if key in data and data[key] not in VISIBILITIES:
            problems.append(f"{key} {data[key]!r} is not one of {sorted(VISIBILITIES)}")
    for key in ("output_format", "test_output_format", "test_name_format"):
        if key in data and data[key] not in FORMATS:
            problems.append(f"{key} {data[key]!r} is not one of {sorted(FORMATS)}")
    if "output" in data and not isinstance(data["output"], str):
        problems.append("output must be a string")
    for i, t in enumerate(tests):
        where = f"tests[{i}]"
        if not isinstance(t, dict):
            problems.append(f"{where} must be an object")
            continue
        problems += [f"{where}: unknown field {k!r}" for k in sorted(set(t) - TEST_KEYS)]
        for key in ("score", "max_score"):
            if key in t and (isinstance(t[key], bool) or not isinstance(t[key], (int, float))):
                problems.append(f"{where}: {key} must be a number")
        if "status" in t and t["status"] not in ("passed", "failed"):
            problems.append(f"{where}: status {t['status']!r} is not 'passed' or 'failed'")
        if "visibility" in t and t["visibility"] not in VISIBILITIES:
            problems.append(f"{where}: visibility {t['visibility']!r} is not one of {sorted(VISIBILITIES)}")
        for key in ("name", "output", "number"):
            if key in t and not isinstance(t[key], str):
                problems.append(f"{where}: {key} must be a string")
        if "tags" in t and not (isinstance(t["tags"], list) and all(isinstance(x, str) for x in t["tags"])):
            problems.append(f"{where}: tags must be a list of strings")
    return problems


def _write(path: Path, data: dict) -> None:
    write_atomic(path, json.dumps(data, indent=1, sort_keys=True))


def _failure(output: str, **extra) -> dict:
    return {"score": 0.0, "output": output, "visibility": "visible", "stdout_visibility": "hidden",
            "extra_data": extra}


def _what_was_found(root: Path) -> str:
    """`: it holds a.txt, b.zip` (up to 8 files of the submission), or nothing when it is empty."""
    folder = root / "submission"
    try:
        files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    except OSError:
        return ""
    if not files:
        return " (it is empty)"
    more = f" and {len(files) - 8} more" if len(files) > 8 else ""
    return f" (it holds {', '.join(files[:8])}{more})"


def forget_secrets(release_dir: Path) -> None:
    """Delete what of a release students must not read (reference, hidden tests, manifest); keep `files/`, the
    assignment's input files, which students have anyway and which their code reads while it is graded."""
    for entry in release_dir.iterdir():
        if entry.name == "files" and entry.is_dir() and not entry.is_symlink():
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def run(root: Path, release_dir: Path, forget_release: bool = False) -> int:
    """Grade /autograder/submission; write /autograder/results/results.json. Never raises.

    `forget_release` deletes the release bundle (reference, hidden tests; not the shipped files) once it is loaded, before
    any student code runs: Gradescope starts every submission from a fresh copy of the image, and a
    container that refuses namespaces cannot hide the files from the worker otherwise."""
    results = root / "results" / "results.json"
    start = time.monotonic()
    _write(results, {**_failure("Grading did not finish: the autograder stopped before it was done (a time "
                                "limit, or a crash of the grader). This is not your grade: your instructor "
                                "will look into it."), "extra_data": {"provisional": True}})
    try:
        from autograder.grading import GradeOptions, grade
        from autograder.release import load_release
        from autograder.reports.results import gradescope_json
        from autograder.status import PENDING
        from autograder.submissions import pick_notebook

        release = load_release(release_dir)
        release.recording()  # read now: the recording made by setup.sh in this image, kept in memory
        if forget_release:  # the reference and hidden tests go; the shipped files stay: the workers read them
            forget_secrets(release_dir)
        notebook, note = pick_notebook(root / "submission", release.config.notebook, release.student_code)
        if notebook is None:
            _write(results, _failure(f"No notebook (.ipynb file) found in your submission{_what_was_found(root)}. "
                                     f"Submit your {release.config.notebook}, downloaded from Jupyter (File > "
                                     "Download), as a file of its own (not inside a zip of a zip, nor only in "
                                     ".ipynb_checkpoints).", no_notebook=True))
            return 0
        with tempfile.TemporaryDirectory(prefix="ag-gradescope-") as tmp:
            [result] = grade(release, [notebook], GradeOptions(Path(tmp), quiet=True))
        missing = notes_at_submission(release, notebook)
        result.notes[:0] = [n for n in (note, *missing.values()) if n]
        for check in result.checks:  # the pending check says it too, where the student reads it
            if check.name in missing and check.status == PENDING:
                check.message = f"{check.message}\n{missing[check.name]}"
        data = gradescope_json(result)
        problems = validate_results(data)
        if problems:  # never hand Gradescope a file it rejects: say what went wrong instead
            raise ValueError("results.json would not follow Gradescope's format: " + "; ".join(problems))
        _write(results, data)
        print(data["output"])
        return 0
    except BaseException as exc:  # noqa: BLE001 - whatever happens, results.json must say it
        detail = "".join(traceback.format_exception(exc))
        print(detail, file=sys.stderr)
        _write(results, {**_failure(
            "The autograder itself failed while grading this submission (an error in the grader, not in "
            f"your notebook): {type(exc).__name__}: {exc}. This is not your grade: your instructor will "
            "look into it and re-run it.", grader_error=True), "execution_time": round(time.monotonic() - start, 3)})
        return 1


def main(argv: list[str] | None = None) -> int:
    """`python -m autograder.entrypoints gradescope run --release DIR`: grade the submission in Gradescope's
    /autograder (or --root) and write its results.json; the exit code."""
    p = argparse.ArgumentParser(prog="python -m autograder.entrypoints gradescope")
    sub = p.add_subparsers(dest="op", required=True)
    r = sub.add_parser("run", help="grade /autograder/submission (what run_autograder calls)")
    r.add_argument("--root", default="/autograder")
    r.add_argument("--release", required=True)
    r.add_argument("--forget-release", action="store_true", help="delete the release bundle once loaded")
    args = p.parse_args(argv)
    return run(Path(args.root), Path(args.release), args.forget_release)

