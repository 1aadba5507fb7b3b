"""The accuracy rubric on a Ray cluster (`autograder rubric ... --cluster ADDRESS`): every GPU of the cluster
grades students' models at once.

    driver (this process: the submissions, their checkpoints, merging into --out)
      |-- actor "RubricGPU" x (the cluster's GPUs; num_gpus=1 each, Ray sets CUDA_VISIBLE_DEVICES)
            RubricRun, prepared once per actor: the encoder and the class-wide cache (its hidden states for
            the validation split), then one student's model at a time in its own confined worker

A cluster without GPUs keeps the rubric pending, as a machine without CUDA does; `--device cpu` grades on one
actor per CPU instead (small classes, tests). Results come back to the driver, which merges them into --out as
the local loop does. An actor that dies (a lost node, a killed process) costs nothing: its submission goes to a
fresh actor, and after POOL_ATTEMPTS deaths the check stays pending with a note, never a score; the driver watches
the nodes as grading.cluster.schedule does (a lost node's model goes to another actor at once; a cluster without a
node able to hold an actor for NO_CAPACITY_SECONDS leaves what is left pending). Paths are read
by every node as given (a shared filesystem, or the same copy on each node; docs/scale.md); the cache folder,
when shared, is written atomically, so actors on one filesystem compute it once between them.
"""
from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from autograder.grading.cluster import connect, node_id, schedule
from autograder.grading.pool import POOL_ATTEMPTS
from autograder.deferred.accuracy.config import RubricConfig
from autograder.rubric.options import RubricOptions
from autograder.rubric.stage import Graded, RubricOutcome
from autograder.status import PENDING

GPU_DIED = "the GPU worker grading this model stopped (a lost node or a killed process); grade it again"


class RubricActorBody:
    """An actor's body: one prepared RubricRun (the encoder and the cache, once), one model at a time."""

    def __init__(self, config: RubricConfig, options: RubricOptions, out_dir: str):
        from autograder.rubric.stage import RubricRun

        self.run = RubricRun(config, options, out_dir=Path(out_dir))
        self.error = ""
        try:
            if not self.run.pending:
                self.run.prepare()
        except Exception as exc:  # noqa: BLE001 - reported to the driver, which stops the run
            self.error = f"{type(exc).__name__}: {exc}"

    def where(self) -> str:
        """The cluster node the actor runs on (Ray's node id)."""
        return node_id()

    def grade(self, notebook: str, checkpoint: str) -> tuple[RubricOutcome | None, str | None, dict, str]:
        """Grade one submission as RubricRun.grade does, as (outcome, encoder source, timings, error); where the
        actor could not prepare, only the error."""
        if self.error:
            return None, None, {}, self.error
        start = time.monotonic()
        outcome = self.run.grade(Path(notebook), Path(checkpoint))
        outcome.details["wall_seconds"] = round(time.monotonic() - start, 3)
        outcome.details["node"] = socket.gethostname()
        encoder = self.run.encoder.source if self.run.encoder else None
        return outcome, encoder, dict(self.run.timings), ""


class RubricPrepareError(RuntimeError):
    """An actor could not load the encoder or the data: nothing can be graded."""


def actor_resources(ray, device: str) -> tuple[dict, int]:
    """(resources of one actor, how many actors): one per GPU; on CPUs only with --device cpu; none otherwise."""
    resources = ray.cluster_resources()
    gpus = int(resources.get("GPU", 0))
    if gpus:
        return {"num_gpus": 1, "num_cpus": 1}, gpus
    if device == "cpu":
        return {"num_cpus": 1}, max(1, int(resources.get("CPU", 1)))
    return {}, 0


def pending_outcome(config: RubricConfig, why: str) -> RubricOutcome:
    """A pending rubric result for a submission that cannot be graded on the cluster, `why` recorded in its details."""
    from autograder.judge import CheckResult
    from autograder.deferred.accuracy.config import pending_message

    check = CheckResult(config.name, config.part, config.points, 0.0, PENDING, pending_message(config, cuda=False),
                        config.visibility)
    return RubricOutcome(check, {"pending": why})


def grade_on_cluster(address: str, config: RubricConfig, options: RubricOptions, out_dir: Path,
                     jobs: list[tuple[str, str]], log: Callable[[str], None]) -> Iterator[Graded]:
    """Each (notebook, checkpoint) of `jobs` graded by the cluster's GPUs, yielded as it finishes."""
    ray = connect(address)
    resources, slots = actor_resources(ray, options.device)
    if not slots:
        log("the cluster has no GPU: the rubric stays pending (--device cpu grades on its CPUs, slowly)")
        for i in range(len(jobs)):
            yield Graded(i, pending_outcome(config, "the cluster has no GPU"), None, {})
        return
    log(f"rubric on the cluster: {min(slots, len(jobs))} actor(s) with {resources}")
    yield from _schedule(ray, ray.remote(max_restarts=0, **resources)(RubricActorBody),
                         (config, options, str(out_dir)), jobs, min(slots, len(jobs)), config, resources)


def _schedule(ray, actor_class, setup: tuple, jobs: list[tuple[str, str]], slots: int, config: RubricConfig,
              resources: dict) -> Iterator[Graded]:
    """grading.cluster.schedule over the rubric's actors: a model lost POOL_ATTEMPTS times, or left when the cluster
    lost its nodes, stays pending with a note, never a score."""
    needs = {"GPU": resources.get("num_gpus", 0), "CPU": resources.get("num_cpus", 0)}
    call = lambda actor, job, more: actor.grade.remote(*job)  # noqa: E731 - one call
    for i, answer, why in schedule(ray, lambda: actor_class.remote(*setup), call, jobs, slots,
                                   {k: v for k, v in needs.items() if v}, f"{GPU_DIED} ({POOL_ATTEMPTS} times)"):
        if why:
            yield Graded(i, pending_outcome(config, why), None, {})
            continue
        outcome, encoder, timings, error = answer
        if error:
            raise RubricPrepareError(error)
        yield Graded(i, outcome, encoder, timings)
