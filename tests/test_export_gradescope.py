"""Gradescope export: the zip's layout, run_autograder in a Gradescope-like tree, results.json's format.

The full `setup.sh` install (a fresh venv, CPU torch, every pinned requirement) takes minutes; it runs
when AUTOGRADER_TEST_SETUP_SH=1 (see docs/platforms.md for the measured sizes).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

import pytest

from autograder.export.gradescope import (
    ZIP_NAME, export_gradescope, notes_at_submission, points_summary, run, validate_results,
)
from autograder.judge import CheckResult
from autograder.release import load_release
from autograder.reports.results import SubmissionResult, gradescope_json
from autograder.submissions import discover, pick_notebook
from tests.conftest import EXAMPLE_SOURCE, make_submission

BROKEN_SOFTMAX = {"shifted = x - x.max(dim=dim, keepdim=True).values": "shifted = x"}  # unstable: NaN for 1000s


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    from autograder.grading import build_and_record

    root = tmp_path_factory.mktemp("gs-course")
    source = root / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    paths = build_and_record(source)
    release = load_release(paths.release)
    zip_path, warnings = export_gradescope(release)
    return release, zip_path, warnings, paths


@pytest.fixture
def tmp_root(tmp_path):
    """A temporary folder outside /tmp when possible: workers get a private /tmp of their own, so a
    grading runtime under /tmp (unlike Gradescope's /autograder) would vanish from their view."""
    try:
        root = Path(tempfile.mkdtemp(prefix="ag-gradescope-test-", dir="/var/tmp"))
    except OSError:
        yield tmp_path
        return
    yield root
    shutil.rmtree(root, ignore_errors=True)


def gradescope_tree(root: Path, zip_path: Path) -> Path:
    """/autograder laid out as Gradescope does, under `root`."""
    for d in ("source", "submission", "results"):
        (root / d).mkdir(parents=True)
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(root / "source")
    for name in ("run_autograder", "setup.sh"):
        (root / "source" / name).chmod(0o755)  # zipfile does not restore modes; Gradescope's unzip does
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    return root


def run_autograder(root: Path, **env) -> dict:
    subprocess.run(["bash", str(root / "run_autograder")], env={**os.environ, "AUTOGRADER_ROOT": str(root), **env},
                   check=True, capture_output=True, timeout=300)
    path = root / "results" / "results.json"
    assert path.is_file(), "run_autograder left no results.json"
    data = json.loads(path.read_text())
    assert validate_results(data) == [], validate_results(data)
    return data


def test_zip_layout(exported):
    release, zip_path, warnings, _ = exported
    assert zip_path == release.dir / ZIP_NAME
    with zipfile.ZipFile(zip_path) as zf:
        names = set(zf.namelist())
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in zf.infolist()}
        reqs = zf.read("requirements.txt").decode().split("\n")
        setup = zf.read("setup.sh").decode()
        run = zf.read("run_autograder").decode()
    assert {"setup.sh", "run_autograder", "requirements.txt", "autograder/grading/run.py",
            "release/vectors/manifest.json", "release/vectors/reference.json",
            "release/vectors/tests/test_hidden.py"} <= names
    assert modes["setup.sh"] == modes["run_autograder"] == 0o755
    assert not any(n.endswith((".pyc", "answer_key.ipynb")) or "__pycache__" in n for n in names)
    pins = [r for r in reqs if r and not r.startswith("#")]
    assert pins and all("==" in r for r in pins), pins
    assert "torch==2.13.0" in pins or any(p.startswith("torch==") and "+" not in p for p in pins)
    lean = " ".join(pins).lower()
    for heavy in ("jupyterlab", "notebook==", "nbconvert", "ipykernel", "playwright", "nbgrader", "conda"):
        assert heavy not in lean, f"{heavy} in the grading runtime"
    cuda = [p for p in pins if p.startswith(("nvidia-", "cuda-", "triton==", "pytorch-triton"))]
    assert not cuda, f"the CPU grading runtime would install CUDA libraries: {cuda}"
    assert "download.pytorch.org/whl/cpu" in setup and "--no-deps" in setup and "conda" not in setup.replace(
        "no conda", "")
    assert "release/vectors" in run and "results.json" in run
    subprocess.run(["bash", "-n", "-c", setup], check=True)
    subprocess.run(["bash", "-n", "-c", run], check=True)


