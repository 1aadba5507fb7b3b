"""`autograder grade --cluster` and `autograder rubric --cluster`: the same grading on a Ray cluster (a head and a
second node with one (logical) GPU, started here): results identical to --jobs 2 less timings, nothing lost when a
node's grading process is killed mid-run, or a third node's agent (the node lost); the rubric's actors placed on the
GPU, its results those of a local run."""
from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

from autograder.grading import GradeOptions, grade
from tests.conftest import make_submission

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow

BUGGY = {"return v / v.norm(dim=-1, keepdim=True)": "return v / v.sum(dim=-1, keepdim=True)"}
EXITS = {"return v / v.norm(dim=-1, keepdim=True)": "import sys; sys.exit(3)"}


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    c.add_node(num_cpus=1, num_gpus=1)  # a logical GPU: Ray schedules by it; the rubric runs with --device cpu
    ray.init(address=c.address, include_dashboard=False, log_to_driver=False)
    yield c
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def batch(example_build, tmp_path_factory):
    folder = tmp_path_factory.mktemp("subs")
    key = example_build.release / "answer_key.ipynb"
    subs = [make_submission(folder / f"key{i}.ipynb", key) for i in range(4)]
    subs += [make_submission(folder / "buggy.ipynb", key, BUGGY), make_submission(folder / "exits.ipynb", key, EXITS)]
    return subs


def _without_timings(out, ids):
    rows = {}
    for sub_id in ids:
        data = json.loads((out / sub_id / "grading.json").read_text())
        data.pop("execution_time")
        data.pop("memory")  # what held the workers' memory: the cluster's nodes make no memory cgroups
        for c in data["checks"]:
            c.pop("seconds")
        rows[sub_id] = data
    return rows


def test_the_cluster_grades_as_jobs_does(cluster, example_release, batch, tmp_path):
    local = grade(example_release, batch, GradeOptions(tmp_path / "jobs", quiet=True, jobs=2))
    remote = grade(example_release, batch, GradeOptions(tmp_path / "cluster", quiet=True, cluster=cluster.address))
    ids = [r.submission for r in local]
    assert [r.submission for r in remote] == ids
    assert _without_timings(tmp_path / "cluster", ids) == _without_timings(tmp_path / "jobs", ids)
    assert (tmp_path / "cluster" / "grades.csv").read_text() == (tmp_path / "jobs" / "grades.csv").read_text()
    full = example_release.max_score - 2  # all but the written answer's 2 (pending, graded by hand)
    assert remote[0].score == full and remote[4].score < full


def _grading_processes() -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if b"autograder.entrypoints\0pool" in fh.read():
                    found.append(int(pid))
        except (OSError, ValueError):
            continue
    return found


def test_a_grading_process_killed_mid_run_loses_nothing(cluster, example_release, batch, tmp_path):
    killed = []

    def kill_one():
        end = time.monotonic() + 60
        while time.monotonic() < end and not killed:
            for pid in _grading_processes():
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                break
            time.sleep(0.05)

    killer = threading.Thread(target=kill_one)
    killer.start()
    results = grade(example_release, batch, GradeOptions(tmp_path / "out", quiet=True, cluster=cluster.address))
    killer.join()
    assert killed, "no grading process was seen to kill"
    assert len(results) == len(batch) and all(not r.error for r in results)
    assert [r.score for r in results[:4]] == [example_release.max_score - 2] * 4  # the written answer's 2 pending


# -- the rubric ------------------------------------------------------------------------------------------

class _Resources:
    def __init__(self, resources: dict):
        self.resources = resources

    def cluster_resources(self) -> dict:
        return self.resources


def test_rubric_actors_one_per_gpu_none_without_gpus():
    from autograder.rubric.cluster import actor_resources

    assert actor_resources(_Resources({"CPU": 8.0, "GPU": 3.0}), "auto") == ({"num_gpus": 1, "num_cpus": 1}, 3)
    assert actor_resources(_Resources({"CPU": 8.0}), "auto") == ({}, 0)  # stays pending
    assert actor_resources(_Resources({"CPU": 8.0}), "cpu") == ({"num_cpus": 1}, 8)


def _rubric(main, release, submissions, out, world, *extra) -> int:
    return main(["rubric", str(release), *map(str, submissions), "--out", str(out),
                 "--quiet", "--device", "cpu", "--encoder", str(world["encoder"]), "--imdb", str(world["imdb"]),
                 *extra])


