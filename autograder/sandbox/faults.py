"""What a request to a worker can end in, as the judge's exceptions: the worker failed (WorkerError: it hung,
died, sent garbage; SystemFault: the machine's fault, never a student's score) or the code it ran raised
(StudentError, carrying only the student-facing description; MissingName, TrippedCall: the check ends with a
message of its own). Nothing here runs or imports student code."""
from __future__ import annotations

import re

from autograder.sandbox.worker import MODULE_NAME


class WorkerError(Exception):
    """The worker could not answer: it hung, died, or sent garbage. Costs the current check."""


class WorkerTimeout(WorkerError):
    """The worker did not answer by the request's deadline."""
    pass


class WorkerDied(WorkerError):
    """The worker ended, could not be loaded, or sent a reply that is not the answer to the request."""
    pass


class SystemFault(WorkerDied):
    """The worker ended for a cause outside the code it runs: killed by a signal it did not send itself (the
    machine's out-of-memory killer, another process), its fork server gone, or it could not be started at all.
    Never a student's score: the judge runs the check again on a fresh worker, then reports it not graded.
    `certain`: the worker could not have caused it (a worker without a PID namespace of its own can SIGKILL
    itself: its kill is tried again, and counts as before when it happens again)."""

    def __init__(self, message: str, summary: str, certain: bool = True):
        super().__init__(message)
        self.summary = summary  # the message without what the worker was doing
        self.certain = certain


_UNBOUND = re.compile(r"name '([A-Za-z_][A-Za-z0-9_]*)' is not defined")
# grader helper code calling `submission.NAME` the notebook does not define (the worker's module: worker.MODULE_NAME)
_MISSING = re.compile(rf"module '{MODULE_NAME}' has no attribute '([A-Za-z_][A-Za-z0-9_]*)'")
# the name of what a definition that hung an earlier check raises in the worker (standins.NotRunAgain, raised by
# standins.tripwire): the worker reports an exception by its class name (tests/test_faults.py ties the two)
TRIPPED = "NotRunAgain"


class StudentError(Exception):
    """Code in the worker raised. Carries the student-facing description only."""

    def __init__(self, what: str, info: dict, explain_name=None, explain_hang=None, functions: frozenset = frozenset(),
                 owner: str = "your"):
        self.what = what
        self.functions = functions  # the notebook's top-level callables (a stub among them is named: describe)
        self.type = str(info.get("type", "Exception"))
        self.message = str(info.get("message", ""))
        self.trace = [str(x) for x in info.get("traceback", [])][:8]
        self.stub = bool(info.get("stub"))
        self.unsent = bool(info.get("unsent"))  # it returned a value that cannot be sent (too many items...)
        self.mro = [str(x) for x in info.get("mro", [])][:32]  # dotted names of the exception's classes
        # a NameError for a global the notebook binds in a statement the grader did not run: where, and why
        found = _UNBOUND.search(self.message) if self.type == "NameError" and explain_name else None
        self.hint = (explain_name(found.group(1)) or "") if found else ""
        missing = _MISSING.search(self.message) if self.type == "AttributeError" else None
        # raised by the grader's own code (no frame of the notebook's), for a name the notebook does not define here:
        # said as a test cell says it ("`MLP` is defined in cell 25, which the grader skipped: ..."), no internals
        self.absent = self.hint if found and self.hint and not self.trace else ""
        if missing:
            name = missing.group(1)
            explained = explain_name(name) if explain_name else None
            self.absent = "" if self.trace else explained or f"{owner} notebook does not define `{name}`"
            # what checks quote of the error ("... failed (AttributeError: ...)"): the worker's module name is no
            # name the student wrote
            self.message, self.hint = explained or f"the notebook does not define `{name}`", ""
        # a definition that made an earlier check time out, called again: that check's message
        self.hung = (explain_hang(self.message) or "") if self.type == TRIPPED and explain_hang else ""
        self.message = self.hung or self.message  # what checks quote of an error
        super().__init__(self.describe())

    def stub_function(self) -> str:
        """The notebook's function or method that raised NotImplementedError (the innermost frame of the notebook's
        code), by its qualified name when its class is the notebook's: `mask_inputs`, `Value.__add__`; never a cell's
        top level."""
        found = re.search(r", in ([A-Za-z_][A-Za-z0-9_.]*): ", self.trace[-1]) if self.trace else None
        name = found.group(1) if found else ""
        name = name[:-len(".__init__")] if name.endswith(".__init__") else name  # constructing Value: `Value`
        return name if name.split(".")[0] in self.functions else ""  # `mask_inputs` or `Value.__add__`

    def describe(self, what: str = "") -> str:
        """The student-facing message; `what` names the code that raised in the check's words ("your train_epoch
        (on a small stand-in model)") where the request was a worker helper's."""
        what = what or self.what
        if self.hung:
            return self.hung
        if self.stub:
            # where it was raised: a `raise NotImplementedError()` left among written code is found there
            where = f", at {self.trace[-1]}" if self.trace else ""
            stub = self.stub_function()
            if stub and not re.search(rf"\b{re.escape(stub)}\b", what):  # a helper it calls is the stub
                return f"{what} calls {stub}, which is not implemented yet (it raised NotImplementedError){where}"
            return f"{what} is not implemented yet (it raised NotImplementedError){where}"
        if self.unsent:
            return f"{what} returned a value the grader cannot take: {self.message}"
        if self.absent:
            return self.absent
        text = f"{what} raised {self.type}: {self.message}".rstrip(": ")
        if self.hint:
            text += f" ({self.hint})"
        if self.trace:
            text += "\n    " + "\n    ".join(self.trace)
        return text


class MissingName(AttributeError):
    """The submission does not define a name a check uses."""


class TrippedCall(Exception):
    """The check called a definition that hung or ended an earlier check (the worker's tripwire raised
    standins.NotRunAgain, named TRIPPED here): the check ends with that check's message (never a StudentError a
    check would quote in its own words, "... failed (NotRunAgain: ...)")."""


