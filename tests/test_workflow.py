"""The GitHub Actions workflow that grades submissions: valid YAML, the right jobs and steps, valid bash."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

WORKFLOW = Path(__file__).resolve().parents[1] / ".github" / "workflows" / "grade.yml"


@pytest.fixture(scope="module")
def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def _uses(job: dict) -> list[str]:
    return [s["uses"].split("@")[0] for s in job["steps"] if "uses" in s]


def _runs(job: dict) -> str:
    return "\n".join(s.get("run", "") for s in job["steps"])


def test_triggers_and_inputs(workflow):
    on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    inputs = on["workflow_dispatch"]["inputs"]
    assert {"assignment", "submissions", "student_repository", "gpu", "rubric"} <= set(inputs)
    assert inputs["gpu"]["type"] == "boolean" and inputs["gpu"]["default"] is False
    assert workflow["permissions"] == {"contents": "read"}


def test_cpu_job_grades_and_uploads(workflow):
    job = workflow["jobs"]["grade"]
    assert job["runs-on"] == "ubuntu-latest"
    assert _uses(job)[:2] == ["actions/checkout", "actions/checkout"] and "actions/setup-python" in _uses(job)
    runs = _runs(job)
    assert "download.pytorch.org/whl/cpu" in runs and "pip install -e ." in runs
    assert 'autograder grade "$ASSIGNMENT"' in runs and "--out grading-output" in runs
    assert "autograder report grading-output" in runs
    upload = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["with"]["path"] == "grading-output/" and upload["if"] == "${{ always() }}"
    names = [s.get("name") for s in job["steps"]]
    assert names.index("Grade") < names.index("Upload results")


def test_gpu_job_is_optional_and_self_hosted(workflow):
    job = workflow["jobs"]["grade-gpu"]
    assert job["runs-on"] == ["self-hosted", "gpu"]
    assert job["if"] == "${{ inputs.gpu }}" and job["needs"] == "grade"
    assert "torch.cuda.is_available()" in _runs(job) and "grading-output-gpu" in _runs(job)
    assert 'autograder rubric "$ASSIGNMENT"' in _runs(job)
    assert "actions/upload-artifact" in _uses(job)


def test_run_scripts_are_valid_bash(workflow):
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            if "run" in step:
                script = re.sub(r"\$\{\{[^}]*\}\}", "x", step["run"])
                subprocess.run(["bash", "-n", "-c", script], check=True)
