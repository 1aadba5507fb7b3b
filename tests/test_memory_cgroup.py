"""A run inside a memory cgroup it does not own (a Gradescope container, a CI job): the workers' memory is held by
memory cgroups of their own under a run group whose limit leaves room for the judges and the command, so the
kernel's OOM killer never takes a grading process or the command. Scaled down: a 1.5 GB enclosing group, `--jobs 2`,
answer keys and a notebook that writes 8 GB into memfd files.

Needs a memory cgroup this process may create children in (root with cgroup v1's memory controller, or a
delegated cgroup v2 subtree); skipped with the reason elsewhere.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from autograder.grading import GradeOptions, build_and_record, grade
from autograder.release import load_release
from autograder.sandbox import cgroups
from autograder.sandbox.cgroups import PREFIX, RunGroup, MemoryVerdict, own_group
from autograder.sandbox.processes import MONITORED
from autograder.status import PENDING, PASSED, UNGRADED
from tests.conftest import EXAMPLE_SOURCE, make_submission
from tests.test_memory_in_files import MEMFD_FILLER

pytestmark = pytest.mark.slow

ENCLOSING_BYTES = 1536 << 20
KEYS = 8


def _enclosing_group():
    """A group of the test's own with a small limit (what a container's cgroup is), or a skip saying why not."""
    own, why = own_group()
    if own is None:
        pytest.skip(f"no memory cgroup here: {why}")
    group = own.child(f"ag-test-enclosing-{os.getpid()}")
    try:
        group.create()
        if own.version == "v2":
            group.delegate_memory()  # type: ignore[attr-defined]
        group.set_limit(ENCLOSING_BYTES)
    except OSError as exc:
        group.remove()
        pytest.skip(f"cannot create a memory cgroup under {own.path}: {exc}")
    return group


def _course(tmp_path):
    source = tmp_path / "course" / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    toml = source / "assignment.toml"
    toml.write_text(toml.read_text().split("[limits]")[0] + "[limits]\ncheck_seconds = 60\nmemory_mb = 3072\n")
    return load_release(build_and_record(source).release)


# fills a memfd and, like a student's code that catches the error, retries a write the kernel refuses (ENOMEM)
FILL = """import os, time
time.sleep(0.3)
fd, block = os.memfd_create('x'), b'x' * 2**20
for _ in range(400):
    while True:
        try:
            os.write(fd, block)
            break
        except OSError:
            pass
