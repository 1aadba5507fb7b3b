"""Grading on a Ray cluster (`autograder grade ... --cluster ADDRESS`): the same grading as `--jobs`, spread over
the cluster's nodes. Ray is an optional extra (`pip install 'torchgrade[cluster]'`), imported only here.

    driver (this process: the preflight, the results folder, the lock, resume)
      |-- actor "NodeGrader" x N (num_cpus=1 each; Ray places them on the nodes)
            |-- python -m autograder.entrypoints pool   (the same grading process as --jobs: its own judge,
                  |                                       reference and fork server, on the actor's node)
                  |-- fork server -> one confined worker per submission

Each actor holds one grading process for its whole life (what start-up costs: the fork server, the recorded
reference, the imported libraries), and is given one submission at a time; results come back to the driver,
which writes them into --out exactly as --jobs does (pool.Pool's `finish`). Student code runs only in the
workers, confined as anywhere else; a node that cannot confine refuses in its grading process and the
submission gets the same row as with --jobs. An actor or grading process that dies (a lost node, a killed
process) costs nothing: its submission is given to another actor, and after POOL_ATTEMPTS deaths gets a NOT
GRADED row, never a score. The release and the submissions are read by path: every node sees the same paths (a shared
filesystem, or the same copy on each node; docs/scale.md).

The driver never waits on Ray without a limit (`schedule`): it looks at the cluster every POLL_SECONDS while results
are due. A submission whose actor sits on a node the cluster reports dead is lost at once (given to another actor),
without waiting for Ray to fail its call; a result that cannot be fetched within FETCH_SECONDS is lost too; and when
no live node can hold an actor for NO_CAPACITY_SECONDS (every node lost, the head's agent killed under
`--cluster local`), what is left gets NOT GRADED rows and the run ends (grade exits 3).
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder.errors import UserError
from autograder.grading.grader import ungraded_result
from autograder.grading.options import GradeOptions
from autograder.grading.pool import GRADING_PROCESS_DIED, POOL_ATTEMPTS, GradingProcess, Task
from autograder.release import Release
from autograder.reports.results import SubmissionResult


POLL_SECONDS = 5.0  # how often the driver looks at the cluster's nodes while results are due
FETCH_SECONDS = 60.0  # a result Ray says is ready but that cannot be fetched in this time (its node gone): lost
NO_CAPACITY_SECONDS = 45.0  # no live node able to hold an actor this long: what is left is given up
CLUSTER_LOST = ("the Ray cluster had no live node able to grade for {seconds:.0f} s (its nodes were lost or their "
                "Ray agents stopped); grade it again once the cluster is back")


class ClusterUnavailable(UserError, RuntimeError):
    """Ray is not installed, or the cluster cannot be reached."""


def _ray():
    try:
        import ray
    except ImportError:
        raise ClusterUnavailable("--cluster needs Ray: pip install 'torchgrade[cluster]' (or pip install ray)") from None
    return ray


def connect(address: str):
    """Ray, connected to the cluster at `address` (`local` starts one here) unless this process already is."""
    ray = _ray()
    if not ray.is_initialized():
        try:
            ray.init(address=None if address == "local" else address, include_dashboard=False,
                     log_to_driver=False, ignore_reinit_error=True)
        except Exception as exc:  # noqa: BLE001 - Ray raises many types for an unreachable cluster
            raise ClusterUnavailable(f"cannot reach the Ray cluster at {address!r}: {type(exc).__name__}: {exc}") \
                from None
    return ray


def node_id() -> str:
    """The id of the Ray node the calling actor runs on (what the driver watches)."""
    import ray

    return ray.get_runtime_context().get_node_id()


@dataclass(eq=False)  # (one actor, one slot: compared by identity)
class _Slot:
    """One actor as the driver sees it: its node once the actor said where it runs."""
    actor: Any
    located: Any  # the reference to its `where()` answer
    node: str | None = None  # None until that answer arrives


@dataclass
class _Cluster:
    """What the driver knows of the cluster's health between two looks at it."""
    needs: dict
    last_look: float = 0.0
    capacity_since: float = field(default_factory=time.monotonic)  # the last time a live node could hold an actor
    live: set[str] = field(default_factory=set)

    def look(self, ray, now: float) -> bool:
        """Whether the cluster answered: then its live nodes, and whether one of them can hold an actor. A cluster
        that does not answer keeps what was known of its nodes, and counts as holding no actor."""
        self.last_look = now
        try:
            nodes = [n for n in ray.nodes() if n.get("Alive")]
        except Exception:  # noqa: BLE001 - Ray raises many types for a cluster it cannot reach
            return False
        self.live = {n["NodeID"] for n in nodes}
        if any(all(n.get("Resources", {}).get(k, 0) >= v for k, v in self.needs.items()) for n in nodes):
            self.capacity_since = now
        return True

    def lost(self, now: float) -> bool:
        return now - self.capacity_since > NO_CAPACITY_SECONDS