# The Requires-Dist of torch 2.14.1 from PyPI (Linux, CUDA 13) and of the same version's CPU wheel.
CUDA_TORCH_REQUIRES = [
    "filelock", "typing-extensions>=4.10.0", "setuptools>=77.0.3", "sympy>=1.13.3", "networkx>=2.5.1", "jinja2",
    "fsspec>=0.8.5",
    'cuda-toolkit[cublas,cudart,cufft,nvrtc]==13.0.3; platform_system == "Linux"',
    'cuda-bindings<14,>=13.0.3; platform_system == "Linux" and python_version < "3.15"',
    'nvidia-cudnn-cu13==9.24.0.43; platform_system == "Linux"',
    'nvidia-nccl-cu13==2.30.7; platform_system == "Linux"',
    'nvidia-cuda-runtime-cu12==12.8.90; platform_system == "Linux" and platform_machine == "x86_64"',
    'triton~=3.8.0; platform_system == "Linux" and python_version < "3.15"',
    'pytorch-triton-rocm==3.3.0; platform_system == "Linux"',
    'optree>=0.13.0; extra == "optree"', 'pyyaml; extra == "pyyaml"',
]
CPU_TORCH_CLOSURE = {"torch", "filelock", "typing-extensions", "setuptools", "sympy", "mpmath", "networkx",
                     "jinja2", "markupsafe", "fsspec"}


@pytest.fixture
def cuda_torch_installed(monkeypatch):
    """importlib.metadata answering as an environment with PyPI's CUDA torch on Linux would."""
    import importlib.metadata
    from types import SimpleNamespace

    requires = {
        "torch": CUDA_TORCH_REQUIRES, "sympy": ["mpmath<1.4,>=1.1.0"], "jinja2": ["MarkupSafe>=2.0"],
        "cuda-toolkit": ['nvidia-cublas==13.1.1.3; extra == "cublas"', 'nvidia-cuda-nvrtc==13.0.88; extra == "nvrtc"',
                         'nvidia-cuda-runtime==13.0.96; extra == "cudart"'],
        "cuda-bindings": ["cuda-pathfinder~=1.1"],
        "nvidia-cudnn-cu13": ["nvidia-cublas"],
        "triton": ["filelock", "only-for-triton"],  # a package only the CUDA build's requirements need
        "torchvision": ["numpy", "torch==2.14.1", "pillow!=8.3.*,>=5.3.0"],
        "uses-triton": ["triton"],  # something other than torch that needs one of the CUDA build's packages
    }

    def distribution(name):
        key = name.lower().replace("_", "-")
        version = "2.14.1" if key == "torch" else "1.0"
        return SimpleNamespace(version=version, requires=requires.get(key, []))

    monkeypatch.setattr(importlib.metadata, "distribution", distribution)
    monkeypatch.setattr("platform.system", lambda: "Linux")
    return requires


def test_the_closure_of_a_cuda_torch_is_that_of_the_cpu_build(cuda_torch_installed):
    """On a machine with PyPI's CUDA torch (what `pip install torch` gives on Linux), requirements.txt must not
    pin the CUDA libraries, Triton, or what only they need: setup.sh installs the CPU build, which requires none
    of them, and `pip install -r requirements.txt` would bring them back (about 3 GB)."""
    from autograder.export.gradescope import pinned_closure

    names = lambda roots: {line.split("==")[0] for line in pinned_closure(roots)}  # noqa: E731
    assert names(["torch"]) == CPU_TORCH_CLOSURE
    assert names(["nbformat", "torch"]) >= CPU_TORCH_CLOSURE | {"nbformat"}
    assert names(["torchvision"]) == CPU_TORCH_CLOSURE | {"torchvision", "numpy", "pillow"}
    assert names(["torch[optree]"]) == CPU_TORCH_CLOSURE | {"optree"}  # the CPU wheel's extras still apply
    # what is not torch's own CUDA build keeps its requirements, and a root is pinned as asked
    assert names(["torch", "uses-triton"]) == CPU_TORCH_CLOSURE | {"uses-triton", "triton", "only-for-triton"}
    assert names(["nvidia-cudnn-cu13"]) == {"nvidia-cudnn-cu13", "nvidia-cublas"}
    from autograder.export.gradescope import cuda_build_requirement

    assert [n for n in ("nvidia-cublas", "nvidia-cudnn-cu13", "cuda-toolkit", "cuda-bindings", "cuda-pathfinder",
                        "triton", "pytorch-triton-rocm", "nvidia-cuda-runtime-cu12") if not cuda_build_requirement(n)] == []
    assert [n for n in sorted(CPU_TORCH_CLOSURE) if cuda_build_requirement(n)] == []


