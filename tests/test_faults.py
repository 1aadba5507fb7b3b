"""Nothing the machine or the grader does is charged to a student, and one endless loop costs one time limit.

- System faults: a worker SIGKILLed from outside (what the kernel's out-of-memory killer does), its fork server
  gone, a grading process that keeps dying, an internal error: the check (or submission) is tried again on a
  fresh worker, then NOT GRADED, never a lower score.
- Big but legal notebooks: a statement holding more than a message header may (a 65 MB string constant: weights
  pasted into a cell) is graded like any other.
- A hang is remembered: once a definition made a check time out, later checks that call it fail at once with
  the same message, and checks of other parts that declare it in depends_on get the reference in its place. The
  accuracy rubric stays pending whatever the time budget does.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import threading
from pathlib import Path

import nbformat
import pytest

from autograder.grading import GradeOptions, Grader, build_and_record, grade, preflight
from autograder.release import load_release
from autograder.sandbox import client, diagnosis, pipes
from autograder.sandbox.processes import process_table
from autograder.sandbox.remote import Remote
from autograder.sandbox.protocol import MAX_HEADER_BYTES, pack_sources, unpack_sources
from autograder.status import FAILED, PASSED, PENDING, UNGRADED
from tests.conftest import EXAMPLE_SOURCE, make_submission

NORMALIZE = "return v / v.norm(dim=-1, keepdim=True)"
SLOW_NORMALIZE = {NORMALIZE: f"import time; time.sleep(2)\n    {NORMALIZE}"}  # a kill lands mid-call
SOFTMAX_LINE = "shifted = x - x.max(dim=dim, keepdim=True).values"
ENDLESS_SOFTMAX = {SOFTMAX_LINE: "while True:\n        pass"}
ENDLESS_NORMALIZE = {NORMALIZE: "while True:\n        pass"}


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
    return op in ("call", "call_updating") and bool(args) and isinstance(args[0], Remote) and \
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
    assert checks.pop("q_softmax") == (PENDING, 0)  # the written answer: graded by hand
    assert all(status == PASSED for status, _ in checks.values())  # the other checks are graded as usual
    (ungraded,) = result.ungraded
    assert "killed from outside" in ungraded.grader_problem and "twice" in ungraded.grader_problem
    assert ungraded.message.startswith("not graded") and "not of your notebook" in ungraded.message
    assert result.score == 9  # `grade` exits 3 for a result with ungraded checks (commands/grade.py)


OWN_CPU_LIMIT = {NORMALIZE: "import resource, signal\n    signal.signal(signal.SIGXCPU, signal.SIG_IGN)\n"
                            "    resource.setrlimit(resource.RLIMIT_CPU, (1, 1))\n    while True:\n        pass"}


def test_a_cpu_time_limit_the_notebook_set_itself_is_its_own_failure(grader, submission):
    """The kernel's SIGKILL at a CPU-time limit the code lowered itself (SIGXCPU ignored) is the notebook's doing:
    the check fails and says so, never NOT GRADED as a kill from outside."""
    result = grader.grade_one(submission("cpu_limit.ipynb", OWN_CPU_LIMIT), "cpu_limit")
    checks = {c.name: c for c in result.checks}
    normalize = checks["normalize_test"]
    assert normalize.status == FAILED and not result.ungraded, (normalize.status, normalize.message)
    assert "killed from outside" not in normalize.message and "CPU-time limit" in normalize.message, normalize.message


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


def grading_process_killer(monkeypatch, kills: int):
    """SIGKILL from outside (as a person's `kill -9` would) the first `kills` grading processes of a pool: the
    first at once, before it is ready; the others half a second after they said they were ready, while they
    grade. Returns the list of pids it killed."""
    from autograder.grading import pool as pool_module

    killed: list[int] = []
    marked: set[int] = set()
    original_start, original_answer = pool_module.Pool._start_one, pool_module.Pool._answer

    def kill(pid: int, delay: float) -> None:
        marked.add(pid)
        threading.Timer(delay, lambda: (killed.append(pid), os.kill(pid, signal.SIGKILL))).start()

    def start_one(self):
        original_start(self)
        if not marked:
            kill(self.procs[-1].proc.pid, 0)

    def answer(self, gp, line):
        original_answer(self, gp, line)
        if gp.ready and gp.proc.pid not in marked and len(marked) < kills:
            kill(gp.proc.pid, 0.5)

    monkeypatch.setattr(pool_module.Pool, "_start_one", start_one)
    monkeypatch.setattr(pool_module.Pool, "_answer", answer)
    return killed


def test_grading_processes_killed_from_outside_cost_nothing(example_release, submission, tmp_path, monkeypatch):
    """`kill -9` to each grading process once, one before it was ready: every submission is graded again on a
    fresh process and gets its score; nothing says a process could not start."""
    killed = grading_process_killer(monkeypatch, kills=3)
    paths = [submission(f"slow{n}.ipynb", SLOW_NORMALIZE) for n in range(3)] + [submission("good.ipynb")]
    results = grade(example_release, paths, GradeOptions(tmp_path / "out", quiet=True, jobs=2))
    assert len(killed) == 3
    assert [(r.score, r.error) for r in results] == [(11, "")] * 4, [r.error for r in results]


def test_a_submission_whose_grading_process_is_always_killed_is_not_graded(example_release, submission, tmp_path,
                                                                          monkeypatch):
    """Every grading process killed: each submission dies POOL_ATTEMPTS times, and its row says so, never that
    the grading process could not start."""
    from autograder.grading.pool import GRADING_PROCESS_DIED, POOL_ATTEMPTS

    killed = grading_process_killer(monkeypatch, kills=100)
    paths = [submission(f"slow{n}.ipynb", SLOW_NORMALIZE) for n in range(2)]
    results = grade(example_release, paths, GradeOptions(tmp_path / "out", quiet=True, jobs=2))
    assert len(killed) == 2 * POOL_ATTEMPTS
    for row in results:
        assert row.error == f"not graded: {GRADING_PROCESS_DIED} ({POOL_ATTEMPTS} times)"
        assert all(c.status == UNGRADED for c in row.checks)


def test_grading_processes_that_cannot_start_say_why(example_release, tmp_path):
    """Grading processes that exit with an error before they are ready: after POOL_ATTEMPTS the run gives up on
    the queue, and each row quotes the error."""
    from autograder.grading.pool import COULD_NOT_START, Pool

    rows: dict[int, object] = {}
    pool = Pool(example_release, GradeOptions(tmp_path, jobs=2), "", rows.__setitem__)
    pool.setup["release"] = str(tmp_path / "no-such-release")
    pool.run([(i, tmp_path / f"{i}.ipynb", str(i)) for i in range(3)])
    assert sorted(rows) == [0, 1, 2]
    for row in rows.values():
        assert row.error.startswith(f"not graded: {COULD_NOT_START}: ") and "no-such-release" in row.error, row.error
        assert all(c.status == UNGRADED for c in row.checks)


def test_a_grading_process_whose_run_is_gone_stops_quietly(example_release, submission, tmp_path):
    """The run killed while its grading process grades (its end of the pipe closed): the process finishes,
    cannot answer, and says so in one line, without a traceback."""
    import json
    import subprocess

    from autograder.sandbox.environment import python_command, start_environment

    setup = {"release": str(example_release.dir), "out_dir": str(tmp_path / "out"), "cuda": False,
             "trusted": False, "confinement": "", "use_recording": False, "memory_cgroup": None,
             "handshake": True, "env": {**os.environ, "PYTHONHASHSEED": "0"}}
    task = {"path": str(submission("good.ipynb")), "id": "good", "more": False}
    proc = subprocess.Popen(python_command("pool"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**start_environment(), "PYTHONHASHSEED": "0"}, text=True)
    proc.stdin.write(json.dumps(setup) + "\n" + json.dumps(task) + "\n")
    proc.stdin.close()
    assert json.loads(proc.stdout.readline()) == {"ready": True}
    proc.stdout.close()  # the run is gone before the answer
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert [line for line in err.splitlines() if "grading process" in line] == \
        [f"autograder: grading process {proc.pid}: the run that started it is gone; stopping"], err


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


# -- a hang is remembered -----------------------------------------------------------------------------------

ATTEND = '''def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T) v, with the softmax above."""
    ### BEGIN SOLUTION
    return softmax(q @ k.transpose(-2, -1), dim=-1) @ v
    ### END SOLUTION
'''
ATTEND_TESTS = '''import torch

from autograder.rubric import rubric_check
from autograder.testing import check, expect_close


@check("attend: weights the values", points=2, part="4. Attention", depends_on=["softmax"])
def attend_weights_values(sub, ref):
    g = torch.Generator().manual_seed(5)
    q, k, v = torch.randn(3, 4, generator=g), torch.randn(5, 4, generator=g), torch.randn(5, 2, generator=g)
    expect_close(sub.attend(q, k, v), ref.attend(q, k, v), "attend(q, k, v) is wrong")


accuracy = rubric_check(name="5. accuracy (rubric)", points=3, part="5. Rubric")
'''
CHECK_SECONDS = 3


def course_with_attend(tmp_path_factory, tests: str) -> Path:
    """A copy of the example assignment's source with `attend` (part 4, calling part 2's softmax) before part 3,
    and `tests` as its tests/test_attend.py."""
    source = tmp_path_factory.mktemp("course") / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    nb = nbformat.read(source / "vectors.ipynb", as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and c.source.startswith("## 3."))
    nb.cells.insert(at, nbformat.v4.new_code_cell(ATTEND))
    nbformat.write(nb, source / "vectors.ipynb")
    (source / "tests" / "test_attend.py").write_text(tests)
    return source


@pytest.fixture(scope="module")
def attention_release(tmp_path_factory):
    """The example assignment with a part 4 whose `attend` calls part 2's softmax (depends_on), the accuracy
    rubric, and a check time limit of 3 s."""
    source = course_with_attend(tmp_path_factory, ATTEND_TESTS)
    toml = (source / "assignment.toml").read_text()
    toml = toml.replace("check_seconds = 10", f"check_seconds = {CHECK_SECONDS}")
    assert f"check_seconds = {CHECK_SECONDS}" in toml
    (source / "assignment.toml").write_text(toml)
    return load_release(build_and_record(source).release)


DIRECT_TESTS = '''import torch

from autograder.testing import check, expect_close


@check("attend: softmax(q k^T) v", points=2, part="4. Attention", depends_on=["softmax"])
def attend_is_softmax_weighted(sub, ref):
    g = torch.Generator().manual_seed(6)
    q, k, v = torch.randn(3, 4, generator=g), torch.randn(5, 4, generator=g), torch.randn(5, 2, generator=g)
    expect_close(sub.attend(q, k, v), sub.softmax(q @ k.T, dim=-1) @ v, "attend(q, k, v) is not softmax(q k^T) v")
'''


@pytest.fixture(scope="module")
def direct_release(tmp_path_factory):
    """The example assignment with a part 4 check that calls part 2's softmax itself (sub.softmax), depends_on it."""
    source = course_with_attend(tmp_path_factory, DIRECT_TESTS)
    return load_release(build_and_record(source).release)


def test_a_check_calling_a_missing_function_it_depends_on_runs_with_the_references(direct_release, tmp_path):
    """softmax's cell gone: the softmax checks fail, saying so; the part 4 check that calls softmax itself (and
    through attend) runs again with the reference's softmax in its place, as depends_on asks, and keeps its points."""
    path = make_submission(tmp_path / "no_softmax.ipynb", direct_release.dir / "answer_key.ipynb",
                           {"def softmax(": "def soft_max("})
    (result,) = grade(direct_release, [path], GradeOptions(tmp_path / "out", quiet=True))
    by_name = {c.name: c for c in result.checks}
    attend = by_name["attend: softmax(q k^T) v"]
    assert attend.status == PASSED and "reference's softmax in place of yours" in attend.message, attend.message
    softmax = [c for c in result.checks if "softmax" in c.name and c.name not in ("q_softmax", attend.name)]
    assert softmax and all(c.status == FAILED and "does not define `softmax`" in c.message for c in softmax), \
        [c.message for c in softmax]


def attention_submission(release, folder: Path, name: str, replace=None) -> Path:
    return make_submission(folder / name, release.dir / "answer_key.ipynb", replace)


def test_one_endless_loop_costs_its_own_part_and_one_time_limit(attention_release, tmp_path):
    path = attention_submission(attention_release, tmp_path, "endless.ipynb", ENDLESS_SOFTMAX)
    (result,) = grade(attention_release, [path], GradeOptions(tmp_path / "out", quiet=True))
    by_part: dict[str, list] = {}
    for c in result.checks:
        by_part.setdefault(c.part or c.name, []).append(c)
    softmax = [c for c in result.checks if "softmax" in c.name and c.name != "q_softmax"]  # q_softmax: by hand
    assert len(softmax) == 4 and all(c.status == FAILED for c in softmax)
    first, *later = softmax
    assert first.message.startswith(f"timed out after {CHECK_SECONDS} s: your softmax did not finish")
    assert "not run again" not in first.message
    # the later checks say they were not run, and why, never that they timed out themselves
    assert all(c.message.startswith(f"not run: your softmax did not finish in an earlier check, {first.name!r} (timed "
                                    f"out after {CHECK_SECONDS} s there): it is not run again") for c in later), \
        [c.message for c in later]
    assert all(c.seconds < 1 for c in later), [c.seconds for c in later]  # at once: no second time limit
    others = [c for c in result.checks if c not in softmax]
    assert {c.name: c.status for c in others} == {
        "normalize_test": PASSED, "attend: weights the values": PASSED,  # the reference's softmax in place
        "5. accuracy (rubric)": PENDING, "tiny layer: forward with given weights": PASSED, "q_softmax": PENDING}
    assert result.score == 18 - 3 - 2 - 7  # the rubric's 3 and the written answer's 2 pending, softmax's 7 lost
    assert result.execution_time < 2 * CHECK_SECONDS + 2, result.execution_time


def test_a_checks_time_limit_follows_the_references_time_on_this_machine(attention_release, tmp_path):
    """With several submissions the reference is timed first, as a submission: a check may take check_slowdown
    times what the reference took, at least check_min_seconds, at most check_seconds. An endless loop then costs
    check_min_seconds, not check_seconds; correct code far slower than the reference keeps every point."""
    limits = dataclasses.replace(attention_release.config.limits, check_seconds=60, check_min_seconds=3)
    release = dataclasses.replace(attention_release, config=dataclasses.replace(attention_release.config,
                                                                                limits=limits))
    key = release.dir / "answer_key.ipynb"
    endless = attention_submission(release, tmp_path, "endless.ipynb", ENDLESS_SOFTMAX)
    slow = attention_submission(release, tmp_path, "slow.ipynb",  # about 100 times the reference's time
                                {SOFTMAX_LINE: f"import time; time.sleep(0.1)\n    {SOFTMAX_LINE}"})
    _, hung, slowed = grade(release, [key, endless, slow], GradeOptions(tmp_path / "out", quiet=True))
    first = next(c for c in hung.checks if "softmax" in c.name and c.name != "q_softmax")
    assert first.message.startswith("timed out after 3 s: your softmax did not finish"), first.message
    assert "the reference solution takes" in first.message and "on the same machine" in first.message
    assert hung.execution_time < 3 + 10, hung.execution_time
    assert all(c.status in (PASSED, PENDING) for c in slowed.checks), [(c.name, c.message) for c in slowed.checks]


def test_the_time_limit_of_a_check():
    """The check's own timeout as written; without a measure of the reference, check_seconds; else
    check_slowdown times the reference's time, between check_min_seconds and check_seconds."""
    from types import SimpleNamespace

    from autograder.config import Limits
    from autograder.judge import Judge
    from autograder.testing import CheckSpec

    def limit(reference=None, own=None, **settings):
        judge = SimpleNamespace(limits=Limits(**settings), reference_seconds={} if reference is None else
                                {"c": reference})
        return Judge.check_timeout(judge, CheckSpec("c", 1.0, "p", "hidden", None, timeout=own))

    assert limit() == (60.0, None)
    assert limit(0.01) == (10.0, 0.01)  # 50 x 0.01 s = 0.5 s: the floor
    assert limit(0.5) == (25.0, 0.5)
    assert limit(5.0) == (60.0, None)  # the cap
    assert limit(0.01, own=120) == (120, None)
    assert limit(0.01, check_slowdown=0) == (60.0, None)


def test_a_function_stopped_for_sending_too_much_is_not_run_again(example_release, tmp_path, monkeypatch):
    """Past what one check may receive, the worker is killed; later checks that call the same function fail at
    once with that message, instead of sending it all again (scaled down: 64 MB a check)."""
    monkeypatch.setattr(pipes, "MAX_CHECK_BYTES", 64 << 20)
    key = example_release.dir / "answer_key.ipynb"
    nb = make_submission(tmp_path / "flood.ipynb", key, {"return e / e.sum(dim=dim, keepdim=True)":
                                                          "return torch.zeros(20 << 20)"})
    [result] = grade(example_release, [nb], GradeOptions(tmp_path / "out", quiet=True))
    softmax = [c for c in result.checks if "softmax" in c.name and c.name != "q_softmax"]
    first, *later = softmax
    assert "more results during one check than it takes (64 MB of tensors" in first.message, first.message
    assert later and all("it is not run again" in c.message and c.seconds < 1 for c in later), \
        [(c.message, c.seconds) for c in later]


SPINNING_FORK_BOMB = """    import os
    if os.getuid() == 0:
        raise RuntimeError('running as root: this bomb is not set off')
    while True:
        try:
            os.fork()
        except OSError:
            pass
    return e / e.sum(dim=dim, keepdim=True)"""


def test_a_fork_bomb_that_catches_its_errors_is_stopped_in_seconds_not_at_its_timeout(example_release, tmp_path):
    """Forks until the process limit, catching each failure: its processes spin on every core, slowing every other
    worker. The monitor stops it after a second of holding half its process limit; the check says why, and later
    checks of the same function fail at once. Needs the full confinement (an unprivileged uid of the worker's own)."""
    key = example_release.dir / "answer_key.ipynb"
    nb = make_submission(tmp_path / "bomb.ipynb", key, {"    return e / e.sum(dim=dim, keepdim=True)": SPINNING_FORK_BOMB})
    [result] = grade(example_release, [nb], GradeOptions(tmp_path / "out", quiet=True))
    softmax = [c for c in result.checks if "softmax" in c.name and c.name != "q_softmax"]
    first, *later = softmax
    assert "processes at once for a second (a fork bomb?)" in first.message, first.message
    assert first.seconds < 8 and all(c.seconds < 1 for c in later), [(c.name, c.seconds) for c in softmax]
    assert all(c.status == PASSED for c in result.checks if c.part != first.part and c.max_score and
               c.status != PENDING), [(c.name, c.message) for c in result.checks if c.status != PASSED]


def test_a_reply_of_millions_of_values_is_refused_before_it_is_encoded(example_release, tmp_path):
    """A function returning 1.2 million numbers: the worker refuses the reply at once (its length is over the
    most a reply may hold), the check fails with a message saying so."""
    key = example_release.dir / "answer_key.ipynb"
    nb = make_submission(tmp_path / "many.ipynb", key, {"return e / e.sum(dim=dim, keepdim=True)":
                                                         "return list(range(1_200_000))"})
    [result] = grade(example_release, [nb], GradeOptions(tmp_path / "out", quiet=True))
    softmax = [c for c in result.checks if "softmax" in c.name and c.name != "q_softmax"]
    assert softmax and all(c.score == 0 for c in softmax)
    assert any("more than 1,000,000 items" in c.message for c in softmax), [c.message for c in softmax]
    # said as what it is: a value returned that cannot be taken, not an exception of the student's code
    assert any("returned a value the grader cannot take" in c.message for c in softmax), [c.message for c in softmax]
    assert not any("raised TypeError" in c.message for c in softmax), [c.message for c in softmax]
    assert all(c.seconds < 5 for c in softmax)


def test_the_rubric_stays_pending_when_the_time_budget_is_spent(attention_release, tmp_path):
    """Two endless loops with a 4 s budget: normalize and softmax spend it; the rest is not run, except the
    rubric, which is decided elsewhere and stays pending."""
    limits = dataclasses.replace(attention_release.config.limits, submission_seconds=4)
    release = dataclasses.replace(attention_release, config=dataclasses.replace(attention_release.config,
                                                                                limits=limits))
    path = attention_submission(release, tmp_path, "two.ipynb", {**ENDLESS_SOFTMAX, **ENDLESS_NORMALIZE})
    (result,) = grade(release, [path], GradeOptions(tmp_path / "out", quiet=True))
    statuses = {c.name: (c.status, c.message.split(":")[0]) for c in result.checks}
    assert statuses["5. accuracy (rubric)"][0] == PENDING
    assert statuses["tiny layer: forward with given weights"] == (FAILED, "not run")


def test_a_remembered_hang_says_the_later_check_was_not_run_and_why():
    from autograder.program import RememberedHang

    hang = RememberedHang([], "q2 test 1", "timed out after 10 s there", "letter_grade")
    assert hang.later("your") == ("not run: your letter_grade did not finish in an earlier check, 'q2 test 1' (timed "
                                  "out after 10 s there): it is not run again, so this check fails too")
    stopped = RememberedHang([], "q2 test 1", "it went past its memory limit", "f", how="was stopped in")
    assert stopped.later("your").startswith("not run: your f was stopped in an earlier check, 'q2 test 1' (it went")


def test_a_check_whose_own_function_hangs_says_it_timed_out_not_that_an_earlier_check_did(attention_release,
                                                                                           tmp_path):
    # attend hangs in its own code: the run with the reference's softmax in its place meets the hang remembered by
    # the first run of this same check; the student reads the timeout, not "did not finish in an earlier check"
    path = attention_submission(attention_release, tmp_path, "attend_hangs.ipynb",
                                {"return softmax(q @ k.transpose(-2, -1), dim=-1) @ v": "while True:\n        pass"})
    (result,) = grade(attention_release, [path], GradeOptions(tmp_path / "out", quiet=True))
    attend = {c.name: c for c in result.checks}["attend: weights the values"]
    assert attend.status == FAILED
    assert attend.message.startswith(f"timed out after {CHECK_SECONDS} s: your attend did not finish"), attend.message
    assert "earlier check" not in attend.message


def test_a_function_that_ends_its_process_is_not_run_again(attention_release, tmp_path):
    # an exit in the student's softmax ends the worker in the first check that calls it; the later ones would end
    # a fresh worker each (a second and more each): they say it was not run again, at once, and why
    path = attention_submission(attention_release, tmp_path, "exits.ipynb",
                                {SOFTMAX_LINE: "import os; os._exit(4)\n    " + SOFTMAX_LINE})
    (result,) = grade(attention_release, [path], GradeOptions(tmp_path / "out", quiet=True))
    softmax = [c for c in result.checks if "softmax" in c.name and c.name != "q_softmax"]
    first, *later = softmax
    assert all(c.status == FAILED for c in softmax)
    assert "ended (exit code 4) while your softmax" in first.message, first.message
    assert later and all(c.message.startswith(f"not run: your softmax ended its process in an earlier check, "
                                              f"{first.name!r} (the process running") for c in later), \
        [c.message for c in later]
    assert all("exit code 4" in c.message and c.seconds < 1 for c in later), [c.seconds for c in later]
    assert {c.name: c.status for c in result.checks}["attend: weights the values"] == PASSED  # the reference's softmax


def test_where_a_worker_hangs_is_read_from_its_stack():
    dump = ('Thread 0x00007f0000000001 (most recent call first):\n'
            '  File "/usr/lib/python3.11/threading.py", line 320 in wait\n\n'
            'Current thread 0x00007f0000000002 (most recent call first):\n'
            '  File "<cell 7>", line 4 in helper\n'
            '  File "<cell 5>", line 9 in softmax\n'
            '  File "/x/torch/nn/modules/module.py", line 1511 in _call_impl\n'
            '  File "<cell 9>", line 12 in forward\n'
            '  File "/x/autograder/sandbox/worker.py", line 185 in op_call\n'
            '  File "/x/autograder/sandbox/worker.py", line 300 in main\n')
    frames = diagnosis.parse_stacks(dump)
    assert frames == [("<cell 7>", 4, "helper"), ("<cell 5>", 9, "softmax"), ("<cell 9>", 12, "forward")]
    other = diagnosis.parse_stacks(dump.replace('  File "<cell 7>", line 4 in helper\n', "").replace("line 9", "line 8"))
    # the loop is softmax's: the helper it calls shows in one sample only
    assert diagnosis.common_frames([frames, other]) == [("<cell 5>", 9, "softmax"), ("<cell 9>", 12, "forward")]
    waiting = dump.replace("in helper", "in ask_judge").replace("<cell 7>", "/x/autograder/sandbox/worker.py")
    assert diagnosis.parse_stacks(waiting) is None  # waiting for the reference's answer: not the student's time



_STOPPED = diagnosis.StopCause.STOPPED_FOR_ITS_CODE
_FOR_MACHINE = diagnosis.StopCause.STOPPED_FOR_THE_MACHINE


@pytest.mark.parametrize("stopped, code, server_gone, memory, cause", [
    (None, 1, False, "", "ENDED"),  # its own exit
    (None, -signal.SIGSEGV, False, "", "ENDED"),  # its own crash
    (None, -signal.SIGKILL, False, "", "KILLED_FROM_OUTSIDE"),  # a SIGKILL nobody in the grader sent
    (None, -signal.SIGKILL, False, "own", "OWN_MEMORY_LIMIT"),  # the kernel, at its own memory group's limit
    (None, -signal.SIGKILL, False, "system", "RUN_MEMORY_LIMIT"),  # the kernel, at the run's limit
    (None, -signal.SIGKILL, True, "system", "FORK_SERVER_GONE"),
    (_STOPPED, -signal.SIGKILL, True, "system", "STOPPED_FOR_ITS_CODE"),  # the grader's reason comes first
    (_FOR_MACHINE, -signal.SIGKILL, False, "own", "STOPPED_FOR_THE_MACHINE"),
])
def test_why_a_worker_ended_decides_whose_fault_it_is(stopped, code, server_gone, memory, cause):
    """The grader's own reason to stop a worker comes first; then its fork server's end, its memory group's verdict
    and a SIGKILL nobody in the grader sent, each the machine's fault but the worker's own memory limit; what is
    left is its own exit or crash."""
    found = diagnosis.cause_of_end(stopped, code, server_gone, memory)
    assert found is diagnosis.StopCause[cause]
    assert found.system == (cause in ("KILLED_FROM_OUTSIDE", "RUN_MEMORY_LIMIT", "FORK_SERVER_GONE",
                                      "STOPPED_FOR_THE_MACHINE"))


def test_the_judge_knows_the_tripwires_exception_by_the_name_the_worker_reports():
    """The worker reports an exception by its class name: the one a tripped definition raises there
    (standins.NotRunAgain) is the one the judge turns into TrippedCall (faults.TRIPPED)."""
    from autograder.sandbox import faults, standins

    assert standins.NotRunAgain.__name__ == faults.TRIPPED

def test_a_tripwire_replaces_the_function_or_the_method_that_hung():
    import types

    from autograder.sandbox import standins

    module = types.ModuleType("submission")
    exec("def softmax(x):\n    return x\nalias = softmax\n"
         "class Layer:\n    def forward(self):\n        return 1\n    def other(self):\n        return 2\n",
         module.__dict__)
    assert standins.tripwire(module, [["Layer", "<listcomp>"], ["Layer", "forward"]]) == "Layer.forward"
    assert module.Layer().other() == 2
    with pytest.raises(standins.NotRunAgain):
        module.Layer().forward()
    assert standins.tripwire(module, [["softmax", "softmax"]]) == "softmax"
    for name in ("softmax", "alias"):
        with pytest.raises(standins.NotRunAgain):
            getattr(module, name)(1)
    assert standins.tripwire(module, [["nothing", "nothing"], ["Layer", "missing"]]) is None


def test_code_nested_in_a_definition_trips_that_definition_not_its_caller():
    """A local exception class whose __str__ loops, a closure, a local class's method: the frame is inside the
    top-level definition (or method) that holds its line, which is replaced; the caller's method is not."""
    import types

    from autograder.sandbox import standins

    module = types.ModuleType("submission")
    sdp = ("def sdp(q):\n"                                   # line 1
           "    class Oops(Exception):\n"
           "        def __str__(self):\n"
           "            while True:\n"                        # line 4
           "                pass\n"
           "    raise Oops()\n")
    layer = ("class Layer:\n"                                 # line 1
             "    def forward(self, x):\n"
             "        return sdp(x)\n"                         # line 3
             "    def other(self):\n"
             "        helper = lambda: [i for i in range(3)]\n"  # line 5
             "        return helper()\n")
    exec(compile(sdp, "<cell 3>", "exec"), module.__dict__)
    exec(compile(layer, "<cell 5>", "exec"), module.__dict__)
    # innermost first: Oops.__str__ (in sdp's statement), then the caller Layer.forward
    assert standins.tripwire(module, [["sdp", "__str__", 4, "<cell 3>"], ["Layer", "forward", 3, "<cell 5>"]]) == "sdp"
    assert vars(module.Layer)["forward"].__code__.co_filename == "<cell 5>"  # the caller is left as it was
    with pytest.raises(standins.NotRunAgain):
        module.sdp(1)
    assert standins.tripwire(module, [["Layer", "<listcomp>", 5, "<cell 5>"]]) == "Layer.other"
    with pytest.raises(standins.NotRunAgain):
        module.Layer().other()
    # a line in another cell than the definition's is not the definition's
    exec(compile("def g():\n    return 1\n", "<cell 7>", "exec"), module.__dict__)
    assert standins.tripwire(module, [["g", "inner", 2, "<cell 8>"]]) is None


@pytest.mark.parametrize("item", ["{}", "[]", "1.5", "[{}]", "[[{}]]", "[[[[[]]]]]", '{"": {}}', '"x"'])
def test_a_header_never_becomes_more_objects_than_it_is_counted_as(item):
    """What one check may receive is counted before it is parsed: a header's JSON as HEADER_WEIGHT times its bytes.
    Whatever the worker's code writes (a hijacked encoder sending millions of empty dicts), the objects the judge's
    parser makes fit in that count, so a judge stays within MAX_CHECK_BYTES per check."""
    import json as json_module
    import tracemalloc

    text = "[" + ",".join([item] * 200_000) + "]"
    tracemalloc.start()
    try:
        value = json_module.loads(text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert value and peak <= pipes.HEADER_WEIGHT * len(text), (peak / len(text), item)
