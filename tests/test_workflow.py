"""The GitHub Actions workflow that grades submissions: valid YAML, the right jobs and steps, valid bash, every
`autograder ...` command accepted by the command line's parser, defaults that exist here, pinned actions and no
credentials left where student code runs."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from autograder.export.gradescope import top_level_imports

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "grade.yml"


@pytest.fixture(scope="module")
def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def _uses(job: dict) -> list[str]:
    return [s["uses"].split("@")[0] for s in job["steps"] if "uses" in s]


def _runs(job: dict) -> str:
    return "\n".join(s.get("run", "") for s in job["steps"])


def _inputs(workflow) -> dict:
    return workflow.get("on", workflow.get(True))["workflow_dispatch"]["inputs"]


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
    assert "download.pytorch.org/whl/cpu" in runs and 'pip install ".[$EXTRAS]"' in runs
    assert 'autograder grade "$ASSIGNMENT" "$GRADE_FOLDER" --out grading-output' in runs
    assert "autograder report grading-output" in runs
    assert 'as_root=(sudo -n env "PATH=$PATH")' in runs, "confined: as root on the hosted runner"
    assert '"${as_root[@]}" autograder grade' in runs
    upload = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["with"]["path"] == "grading-output/" and upload["if"] == "${{ always() }}"
    names = [s.get("name") for s in job["steps"]]
    assert names.index("Grade") < names.index("Upload results")


def test_gpu_job_is_optional_and_self_hosted(workflow):
    job = workflow["jobs"]["grade-gpu"]
    assert job["runs-on"] == ["self-hosted", "gpu"]
    assert job["if"] == "${{ inputs.gpu }}" and "needs" not in job, "the GPU job does not wait for the CPU job"
    assert "torch.cuda.is_available()" in _runs(job) and "grading-output-gpu" in _runs(job)
    assert 'autograder rubric "$ASSIGNMENT"' in _runs(job) and 'pip install ".[$EXTRAS]"' in _runs(job)
    assert "actions/upload-artifact" in _uses(job)


def test_run_scripts_are_valid_bash(workflow):
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            if "run" in step:
                script = re.sub(r"\$\{\{[^}]*\}\}", "x", step["run"])
                subprocess.run(["bash", "-n", "-c", script], check=True)


# -- every `autograder ...` command, through the command line's own parser -------------------------------

def _commands(script: str) -> list[list[str]]:
    """The argv of every `autograder` command in a step's bash script (after `autograder`), redirections and
    the rest of the line after `||`, `&&`, `;` or `|` left out."""
    out = []
    for line in script.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError:  # an unfinished quote: a heredoc or a multi-line string, not a command
            continue
        segment: list[str] = []
        for token in [*tokens, ";"]:
            if token in ("||", "&&", ";", "|", "(", ")"):
                while segment and (segment[0] in ("sudo", "env", "${as_root[@]}") or segment[0].startswith("-")
                                   or re.match(r"\w+=", segment[0])):
                    segment.pop(0)  # sudo, env and VAR=value before the command
                if segment and Path(segment[0]).name == "autograder":
                    args = segment[1:]
                    cut = next((i for i, t in enumerate(args) if t in (">", ">>", "<", ">&")), len(args))
                    if cut and args[cut - 1].isdigit() and cut < len(args):
                        cut -= 1
                    out.append(args[:cut])
                segment = []
            else:
                segment.append(token)
    return out


def _expand(argv: list[str], values: dict[str, str]) -> list[str]:
    return [re.sub(r"\$\{?(\w+)\}?", lambda m: values.get(m.group(1), m.group(1).lower()), a) for a in argv]


def _defaults(workflow) -> dict[str, str]:
    inputs = _inputs(workflow)
    return {"ASSIGNMENT": inputs["assignment"]["default"], "SUBMISSIONS": inputs["submissions"]["default"],
            "GRADE_FOLDER": inputs["submissions"]["default"], "EXTRAS": workflow["env"]["EXTRAS"]}


def test_every_autograder_command_parses(workflow):
    from autograder.cli import parse

    seen = []
    for job_name, job in workflow["jobs"].items():
        for step in job["steps"]:
            for argv in _commands(step.get("run", "")):
                argv = _expand(argv, _defaults(workflow))
                try:
                    command, args = parse(argv)
                except SystemExit as exc:
                    pytest.fail(f"{job_name}, step {step.get('name')!r}: `autograder {' '.join(argv)}` is refused by "
                                f"the command line (exit {exc.code})")
                seen.append((job_name, command.name, args))
    verbs = {(job, verb) for job, verb, _ in seen}
    assert {("grade", "grade"), ("grade", "report"), ("grade-gpu", "grade"), ("grade-gpu", "rubric"),
            ("grade-gpu", "report")} <= verbs, verbs
    # the rubric reads what the GPU job's grading wrote: the same submissions (the same ids) and folder
    gpu = {verb: args for job, verb, args in seen if job == "grade-gpu"}
    assert gpu["rubric"].submissions == gpu["grade"].submissions and gpu["rubric"].out == gpu["grade"].out


def test_the_command_parser_catches_a_bad_command():
    """The test above would see a wrong option or verb."""
    assert _commands('x=1; .venv/bin/autograder grade "$A" "$B" --out o 2>&1 || status=$?\n') == \
        [["grade", "$A", "$B", "--out", "o"]]
    assert _commands('sudo env "PATH=$PATH" autograder report out --title "$A"') == [["report", "out", "--title", "$A"]]
    from autograder.cli import parse

    with pytest.raises(SystemExit):
        parse(["grade", "vectors", "subs", "--output", "o"])


def test_defaults_exist_in_this_repository(workflow):
    defaults = _defaults(workflow)
    assert (ROOT / "solutions" / defaults["ASSIGNMENT"] / "assignment.toml").is_file()
    folder = ROOT / defaults["SUBMISSIONS"]
    assert folder.is_dir() and any(folder.rglob("*.ipynb")), f"{folder} holds no notebook to grade"


def test_installs_what_every_assignment_imports(workflow):
    """The extras the workflow installs, with the grader's own dependencies, provide every module the
    assignments' notebooks import (as installed here)."""
    import importlib.metadata

    from autograder.export.gradescope import pinned_closure

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = workflow["env"]["EXTRAS"].split(",")
    assert set(extras) <= set(project["optional-dependencies"])
    try:
        installed = {line.split("==")[0] for line in pinned_closure(
            project["dependencies"] + [r for e in extras for r in project["optional-dependencies"][e]])}
    except ValueError as exc:
        pytest.skip(f"not everything the extras name is installed here: {exc}")
    providers = importlib.metadata.packages_distributions()
    for toml in sorted((ROOT / "solutions").glob("*/assignment.toml")):
        notebook = toml.parent / tomllib.loads(toml.read_text())["notebook"]
        cells = json.loads(notebook.read_text())["cells"]
        modules = top_level_imports(["".join(c["source"]) for c in cells if c["cell_type"] == "code"])
        for module in sorted(modules - set(sys.stdlib_module_names)):
            dists = {re.sub(r"[-_.]+", "-", d).lower() for d in providers.get(module, [])}
            assert dists & installed, f"{notebook.name} imports {module}, which the workflow does not install"


