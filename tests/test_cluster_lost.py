"""The driver of `--cluster` never hangs on a lost node (grading/cluster.py: schedule), checked against a stand-in
for Ray whose calls never come back the way a lost node's do (no Ray needed, no timing asserted):

- a node lost mid-run whose calls Ray never fails: its submission is graded again on another node's actor;
- every node lost (what killing the agent of `--cluster local`'s only node does): every submission left gets a
  NOT GRADED row and the run ends; the rubric's models stay pending;
- a result Ray announces but cannot hand over (its node's object store gone) counts as lost;
- the lost node's replacement actor that Ray cannot place (no room left) holds no work: the nodes left grade it.

tests/test_cluster.py kills a real node's agent (raylet) mid-run on a local Ray cluster.
"""
from __future__ import annotations

import itertools
import time

import pytest

from autograder.grading import cluster
from autograder.grading.options import GradeOptions
from autograder.reports.results import SubmissionResult
from autograder.status import UNGRADED

_ids = itertools.count()


class Ref:
    """An object reference: ready with a value, never ready (its node is gone), or ready but unfetchable."""

    def __init__(self, value=None, ready: bool = True, fetchable: bool = True):
        self.value, self.is_ready, self.fetchable, self.id = value, ready, fetchable, next(_ids)

    def __hash__(self):
        return self.id


class Method:
    def __init__(self, fn):
        self.remote = fn


class FakeRay:
    """Nodes by name, alive or not; actors placed on `placement` in turn. An actor on a node in `silent` answers
    nothing (its calls hang, as on a node whose agent was killed); `lose_after` calls later, nodes in `dies`
    are reported dead. Any wait without a limit fails the test: that is the hang."""

    def __init__(self, alive: dict[str, bool], placement: list[str], silent=(), dies=(), lose_after=1,
                 unfetchable=()):
        self.alive, self.placement = dict(alive), list(placement)
        self.silent, self.dies, self.lose_after, self.unfetchable = set(silent), set(dies), lose_after, set(unfetchable)
        self.calls, self.killed, self.graded_on, self.waits = 0, 0, [], 0

    def remote(self, **_):
        return lambda body: self._actor_class

    @property
    def _actor_class(self) -> Method:
        """What ray.remote(...)(Body) gives: `.remote(setup)` makes an actor."""
        return Method(self._new_actor)

    def _new_actor(self, *_):
        node = self.placement.pop(0) if self.placement else "nowhere"
        ray = self

        class Actor:
            where = Method(lambda: Ref(node, ready=node != "nowhere"))
            grade = Method(lambda path, sub_id, more=True: ray._grade(node, sub_id))
        return Actor()

    def _grade(self, node: str, sub_id: str) -> Ref:
        self.calls += 1
        if self.calls > self.lose_after:
            for dead in self.dies:
                self.alive[dead] = False
        if node in self.silent or node == "nowhere":
            return Ref(ready=False)
        self.graded_on.append((sub_id, node))
        reply = {"result": SubmissionResult(sub_id, sub_id, [], [], "", 0.0).to_dict(), "status": "isolated"}
        return Ref(reply, fetchable=node not in self.unfetchable)

    def wait(self, refs, num_returns=1, timeout=None):
        assert timeout is not None, "the driver waits on Ray without a limit"
        self.waits += 1
        assert self.waits < 3000, "the driver makes no progress"  # (each empty wait lasts 1 ms: 3 s)
        ready = [r for r in refs if r.is_ready][:num_returns]
        if not ready:
            time.sleep(0.001)
        return ready, [r for r in refs if r not in ready]

    def get(self, ref, timeout=None):
        assert timeout is not None, "the driver fetches from Ray without a limit"
        if not ref.fetchable:
            raise TimeoutError("GetTimeoutError")
        return ref.value

    def kill(self, actor, no_restart=True):
        self.killed += 1

    def nodes(self):
        return [{"NodeID": name, "Alive": alive, "Resources": {"CPU": 1.0}} for name, alive in self.alive.items()]

    def cluster_resources(self):
        return {"CPU": float(sum(self.alive.values()))}


