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
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from autograder.errors import UserError
from autograder.grading.grader import ungraded_result
from autograder.grading.options import GradeOptions
from autograder.grading.pool import GRADING_PROCESS_DIED, POOL_ATTEMPTS, GradingProcess, Task
from autograder.release import Release
from autograder.reports.results import SubmissionResult


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


class NodeGraderBody:
    """An actor's body: one grading process on the actor's node, one submission at a time."""

    def __init__(self, setup: dict):
        self.process = GradingProcess(setup)

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
        self.deaths: dict[int, int] = {}

    def run(self, tasks: list[Task]) -> None:
        ray = connect(self.options.cluster)
        actor_class = ray.remote(num_cpus=1, max_restarts=0)(NodeGraderBody)
        todo = list(tasks)
        actors = [actor_class.remote(self.setup) for _ in range(max(1, min(self._slots(ray), len(todo))))]
        running: dict = {}  # future -> (actor, task)
        try:
            while todo or running:
                while todo and actors:
                    actor, task = actors.pop(), todo.pop(0)
                    running[actor.grade.remote(str(task[1]), task[2], bool(todo))] = (actor, task)
                done, _ = ray.wait(list(running), num_returns=1)
                actor, task = running.pop(done[0])
                reply = self._reply(ray, done[0])
                if reply is None:
                    ray.kill(actor)
                    self._retry_or_give_up(task, todo)
                    actors.append(actor_class.remote(self.setup))
                    continue
                self.status = self.status or reply.get("status", "")
                self.finish(task[0], SubmissionResult.from_dict(reply["result"]))
                actors.append(actor)
        finally:
            for actor, _ in running.values():
                ray.kill(actor)
            for actor in actors:
                ray.kill(actor)

    def _slots(self, ray) -> int:
        """One actor per CPU the cluster offers, or --jobs if that was given above 1."""
        if self.options.jobs > 1:
            return self.options.jobs
        return max(1, int(ray.cluster_resources().get("CPU", 1)))

    @staticmethod
    def _reply(ray, future) -> dict | None:
        try:
            return ray.get(future)
        except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError, ray.exceptions.RayTaskError):
            return None

    def _retry_or_give_up(self, task: Task, todo: list[Task]) -> None:
        self.deaths[task[0]] = self.deaths.get(task[0], 0) + 1
        if self.deaths[task[0]] >= POOL_ATTEMPTS:
            i, path, sub_id = task
            self.finish(i, ungraded_result(self.release, path, sub_id, f"{GRADING_PROCESS_DIED} ({POOL_ATTEMPTS} times)"))
        else:
            todo.insert(0, task)