def test_zip_is_reproducible(exported, tmp_path):
    release, zip_path, _, _ = exported
    again, _ = export_gradescope(release, tmp_path / "again.zip")
    assert again.read_bytes() == zip_path.read_bytes()


@pytest.mark.slow
def test_run_autograder_correct_and_broken(exported, tmp_root):
    tmp_path = tmp_root
    release, zip_path, _, paths = exported
    key = paths.release / "answer_key.ipynb"

    good = gradescope_tree(tmp_path / "good", zip_path)
    make_submission(good / "submission" / "My Homework (final).ipynb", key)  # any file name
    data = run_autograder(good)
    assert data["score"] == release.max_score - 2 == 11  # the written answer's 2 are pending, graded by hand
    assert not (good / "source" / "release").exists() or not any((good / "source" / "release").rglob("*.py")), \
        "the hidden tests are deleted before student code runs"
    assert all(t["status"] == "passed" for t in data["tests"] if t["name"] != "q_softmax")
    assert "status" not in next(t for t in data["tests"] if t["name"] == "q_softmax")  # pending: no verdict yet
    by_name = {t["name"]: t for t in data["tests"]}
    assert by_name["softmax: stable for large logits"]["visibility"] == "after_due_date"
    assert by_name["normalize_test"]["visibility"] == "visible"
    assert {t["max_score"] for t in data["tests"]} <= {1.0, 2.0, 3.0}

    bad = gradescope_tree(tmp_path / "bad", zip_path)
    make_submission(bad / "submission" / "vectors.ipynb", key, BROKEN_SOFTMAX)
    (bad / "submission" / "notes.txt").write_text("not a notebook")
    data = run_autograder(bad)
    by_name = {t["name"]: t for t in data["tests"]}
    assert data["score"] == 10
    assert by_name["softmax: stable for large logits"]["status"] == "failed"
    assert by_name["softmax: stable for large logits"]["score"] == 0
    assert "NaN or inf" in by_name["softmax: stable for large logits"]["output"]
    assert by_name["normalize_test"]["status"] == "passed"


def test_results_written_when_the_grader_fails(exported, tmp_root):
    tmp_path = tmp_root
    _, zip_path, _, _ = exported
    # No notebook in the submission: a result that says so (the runner in-process: no torch to import).
    empty = gradescope_tree(tmp_path / "empty", zip_path)
    (empty / "submission" / "work.zip").write_bytes(b"PK")  # what was handed in instead is named
    assert run(empty, empty / "source" / "release" / "vectors") == 0
    data = json.loads((empty / "results" / "results.json").read_text())
    assert validate_results(data) == [] and data["score"] == 0 and "No notebook" in data["output"]
    assert "(it holds work.zip)" in data["output"]

    # The grader itself crashes (its release bundle is damaged): still a result, saying so.
    crash = gradescope_tree(tmp_path / "crash", zip_path)
    (crash / "submission" / "vectors.ipynb").write_text("{}")
    (crash / "source" / "release" / "vectors" / "reference.json").write_text("not json")
    assert run(crash, crash / "source" / "release" / "vectors") == 1
    data = json.loads((crash / "results" / "results.json").read_text())
    assert validate_results(data) == []
    assert data["extra_data"]["grader_error"] is True and "autograder itself failed" in data["output"]
    assert "execution_time" in data and data["stdout_visibility"] == "hidden"

    # Python cannot even start: run_autograder's own fallback writes the result.
    dead = gradescope_tree(tmp_path / "dead", zip_path)
    (dead / "venv" / "bin").mkdir(parents=True)
    fake = dead / "venv" / "bin" / "python"
    fake.write_text("#!/bin/sh\nexit 3\n")
    fake.chmod(0o755)
    data = run_autograder(dead)
    assert data["extra_data"] == {"grader_error": True, "exit_status": 3} and data["stdout_visibility"] == "hidden"


def test_any_name_and_checkpoints_ignored(tmp_path):
    assert pick_notebook(tmp_path, "vectors.ipynb") == (None, "")
    (tmp_path / "sub").mkdir()
    only = tmp_path / "sub" / "Copy of vectors (3).ipynb"
    only.write_text("{}")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    (tmp_path / ".ipynb_checkpoints" / "vectors-checkpoint.ipynb").write_text("{}")
    (tmp_path / "._vectors.ipynb").write_text("")  # macOS resource fork
    assert pick_notebook(tmp_path, "vectors.ipynb") == (only, "")


