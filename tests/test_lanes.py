"""Grading processes on lanes of CPUs (grading/pool.py cpu_lanes): each judge shares its CPUs with its own workers
only, so a request and its reply switch processes on one core instead of waking another core."""
import os
import subprocess
import sys

import pytest

from autograder.grading.pool import LANE_VARIABLE, cpu_lanes


def test_lanes_split_the_cpus_without_overlap():
    cpus = sorted(os.sched_getaffinity(0))
    lanes = cpu_lanes(len(cpus))
    if len(cpus) < 2:
        assert lanes is None
        return
    assert lanes is not None and len(lanes) == len(cpus)
    assert sorted(c for lane in lanes for c in lane) == cpus


def test_no_lanes_for_one_job_or_more_jobs_than_cpus():
    assert cpu_lanes(1) is None
    assert cpu_lanes(len(os.sched_getaffinity(0)) + 1) is None


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_a_grading_process_enters_its_lane_and_forgets_the_variable():
    cpu = max(os.sched_getaffinity(0))
    code = ("import os; from autograder.grading.pool import _enter_lane; _enter_lane(); "
            f"print(sorted(os.sched_getaffinity(0)), {LANE_VARIABLE!r} in os.environ)")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, LANE_VARIABLE: str(cpu)},
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"[{cpu}] False"


def test_a_lane_that_is_gone_leaves_the_process_where_it_was():
    code = ("import os; from autograder.grading.pool import _enter_lane; before = os.sched_getaffinity(0); "
            "_enter_lane(); print(os.sched_getaffinity(0) == before)")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, LANE_VARIABLE: "4095,x"},
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"
