"""Memory a worker holds in files, not in its address space (memfd, /dev/shm): counted against its memory limit
by the monitor, so a notebook cannot fill the machine with it (scaled down: a 3 GB limit, the worker's address space holding torch)."""
from __future__ import annotations

import os
import shutil

import pytest

from autograder.grading import GradeOptions, build_and_record, grade
from autograder.release import load_release
from autograder.sandbox import cgroups
from autograder.sandbox.processes import MONITORED, memory_held_in_files
from tests.conftest import EXAMPLE_SOURCE, make_submission

pytestmark = pytest.mark.slow

MEMFD_FILLER = '''
def normalize(v):
    import os, time
    block = b"x" * (1 << 20)  # small: the address-space limit leaves little room beside torch
    hoard = []
    for _ in range(8 * 1024 // 48):  # 8 GB in memfd files of 48 MB (each under the file-size limit)
        fd = os.memfd_create("hoard")
        hoard.append(fd)
        for _ in range(48):
            while True:  # a write the kernel refuses (ENOMEM at a cgroup's limit) is tried again, as hostile code would
                try:
                    os.write(fd, block)
                    break
                except OSError:
                    time.sleep(0.001)
        time.sleep(0.005)
    return v / v.norm(dim=-1, keepdim=True)
'''


def test_a_memfd_is_counted_by_the_reader():
    fd = os.memfd_create("probe")
    try:
        os.write(fd, b"y" * (8 << 20))
        assert memory_held_in_files([os.getpid()]) >= 8 << 20
    finally:
        os.close(fd)
    assert memory_held_in_files([os.getpid()]) < 8 << 20


@pytest.mark.parametrize("controller", ["this machine's", "none"])
def test_a_notebook_filling_a_memfd_loses_that_part_only(tmp_path, monkeypatch, controller):
    """Whatever holds the worker's memory: this machine's memory cgroup (v1 or v2: the kernel kills the worker at its
    group's limit, even one retrying the writes refused) or, without a memory controller, the judge's monitor (the
    memory files counted). Either way the row says the memory limit was passed, with memfd in it."""
    if controller == "none":
        monkeypatch.setattr(cgroups, "own_group", lambda: (None, "no memory cgroup controller is mounted"))
    source = tmp_path / "course" / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    toml = source / "assignment.toml"
    toml.write_text(toml.read_text().split("[limits]")[0] + "[limits]\ncheck_seconds = 60\nmemory_mb = 3072\n")
    release = load_release(build_and_record(source).release)
    key = release.dir / "answer_key.ipynb"
    nb = make_submission(tmp_path / "hoard.ipynb", key, {"return v / v.norm(dim=-1, keepdim=True)":
                                                          "return _hoard(v)"}, [MEMFD_FILLER.replace(
                                                              "def normalize(v)", "def _hoard(v)")])
    [result] = grade(release, [nb], GradeOptions(tmp_path / "out", quiet=True))
    checks = {c.name: c for c in result.checks}
    assert result.memory.startswith("memory cgroup") or result.memory == MONITORED
    assert controller != "none" or result.memory == MONITORED
    assert checks["normalize_test"].score == 0
    assert "memory limit" in checks["normalize_test"].message and "memfd" in checks["normalize_test"].message
    others = [c for c in result.checks if c.part != checks["normalize_test"].part and c.name != "q_softmax"]
    assert others and all(c.status == "passed" for c in others), [(c.name, c.message) for c in others]
    assert checks["q_softmax"].status == "pending"  # the written answer: graded by hand


def test_a_function_stopped_at_the_memory_limit_is_not_run_again(tmp_path):
    """softmax filling memfd files: its worker is stopped at the memory limit in the first check that calls it;
    the later ones fail at once with the same message (no second fill), and other parts keep their points."""
    source = tmp_path / "course" / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    toml = source / "assignment.toml"
    toml.write_text(toml.read_text().split("[limits]")[0] + "[limits]\ncheck_seconds = 60\nmemory_mb = 3072\n")
    release = load_release(build_and_record(source).release)
    nb = make_submission(tmp_path / "hoard.ipynb", release.dir / "answer_key.ipynb",
                         {"return e / e.sum(dim=dim, keepdim=True)": "return _hoard(e / e.sum(dim=dim, keepdim=True))"},
                         [MEMFD_FILLER.replace("def normalize(v)", "def _hoard(v)").replace(
                             "return v / v.norm(dim=-1, keepdim=True)", "return v")])
    [result] = grade(release, [nb], GradeOptions(tmp_path / "out", quiet=True))
    softmax = [c for c in result.checks if "softmax" in c.name and c.name != "q_softmax"]
    first, *later = softmax
    assert "memory limit" in first.message and first.score == 0, first.message
    assert later and all("it is not run again" in c.message and c.seconds < 1 for c in later), \
        [(c.message, c.seconds) for c in later]
    assert all(c.status == "passed" for c in result.checks if c.part != first.part and c.name != "q_softmax")


def test_a_check_receives_a_bounded_amount_whatever_the_function_returns(example_release, tmp_path):
    """softmax returning 400 MB per call: the checks calling it twice or more fail, past MAX_CHECK_BYTES, with
    a message; the judge never holds the rest; other parts keep their points."""
    from autograder.sandbox.pipes import MAX_CHECK_BYTES

    key = example_release.dir / "answer_key.ipynb"
    nb = make_submission(tmp_path / "flood.ipynb", key, {"return e / e.sum(dim=dim, keepdim=True)":
                                                          "return torch.zeros(100 << 20)"})
    [result] = grade(example_release, [nb], GradeOptions(tmp_path / "out", quiet=True))
    over = [c for c in result.checks if f"than it takes ({MAX_CHECK_BYTES >> 20} MB" in c.message]
    assert over and all(c.score == 0 for c in over)
    assert all(c.status == "passed" for c in result.checks if not c.part.startswith("2.") and c.name != "q_softmax")

