"""The reference's worker in a grading run, recorded or replayed (the data and its format: autograder/recording.py).

- RecordingWorker: the live reference worker, noting each check's requests and replies into a Recording
  (used by grading/record_reference.py when a release is recorded).
- ReplayingWorker: the reference as recorded. Replies come from the recording; the first request of a check
  that was not recorded starts the live worker, which is brought to where the check is, and the rest of the
  check runs live. So a replayed reference answers exactly as the live one would.
"""
from __future__ import annotations

from autograder.recording import BOOKKEEPING, START, Recording, chain
from autograder.sandbox import LoadReport, WorkerProcess


class RecordingWorker(WorkerProcess):
    """The live reference worker, noting every request and reply of each check into a Recording."""

    def __init__(self, spec, recording: Recording):
        super().__init__(spec)
        self.recording = recording
        self.key = START

    def roundtrip(self, header: dict, tensors: dict, what: str) -> tuple[dict, dict]:
        """As WorkerProcess.roundtrip, noting the reply (and its tensors) under the key of the check's requests so
        far; bookkeeping requests are not recorded."""
        if header.get("op") in BOOKKEEPING:  # done by the replaying worker itself
            return super().roundtrip(header, tensors, what)
        self.key = chain(self.key, header, tensors)
        reply, reply_tensors = super().roundtrip(header, tensors, what)
        self.recording.replies[self.key] = {**reply, "_tensors": sorted(reply_tensors)}
        for name, t in reply_tensors.items():
            self.recording.tensors[f"{self.key}/{name}"] = t
        return reply, reply_tensors

    def end_check(self, seed: int) -> bool:
        """As WorkerProcess.end_check; the next check's keys start again from START."""
        self.key = START
        return super().end_check(seed)


class ReplayingWorker(WorkerProcess):
    """The reference's worker as recorded: replies come from the recording; the first request of a check that
    was not recorded starts the live worker (if it is not running), which gets the check's earlier requests
    again, and the rest of the check runs live."""

    def __init__(self, spec, recording: Recording, helpers: list[str]):
        super().__init__(spec)
        self.recording = recording
        self.helpers = list(helpers)
        self.key = START
        self.sent: list[tuple[dict, dict, str]] = []  # this check's requests so far
        self.live = False  # this check goes to the live worker
        self.seed = 0  # the check's seed, for the live worker if the check goes live

    manages_helpers = True  # loads the grader's helper code itself, when it goes live (program.Program.start)

    def can_answer(self) -> bool:
        """Always: what the recording lacks, the live worker answers."""
        return True  # from the recording, or live

    def ensure_started(self) -> LoadReport:
        """The recorded LoadReport without starting a worker, until it has gone live."""
        if self.live:
            return super().ensure_started()
        if self.report is None:
            self.report = LoadReport(dict(self.recording.defined),
                                     {int(i): why for i, why in self.recording.errors.items()}, self.recording.status)
        return self.report

    def start_check(self, seed: int) -> None:
        """Note the seed only: the live worker is seeded if the check goes live."""
        self.seed = seed  # a check starts replayed: the live worker is seeded only if it goes live (_go_live)

    def roundtrip(self, header: dict, tensors: dict, what: str) -> tuple[dict, dict]:
        """The recorded reply to this request where the recording has one; otherwise the worker goes live and answers
        it (and the rest of the check)."""
        if not self.live and header.get("op") in BOOKKEEPING:
            return {"ok": False if header.get("op") == "end_check" else None}, {}  # what the live worker answers
        if not self.live:
            self.key = chain(self.key, header, tensors)
            recorded = self.recording.reply(self.key)
            if recorded is not None:
                self.sent.append((header, tensors, what))
                return recorded
            self._go_live()
        return super().roundtrip(header, tensors, what)

    def _go_live(self) -> None:
        """Bring the live worker to where this check is: the state a check starts from (clean, seeded), then the
        check's earlier requests."""
        self.live = True
        fresh = self.proc is None or self.proc.poll() is not None
        super().ensure_started()
        if fresh:
            for source in self.helpers:
                super().roundtrip({"op": "helpers", "args": [source]}, {}, "loading the grader's helper code")
        super().roundtrip({"op": "end_check", "args": [self.seed]}, {}, "bookkeeping")
        for header, tensors, what in self.sent:
            super().roundtrip(header, tensors, what)

    def end_check(self, seed: int) -> bool:
        """End the check (live, as WorkerProcess.end_check; replayed, no stub hit) and go back to replaying for the
        next one."""
        try:
            return super().end_check(seed) if self.live else False
        finally:
            self.key, self.sent, self.live = START, [], False
