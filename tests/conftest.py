"""Shared fixtures: the example assignment built into a temporary folder, and submissions made from it."""
from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest

from autograder.grading import build_and_record

EXAMPLE_SOURCE = Path(__file__).parent / "example_course" / "solutions" / "vectors"


def pytest_addoption(parser):
    parser.addoption("--update-goldens", action="store_true",
                     help="rewrite golden files (generated student notebooks) instead of comparing with them")


@pytest.fixture
def update_goldens(request) -> bool:
    return request.config.getoption("--update-goldens")


@pytest.fixture(scope="session")
def example_build(tmp_path_factory):
    """The example assignment built from a copy of its source, outside the repository."""
    root = tmp_path_factory.mktemp("course")
    source = root / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    paths = build_and_record(source)
    return paths


@pytest.fixture(scope="session")
def rubric_release(tmp_path_factory) -> Path:
    """A built assignment named transformers_bert whose hidden tests declare the accuracy rubric with the default
    settings (the Transformers & BERT notebook's), around the example's small checks: what `autograder rubric`
    reads its settings from."""
    root = tmp_path_factory.mktemp("rubric-course")
    source = root / "solutions" / "transformers_bert"
    shutil.copytree(EXAMPLE_SOURCE, source)
    (source / "tests" / "test_rubric_part.py").write_text(
        "from autograder.rubric import rubric_check\n\n"
        "validation_accuracy = rubric_check(points=8, part='7. Sentiment classifier')\n", encoding="utf-8")
    return build_and_record(source).release


@pytest.fixture(scope="session")
def example_release(example_build):
    from autograder.release import load_release

    return load_release(example_build.release)


def make_submission(path: Path, answer_key: Path, replace: dict[str, str] | None = None,
                    append: list[str] = ()) -> Path:
    """A submission notebook: the answer key with text replaced (bugs) and cells appended (attacks)."""
    nb = nbformat.read(answer_key, as_version=4)
    for old, new in (replace or {}).items():
        hits = 0
        for cell in nb.cells:
            if old in cell.source:
                cell.source = cell.source.replace(old, new)
                hits += 1
        assert hits, f"{old!r} is not in the answer key"
    for source in append:
        nb.cells.append(nbformat.v4.new_code_cell(source))
    nbformat.write(nb, path)
    return path


@pytest.fixture
def submission(tmp_path, example_build):
    def make(name: str, replace=None, append=()):
        return make_submission(tmp_path / name, example_build.release / "answer_key.ipynb", replace, append)
    return make
