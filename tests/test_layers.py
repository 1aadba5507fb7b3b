"""The package reads one way: no import runs back up a layer, no modules import each other in a circle, no import
goes past a package's face (tools/imports.py, function-level imports included), and lint is clean (ruff,
configured in pyproject.toml)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import imports  # noqa: E402 - tools/ is not a package: its folder goes on the path first


def test_no_import_runs_back_up_a_layer():
    assert imports.upward_imports(imports.graph()) == []


def test_no_import_circles():
    assert imports.circles(imports.graph()) == []


def test_every_package_lies_in_one_layer():
    assert imports.split_packages(imports.graph()) == []
    graph = {"autograder.grading.run": set(), "autograder.grading.cli_side": set()}
    layers = imports.LAYERS
    try:
        imports.LAYERS = [("grading", ["autograder.grading.run"]), ("command line", ["autograder.grading"])]
        assert imports.split_packages(graph) == ["autograder.grading is in layers grading, command line"]
    finally:
        imports.LAYERS = layers


def test_every_module_is_in_a_layer():
    for module in imports.graph():
        imports.layer_of(module)


def test_the_checker_sees_an_upward_import_and_a_circle():
    graph = {"autograder.files": {"autograder.grading.run"}, "autograder.grading.run": {"autograder.files"}}
    assert imports.upward_imports(graph) == ["autograder.files (foundations) imports autograder.grading.run (grading)"]
    assert imports.circles(graph) == [["autograder.files", "autograder.grading.run"]]


def test_no_module_goes_past_a_face():
    assert imports.face_bypasses(imports.graph()) == []


def test_the_checker_sees_an_import_past_a_face():
    graph = {"autograder.judge": {"autograder.sandbox", "autograder.sandbox.client"},  # the second goes past it
             "autograder.grading.pool": {"autograder.sandbox.cgroups"},  # (`from autograder.sandbox import cgroups`)
             "autograder.sandbox.client": {"autograder.sandbox.lifecycle"},  # inside the package: its own business
             "autograder.entrypoints": {"autograder.sandbox.worker"},  # the process map too
             "autograder.kernel": {"autograder.sandbox"}}
    assert imports.face_bypasses(graph) == [
        "autograder.entrypoints imports autograder.sandbox.worker: autograder.sandbox is imported from outside only "
        "through its __init__ (from autograder.sandbox import ...)",
        "autograder.grading.pool imports autograder.sandbox.cgroups: autograder.sandbox is imported from outside "
        "only through its __init__ (from autograder.sandbox import ...)",
        "autograder.judge imports autograder.sandbox.client: autograder.sandbox is imported from outside only "
        "through its __init__ (from autograder.sandbox import ...)"]


def test_the_sandbox_face_names_each_name_where_it_is_defined_and_imports_nothing_until_asked():
    """Every name of `autograder.sandbox.__all__` loads from the module its table names (and type checkers see the
    same imports); importing the package itself imports none of its modules (a worker imports it first)."""
    import ast

    face = ROOT / "autograder" / "sandbox" / "__init__.py"
    typed = {a.asname or a.name: node.module for node in ast.walk(ast.parse(face.read_text()))
             if isinstance(node, ast.ImportFrom) and node.module for a in node.names}
    done = subprocess.run([sys.executable, "-c", (
        "import sys, autograder.sandbox as s\n"
        "print(sorted(m for m in sys.modules if m.startswith('autograder.sandbox.')))\n"
        "print(sorted(s.__all__) == sorted(s._WHERE))\n"
        "print(all(getattr(s, n).__module__ == 'autograder.sandbox.' + s._WHERE[n] for n in s.__all__\n"
        "          if hasattr(getattr(s, n), '__module__')))\n"
        "print(sorted((n, 'autograder.sandbox.' + m) for n, m in s._WHERE.items()))")],
        capture_output=True, text=True, cwd=ROOT)
    loaded, same_names, defined_there, where = done.stdout.splitlines()
    assert loaded == "[]" and same_names == "True" and defined_there == "True", done.stderr[-2000:]
    assert where == str(sorted((n, m) for n, m in typed.items() if m.startswith("autograder.sandbox.")))


def test_ruff_is_clean():
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[test]' installs it)")
    done = subprocess.run([ruff, "check", "--output-format", "concise", str(ROOT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:]


def test_mypy_is_clean():
    """The files [tool.mypy] names in pyproject.toml (the sandbox, the judge) type-check."""
    mypy = shutil.which("mypy")
    if mypy is None:
        pytest.skip("mypy is not installed (pip install -e '.[test]' installs it)")
    done = subprocess.run([mypy], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:]


# Outside grading/, these import a grading module by name, each for a reason grading/__init__.py states.
GRADING_FACE_EXCEPTIONS = {"autograder.entrypoints", "autograder.rubric.cluster"}


def test_grading_is_imported_through_its_face():
    """grading/__init__.py is the grading package's public API: the commands, the services and the rest import
    grading names from it, never from the module that happens to hold them."""
    graph = imports.graph()
    behind = sorted(f"{m} imports {t}" for m, targets in graph.items() for t in targets
                    if t.startswith("autograder.grading.") and not m.startswith("autograder.grading")
                    and m not in GRADING_FACE_EXCEPTIONS)
    assert behind == []


def test_the_test_authors_api_reads_no_notebook():
    """autograder/testing.py is what hidden test files import; reading checks out of notebook cells and test files
    is the build's (autograder/checkspecs.py), so the authoring API imports nothing that reads a notebook."""
    assert sorted(t for t in imports.graph()["autograder.testing"] if t.startswith("autograder.notebook")) == []
    import autograder.testing as testing

    assert all(hasattr(testing, name) for name in testing.__all__)
