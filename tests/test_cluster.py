"""`autograder grade --cluster`: the same grading on a Ray cluster (a head and a second node, started here),
results identical to --jobs 2 less timings, nothing lost when a node's grading process is killed mid-run."""
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
    c.add_node(num_cpus=1)
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
    assert remote[0].score == example_release.max_score and remote[4].score < example_release.max_score


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
    assert [r.score for r in results[:4]] == [example_release.max_score] * 4