def untouched_beside_work(folder: Path, paths) -> Path:
    """A submission holding the notebook as handed out under the assignment's name, and the work elsewhere."""
    folder.mkdir(parents=True)
    shutil.copy(paths.assignment / "vectors.ipynb", folder / "vectors.ipynb")
    return make_submission(folder / "my_work.ipynb", paths.release / "answer_key.ipynb")


def test_one_rule_for_the_notebook_graded(exported, tmp_path):
    """The notebook named like the assignment's unless untouched, then the one with the work: the same choice in
    Gradescope's runner, in `autograder grade` on a Gradescope export, and on an nbgrader tree."""
    release, _, _, paths = exported
    assert release.student_code, "the release knows the student notebook's code cells"
    work = untouched_beside_work(tmp_path / "gs" / "submission_1", paths)
    chosen, note = pick_notebook(tmp_path / "gs" / "submission_1", "vectors.ipynb", release.student_code)
    assert chosen == work
    assert note.startswith("graded my_work.ipynb: vectors.ipynb is the notebook as handed out, with none of your "
                           "code in it, and my_work.ipynb holds the most of your work"), note
    (tmp_path / "gs" / "submission_metadata.yml").write_text("submission_1:\n  :submitters:\n  - :sid: '7'\n")
    nbgrader_tree = tmp_path / "course" / "submitted" / "ann" / "vectors"
    shutil.copytree(tmp_path / "gs" / "submission_1", nbgrader_tree)
    for arg in (tmp_path / "gs", tmp_path / "course"):
        [sub] = discover([arg], "vectors.ipynb", "vectors", released=release.student_code).submissions
        assert sub.path.name == "my_work.ipynb" and sub.note == note

    # the notebook named like the assignment's, with work in it, wins over a larger one
    (tmp_path / "b").mkdir()
    named = make_submission(tmp_path / "b" / "vectors.ipynb", paths.release / "answer_key.ipynb",
                            {"return v / v.norm(dim=-1, keepdim=True)": "return v"})
    big = make_submission(tmp_path / "b" / "scratch.ipynb", paths.release / "answer_key.ipynb")
    big.write_text(big.read_text() + " " * 100_000)
    chosen, note = pick_notebook(tmp_path / "b", "vectors.ipynb", release.student_code)
    assert chosen == named and "named like the assignment's notebook" in note and "scratch.ipynb" in note

    # nothing but notebooks as handed out: the named one, saying so
    (tmp_path / "c").mkdir()
    for name in ("vectors.ipynb", "vectors (1).ipynb"):
        shutil.copy(paths.assignment / "vectors.ipynb", tmp_path / "c" / name)
    chosen, note = pick_notebook(tmp_path / "c", "vectors.ipynb", release.student_code)
    assert chosen.name == "vectors.ipynb" and "every notebook submitted is as handed out" in note

    # a release without the digests (built by an older version): the stubs tell
    chosen, note = pick_notebook(tmp_path / "gs" / "submission_1", "vectors.ipynb")
    assert chosen == work and "as handed out" in note


@pytest.mark.slow
def test_run_autograder_grades_the_work_not_the_blank_notebook(exported, tmp_root):
    release, zip_path, _, paths = exported
    root = gradescope_tree(tmp_root / "two", zip_path)
    untouched_beside_work(root / "submission" / "upload", paths)
    data = run_autograder(root)
    assert data["score"] == release.max_score - 2  # the written answer's 2 are pending
    assert "graded upload/my_work.ipynb: upload/vectors.ipynb is the notebook as handed out" in data["output"]


def test_export_states_the_autograder_total_and_the_pending_points():
    from types import SimpleNamespace

    from autograder.rubric import rubric_check
    from autograder.testing import CheckSpec, manual

    def release(*specs):
        return SimpleNamespace(checks=list(specs), config=SimpleNamespace(gpu_checks=["on gpu"]),
                               max_score=sum(s.points for s in specs))

    plain = CheckSpec("a", 40.0, "1", "visible", lambda sub, ref: None)
    assert points_summary(release(plain)) == ["Autograder points (Gradescope: Settings > Autograder points): 40"]
    lines = points_summary(release(plain, rubric_check(points=8, part="7")._ag_check,
                                   manual("essay", 3, "8", "a paragraph")._ag_check,
                                   CheckSpec("on gpu", 5.0, "9", "visible", lambda sub, ref: None)))
    text = "\n".join(lines)
    assert lines[0] == "Autograder points (Gradescope: Settings > Autograder points): 40 of the assignment's 56"
    assert "Pending on Gradescope, not in the autograder's score: 16 points" in text
    assert "7. validation accuracy (rubric): 8 points, the accuracy rubric" in text
    assert "essay: 3 points, graded by hand (a paragraph)" in text and "on gpu: 5 points, needs a GPU" in text
    assert "manually graded question worth 16 points" in text