def schedule(ray, make_actor: Callable[[], Any], call: Callable[[Any, Any, bool], Any], work: list, slots: int,
             needs: dict, died: str) -> Iterator[tuple[int, Any, str]]:
    """Each item of `work` given to one of `slots` actors at a time (`call(actor, item, more)`: a Ray reference;
    `more`: others are still to be given out), yielded as (index, answer, "") when it comes back, or (index, None,
    why) when it was lost POOL_ATTEMPTS times (`died` says so) or the cluster lost every node able to hold an actor
    (`needs`: one actor's resources, as Ray names them: {"CPU": 1}). An answer of None means the actor's own process
    died: lost like a dead actor. Actors have a `where()` method (node_id); work goes only to actors that have
    answered it (a replacement that Ray cannot place yet holds none). Never waits on Ray without a limit (the
    module's docstring)."""
    todo, deaths = deque(range(len(work))), dict.fromkeys(range(len(work)), 0)
    cluster = _Cluster(needs)
    idle: list[_Slot] = []
    running: dict = {}  # reference -> (slot, index)
    failed_starts = [0]

    def new_slot() -> None:
        actor = make_actor()
        idle.append(_Slot(actor, actor.where.remote()))

    def lose(slot: _Slot, i: int):
        _kill(ray, slot.actor)
        deaths[i] += 1
        if deaths[i] < POOL_ATTEMPTS:
            todo.appendleft(i)
        new_slot()  # in its place (it gets work once Ray has placed it)
        return (i, None, died) if deaths[i] >= POOL_ATTEMPTS else None

    def drop(slot: _Slot) -> None:
        """An idle actor that died before it started, or whose node is dead: replaced, a bounded number of times."""
        idle.remove(slot)
        _kill(ray, slot.actor)
        failed_starts[0] += 1
        if failed_starts[0] <= POOL_ATTEMPTS * max(1, slots):
            new_slot()

    for _ in range(slots):
        new_slot()
    try:
        while todo or running:
            for slot in [s for s in idle if s.node]:
                if not todo:
                    break
                idle.remove(slot)
                i = todo.popleft()
                running[call(slot.actor, work[i], bool(todo))] = (slot, i)
            locating = {slot.located: slot for slot in idle if slot.node is None}
            if not running and not locating:  # no actor left, none starting: what is left cannot be graded
                for i in list(todo):
                    yield i, None, died
                return
            ready, _ = ray.wait([*running, *locating], num_returns=1, timeout=POLL_SECONDS)
            for ref in ready:
                if ref in locating:
                    slot = locating[ref]
                    slot.node = _fetch(ray, ref) or ""
                    if not slot.node:
                        drop(slot)
                    continue
                slot, i = running.pop(ref)
                answer = _fetch(ray, ref)
                if answer is None:
                    lost = lose(slot, i)
                    if lost:
                        yield lost
                    continue
                idle.append(slot)
                yield i, answer, ""
            now = time.monotonic()
            if now - cluster.last_look < POLL_SECONDS:
                continue
            if cluster.look(ray, now):
                for ref, (slot, i) in list(running.items()):
                    if slot.node not in cluster.live:  # its node is dead: no waiting for Ray to say so
                        del running[ref]
                        lost = lose(slot, i)
                        if lost:
                            yield lost
                for slot in [s for s in idle if s.node and s.node not in cluster.live]:
                    drop(slot)
            if cluster.lost(now) and (todo or running):
                why = CLUSTER_LOST.format(seconds=NO_CAPACITY_SECONDS)
                for i in [*(i for _, i in running.values()), *todo]:
                    yield i, None, why
                return
    finally:
        for slot in [*idle, *(slot for slot, _ in running.values())]:
            _kill(ray, slot.actor)