"""


def test_a_worker_at_its_own_group_limit_is_its_own_and_a_full_run_is_the_systems(tmp_path):
    """The verdicts the judge acts on, from the kernel's own counters: a process filling a memfd past its group's
    limit, then past the run's (its own limit being higher). Either way the kernel's OOM killer ends it: cgroup v1
    with its OOM killer turned off would only pause a page fault, and fail the write with ENOMEM, which the filler
    retries for ever."""
    run, why = RunGroup.create()
    if run is None:
        pytest.skip(f"no memory cgroup here: {why}")
    try:
        proc = subprocess.Popen([sys.executable, "-c", FILL])
        worker = run.new_worker(proc.pid, [proc.pid], 100 << 20)
        assert proc.wait(timeout=60) == -9  # killed at its own limit by the kernel, no one else
        assert worker.verdict() == MemoryVerdict.OWN
        assert worker.group.oom_kills() == 1  # v1: the process the OOM killer took; v2: the group's (one process)
        worker.close()
        run.group.set_limit(150 << 20)
        proc = subprocess.Popen([sys.executable, "-c", FILL])
        worker = run.new_worker(proc.pid, [proc.pid], 400 << 20)
        assert proc.wait(timeout=60) == -9
        assert worker.verdict() == MemoryVerdict.SYSTEM
        worker.close()
    finally:
        run.close()
    assert not os.path.exists(run.group.path)


def test_the_rest_of_a_worker_the_kernel_killed_one_process_of_is_stopped(tmp_path):
    """Two processes in a worker's group: the parent holds 40 MB of resident memory (the one the OOM killer takes
    first), its child writes 70 MB into a memfd and waits. Together they pass the group's 100 MB. v2
    (`memory.oom.group`) kills both; v1 kills the parent only and the child, with room again, lives on: the group
    then reads as partly killed at its own limit, which the judge's monitor acts on
    (`WorkerProcess.stop_if_partly_killed`)."""
    run, why = RunGroup.create()
    if run is None:
        pytest.skip(f"no memory cgroup here: {why}")
    child = "import os, time\nfd = os.memfd_create('x')\nfor _ in range(70): os.write(fd, b'x' * 2**20)\ntime.sleep(60)"
    parent = ("import subprocess, sys, time\ntime.sleep(0.3)\nheld = b'x' * (40 << 20)\n"
              f"subprocess.Popen([sys.executable, '-c', {child!r}]).wait()")
    try:
        proc = subprocess.Popen([sys.executable, "-c", parent])
        worker = run.new_worker(proc.pid, [proc.pid], 100 << 20)  # its child is started inside the group
        assert proc.wait(timeout=60) == -9
        assert worker.partly_killed() and worker.verdict() == MemoryVerdict.OWN
        if run.group.version == "v1":
            assert len(worker.group.pids()) == 1  # the child: v1 kills one process, the judge the rest
        else:
            _until(lambda: not worker.group.pids())  # oom.group: the whole group
        worker.close()
        _until(lambda: not worker.group.pids())
    finally:
        run.close()


def _until(condition, seconds: float = 30.0) -> None:
    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def test_answer_keys_keep_their_points_when_a_memfd_notebook_fills_the_enclosing_group(tmp_path):
    enclosing = _enclosing_group()
    try:
        release = _course(tmp_path)
        key = release.dir / "answer_key.ipynb"
        subs = tmp_path / "subs"
        subs.mkdir()
        for n in range(KEYS):
            shutil.copy(key, subs / f"key{n}.ipynb")
        make_submission(subs / "hoard.ipynb", key, {"return v / v.norm(dim=-1, keepdim=True)": "return _hoard(v)"},
                        [MEMFD_FILLER.replace("def normalize(v)", "def _hoard(v)")])
        out = tmp_path / "out"
        enter = f'echo $$ > {enclosing.file("cgroup.procs")} && exec "$@"'
        done = subprocess.run(["sh", "-c", enter, "sh", sys.executable, "-m", "autograder", "grade", str(release.dir),
                               str(subs), "--out", str(out), "--jobs", "2"], capture_output=True, text=True,
                              timeout=900)
        grading_processes_killed = _local_oom_kills(enclosing)
    finally:
        enclosing.kill()
        enclosing.remove(wait=5.0)
    assert done.returncode in (0, 3), done.stderr[-3000:]
    rows = {p.name: json.loads((p / "grading.json").read_text()) for p in out.iterdir() if (p / "grading.json").exists()}
    assert set(rows) == {f"key{n}" for n in range(KEYS)} | {"hoard"}, done.stderr[-3000:]
    for n in range(KEYS):
        row = rows[f"key{n}"]
        assert (row["score"], row["max_score"]) == (11, 13), [(c["name"], c["message"]) for c in row["checks"]]  # 2 written
        assert row["memory"].startswith("memory cgroup")
    hoard = {c["name"]: c for c in rows["hoard"]["checks"]}
    normalize = hoard["normalize_test"]
    assert normalize["score"] == 0 or normalize["status"] == UNGRADED
    assert normalize["status"] == UNGRADED or "memory" in normalize["message"], normalize
    others = [c for c in hoard.values() if c["part"] != normalize["part"]]
    assert all(c["status"] in (PASSED, UNGRADED, PENDING) for c in others), others  # the written answer: pending
    assert grading_processes_killed == 0  # the kernel never had to choose among the judges and the command


def _local_oom_kills(group) -> int:
    """Processes of the group itself (the command, the judges, their fork servers; not the workers, which live in
    groups below it) that the kernel's OOM killer took."""
    if group.version == "v1":
        return group.oom_kills()  # v1 counts each group's own processes only
    with open(group.file("memory.events.local")) as fh:
        return int(dict(line.split() for line in fh.read().splitlines()).get("oom_kill", 0))


def test_groups_left_by_a_run_that_crashed_are_removed_by_the_next(tmp_path):
    own, why = own_group()
    if own is None:
        pytest.skip(f"no memory cgroup here: {why}")
    stale = own.child(f"{PREFIX}999999999-1")  # no process has that pid: its owner is gone
    try:
        stale.create()
        stale.child("worker-1").create()
    except OSError as exc:
        pytest.skip(f"cannot create a memory cgroup under {own.path}: {exc}")
    run, why = RunGroup.create()
    assert run is not None, why
    run.close()
    assert not os.path.exists(stale.path)