def test_a_missing_checkpoint_is_reported_at_submission_time(tmp_path):
    from types import SimpleNamespace

    from autograder.rubric import rubric_check

    spec = rubric_check(points=8, part="7")._ag_check
    rel = SimpleNamespace(checks=[spec])
    nb = tmp_path / "transformers_bert.ipynb"
    [message] = notes_at_submission(rel, nb).values()
    assert "no `bert_gru_sentiment.pt` next to transformers_bert.ipynb" in message and "Submit again" in message
    (tmp_path / "bert_gru_sentiment.pt").write_bytes(b"weights")
    assert notes_at_submission(rel, nb) == {}


def test_visibility_and_pending_in_results():
    checks = [CheckResult("a", "1. A", 2, 2, "passed", "", "visible"),
              CheckResult("b", "1. A", 1, 0, "failed", "wrong", "hidden"),
              CheckResult("c", "2. B", 3, 1, "partial", "1 of 3", "after_due_date"),
              CheckResult("acc", "3. Accuracy", 4, 0, "pending", "needs a GPU", "after_published")]
    data = gradescope_json(SubmissionResult("s", "s.ipynb", checks))
    assert validate_results(data) == []
    tests = {t["name"]: t for t in data["tests"]}
    assert [tests[n]["visibility"] for n in "abc"] == ["visible", "hidden", "after_due_date"]
    assert "score" not in tests["acc"] and tests["acc"]["output"] == "Pending: needs a GPU"
    assert data["score"] == 3 and data["extra_data"]["pending_points"] == 4
    # the score out of what Gradescope's Autograder points are (the total less the pending points), and what is pending
    assert data["output"].startswith("Score: 3 / 6 (the autograded points; the assignment's total is 10)")
    assert "Pending: 4 points (1 check(s): acc (4)) are not graded yet" in data["output"]
    # Markdown, as the messages are written (code in backticks), with what came from a submission made inert
    assert data["output_format"] == data["test_output_format"] == "md"
    marked = CheckResult("d", "1. A", 1, 0, "failed", "calling `f` raised: see [here](http://x) <b>\nsecond line")
    [test] = gradescope_json(SubmissionResult("s", "s.ipynb", [marked]))["tests"]
    assert test["output"] == "calling `f` raised: see \\[here\\](http://x) \\<b>  \nsecond line"
    hidden = CheckResult("secret", "4", 2, 0, "pending", "by hand", "hidden")
    text = gradescope_json(SubmissionResult("s", "s.ipynb", [*checks, hidden]))["output"]
    assert "acc (4), hidden checks (2)" in text and "secret" not in text  # counted, never named
    said_pending = CheckResult("m", "4", 1, 0, "pending", "pending: graded by hand")
    assert gradescope_json(SubmissionResult("s", "s.ipynb", [said_pending]))["tests"][0]["output"] == \
        "pending: graded by hand"  # never "Pending: pending"


def test_validate_results_catches_format_errors():
    assert validate_results({"tests": [{"name": "x"}]}) == ["a score is needed: top-level, or on every test"]
    problems = validate_results({"score": "1", "visibility": "secret", "bogus": 1,
                                 "tests": [{"score": 1, "status": "ok", "visibility": "later", "tags": "x"}]})
    assert len(problems) == 6, problems


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("AUTOGRADER_TEST_SETUP_SH") != "1",
                    reason="installs the grading runtime (minutes); set AUTOGRADER_TEST_SETUP_SH=1")
def test_setup_sh_installs_in_a_fresh_venv(exported, tmp_root):
    """setup.sh's real install into a fresh venv, torch from a local CPU wheel (AUTOGRADER_TORCH_WHEELS)."""
    _, zip_path, _, paths = exported
    wheels = os.environ.get("AUTOGRADER_TORCH_WHEELS", "/opt/wheels")
    root = gradescope_tree(tmp_root / "autograder", zip_path)
    subprocess.run(["bash", str(root / "source" / "setup.sh")], check=True, timeout=1800,
                   env={**os.environ, "AUTOGRADER_ROOT": str(root),
                        "AUTOGRADER_TORCH_PIP_ARGS": f"--no-index --find-links {wheels}"})
    version = subprocess.run([str(root / "venv" / "bin" / "python"), "-c", "import torch; print(torch.__version__)"],
                             check=True, capture_output=True, text=True).stdout
    assert version.startswith("2.13.0")
    make_submission(root / "submission" / "hw.ipynb", paths.release / "answer_key.ipynb")
    assert run_autograder(root)["score"] == 11