def test_the_rubric_on_the_cluster_grades_as_here(cluster, tmp_path, rubric_release):
    from autograder.entrypoints import command_line as main
    from tests.test_rubric import _submission, _train, MODEL
    from tests.transformers_bert.tiny_world import build_world

    world = build_world(tmp_path / "world")
    state = _train(world, MODEL, world["encoder"], steps=40)
    subs = [_submission(tmp_path / "subs" / name, state=state if name != "nockpt" else None)
            for name in ("ada", "bo", "nockpt")]
    assert _rubric(main, rubric_release, subs, tmp_path / "here" / "out", world) == 0
    assert _rubric(main, rubric_release, subs, tmp_path / "there" / "out", world, "--cluster", cluster.address) == 0
    for sub in ("transformers_bert", "transformers_bert-2", "transformers_bert-3"):  # ids in the order given
        here = json.loads((tmp_path / "here" / "out" / sub / "grading.json").read_text())["checks"]
        there = json.loads((tmp_path / "there" / "out" / sub / "grading.json").read_text())["checks"]
        for check in here + there:
            check.pop("seconds")
        assert there == here
    ada = json.loads((tmp_path / "there" / "out" / "transformers_bert" / "grading.json").read_text())["checks"][0]
    assert ada["status"] in ("passed", "partial", "failed") and "validation accuracy" in ada["message"]
    assert "no saved model" in json.loads((tmp_path / "there" / "out" / "transformers_bert-3" / "grading.json").read_text())[
        "checks"][0]["message"]


def test_a_killed_driver_resumes_where_it_stopped(cluster, example_release, batch, tmp_path):
    """The command itself killed mid-run (kill -9): the next run grades only what has no result, and every row
    equals a --jobs 2 run's."""
    import subprocess
    import sys

    out = tmp_path / "out"
    command = [sys.executable, "-m", "autograder", "grade", str(example_release.dir), *map(str, batch), "--out",
               str(out), "--cluster", cluster.address, "--quiet"]
    first = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 300
    while time.monotonic() < end and first.poll() is None and len(list(out.glob("*/.graded.json"))) < 2:
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    # a result is whole once its .graded.json is written (after grading.json): one killed in between is graded again
    kept = {p.parent.name: p.stat().st_mtime_ns for p in out.glob("*/grading.json")
            if (p.parent / ".graded.json").is_file()}
    assert 0 < len(kept) < len(batch), "the driver was not killed mid-run"
    second = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr
    assert {p.parent.name: p.stat().st_mtime_ns for p in out.glob("*/grading.json") if p.parent.name in kept} == kept
    local = grade(example_release, batch, GradeOptions(tmp_path / "jobs", quiet=True, jobs=2))
    ids = [r.submission for r in local]
    assert _without_timings(out, ids) == _without_timings(tmp_path / "jobs", ids)


def _below(pid: int, marker: bytes) -> list[int]:
    """Processes below `pid` whose command line holds `marker`."""
    from autograder.sandbox.processes import descendants

    found = []
    for child in descendants(pid):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as fh:
                if marker in fh.read():
                    found.append(child)
        except OSError:
            continue
    return found


def test_a_node_lost_mid_run_has_its_submissions_graded_on_the_others(cluster, example_build, example_release,
                                                                      tmp_path):
    """A third node joins; its agent (raylet) is SIGKILLed once a grading process runs on it, which takes the node
    down with the actor and its grading process. The driver does not wait for the node: every submission gets its
    grade from the nodes left (grading/cluster.py: schedule). Last in this module: the cluster keeps its two nodes."""
    node = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    raylet = node.all_processes["raylet"][0].process
    key = example_build.release / "answer_key.ipynb"
    slow = {"return v / v.norm(dim=-1, keepdim=True)": "import time; time.sleep(3)\n    return v / v.norm(dim=-1, keepdim=True)"}
    subs = [make_submission(tmp_path / f"slow{i}.ipynb", key, slow) for i in range(4)]
    killed = []

    def kill_the_node_while_it_grades():
        end = time.monotonic() + 300
        while time.monotonic() < end and not killed:
            if _below(raylet.pid, b"autograder.entrypoints\0pool"):
                raylet.kill()
                killed.append(raylet.pid)
            time.sleep(0.1)

    killer = threading.Thread(target=kill_the_node_while_it_grades)
    killer.start()
    try:
        results = grade(example_release, subs, GradeOptions(tmp_path / "out", quiet=True, cluster=cluster.address))
    finally:
        killer.join()
        cluster.remove_node(node, allow_graceful=False)
    assert killed, "no grading process was seen on the node to lose"
    assert [r.error for r in results] == [""] * len(subs)
    assert [r.score for r in results] == [example_release.max_score - 2] * len(subs)  # the written answer's 2 pending
