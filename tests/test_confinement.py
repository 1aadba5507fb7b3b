"""What a worker can see, what happens when the grader's environment is broken, and grading where the
kernel refuses namespaces (docs/isolation.md: "What the worker sees", "Never silently wrong")."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import nbformat
import pytest

from autograder.grading import build_and_record
from autograder.program import Program
from autograder.notebook.extract import extract
from autograder.sandbox.client import WorkerSpec
from autograder.sandbox.isolation import Confinement
from tests.conftest import EXAMPLE_SOURCE, make_submission

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent

# Walks the whole disk for what a course is made of and reads the first lines of what it finds.
SEARCH = '''
import os, fnmatch
PATTERNS = ("*.ipynb", "test_*.py", "_common.py", "assignment.toml", "answer_key*", "reference.py", "reference.json",
            "manifest.json", "grading.json", "results.json", "grades.csv", "*.md")
def search_disk(marker):
    found, read = [], 0
    for top, dirs, files in os.walk("/", onerror=lambda e: None):
        if top in ("/proc", "/sys", "/dev"):
            dirs[:] = []
            continue
        for name in files:
            if not any(fnmatch.fnmatch(name, p) for p in PATTERNS):
                continue
            path = os.path.join(top, name)
            try:
                with open(path, errors="replace") as fh:
                    text = fh.read(200000)
            except OSError:
                continue
            read += 1
            if marker in text or "normalize is wrong on random rows" in text:
                found.append(path + ": " + text[:120])
    return found, read
'''


def _program(source: str) -> Program:
    ex = extract(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)]))
    return Program(ex, WorkerSpec([u.to_wire() for u in ex.units], confinement=Confinement(), import_seconds=60))


def _course_copy(where: Path, marker: str) -> Path:
    """A copy of the example course (sources, built release, a graded result) with a unique marker line in
    its hidden tests and notebook."""
    source = where / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    tests = source / "tests" / "test_hidden.py"
    tests.write_text(tests.read_text() + f"\n# {marker}\n")
    nb = source / "vectors.ipynb"
    nb.write_text(nb.read_text().replace("Rows of v (N, D) scaled to unit L2 norm.", f"{marker} rows scaled"))
    build_and_record(source)
    (where / "old-results" / "alice").mkdir(parents=True)
    (where / "old-results" / "alice" / "grading.json").write_text(json.dumps({"marker": marker}))
    return source


@pytest.fixture
def course_copies(tmp_path):
    """Copies of the course where nobody told the grader about them: /var/tmp, /opt and the home folder."""
    marker = f"AG-PRIVATE-{uuid.uuid4().hex}"
    places = [Path("/var/tmp") / f"ag-course-{uuid.uuid4().hex[:8]}", Path("/opt") / f"ag-course-{uuid.uuid4().hex[:8]}",
              Path.home() / f"ag-course-{uuid.uuid4().hex[:8]}", tmp_path / "last-year"]
    made = []
    try:
        for place in places:
            try:
                _course_copy(place, marker)
                made.append(place)
            except OSError:
                shutil.rmtree(place, ignore_errors=True)
        assert len(made) >= 2
        yield marker, made
    finally:
        for place in made:
            shutil.rmtree(place, ignore_errors=True)


def test_a_worker_searching_the_whole_disk_finds_no_course_file(course_copies, example_build, tmp_path):
    marker, places = course_copies
    program = _program(SEARCH)
    try:
        found, read = program.proxy().search_disk(marker)
        assert program.start().status.startswith("isolated: allowlist root")
    finally:
        program.close()
    assert read > 20, "the search read almost nothing: it proves nothing"  # numpy's and torch's own test files
    assert found == [], found[:5]

    # The same search through `autograder grade`: its feedback holds no path or line of any copy.
    hostile = make_submission(tmp_path / "search.ipynb", example_build.release / "answer_key.ipynb",
                              {"return v / v.norm(dim=-1, keepdim=True)": "raise RuntimeError(repr(search_disk(MARKER)))"},
                              [SEARCH + f"\nMARKER = {marker[:8]!r} + {marker[8:]!r}\n"])
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(example_build.release), str(hostile),
                           "--out", str(out), "--quiet"], cwd=str(places[0]), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    feedback = (out / "search" / "feedback.md").read_text()
    assert "raised RuntimeError: (\\[\\], " in feedback  # the search ran and found nothing (markdown-escaped)
    for text in [marker, "normalize is wrong on random rows", *map(str, places),
                 str(example_build.release), str(example_build.source)]:
        assert text not in feedback
    result = json.loads((out / "search" / "grading.json").read_text())
    assert result["confinement"].startswith("isolated: allowlist root")


HELPER_IMPORT = "import torch.nn as nn"


def test_a_module_missing_in_the_workers_leaves_checks_ungraded_never_zero(tmp_path):
    """The reference imports a module that the grading process finds but its workers do not (an instructor's
    helper installed only in their shell): the checks that need it are NOT GRADED for every submission, the
    run says why on stderr and exits non-zero; the other checks are graded as usual."""
    helpers = tmp_path / "site"
    helpers.mkdir()
    (helpers / "course_helpers.py").write_text("def unit(v):\n    return v / v.norm(dim=-1, keepdim=True)\n")
    source = tmp_path / "course" / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    nb = nbformat.read(source / "vectors.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and HELPER_IMPORT in cell.source:
            cell.source = cell.source.replace(HELPER_IMPORT, HELPER_IMPORT + "\nimport course_helpers\n")
        cell.source = cell.source.replace("return v / v.norm(dim=-1, keepdim=True)", "return course_helpers.unit(v)")
    nbformat.write(nb, source / "vectors.ipynb")
    paths = build_and_record(source)
    key = paths.release / "answer_key.ipynb"
    wrong = make_submission(tmp_path / "wrong_softmax.ipynb", key, {"return e / e.sum(dim=dim, keepdim=True)": "return e"})
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": f"{helpers}{os.pathsep}{ROOT}"}
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(paths.release), str(key), str(wrong),
                           "--out", str(out), "--quiet"], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 3, done.stderr
    assert "GRADER PROBLEM" in done.stderr and "normalize_test" in done.stderr
    assert "course_helpers" in done.stderr  # the cause, named
    for sub_id, _softmax_points in (("answer_key", 6), ("wrong_softmax", 0)):
        result = json.loads((out / sub_id / "grading.json").read_text())
        checks = {c["name"]: c for c in result["checks"]}
        assert checks["normalize_test"]["status"] == "ungraded", sub_id
        assert "not graded" in checks["normalize_test"]["message"]
        assert all(c["status"] != "failed" or c["part"] == "2. Softmax" for c in result["checks"]), sub_id
        assert checks["tiny layer: forward with given weights"]["score"] == 2
        gradescope = json.loads((out / sub_id / "results.json").read_text())
        assert gradescope["extra_data"]["final"] is False and "NOT FINAL" in gradescope["output"]
        test = next(t for t in gradescope["tests"] if t["name"] == "normalize_test")
        assert "score" not in test and test["output"].startswith("NOT GRADED")
    grades = (out / "grades.csv").read_text()
    assert ",ungraded," in grades and "not final" in grades


def _refusing_kernel(command: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    """Run `command` as a user that is not root, on a kernel that refuses it new user namespaces: inside a
    user namespace that maps uid 1000 to this (root) user and whose parent allows no more user namespaces
    (what Ubuntu 24.04's AppArmor default, or user.max_user_namespaces=0, does to a normal user)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and util-linux's unshare to simulate the refusing kernel")
    ready, limited = tmp_path / "namespace-ready", tmp_path / "limit-set"
    for f in (ready, limited):
        f.unlink(missing_ok=True)
    inner = (f"touch {ready}; while [ ! -e {limited} ]; do sleep 0.05; done; exec " + " ".join(map(_quote, command)))
    script = (f"unshare --user --map-user=1000 --map-group=1000 sh -c {_quote(inner)} & "
              f"while [ ! -e {ready} ]; do sleep 0.05; done; "
              f"echo 0 > /proc/sys/user/max_user_namespaces && touch {limited}; wait $!")
    return subprocess.run(["unshare", "--user", "--map-root-user", "sh", "-c", script], capture_output=True,
                          text=True, timeout=600, cwd=str(tmp_path))


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def test_a_kernel_refusing_namespaces_grades_restricted_and_says_so(example_build, tmp_path):
    """The ladder's second level (sandbox/ladder.py): the files still hidden by Landlock, the level recorded;
    --trusted-submissions changes nothing where a stronger level builds. Refusals: tests/test_ladder.py."""
    from autograder.sandbox import landlock

    if not landlock.abi_version():
        pytest.skip("this kernel has no Landlock: the restricted level cannot be built here")
    key = example_build.release / "answer_key.ipynb"
    grade = [sys.executable, "-m", "autograder", "grade", str(example_build.release), str(key)]
    for flags, out in (([], "restricted"), (["--trusted-submissions"], "trusted")):
        done = _refusing_kernel(grade + ["--out", str(tmp_path / out), *flags], tmp_path)
        assert done.returncode == 0, done.stderr
        assert "confinement: restricted" in done.stderr and "not held" in done.stderr
        result = json.loads((tmp_path / out / "answer_key" / "grading.json").read_text())
        assert result["score"] == 11
        assert result["confinement"].startswith("restricted: no namespaces"), result["confinement"]
        assert "restricted: no namespaces" in (tmp_path / out / "summary.md").read_text()


# Reads every readable mapping of its own process, looking for a string it is not given (so that it does not
# find its own copy): a prefix, and the SHA-256 of the `length` characters that follow it.
MEMORY_SEARCH = '''
import hashlib, os
def search_memory(prefix, digest, length):
    prefix = prefix.encode()
    found, scanned = 0, 0
    with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            start, end = (int(x, 16) for x in fields[0].split("-"))
            # what the process holds at run time is in writable memory; the read-only text of libraries (3 GB
            # for a CUDA build of torch) holds nothing it was given
            if "r" not in fields[1] or "w" not in fields[1] or end - start > 2**31:
                continue
            try:
                mem.seek(start)
                data = mem.read(end - start)
            except (OSError, ValueError, OverflowError):
                continue
            scanned += len(data)
            at = data.find(prefix)
            while at >= 0:
                tail = data[at + len(prefix):at + len(prefix) + length]
                found += hashlib.sha256(tail).hexdigest() == digest
                at = data.find(prefix, at + 1)
    return found, scanned, os.environ.get("AG_SECRET")
'''


def test_the_graders_environment_and_command_line_are_nowhere_in_a_workers_memory(example_build, tmp_path):
    """The grading process forks its fork server from itself (one torch import): the fork forgets the process's
    environment (and its bytes) and command line before any worker is forked from it. A worker that reads all of
    its own memory finds neither a secret of the grader's environment nor the path of another submission."""
    import hashlib

    token = uuid.uuid4().hex
    secret = f"AG-SECRET-{token}"
    name = uuid.uuid4().hex[:12]
    other = tmp_path / f"alice-{name}.ipynb"
    key = example_build.release / "answer_key.ipynb"
    shutil.copy(key, other)
    digest = lambda text: hashlib.sha256(text.encode()).hexdigest()  # noqa: E731 - a one-line helper
    hostile = make_submission(tmp_path / "search.ipynb", key, {
        "return v / v.norm(dim=-1, keepdim=True)":
        # the control: a string the worker builds itself (only at run time is its prefix next to the token)
        f"control = ('AG-CON' + 'TROL-' + {token!r}).encode()\n"
        f"    raise RuntimeError(repr([search_memory('AG-SECRET-', {digest(token)!r}, 32), "
        f"search_memory('alice-', {digest(name)!r}, 12), search_memory('AG-CONTROL-', {digest(token)!r}, 32)]))"},
        [MEMORY_SEARCH])
    out = tmp_path / "out"
    env = {**os.environ, "AG_SECRET": secret}
    env.pop("OMP_NUM_THREADS", None)
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(example_build.release), str(hostile),
                           str(other), "--out", str(out), "--quiet"], capture_output=True, text=True, timeout=600,
                          env=env)
    assert done.returncode == 0, done.stderr
    message = next(c["message"] for c in json.loads((out / "search" / "grading.json").read_text())["checks"]
                   if c["name"] == "normalize_test")
    found = re.findall(r"\((\d+), (\d+), None\)", message)
    assert len(found) == 3, message  # it searched
    assert [int(n) for n, _ in found][:2] == [0, 0] and int(found[2][0]) >= 1, message  # the control is found
    assert all(int(scanned) > 50 * 2**20 for _, scanned in found), message  # all of its memory, torch's too