def _fetch(ray, ref):
    """A ready reference's value, or None when it is an error or cannot be fetched in FETCH_SECONDS."""
    try:
        return ray.get(ref, timeout=FETCH_SECONDS)
    except Exception:  # noqa: BLE001 - RayActorError, GetTimeoutError, ObjectLostError...: all mean lost
        return None


def _kill(ray, actor) -> None:
    try:
        ray.kill(actor, no_restart=True)
    except Exception:  # noqa: BLE001 - an actor on a lost node may be beyond reach: nothing more to do
        pass


class NodeGraderBody:
    """An actor's body: one grading process on the actor's node, one submission at a time."""

    def __init__(self, setup: dict):
        self.process = GradingProcess(setup)

    def where(self) -> str:
        """The id of the Ray node this actor runs on; `schedule` gives work only to actors that have answered it."""
        return node_id()

    def grade(self, path: str, sub_id: str, more: bool) -> dict | None:
        """The grading process's answer for one submission ({"result", "status"}), or None when it died."""
        import json

        if not self.process.give((0, Path(path), sub_id), more):
            return None
        line = self.process.proc.stdout.readline()
        try:
            return json.loads(line)
        except ValueError:
            return None

    def stop(self) -> None:
        """Stop the actor's grading process (stdin closed, then killed if it has not ended within 60 s)."""
        self.process.stop()


class ClusterPool:
    """pool.Pool's interface (`run(tasks)`, `status`) over Ray actors."""

    def __init__(self, release: Release, options: GradeOptions, confinement_status: str,
                 finish: Callable[[int, SubmissionResult], None]):
        self.release, self.options, self.finish = release, options, finish
        self.setup = {"release": str(release.dir), "out_dir": str(options.out_dir), "cuda": options.cuda,
                      "trusted": options.trusted, "confinement": confinement_status,
                      "use_recording": options.use_recording}
        self.status = ""

    def run(self, tasks: list[Task]) -> None:
        ray = connect(self.options.cluster)
        actor_class = ray.remote(num_cpus=1, max_restarts=0)(NodeGraderBody)
        slots = max(1, min(self._slots(ray), len(tasks)))
        grade = lambda actor, task, more: actor.grade.remote(str(task[1]), task[2], more)  # noqa: E731 - one call
        died = f"{GRADING_PROCESS_DIED} ({POOL_ATTEMPTS} times)"
        for i, reply, why in schedule(ray, lambda: actor_class.remote(self.setup), grade, tasks, slots, {"CPU": 1},
                                      died):
            index, path, sub_id = tasks[i]
            if why:
                self.finish(index, ungraded_result(self.release, path, sub_id, why))
                continue
            self.status = self.status or reply.get("status", "")
            self.finish(index, SubmissionResult.from_dict(reply["result"]))

    def _slots(self, ray) -> int:
        """One actor per CPU the cluster offers, or --jobs if that was given above 1."""
        if self.options.jobs > 1:
            return self.options.jobs
        return max(1, int(ray.cluster_resources().get("CPU", 1)))
