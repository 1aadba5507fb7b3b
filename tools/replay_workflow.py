"""Replay .github/workflows/grade.yml's CPU job here, step by step, as GitHub's hosted runner runs it: as an
unprivileged user whose kernel refuses it user namespaces (tools/no_userns.py: what ubuntu-latest's AppArmor
default leaves such a user). Without --sudo there is no passwordless sudo in reach, so the grade step meets the
confinement ladder; with --sudo, `sudo` works as on the hosted runner: what it runs runs as root, outside the
restriction (a broker started here runs it with the caller's terminal, working folder and arguments).

    sudo python tools/replay_workflow.py [--sudo] [--user gradeuser] [--assignment A] [--submissions DIR] [--keep]

Run as root (it creates the user with useradd when missing and lays out the workspace). Each `run:` step runs
with the runner's shell (`bash --noprofile --norc -eo pipefail`), the workflow's env and inputs, GITHUB_ENV and
GITHUB_STEP_SUMMARY files. Steps that `uses:` an action are done locally: checkout copies the repository's
files, setup-python gives a virtual environment over this interpreter's packages (a venv's own included),
upload-artifact copies the path. The install step is replaced by an offline install of this checkout into that
environment (this machine may not reach PyPI); what it installs is the same project. Exit status: the job's (0 when every step passed).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import threading
import pwd
import re
import shlex
import shutil
import site
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "grade.yml"
SHELL = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]
SECURE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # sudo's default secure_path
SUDO_CLIENT = """import array, json, os, socket, sys
args = sys.argv[1:]
while args and args[0].startswith("-"):  # -n, -E: passwordless, and the environment is reset either way
    args.pop(0)
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["REPLAY_SUDO_SOCKET"])
socket.send_fds(s, [json.dumps({"argv": args, "cwd": os.getcwd()}).encode() + b"\\n"], [0, 1, 2])
sys.exit(int(s.makefile().readline() or 1))
"""


class SudoBroker:
    """Passwordless sudo for the replayed steps: a UNIX socket that runs the argv it is sent as root, in this
    process's namespaces, on the caller's stdin, stdout and stderr, and answers the exit status."""

    def __init__(self, path: Path):
        self.path = path
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(path))
        path.chmod(0o777)
        self.server.listen()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            connection, _ = self.server.accept()
            threading.Thread(target=self._run, args=(connection,), daemon=True).start()

    @staticmethod
    def _run(connection: socket.socket) -> None:
        message, fds, _, _ = socket.recv_fds(connection, 1 << 16, 3)
        request = json.loads(message)
        try:
            code = subprocess.run(request["argv"] or ["true"], cwd=request["cwd"], stdin=fds[0], stdout=fds[1],
                                  stderr=fds[2], env={"PATH": SECURE_PATH, "HOME": "/root"}).returncode
        except OSError as exc:
            os.write(fds[2], f"sudo: {exc}\n".encode())
            code = 1
        for fd in fds:
            os.close(fd)
        connection.sendall(f"{code}\n".encode())
        connection.close()


def expand(text: str, inputs: dict[str, str]) -> str:
    """${{ inputs.x }}, ${{ vars.x }} and ${{ secrets.x }}: the inputs, and empty for the rest."""
    def value(match: re.Match) -> str:
        name = match.group(1).strip()
        return str(inputs.get(name.removeprefix("inputs."), "")) if name.startswith("inputs.") else ""
    return re.sub(r"\$\{\{\s*([^}]*?)\s*\}\}", value, str(text))


def runs(step: dict, inputs: dict[str, str], failed: bool) -> bool:
    """Whether the step's `if:` holds (`always()`, or an input compared with ''), and no earlier step failed."""
    condition = str(step.get("if", "")).replace("${{", "").replace("}}", "").strip()
    if condition == "always()":
        return True
    if failed:
        return False
    match = re.fullmatch(r"inputs\.(\w+)\s*(==|!=)\s*''", condition)
    if match:
        empty = not str(inputs.get(match.group(1), ""))
        return empty if match.group(2) == "==" else not empty
    return True


