"""Nothing the machine or the grader does is charged to a student.

- System faults: a worker SIGKILLed from outside (what the kernel's out-of-memory killer does), its fork server
  gone, a grading process that keeps dying, an internal error: the check (or submission) is tried again on a
  fresh worker, then NOT GRADED, never a lower score.
- Big but legal notebooks: a statement holding more than a message header may (a 65 MB string constant: weights
  pasted into a cell) is graded like any other.
"""
from __future__ import annotations

import os
import signal
import threading

import pytest

from autograder.grading import GradeOptions, Grader, grade, preflight
from autograder.sandbox import client
from autograder.sandbox.processes import process_table
from autograder.sandbox.remote import Remote
from autograder.sandbox.protocol import MAX_HEADER_BYTES, pack_sources, unpack_sources
from autograder.status import PASSED, UNGRADED

NORMALIZE = "return v / v.norm(dim=-1, keepdim=True)"
SLOW_NORMALIZE = {NORMALIZE: f"import time; time.sleep(2)\n    {NORMALIZE}"}  # a kill lands mid-call


def scores(result) -> dict:
    return {c.name: (c.status, c.score) for c in result.checks}


# -- system faults ------------------------------------------------------------------------------------------

def the_code_process(worker: client.WorkerProcess) -> int | None:
    """The pid of the process running a worker's code, seen from outside: the worker or, in a PID namespace of
    its own, its only child (the namespace's init)."""
    pid = worker.pid
    if pid is None:
        return None
    children = [p for p, parent in process_table().items() if parent == pid]
    return children[0] if len(children) == 1 else pid


def calls(op: str, args: tuple, name: str) -> bool:
    """Whether a worker request calls the notebook's `name`."""
    return op == "call" and bool(args) and isinstance(args[0], Remote) and \
        object.__getattribute__(args[0], "_handle").path == name


@pytest.fixture
def kill_during_calls(monkeypatch):
    """kill(name, times, what): while the student's worker runs a call to `name`, SIGKILL from outside the
    process running the code ("worker", as the out-of-memory killer would) or its fork server ("fork server"),
    the first `times` such calls. Returns the list of pids it killed."""
    original = client.WorkerProcess.request
    killed: list[int] = []

    def arm(name: str, times: int, what: str = "worker") -> list[int]:
        def request(self, op, *args, **kwargs):
            if self.spec.owner == "your" and calls(op, args, name) and len(killed) < times:
                def kill():
                    if what == "worker":
                        pid = the_code_process(self)
                    else:
                        from autograder.sandbox.forkserver import ForkServer
                        server = ForkServer._instance
                        pid = server.proc.pid if server is not None and server.proc is not None else None
                    if pid is not None:
                        killed.append(pid)
                        os.kill(pid, signal.SIGKILL)
                threading.Timer(0.3, kill).start()
            return original(self, op, *args, **kwargs)

        monkeypatch.setattr(client.WorkerProcess, "request", request)
        return killed
    return arm


@pytest.fixture
def grader(example_release, tmp_path):
    options = GradeOptions(tmp_path / "out", quiet=True)
    g = Grader(example_release, options, preflight(example_release, options), self_grade=False)
    yield g
    g.close()


def test_a_worker_killed_from_outside_gets_its_honest_score_after_a_retry(grader, submission, kill_during_calls):
    killed = kill_during_calls("normalize", times=1)
    result = grader.grade_one(submission("slow.ipynb", SLOW_NORMALIZE), "slow")
    assert len(killed) == 1
    assert result.score == 11 and not result.ungraded and not result.error


def test_a_worker_killed_every_time_is_not_graded_never_zero(grader, submission, kill_during_calls):
    killed = kill_during_calls("normalize", times=100)
    result = grader.grade_one(submission("slow.ipynb", SLOW_NORMALIZE), "slow")
    assert len(killed) == 2  # the check and its one retry, each on a fresh worker
    checks = scores(result)
    assert checks.pop("normalize_test") == (UNGRADED, 0)
    assert all(status == PASSED for status, _ in checks.values())  # the other checks are graded as usual
    (ungraded,) = result.ungraded
    assert "killed from outside" in ungraded.grader_problem and "twice" in ungraded.grader_problem
    assert ungraded.message.startswith("not graded") and "not of your notebook" in ungraded.message
    assert result.score == 9  # `grade` exits 3 for a result with ungraded checks (commands/grade.py)


def test_a_dead_fork_server_costs_nothing(grader, submission, kill_during_calls):
    killed = kill_during_calls("normalize", times=1, what="fork server")
    result = grader.grade_one(submission("slow.ipynb", SLOW_NORMALIZE), "slow")
    assert len(killed) == 1
    assert result.score == 11 and not result.ungraded


def test_an_internal_error_is_tried_again_then_not_graded(grader, submission, monkeypatch):
    from autograder.judge import Judge

    original, calls = Judge.grade, []

    def failing(self, program, confirm=True, times=1):
        calls.append(1)
        if len(calls) <= times:
            raise RuntimeError("a grader bug")
        return original(self, program, confirm)

    path = submission("good.ipynb")
    monkeypatch.setattr(Judge, "grade", failing)
    assert grader.grade_one(path, "good").score == 11 and len(calls) == 2  # failed once, then graded

    calls.clear()
    monkeypatch.setattr(Judge, "grade", lambda self, program, confirm=True: failing(self, program, confirm, 99))
    result = grader.grade_one(path, "good")
    assert len(calls) == 2
    assert all(c.status == UNGRADED and "internal grader error" in c.grader_problem for c in result.checks)
    assert result.error.startswith("not graded")


def test_a_grading_process_that_keeps_dying_leaves_a_not_graded_row(example_release, tmp_path):
    from autograder.grading.pool import POOL_ATTEMPTS, Pool

    rows = []
    pool = Pool(example_release, GradeOptions(tmp_path, jobs=2), "", lambda i, result: rows.append(result))
    for _ in range(POOL_ATTEMPTS):
        pool._retry_or_give_up((0, tmp_path / "a.ipynb", "a"))
    (row,) = rows
    assert row.ungraded and all(c.status == UNGRADED for c in row.checks) and row.score == 0
    assert "grading process died" in row.checks[0].grader_problem


# -- big but legal notebooks --------------------------------------------------------------------------------

def test_the_load_request_carries_sources_as_bytes():
    units = [{"cell": 1, "line": 1, "source": "x = 'caf\u00e9 \ud800'", "names": ["x"], "kind": "constant"},
             {"cell": 2, "line": 3, "source": "", "names": [], "kind": "definition"}]
    header_units, tensors = pack_sources(units)
    assert all("source" not in u for u in header_units)
    assert unpack_sources(header_units, tensors) == units


def test_a_statement_larger_than_a_message_header_is_graded(submission, example_release, tmp_path):
    """Weights pasted into a cell as a string: 65 MB, over the 64 MB a message header may hold (the load request
    used to carry the sources in its header: the worker refused it, and the judge said 'internal grader error:
    BrokenPipeError', 0 points)."""
    size = MAX_HEADER_BYTES + 2**20
    path = submission("big.ipynb", append=[f'WEIGHTS = "{"A" * size}"\n'])
    (result,) = grade(example_release, [path], GradeOptions(tmp_path / "out", quiet=True))
    assert result.score == 11 and not result.error and not result.ungraded
    assert not any("WEIGHTS" in note for note in result.notes)
