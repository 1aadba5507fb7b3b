"""The confinement ladder (sandbox/ladder.py, sandbox/isolation.py): which level a run takes, what a refusal
says on each platform, each level all or nothing when one of its steps fails, and grading and `check` as an
unprivileged user where the kernel refuses user namespaces (docs/isolation.md: "The confinement ladder")."""
from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.sandbox import landlock
from autograder.sandbox.isolation import FULL, RESTRICTED, TRUSTED, Confinement, level_of
from autograder.sandbox.ladder import REMEDIES, ConfinementUnavailable, choose, describe_choice, detect_platform
from tests.conftest import EXAMPLE_SOURCE, make_submission

ROOT = Path(__file__).resolve().parent.parent
STATUS = {FULL: "isolated: allowlist root", RESTRICTED: "restricted: file allowlist", TRUSTED: "unconfined: limits"}


def fake_probe(working: set[str]):
    """A probe that builds only the levels in `working`, and remembers what it was asked."""
    asked: list[str] = []

    def run(conf: Confinement) -> tuple[bool, str]:
        asked.append(conf.level)
        return (True, STATUS[conf.level]) if conf.level in working else (False, f"{conf.level} step failed")

    run.asked = asked  # type: ignore[attr-defined]
    return run


def test_the_strongest_level_that_builds_is_taken_and_the_ones_above_it_are_said():
    probe = fake_probe({FULL, RESTRICTED, TRUSTED})
    assert choose(Confinement(), trusted=True, run_probe=probe).level == FULL
    assert probe.asked == [FULL]
    probe = fake_probe({RESTRICTED, TRUSTED})
    choice = choose(Confinement(), trusted=False, run_probe=probe)
    assert (choice.level, choice.refused) == (RESTRICTED, [(FULL, "full step failed")])
    assert "not held" in describe_choice(choice) and "/proc" in describe_choice(choice)


def test_no_level_without_the_flag_is_a_refusal_with_the_remedy_and_the_flag():
    with pytest.raises(ConfinementUnavailable) as refused:
        choose(Confinement(), trusted=False, run_probe=fake_probe({TRUSTED}), platform="github")
    message = str(refused.value)
    assert "full: full step failed" in message and "restricted: restricted step failed" in message
    assert "apparmor_restrict_unprivileged_userns=0" in message and "sudo" in message
    assert "--trusted-submissions" in message and "nothing was graded" in message
    assert choose(Confinement(), trusted=True, run_probe=fake_probe({TRUSTED})).level == TRUSTED


def test_trusted_but_nothing_builds_is_still_a_refusal_without_the_flag_again():
    with pytest.raises(ConfinementUnavailable) as refused:
        choose(Confinement(), trusted=True, run_probe=fake_probe(set()), platform="docker")
    assert "--trusted-submissions" not in str(refused.value)
    assert "trusted: trusted step failed" in str(refused.value)


@pytest.mark.parametrize("platform, words", [
    ("github", ["sudo", "kernel.apparmor_restrict_unprivileged_userns=0"]),
    ("docker", ["docker run", "--security-opt seccomp=unconfined", "apparmor=unconfined", "--cap-add SYS_ADMIN"]),
    ("jupyterhub", ["KubeSpawner", "DockerSpawner", "seccomp"]),
    ("kubernetes", ["securityContext", "Unconfined"]),
    ("linux", ["user.max_user_namespaces", "apparmor_restrict_unprivileged_userns"]),
])
def test_each_platform_gets_its_own_remedy(platform, words):
    with pytest.raises(ConfinementUnavailable) as refused:
        choose(Confinement(), trusted=False, run_probe=fake_probe(set()), platform=platform)
    for word in words:
        assert word in str(refused.value), (platform, word)