def reachable(paths: list[str]) -> str:
    """Shell lines for a private mount namespace in which other users reach `paths` through a folder closed to
    them (an interpreter under /root): a tmpfs over the folder, the path moved back in."""
    lines = []
    for path in sorted({os.path.realpath(p) for p in paths}):
        parts = path.split("/")
        for i in range(2, len(parts)):
            folder, child = "/".join(parts[:i]), "/".join(parts[:i + 1])
            if not os.stat(folder).st_mode & 0o001:
                lines.append(f's=$(mktemp -d) && mount --bind {child} "$s" && mount -t tmpfs -o mode=0755 tmpfs '
                             f'{folder} && mkdir -p {child} && mount --move "$s" {child}')
                break
    return "\n".join(dict.fromkeys(lines))


class Runner:
    """The hosted runner: a workspace, the runner's user, its env files."""

    def __init__(self, user: pwd.struct_passwd, home: Path, inputs: dict[str, str], workflow: dict,
                 sudo: bool = False):
        self.user, self.home, self.inputs, self.sudo = user, home, inputs, sudo
        self.workspace, self.tool = home / "work", home / "toolcache" / "python"
        self.env_file, self.summary = home / "github_env", home / "step_summary.md"
        self.artifacts = home / "artifacts"
        self.env = {k: expand(v, inputs) for k, v in workflow.get("env", {}).items()}

    def shell(self, script: str, extra_env: dict[str, str]) -> int:
        """`script` in the runner's shell, as the runner's user, refused user namespaces."""
        shims = f"{self.home}/sudo-shim:" if self.sudo else ""
        env = {"PATH": f"{shims}{self.tool}/bin:/usr/local/bin:/usr/bin:/bin", "HOME": str(self.home),
               "REPLAY_SUDO_SOCKET": str(self.home / "sudo.sock"),
               "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(self.workspace), "GITHUB_ENV": str(self.env_file),
               "GITHUB_STEP_SUMMARY": str(self.summary), **self.env, **self._github_env(), **extra_env}
        step = self.home / "step.sh"
        step.write_text(script)
        os.chown(step, self.user.pw_uid, self.user.pw_gid)
        command = ["env", "-i", *(f"{k}={v}" for k, v in env.items()), sys.executable,
                   str(ROOT / "tools" / "no_userns.py"), *SHELL, str(step)]
        quoted = " ".join("'" + a.replace("'", "'\"'\"'") + "'" for a in command)
        outer = f"{reachable([sys.prefix, sys.base_prefix, sys.executable, str(ROOT)])}\n" \
                f"cd {self.workspace} && exec runuser -u {self.user.pw_name} -- {quoted}"
        return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", outer]).returncode

    def _github_env(self) -> dict[str, str]:
        lines = self.env_file.read_text().splitlines() if self.env_file.exists() else []
        return dict(line.split("=", 1) for line in lines if "=" in line)

    def action(self, step: dict) -> int:
        """The local equivalent of a `uses:` step."""
        name, given = step["uses"].split("@")[0], {k: expand(v, self.inputs) for k, v in step.get("with", {}).items()}
        if name == "actions/checkout":
            return self._checkout(given)
        if name == "actions/setup-python":
            return self.shell(setup_python_script(self.tool), {})
        if name == "actions/upload-artifact":
            source = self.workspace / given["path"]
            if source.exists():
                shutil.copytree(source, self.artifacts / given["name"], dirs_exist_ok=True)
            print(f"artifact {given['name']}: {'uploaded' if source.exists() else 'nothing to upload'}")
            return 0
        print(f"no local equivalent for {name}")
        return 1

    def _checkout(self, given: dict) -> int:
        target = self.workspace / given.get("path", "")
        files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        for rel in filter(None, files.decode().split("\0")):
            if (ROOT / rel).is_file():
                (target / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / rel, target / rel)
        subprocess.run(["chown", "-R", f"{self.user.pw_uid}:{self.user.pw_gid}", str(self.home)], check=True)
        return 0

    def install(self) -> int:
        """The install step, offline: this checkout into the setup-python environment (packages from this
        interpreter's site-packages, the project itself as in `pip install .`)."""
        site = subprocess.run([f"{self.tool}/bin/python", "-c", "import site; print(site.getsitepackages()[0])"],
                              capture_output=True, text=True, check=True).stdout.strip()
        Path(site, "autograder_checkout.pth").write_text(f"{self.workspace}\n")
        script = self.tool / "bin" / "autograder"
        script.write_text(f"#!/bin/sh\nexec {self.tool}/bin/python -m autograder \"$@\"\n")
        script.chmod(0o755)
        return 0