def test_without_a_memory_cgroup_the_monitor_holds_memory_and_results_say_so(example_release, tmp_path, monkeypatch):
    monkeypatch.setattr(cgroups, "own_group", lambda: (None, "no memory cgroup controller is mounted"))
    with cgroups.run_memory_groups() as (run, line):
        assert run is None and cgroups.current_run_group() is None
        assert "no memory cgroup" in line and "controller is mounted" in line
    [result] = grade(example_release, [example_release.dir / "answer_key.ipynb"],
                     GradeOptions(tmp_path / "out", quiet=True))
    assert result.score == 11 and result.memory == MONITORED
    extra = json.loads((tmp_path / "out" / "answer_key" / "results.json").read_text())["extra_data"]
    assert extra["memory"] == MONITORED
    assert "Memory: no memory cgroup" in (tmp_path / "out" / "summary.md").read_text()


def test_both_back_ends_read_their_own_files(tmp_path):
    """The v2 and v1 back-ends on folders that stand in for their cgroups: what each reads and writes (this machine
    may have only one of them)."""
    v2 = cgroups.V2Group(str(tmp_path / "v2"))
    os.mkdir(v2.path)
    for name, text in {"memory.max": "max\n", "memory.current": "300\n", "memory.stat": "anon 200\ninactive_file 100\n",
                       "memory.events": "low 0\nhigh 0\nmax 4\noom 1\noom_kill 2\n"}.items():
        (tmp_path / "v2" / name).write_text(text)
    assert v2.limit() == cgroups.UNLIMITED and v2.working_set() == 200
    assert v2.limit_reached() and v2.oom_kills() == 2
    v2.set_limit(1 << 30)
    assert v2.limit() == 1 << 30
    v1 = cgroups.V1Group(str(tmp_path / "v1"))
    os.mkdir(v1.path)
    for name, text in {"memory.limit_in_bytes": "9223372036854771712\n", "memory.memsw.limit_in_bytes": "9223372036854771712\n",
                       "memory.max_usage_in_bytes": str(100 << 20), "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n"}.items():
        (tmp_path / "v1" / name).write_text(text)
    v1.set_limit(100 << 20)
    assert v1.limit() == 100 << 20 and (tmp_path / "v1" / "memory.memsw.limit_in_bytes").read_text() == str(100 << 20)
    assert not v1.limit_reached() and not v1.partly_killed()  # a peak at the limit alone: page cache, reclaimed
    (tmp_path / "v1" / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
    assert v1.limit_reached() and v1.partly_killed() and v1.oom_kills() == 1
    (tmp_path / "v1" / "memory.max_usage_in_bytes").write_text(str(60 << 20))
    assert not v1.limit_reached()  # killed under its own limit: the run's or the machine's doing


def test_a_cgroup_path_is_found_under_the_mount_that_reaches_it():
    assert cgroups._located("/process_api/x", "/", "/sys/fs/cgroup/memory") == "/sys/fs/cgroup/memory/process_api/x"
    assert cgroups._located("/docker/c1/sub", "/docker/c1", "/sys/fs/cgroup/memory") == "/sys/fs/cgroup/memory/sub"
    assert cgroups._located("/elsewhere", "/docker/c1", "/sys/fs/cgroup/memory") is None


def test_in_a_container_cgroup_v2_moves_its_processes_to_a_leaf_to_delegate(tmp_path, monkeypatch):
    """cgroup v2 refuses controllers to the children of a group holding processes (EBUSY); at the root of the
    container's cgroup namespace they move to a leaf group first. Stand-in folder: the kernel's refusal simulated."""
    import errno

    own = cgroups.V2Group(str(tmp_path))
    (tmp_path / "cgroup.procs").write_text("1\n7\n")
    refusals = []

    def delegate(self):
        if not refusals:
            refusals.append(self.path)
            raise OSError(errno.EBUSY, "Device or resource busy")
        (tmp_path / "cgroup.subtree_control").write_text("+memory")

    monkeypatch.setattr(cgroups.V2Group, "delegate_memory", delegate)
    monkeypatch.setattr(cgroups, "_own_paths", lambda: ("/", None))
    cgroups._delegate(own)
    assert (tmp_path / cgroups.LEAF / "cgroup.procs").read_text() == "7"  # each pid written in turn
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+memory"
    monkeypatch.setattr(cgroups, "_own_paths", lambda: ("/user.slice/session", None))  # not a container's root
    refusals.clear()
    with pytest.raises(OSError):
        cgroups._delegate(own)


def _cgroup_folder(path, files: dict[str, str]):
    path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (path / name).write_text(text)
    return str(path)


@pytest.mark.parametrize("machine", ["v2", "hybrid", "v1", "none", "v2 container leaf"])
def test_the_memory_controller_is_found_on_each_kind_of_machine(tmp_path, monkeypatch, machine):
    """Which group the run is made under, on stand-in cgroup file systems: v2 with its memory controller; this
    development machine's hybrid (v1 controllers, a v2 hierarchy without memory); v1 alone; none (no memory
    controller anywhere: the monitor and RLIMIT_AS, and the reason); v2 in a container whose processes moved to
    the leaf group (the group above it is the one to use)."""
    unified = _cgroup_folder(tmp_path / "unified", {"cgroup.controllers": "cpu io pids" + (
        " memory" if machine.startswith("v2") else "")})
    v1 = _cgroup_folder(tmp_path / "memory" / "job", {"memory.limit_in_bytes": "1"})
    mounts = [("/", unified, "cgroup2", "rw")]
    if machine in ("hybrid", "v1"):
        mounts.append(("/", str(tmp_path / "memory"), "cgroup", "rw,memory"))
    if machine == "v1":
        mounts = mounts[1:]
    own_v2 = "/" + cgroups.LEAF if machine == "v2 container leaf" else "/job"
    if machine != "v2 container leaf":
        os.makedirs(os.path.join(unified, "job"))
    monkeypatch.setattr(cgroups, "_mounts", lambda: mounts)
    monkeypatch.setattr(cgroups, "_own_paths", lambda: (own_v2, "/job"))
    group, why = own_group()
    expected = {"v2": (cgroups.V2Group, os.path.join(unified, "job")), "hybrid": (cgroups.V1Group, v1),
                "v1": (cgroups.V1Group, v1), "none": (type(None), None), "v2 container leaf": (cgroups.V2Group, unified)}
    kind, path = expected[machine]
    assert isinstance(group, kind) and (group is None or group.path.rstrip("/") == path.rstrip("/"))
    assert (why == "") == (group is not None) and (group is not None or "no memory cgroup controller" in why)


@pytest.mark.parametrize("kills, peak_mb, expected", [(0, 100, ""), (1, 100, "own"), (1, 60, "system")])
def test_the_judge_stops_the_rest_of_a_worker_the_kernel_killed_a_process_of(tmp_path, monkeypatch, kills, peak_mb,
                                                                           expected):
    """cgroup v1 kills one process at a limit: the monitor stops the rest, as the student's memory error at its own
    limit (peak at the limit), as a system fault under it (the run's limit or the machine's), not at all when the
    kernel killed nothing (a peak at the limit is page cache reclaimed). Stand-in folder for the worker's group."""
    from autograder.sandbox.client import WorkerProcess, WorkerSpec
    from autograder.sandbox.diagnosis import RUN_OUT_OF_MEMORY, StopCause
    from autograder.sandbox.isolation import Confinement

    folder = _cgroup_folder(tmp_path / "worker-1", {
        "memory.limit_in_bytes": str(100 << 20), "memory.max_usage_in_bytes": str(peak_mb << 20),
        "memory.oom_control": f"oom_kill_disable 0\nunder_oom 0\noom_kill {kills}\n"})
    worker = WorkerProcess(WorkerSpec(units=[], confinement=Confinement(memory_bytes=100 << 20)))
    worker._memory_group = cgroups.WorkerGroup(cgroups.V1Group(folder), 100 << 20)
    stops = []
    monkeypatch.setattr(worker, "stop", lambda why, cause=StopCause.STOPPED_FOR_ITS_CODE: stops.append((why, cause)))
    assert worker.stop_if_partly_killed() == bool(expected)
    if expected == "own":
        assert stops == [(worker.over_own_limit(), StopCause.STOPPED_FOR_ITS_CODE)] and "memory limit (100 MB" in stops[0][0]
    elif expected == "system":
        assert stops == [(RUN_OUT_OF_MEMORY, StopCause.STOPPED_FOR_THE_MACHINE)]
    else:
        assert stops == []