def test_the_platform_is_recognised(tmp_path):
    assert detect_platform({"GITHUB_ACTIONS": "true"}, str(tmp_path)) == "github"
    assert detect_platform({"JUPYTERHUB_USER": "ada"}, str(tmp_path)) == "jupyterhub"
    assert detect_platform({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, str(tmp_path)) == "kubernetes"
    assert detect_platform({}, str(tmp_path)) == "linux"
    (tmp_path / ".dockerenv").touch()
    assert detect_platform({}, str(tmp_path)) == "docker"
    assert set(REMEDIES) == {"github", "jupyterhub", "kubernetes", "docker", "linux"}


def test_a_status_line_names_its_level():
    assert [level_of(STATUS[level]) for level in (FULL, RESTRICTED, TRUSTED)] == [FULL, RESTRICTED, TRUSTED]
    assert level_of("") == FULL


# -- each level all or nothing: confine() in a child process, its steps broken on purpose ------------------------

CONFINE = '''
import json, os, sys
from autograder.sandbox import isolation, landlock, linux
from autograder.sandbox.isolation import Confinement, confine
breaks = set(sys.argv[2].split(",")) - {""}
def refuse(*args, **kwargs):
    raise OSError(1, "Operation not permitted")
if "namespaces" in breaks:
    linux.unshare = refuse
    linux.enter_user_namespace = refuse
if "proc" in breaks:
    mount = linux.mount
    linux.mount = lambda source, target, *a, **k: refuse() if target == "/proc" else mount(source, target, *a, **k)
if "landlock" in breaks:
    landlock.abi_version = lambda: 0
conf = Confinement(**json.loads(sys.argv[1]))
try:
    status = confine(conf)
except OSError as exc:
    print(json.dumps({"refused": str(exc)}), flush=True)  # os._exit flushes nothing
    os._exit(0)
try:
    open(sys.argv[3]).read()
    secret = "read"
except OSError as exc:
    secret = type(exc).__name__
try:
    given = open("data.txt").read()  # a declared input file, in its working folder
except OSError as exc:
    given = type(exc).__name__
print(json.dumps({"status": status, "secret": secret, "input": given}), flush=True)
os._exit(0)
'''


def confine_in_child(tmp_path: Path, level: str, breaks: str, drop_root: bool = True) -> dict:
    secret = tmp_path / "answer_key.ipynb"
    secret.write_text("the answer")
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    release = tmp_path / "release"
    release.mkdir(mode=0o700, exist_ok=True)
    (release / "data.txt").write_text("declared input")
    conf = {"level": level, "scratch": str(scratch), "drop_root": drop_root,
            "inputs": {"data.txt": str(release / "data.txt")}}
    done = subprocess.run([sys.executable, "-c", CONFINE, json.dumps(conf), breaks, str(secret)], capture_output=True,
                          text=True, timeout=120, cwd=str(ROOT))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _namespaces_here() -> bool:
    done = subprocess.run([sys.executable, "-c", CONFINE, json.dumps({"level": FULL}), "", "/nonexistent"],
                          capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    return done.returncode == 0 and "status" in done.stdout


def test_full_never_runs_with_half_of_it(tmp_path):
    if not _namespaces_here():
        pytest.skip("this machine refuses namespaces: full confinement cannot be built at all")
    assert confine_in_child(tmp_path, FULL, "")["status"].startswith("isolated: allowlist root")
    for broken in ("namespaces", "proc"):
        outcome = confine_in_child(tmp_path, FULL, broken)
        assert "full confinement failed" in outcome.get("refused", ""), (broken, outcome)


def test_restricted_hides_the_files_without_namespaces(tmp_path):
    if not landlock.abi_version():
        pytest.skip("this kernel has no Landlock")
    outcome = confine_in_child(tmp_path, RESTRICTED, "namespaces", drop_root=False)
    assert outcome["status"].startswith("restricted: no namespaces"), outcome
    assert "file allowlist (Landlock" in outcome["status"]
    assert outcome["secret"] == "PermissionError" and outcome["input"] == "declared input"


def test_restricted_under_a_root_grader_drops_root_and_still_gets_its_inputs(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs a root grader")
    outcome = confine_in_child(tmp_path, RESTRICTED, "namespaces")
    # its own uid where other users may read the interpreter; said either way
    assert any(words in outcome["status"] for words in ("an unprivileged uid of its own",
                                                         "runs as root: the interpreter is not readable")), outcome
    assert outcome["secret"] == "PermissionError" and outcome["input"] == "declared input"


def test_restricted_refuses_where_nothing_can_hide_the_files(tmp_path):
    outcome = confine_in_child(tmp_path, RESTRICTED, "namespaces,landlock", drop_root=False)
    assert "needs Landlock" in outcome.get("refused", ""), outcome


def test_trusted_holds_limits_only_and_says_so(tmp_path):
    outcome = confine_in_child(tmp_path, TRUSTED, "namespaces,landlock", drop_root=False)
    assert outcome["status"].startswith("unconfined: trusted submissions") and outcome["secret"] == "read"


# -- an unprivileged user, as GitHub's runner user meets it ----------------------------------------------------

TEST_USER = "autograder-ladder"


def _unprivileged_user() -> pwd.struct_passwd:
    if os.geteuid() != 0:
        pytest.skip("needs root to run commands as an unprivileged user")
    for tool in ("useradd", "runuser", "unshare"):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool} to run commands as an unprivileged user")
    try:
        return pwd.getpwnam(TEST_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/bin/sh", TEST_USER], check=True)
        return pwd.getpwnam(TEST_USER)


def _reachable(paths: list[str]) -> str:
    """Shell lines that, in a private mount namespace, make `paths` reachable for other users where a folder
    on the way is closed to them (a Python under /root): a tmpfs over that folder, the path moved back in."""
    lines = []
    for path in sorted({os.path.realpath(p) for p in paths}):
        parts = path.split("/")
        for i in range(2, len(parts)):
            folder, child = "/".join(parts[:i]) or "/", "/".join(parts[:i + 1])
            if not os.stat(folder).st_mode & 0o001:
                lines.append(f's=$(mktemp -d) && mount --bind {child} "$s" && mount -t tmpfs -o mode=0755 tmpfs '
                             f'{folder} && mkdir -p {child} && mount --move "$s" {child}')
                break
    return "\n".join(dict.fromkeys(lines))


def as_user(user: pwd.struct_passwd, command: list[str], home: Path, refuse_userns: bool) -> subprocess.CompletedProcess:
    inner = ([sys.executable, str(ROOT / "tools" / "no_userns.py")] if refuse_userns else []) + command
    quoted = " ".join("'" + a.replace("'", "'\"'\"'") + "'" for a in inner)
    script = f"{_reachable([sys.prefix, sys.base_prefix, sys.executable, str(ROOT), str(home)])}\n" \
             f"exec runuser -u {user.pw_name} -- env -i PATH=/usr/bin:/bin HOME={home} {quoted}"
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True, timeout=600, cwd=str(home))


@pytest.mark.slow
def test_grading_and_check_as_an_unprivileged_user_with_and_without_user_namespaces(tmp_path):
    user = _unprivileged_user()
    home = tmp_path / "home"
    shutil.copytree(EXAMPLE_SOURCE, home / "solutions" / "vectors")
    subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(tmp_path)], check=True)
    for folder in (tmp_path, tmp_path.parent):  # this test's folders; the closed one above them: _reachable
        folder.chmod(0o755)
    autograder = [sys.executable, "-m", "autograder"]
    built = as_user(user, autograder + ["build", str(home / "solutions" / "vectors"), "--no-record"], home, False)
    assert built.returncode == 0, built.stderr
    release = home / "release" / "vectors"
    key = release / "answer_key.ipynb"
    reader = make_submission(home / "reader.ipynb", key, replace={
        "    return v / v.norm(dim=-1, keepdim=True)":
        f"    open({str(key)!r}).close()\n    return v / v.norm(dim=-1, keepdim=True)"})
    # signals to every process it may and to its own process group: the worker's parent outside the PID namespace
    # has the user's uid too
    signals = "".join(f"    try:\n        os.kill({target}, signal.{name})\n    except OSError:\n        pass\n"
                      for target, name in (("-1", "SIGKILL"), ("0", "SIGTERM"), ("0", "SIGKILL")))
    signaller = make_submission(home / "signaller.ipynb", key, replace={
        "    return v / v.norm(dim=-1, keepdim=True)":
        "    import os, signal\n" + signals + "    return v / v.norm(dim=-1, keepdim=True)"})
    subprocess.run(["chown", f"{user.pw_uid}:{user.pw_gid}", str(reader), str(signaller)], check=True)
    full = _namespaces_here()  # as root: where root may not, neither may the user
    for refuse, level in (((False, None),) if full else ()) + ((True, "restricted"),):
        out = home / f"out-{refuse}"
        graded = as_user(user, autograder + ["grade", str(home / "solutions" / "vectors"), str(key), str(reader),
                                             *([] if level else [str(signaller)]), "--out", str(out)], home, refuse)
        assert graded.returncode == 0, graded.stderr
        if not level:  # the signal reaches nothing outside its namespace: no fault, every point
            assert json.loads((out / "signaller" / "grading.json").read_text())["score"] == 11
        confinement = json.loads((out / "answer_key" / "grading.json").read_text())["confinement"]
        if level:
            assert confinement.startswith("restricted:") and "file allowlist" in confinement, confinement
            assert "confinement: restricted" in graded.stderr and "not held" in graded.stderr
        assert json.loads((out / "answer_key" / "grading.json").read_text())["score"] == 11
        reading = json.loads((out / "reader" / "grading.json").read_text())
        hidden = "Permission denied" if level else "No such file"  # Landlock denies; the allowlist root lacks it
        assert reading["score"] == 9 and hidden in json.dumps(reading), (confinement, reading)
        recorded = json.loads((out / "answer_key" / "results.json").read_text())["extra_data"]
        assert recorded["confinement_level"] == (level or FULL) and recorded["confinement"] == confinement
        assert f"Isolation: {level or FULL} confinement ({confinement})" in (out / "summary.md").read_text()
    checked = as_user(user, autograder + ["check", str(key), "--part", "1"], home, True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("ran with restricted confinement") == 1, checked.stdout
    assert "1 of 1 public check(s) pass" in checked.stdout