@pytest.mark.parametrize("requirement", ["evil; rm -rf /", "notinstalledpkg123"])
def test_a_pip_requirement_that_cannot_be_pinned_is_one_line_and_exit_2(example_build, tmp_path, capsys, requirement):
    from autograder.cli import main

    code = main(["export", "gradescope", str(example_build.release), "--out", str(tmp_path / "a.zip"),
                 "--pip", requirement])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "a.zip").exists()


def test_the_zip_reads_shipped_files_and_restores_read_only_cells(tmp_path, tmp_root):
    """In the Gradescope image the release is forgotten before student code runs: the shipped input files stay
    (the workers read them), and read-only cells are put back from the manifest (the zip has no answer key)."""
    import nbformat

    from autograder.grading import build_and_record

    source = tmp_path / "solutions" / "reads"
    (source / "data").mkdir(parents=True)
    (source / "tests").mkdir()
    (source / "data" / "n.txt").write_text("3")
    (source / "assignment.toml").write_text('title = "reads"\nnotebook = "reads.ipynb"\nfiles = ["data/n.txt"]\n')
    setup = nbformat.v4.new_code_cell("SCALE = 2")
    setup.metadata["nbgrader"] = {"grade_id": "setup", "locked": True, "solution": False, "grade": False}
    answer = nbformat.v4.new_code_cell("def load():\n    ### BEGIN SOLUTION\n    return float(open('data/n.txt').read()) "
                                       "* SCALE\n    ### END SOLUTION")
    answer.metadata["nbgrader"] = {"grade_id": "load", "solution": True, "grade": False}
    test = nbformat.v4.new_code_cell("assert load() == 6.0")
    test.metadata["nbgrader"] = {"grade_id": "load_test", "solution": False, "grade": True, "points": 1}
    nbformat.write(nbformat.v4.new_notebook(cells=[setup, answer, test]), source / "reads.ipynb")
    paths = build_and_record(source)
    zip_path, _ = export_gradescope(load_release(paths.release))
    root = gradescope_tree(tmp_root / "reads", zip_path)
    make_submission(root / "submission" / "reads.ipynb", paths.release / "answer_key.ipynb",
                    {"SCALE = 2": "SCALE = 5"})  # a read-only cell changed to fit another answer
    data = run_autograder(root)
    assert data["score"] == 1, data["output"]
    assert "read-only" in data["output"]
    assert (root / "source" / "release" / "reads" / "files" / "data" / "n.txt").is_file()
    assert not (root / "source" / "release" / "reads" / "manifest.json").exists()


@pytest.mark.slow
def test_the_export_text_docs_platforms_quotes_is_the_exports(tmp_path, capsys):
    """docs/platforms.md quotes what `autograder export gradescope transformers_bert` prints: every line as the export
    prints it (the notebook's cell numbers, the points), the zip's size to within 10% (it grows with the source)."""
    import re

    from autograder.build import build
    from autograder.entrypoints import command_line

    root = Path(__file__).resolve().parent.parent
    source = tmp_path / "solutions" / "transformers_bert"
    shutil.copytree(root / "solutions" / "transformers_bert", source)
    build(source)  # no recording: the zip does not carry it
    assert command_line(["export", "gradescope", str(source)]) == 0
    printed = capsys.readouterr().out.replace(f"{tmp_path}/", "").strip().splitlines()
    docs = (root / "docs" / "platforms.md").read_text(encoding="utf-8")
    quoted = docs.split("```\nGradescope autograder: ", 1)[1].split("```", 1)[0]
    quoted = ("Gradescope autograder: " + quoted).strip().splitlines()
    size = re.compile(r"\((\d+) KiB\)")
    kib = [int(size.search(lines[0]).group(1)) for lines in (quoted, printed)]
    assert abs(kib[0] - kib[1]) <= 0.1 * kib[1], f"docs/platforms.md says {kib[0]} KiB, the export {kib[1]} KiB"
    assert [size.sub("", line) for line in quoted] == [size.sub("", line) for line in printed]