@pytest.fixture
def quick(monkeypatch):
    monkeypatch.setattr(cluster, "POLL_SECONDS", 0.01)
    monkeypatch.setattr(cluster, "NO_CAPACITY_SECONDS", 0.2)


def _run(fake: FakeRay, example_release, tmp_path, monkeypatch, n: int = 4) -> dict[str, SubmissionResult]:
    monkeypatch.setattr(cluster, "connect", lambda address: fake)
    rows: dict[str, SubmissionResult] = {}
    pool = cluster.ClusterPool(example_release, GradeOptions(tmp_path, quiet=True, cluster="fake", jobs=2), "",
                               lambda i, result: rows.__setitem__(result.submission, result))
    pool.run([(i, tmp_path / f"s{i}.ipynb", f"s{i}") for i in range(n)])
    return rows


def test_a_node_lost_without_a_word_from_ray_has_its_work_graded_elsewhere(quick, example_release, tmp_path,
                                                                        monkeypatch):
    fake = FakeRay({"a": True, "b": True}, ["a", "b", "a", "a", "a"], silent={"b"}, dies={"b"})
    rows = _run(fake, example_release, tmp_path, monkeypatch)
    assert sorted(rows) == ["s0", "s1", "s2", "s3"]
    assert all(not r.error for r in rows.values()), {k: r.error for k, r in rows.items()}
    assert {node for _, node in fake.graded_on} == {"a"}
    assert fake.killed >= 1  # the lost node's actor was let go


def test_every_node_lost_ends_the_run_with_not_graded_rows(quick, example_release, tmp_path, monkeypatch):
    fake = FakeRay({"head": True}, ["head", "head"], silent={"head"}, dies={"head"}, lose_after=0)
    rows = _run(fake, example_release, tmp_path, monkeypatch)
    assert sorted(rows) == ["s0", "s1", "s2", "s3"]
    for row in rows.values():
        assert "no live node" in row.error
        assert {c.status for c in row.checks} == {UNGRADED}


def test_a_result_that_cannot_be_fetched_is_lost_and_graded_again(quick, example_release, tmp_path, monkeypatch):
    fake = FakeRay({"a": True, "b": True}, ["a", "b", "a", "a", "a"], unfetchable={"b"})
    rows = _run(fake, example_release, tmp_path, monkeypatch)
    assert sorted(rows) == ["s0", "s1", "s2", "s3"] and all(not r.error for r in rows.values())


def test_a_replacement_that_cannot_be_placed_holds_no_work(quick, example_release, tmp_path, monkeypatch):
    fake = FakeRay({"a": True, "b": True}, ["a", "b"], silent={"b"}, dies={"b"})  # then: nowhere to place one
    rows = _run(fake, example_release, tmp_path, monkeypatch, n=6)
    assert sorted(rows) == [f"s{i}" for i in range(6)] and all(not r.error for r in rows.values())
    assert {node for _, node in fake.graded_on} == {"a"}


def test_the_rubric_keeps_what_a_lost_cluster_left_pending(quick, monkeypatch):
    from autograder.rubric import cluster as rubric_cluster

    fake = FakeRay({"gpu": True}, ["gpu"], silent={"gpu"}, dies={"gpu"}, lose_after=0)
    config = type("Config", (), {"name": "accuracy", "part": "7", "points": 8.0, "visibility": "visible"})()
    monkeypatch.setattr(rubric_cluster, "pending_outcome", lambda config, why: why)
    graded = list(rubric_cluster._schedule(fake, fake._actor_class, (), [("a.ipynb", "a.pt"), ("b.ipynb", "b.pt")],
                                           1, config, {"num_gpus": 1, "num_cpus": 1}))
    assert sorted(g.index for g in graded) == [0, 1]
    assert all("no live node" in g.outcome for g in graded)
