"""The reference answering a submission's calls into other graded parts (checks declared with `depends_on`).

The student's worker runs its part with stand-ins (autograder/sandbox/standins.py) in place of the named
definitions; each call to a stand-in reaches the judge as a callback, and `ReferenceAnswers` answers it by
asking the reference's worker. Only the names the check declared can be asked for; only plain data
travels (tensors, numbers, strings, containers, generators by value), never an object of either worker.
"""
from __future__ import annotations

from collections.abc import Callable

from autograder.sandbox import Remote, keep


class ReferenceAnswers:
    """Answers one check's callbacks with `reference` (a program.Program); lives as long as the check."""

    def __init__(self, reference, names, deadline: Callable[[], float] = lambda: float("inf")):
        self.reference = reference
        self.names = set(names)
        self.modules: list[Remote] = []  # modules built by the reference for the student's stand-ins
        self.deadline = deadline  # the student's request's: what the reference does for it is the student's time

    def __call__(self, kind: str, payload: dict):
        """The answer; the reference works on it until the student's request's deadline at the latest (a submission
        asking the reference for a 160-layer encoder spends its own time limit, not the reference's)."""
        if not isinstance(payload, dict):
            raise ValueError("malformed call")
        worker = self.reference.worker
        own = worker.deadline
        worker.deadline = min(own, self.deadline())
        try:
            return self._answer(kind, payload, worker)
        finally:
            worker.deadline = own

    def _answer(self, kind: str, payload: dict, worker):
        if kind == "construct":
            name = self._name(payload.get("name"))
            module = keep(getattr(self.reference.proxy(), name), *payload.get("args", []), **payload.get("kwargs", {}))
            described = worker.request("describe_module", module, what=f"the reference's {name}")
            self.modules.append(module)
            return {"token": len(self.modules) - 1, **described}
        target = self._target(payload.get("target"))
        call = (target, payload.get("args", []), payload.get("kwargs", {}), payload.get("params"),
                bool(payload.get("training")))
        if kind == "forward":
            return worker.request("answer_forward", *call, what="the reference's answer")
        if kind == "backward":
            return worker.request("answer_backward", *call, payload.get("rng"), payload.get("grad_outputs", []),
                                  payload.get("needs", []), what="the reference's gradients")
        raise ValueError(f"unknown call {kind!r}")

    def _name(self, name) -> str:
        if not isinstance(name, str) or name not in self.names:
            raise ValueError(f"{name!r} is not a part the reference answers for in this check")
        return name

    def _target(self, target):
        if isinstance(target, str):
            return getattr(self.reference.proxy(), self._name(target))
        if isinstance(target, int) and not isinstance(target, bool) and 0 <= target < len(self.modules):
            return self.modules[target]
        raise ValueError("unknown module")