def setup_python_script(tool: Path) -> str:
    """The setup-python stand-in: a virtual environment at `tool` that sees this interpreter's packages. It is made
    from the interpreter this one runs on (a venv made from a venv's interpreter sees the base's packages, not the
    venv's), with --system-site-packages for the base's, and a .pth that adds a venv's own site-packages as site
    folders (their .pth files run: editable installs too) after its own, in the order this interpreter reads them."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    base_prefix = Path(sys.base_prefix).resolve()
    carried = [p for p in site.getsitepackages() if Path(p).is_dir() and not Path(p).resolve().is_relative_to(base_prefix)]
    script = f"{shlex.quote(base)} -m venv --system-site-packages {shlex.quote(str(tool))}\n"
    if carried:
        line = "import site; " + "; ".join(f"site.addsitedir({p!r})" for p in carried)
        where = f"$({shlex.quote(str(tool))}/bin/python -c 'import site; print(site.getsitepackages()[0])')"
        script += f"printf '%s\\n' {shlex.quote(line)} > \"{where}/replay_carried.pth\"\n"
    return script


def replay(runner: Runner, job: dict) -> int:
    failed = 0
    for step in job["steps"]:
        name = step.get("name", step.get("uses", "step"))
        if not runs(step, runner.inputs, bool(failed)):
            print(f"--- {name}: skipped")
            continue
        print(f"--- {name}", flush=True)
        if "uses" in step:
            code = runner.action(step)
        elif name.startswith("Install"):
            print("(replaced here by an offline install of this checkout)")
            code = runner.install()
        else:
            code = runner.shell(step["run"], {k: expand(v, runner.inputs) for k, v in step.get("env", {}).items()})
        print(f"--- {name}: exit status {code}", flush=True)
        failed = failed or code
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--user", default="gradeuser")
    parser.add_argument("--assignment")
    parser.add_argument("--submissions")
    parser.add_argument("--keep", action="store_true", help="keep the runner's home folder")
    parser.add_argument("--sudo", action="store_true", help="passwordless sudo, as on GitHub's hosted runner")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: it lays out the runner's user and workspace")
    workflow = yaml.safe_load(WORKFLOW.read_text())
    declared = workflow.get("on", workflow.get(True))["workflow_dispatch"]["inputs"]
    inputs = {k: v.get("default", "") for k, v in declared.items()}
    inputs.update({k: v for k, v in (("assignment", args.assignment), ("submissions", args.submissions)) if v})
    try:
        user = pwd.getpwnam(args.user)
    except KeyError:
        subprocess.run(["useradd", "-m", args.user], check=True)
        user = pwd.getpwnam(args.user)
    home = Path(tempfile.mkdtemp(prefix="runner-", dir="/var/tmp"))
    home.chmod(0o755)
    os.chown(home, user.pw_uid, user.pw_gid)
    runner = Runner(user, home, inputs, workflow, sudo=args.sudo)
    if args.sudo:
        SudoBroker(home / "sudo.sock")
        shim = home / "sudo-shim" / "sudo"
        shim.parent.mkdir()
        (shim.parent / "client.py").write_text(SUDO_CLIENT)
        shim.write_text(f"#!/bin/sh\nexec {sys.executable} {shim.parent / 'client.py'} \"$@\"\n")
        shim.chmod(0o755)
    try:
        code = replay(runner, workflow["jobs"]["grade"])
        if runner.summary.exists():
            print("--- run summary\n" + runner.summary.read_text())
        for graded in sorted(runner.artifacts.glob("*/*/grading.json")):
            result = json.loads(graded.read_text())
            print(f"{graded.parent.name}: {result.get('score', 0):g}/{result.get('max_score', 0):g}, confined: "
                  f"{result.get('confinement')}")
        print(f"job {'succeeded' if code == 0 else f'failed ({code})'}; artifacts in {runner.artifacts}")
        return code
    finally:
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
