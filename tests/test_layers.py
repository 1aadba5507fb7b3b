"""The package reads one way: no import runs back up a layer, no modules import each other in a circle
(tools/imports.py, function-level imports included), and lint is clean (ruff, configured in pyproject.toml)."""
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
