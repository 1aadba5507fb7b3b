"""A student's fresh machine: the notebook the assignment ships, run top to bottom with `jupyter nbconvert
--execute --allow-errors` in a virtual environment that has torch and transformers but not this project (as on
Colab, or a student's new venv). Every `check(...)` cell prints a verdict: the notebook carries check()'s code.

The environment: a venv without system site packages, over a folder that links every package of the interpreter
torch is installed in except this project (its files, its metadata and its editable-install finder), added by a
plain .pth line (so no other .pth of that folder runs and nothing can bring `autograder` back). Its kernel has no
pip (`%pip` cannot install anything), no Hugging Face Hub and no package index: nothing is installed for it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted((ROOT / "assignments").glob("*/*.ipynb"))
THIS_PROJECT = ("autograder", "torchgrade")  # names of the package, its metadata and its editable finder


def _site_packages_of(module: str) -> Path:
    spec = __import__(module)
    return Path(spec.__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def fresh_kernel(tmp_path_factory) -> dict[str, str]:
    """The environment of `jupyter nbconvert` whose kernel `fresh` runs in a venv without this project."""
    pytest.importorskip("transformers")
    pytest.importorskip("ipykernel")
    if shutil.which("jupyter") is None:
        pytest.skip("needs jupyter nbconvert")
    root = tmp_path_factory.mktemp("fresh-machine")
    venv = root / "venv"
    subprocess.run([sys.base_prefix + "/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    packages = root / "packages"
    packages.mkdir()
    for site in {_site_packages_of(m) for m in ("torch", "transformers", "ipykernel")}:
        for entry in site.iterdir():
            lowered = entry.name.lower()
            if not any(name in lowered for name in THIS_PROJECT) and not (packages / entry.name).exists():
                (packages / entry.name).symlink_to(entry)
    [site] = (venv / "lib").glob("python3*/site-packages")
    (site / "packages.pth").write_text(f"{packages}\n")
    python = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", PIP_NO_INDEX="1", PYTHONNOUSERSITE="1", JUPYTER_PATH=str(root / "jupyter"))
    probe = "import importlib.util as u, torch, transformers; print(u.find_spec('autograder'))"
    done = subprocess.run([python, "-c", probe], cwd=root, env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "None", ("the fresh venv must see torch and transformers and not this project",
                                           done.stdout, done.stderr)
    kernel = root / "jupyter" / "kernels" / "fresh"
    kernel.mkdir(parents=True)
    (kernel / "kernel.json").write_text(
        '{"argv": ["%s", "-m", "ipykernel_launcher", "-f", "{connection_file}"], "display_name": "fresh", '
        '"language": "python"}' % python)
    return env


def run_top_to_bottom(notebook: Path, folder: Path, env: dict[str, str]):
    """The notebook executed in the fresh kernel from a folder of its own (no checkout in its working directory)."""
    folder.mkdir()
    shutil.copy(notebook, folder / notebook.name)
    done = subprocess.run(["jupyter", "nbconvert", "--to", "notebook", "--execute", "--allow-errors",
                           "--ExecutePreprocessor.kernel_name=fresh", "--ExecutePreprocessor.timeout=600",
                           notebook.name, "--output", "executed.ipynb"],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    return nbformat.read(folder / "executed.ipynb", as_version=4)


def verdicts(nb) -> list[str]:
    """What each `check(...)` cell printed (errors included, as the cell's text)."""
    out = []
    for cell in nb.cells:
        if "autograder-check" in cell.get("metadata", {}).get("tags", []):
            out.append("".join(o.get("text", "") or f"{o.get('ename')}: {o.get('evalue')}" for o in cell.outputs))
    return out


@pytest.mark.parametrize("notebook", SHIPPED, ids=[p.parent.name for p in SHIPPED])
def test_every_check_prints_a_verdict_on_a_fresh_machine(notebook, fresh_kernel, tmp_path):
    nb = run_top_to_bottom(notebook, tmp_path / "student", fresh_kernel)
    said = verdicts(nb)
    assert said, f"{notebook.name} has no check() cells"
    for text in said:  # each part: "N. Part: 0 of 1 public check(s) pass" and why (its stubs raise)
        assert "public check(s) pass" in text and "[FAIL]" in text and "not implemented yet" in text, text
    errors = [o for c in nb.cells if {"autograder-setup", "autograder-install"} & set(c.metadata.get("tags", []))
              for o in c.outputs if o.get("output_type") == "error"]
    assert not errors, errors  # the setup and install cells run as they are


def test_the_answer_key_passes_every_public_check_on_a_fresh_machine(fresh_kernel, tmp_path):
    from autograder.build import build

    source = tmp_path / "solutions" / "transformers_bert"
    shutil.copytree(ROOT / "solutions" / "transformers_bert", source)
    key = build(source).release / "answer_key.ipynb"
    said = verdicts(run_top_to_bottom(key, tmp_path / "key", fresh_kernel))
    assert len(said) == 6 and all("All public checks of this part pass" in text for text in said), said