def test_actions_pinned_and_no_credentials_left_behind(workflow):
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            if "uses" not in step:
                continue
            ref = step["uses"].split("@", 1)[1]
            assert re.fullmatch(r"[0-9a-f]{40}", ref), f"{step['uses']} is not pinned to a commit"
            if step["uses"].startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, f"{step['name']} leaves its token in .git/config"
        for step in job["steps"]:  # no secret in the environment of a step that runs student code
            if "autograder" in step.get("run", ""):
                assert "secrets." not in json.dumps(step.get("env", {})), step["name"]


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("AUTOGRADER_TEST_REPLAY_WORKFLOW") != "1",
                    reason="replays the CPU job, grading transformers_bert (minutes); set AUTOGRADER_TEST_REPLAY_WORKFLOW=1")
@pytest.mark.parametrize("sudo", [False, True], ids=["ladder", "sudo"])
def test_the_cpu_job_replayed_as_an_unprivileged_user_refused_user_namespaces(sudo):
    """tools/replay_workflow.py: every step passes, as the runner's user where ubuntu-latest refuses it user
    namespaces, with the hosted runner's passwordless sudo (full confinement as root) and without (the ladder)."""
    if os.geteuid() != 0 or not all(shutil.which(t) for t in ("useradd", "runuser", "unshare")):
        pytest.skip("needs root, useradd, runuser and unshare to lay out the runner's user")
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "replay_workflow.py"), *(["--sudo"] if sudo else [])],
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "job succeeded" in done.stdout and "--- Grade: exit status 0" in done.stdout
    level = "isolated: allowlist root" if sudo else "restricted: no namespaces"
    assert f"transformers_bert_submission: 42.5/71, confined: {level}" in done.stdout, done.stdout[-4000:]


def test_the_replays_setup_python_sees_the_packages_of_a_venv_it_runs_from(tmp_path):
    """tools/replay_workflow.py run from a virtual environment: its setup-python stand-in sees that venv's own
    packages (not only the base interpreter's), as the replay's later steps need."""
    venv, tool = tmp_path / "venv", tmp_path / "tool"
    base = getattr(sys, "_base_executable", None) or sys.executable
    subprocess.run([base, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True,
                          text=True, check=True).stdout.strip()
    Path(site, "only_in_this_venv.py").write_text("HERE = True\n")
    driver = ("import sys; sys.path.insert(0, sys.argv[1]); import replay_workflow as r; from pathlib import Path; "
              "print(r.setup_python_script(Path(sys.argv[2])))")
    script = subprocess.run([str(python), "-c", driver, str(ROOT / "tools"), str(tool)], capture_output=True,
                            text=True, check=True).stdout
    subprocess.run(["bash", "-eo", "pipefail", "-c", script], check=True)
    seen = subprocess.run([str(tool / "bin" / "python"), "-c", "import only_in_this_venv, yaml; print('seen')"],
                          capture_output=True, text=True)
    assert seen.stdout.strip() == "seen", seen.stderr


def test_torch_is_pinned_from_one_place_everywhere_it_is_installed(workflow):
    """The CI workflow (both jobs), .ci/run, README's commands and the Gradescope bundle install the same torch, the
    one pin of autograder/pins.py (`python -m autograder.pins` prints it for the shell)."""
    from autograder.export.gradescope import requirements
    from autograder.pins import TORCH_VERSION

    printed = subprocess.run([sys.executable, "-m", "autograder.pins"], cwd=ROOT, capture_output=True, text=True)
    assert printed.stdout.strip() == TORCH_VERSION
    for job in workflow["jobs"].values():
        installs = [line for line in _runs(job).splitlines() if re.search(r"pip install .*\btorch\b", line)]
        assert installs and all("torch==$(" in line and "-m autograder.pins)" in line for line in installs), installs
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'pip install -q "torch==$(python -m autograder.pins)"' in ci
    readme = (ROOT / "README.md").read_text()
    assert set(re.findall(r"torch==([\w.]+)", readme)) == {TORCH_VERSION}

    class Release:  # what requirements() reads of a release: the answer key's imports
        reference = type("Reference", (), {"units": []})()

    lines, torch_line, _ = requirements(Release())
    assert torch_line == f"torch=={TORCH_VERSION}" and torch_line in lines
