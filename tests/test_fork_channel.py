"""A process forked by student code never speaks for its worker (docs/isolation.md, "the severed channel").

`os.fork` children get /dev/null in place of the channel to the judge; these notebooks fork around Python's hooks
(`ctypes.CDLL(None).fork()`, the raw clone system call), so their children keep the channel's descriptors. What
such a child does costs at most the check during which it did it: a child that returns into the worker's request
loop or leaves through the interpreter's shutdown exits before it touches the channel (sandbox/owned.py), a child
that writes garbage into it costs that check, and a child that waits to write garbage during a later check is
killed between checks (client.WorkerProcess.sweep_forked). Every other check gets its full points.
"""
from __future__ import annotations

import platform

import pytest

from autograder.grading import GradeOptions, grade
from tests.conftest import make_submission

NORMALIZE = "return v / v.norm(dim=-1, keepdim=True)"
SOFTMAX_LINE = "shifted = x - x.max(dim=dim, keepdim=True).values"
CLONE = {"x86_64": 56, "aarch64": 220}.get(platform.machine())  # clone(SIGCHLD, 0, ...): a fork, no hooks run

LIBC = ("import ctypes, json, os, sys, time\n    libc = ctypes.CDLL(None, use_errno=True)\n"
        "    channel = json.loads(sys.argv[1])  # (the worker's settings: its channel's descriptors)\n"
        f"    def raw_fork():\n        pid = libc.syscall({CLONE}, 17, 0, 0, 0, 0)\n"
        "        if pid < 0:\n            raise OSError(ctypes.get_errno(), 'clone failed')\n        return pid\n")


def _normalize_doing(body: str) -> dict[str, str]:
    return {NORMALIZE: LIBC + body + "    " + NORMALIZE}


ATTACKS = {
    # writes garbage into the replies at once, during normalize's own check: that check only
    "garbage_now": (_normalize_doing(
        "    pid = raw_fork()\n    if pid == 0:\n        os.write(channel['fd_out'], b'\\xff' * 100)\n        os._exit(0)\n"
        "    os.waitpid(pid, 0)\n"), {}, {"normalize_test"}),
    # returns from normalize into the worker's request loop, as a second worker would
    "returns": (_normalize_doing("    raw_fork()\n"), {}, set()),
    # libc's fork, then sys.exit: SystemExit through the worker's handler, then the interpreter's shutdown
    "exits_through_shutdown": (_normalize_doing(
        "    pid = libc.fork()\n    if pid < 0:\n        raise OSError('fork failed')\n"
        "    if pid == 0:\n        sys.exit(0)\n    os.waitpid(pid, 0)\n"), {}, set()),
    # lingers, and writes garbage while softmax's checks run (softmax lets it: it waits for its "done")
    "garbage_later": (_normalize_doing(
        "    if raw_fork() == 0:\n        open('forked', 'w').close()\n"
        "        for _ in range(3000):\n            if os.path.exists('go'):\n                break\n"
        "            time.sleep(0.01)\n        os.write(channel['fd_out'], b'\\xff' * 100)\n"
        "        open('done', 'w').close()\n        time.sleep(60)\n"
        "    for _ in range(500):\n        if os.path.exists('forked'):\n            break\n        time.sleep(0.01)\n"),
        {SOFTMAX_LINE: "import os, time\n    if not os.path.exists('forked'):\n        raise RuntimeError('no child')\n"
                       "    if not os.path.exists('go'):\n        open('go', 'w').close()\n"
                       "        for _ in range(300):\n            if os.path.exists('done'):\n                break\n"
                       "            time.sleep(0.01)\n    " + SOFTMAX_LINE},
        set()),
}


@pytest.mark.skipif(CLONE is None, reason="the raw clone system call's number is known for x86_64 and aarch64 only")
def test_a_child_forked_around_pythons_hooks_costs_at_most_its_own_check(example_build, example_release, tmp_path):
    key = example_build.release / "answer_key.ipynb"
    subs = [make_submission(tmp_path / f"{name}.ipynb", key, {**normalize, **softmax})
            for name, (normalize, softmax, _) in ATTACKS.items()]
    results = grade(example_release, subs, GradeOptions(tmp_path / "out", quiet=True))
    for (name, (_, _, may_lose)), result in zip(ATTACKS.items(), results):
        lost = {c.name: c.message for c in result.checks if c.score < c.max_score and c.status != "pending"}
        assert set(lost) <= may_lose, (name, lost)
        if may_lose:  # the garbage written during the check is that check's
            assert "malformed reply" in lost["normalize_test"], (name, lost)
