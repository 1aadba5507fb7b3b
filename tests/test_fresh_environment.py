"""README's quick start and `verify`, as a new user runs them: the project installed in a virtual
environment under /tmp (a common habit on shared machines and CI runners), whose packages the workers
must still find once confined."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def tmp_venv(tmp_path_factory) -> Path:
    """A virtual environment under /tmp with torch and the project (`.[bert]`) installed as README says; the
    one running these tests when it already lives under /tmp."""
    if sys.prefix != sys.base_prefix and sys.prefix.startswith("/tmp/"):
        return Path(sys.prefix)
    pytest.importorskip("transformers")
    venv = tmp_path_factory.mktemp("venv")
    venv.chmod(0o755)  # as `python -m venv /tmp/venv` leaves it (pytest's folders are 0700)
    assert str(venv).startswith("/tmp/")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    torch_version = torch.__version__.split("+")[0]
    for args in ([f"torch=={torch_version}"], ["-e", f"{ROOT}[bert]"]):
        done = subprocess.run(pip + args, capture_output=True, text=True, timeout=1200)
        if done.returncode != 0:
            pytest.fail(f"pip install {' '.join(args)} failed: {done.stderr[-2000:]}")
    return venv


def _run(venv: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(["autograder", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=1200)


def test_quick_start_and_verify_from_a_venv_under_tmp(tmp_venv, tmp_path):
    course = tmp_path / "course"
    shutil.copytree(ROOT / "solutions" / "transformers_bert", course / "solutions" / "transformers_bert")
    shutil.copytree(ROOT / "samples", course / "samples")
    assert _run(tmp_venv, ["build", "solutions/transformers_bert"], course).returncode == 0
    graded = _run(tmp_venv, ["grade", "transformers_bert", "samples/transformers_bert_submission.ipynb",
                             "--out", "grading-output"], course)
    assert graded.returncode == 0, graded.stderr
    result = json.loads((course / "grading-output" / "transformers_bert_submission" / "grading.json").read_text())
    assert (result["score"], result["max_score"]) == (42.5, 71)  # 8 rubric points and 15 written ones pending
    assert result["confinement"].startswith("isolated: allowlist root")
    feedback = (course / "grading-output" / "transformers_bert_submission" / "feedback.md").read_text()
    assert "**Score: 42.5 / 71** (23 of the 71 points are pending, added later)" in feedback
    verified = _run(tmp_venv, ["verify", "transformers_bert", "--no-corpus"], course)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "verify: OK" in verified.stdout
