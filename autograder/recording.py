"""The reference, recorded: what it answers to the checks' seeded requests, what each check gives it, and the
modules its worker loads, made once by `autograder build` (or `autograder record`) and used by every grading
run in the same environment.

- Replies. A check sends the reference the same requests for every submission (seeded inputs made by the
  judge), so a grading run replays the recorded replies instead of starting a reference worker. A request
  that was not recorded (an input computed from the student's answers, a call of the student's stand-ins)
  starts the live reference worker, which is reset and seeded as at the start of a check, then receives the
  check's earlier requests, then this one; the rest of the check runs live. Requests are keyed by a chain hash
  of everything the check sent the reference so far, so a reply is only ever used in the state it was
  recorded in. The bookkeeping around a check (seeding, the end-of-check reset) and the grader's helper code
  are not part of the chain: the replaying worker does them itself when it goes live.
- Verdicts. What each check gives the reference graded as a submission, in a worker confined like the
  students': Judge.confirm uses them instead of grading the reference again (never silently wrong, for free).
- Modules. Everything the reference's worker had imported after its self-grade: the fork server imports
  them before the first worker (no lazy import of the model code in every worker).

A recording is used only when its fingerprint equals the grading run's: the release (manifest), this
package's code, the interpreter, the installed distributions, the workers' environment and confinement, and
whether CUDA is used. Otherwise the run grades with a live reference, as without a recording; `autograder
build` and `autograder record` make it again.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from autograder.sandbox.client import LoadReport, WorkerProcess

RECORDING = "recording.json"
REPLIES = "recording.safetensors"
FORMAT = 2
BOOKKEEPING = ("seed", "end_check", "helpers")  # requests that are not part of a check's chain (see above)


# -- the fingerprint ------------------------------------------------------------------------------------

def _package_digest() -> str:
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _distributions() -> list[str]:
    """Installed distributions as their metadata folders name them (name and version), found by listing the
    interpreter's package folders (much faster than importlib.metadata)."""
    import site

    found = set()
    for folder in [*site.getsitepackages(), site.getusersitepackages()]:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        found.update(n for n in names if n.endswith((".dist-info", ".egg-info", ".pth")))
    return sorted(found)


def fingerprint(manifest_digest: str, confinement_status: str, cuda: bool) -> str:
    from autograder.sandbox.forkserver import worker_environment

    parts = {
        "format": FORMAT, "manifest": manifest_digest, "package": _package_digest(),
        "python": sys.version, "executable": os.path.realpath(sys.executable), "prefix": sys.prefix,
        "machine": platform.machine(), "distributions": _distributions(), "torch": torch.__version__,
        "environment": {k: v for k, v in worker_environment().items() if k != "PATH"},  # PATH: how it was started
        "confinement": _confinement_kind(confinement_status), "cuda": bool(cuda),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _confinement_kind(status: str) -> str:
    """The confinement status without the numbers that vary (the count of bound paths stays: it is what the
    worker sees)."""
    return status.split(":", 1)[0] + ":" + ",".join(sorted(x.strip() for x in status.split(":", 1)[-1].split(",")))


# -- request keys ---------------------------------------------------------------------------------------

START = hashlib.sha256(b"autograder check start").hexdigest()


def chain(previous: str, header: dict, tensors: dict[str, torch.Tensor]) -> str:
    """The key of a request, given the key of the one before it in the same check."""
    h = hashlib.sha256(previous.encode())
    h.update(json.dumps(header, sort_keys=True, allow_nan=False).encode())
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


# -- the recording ---------------------------------------------------------------------------------------

@dataclass
class Recording:
    fingerprint: str
    defined: dict[str, str]  # the reference worker's LoadReport.defined
    status: str  # its confinement status
    verdicts: dict[str, dict] = field(default_factory=dict)  # check name -> CheckResult as a dict
    modules: list[str] = field(default_factory=list)  # modules the reference's workers had imported
    replies: dict[str, dict] = field(default_factory=dict)  # request key -> reply header (tensors renamed)
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)  # "<key>/<name>" -> tensor
    seconds: float = 0.0

    def save(self, folder: Path) -> None:
        from autograder.reports.results import write_atomic

        save_file({k: v.contiguous() for k, v in self.tensors.items()} or {"_": torch.zeros(0)},
                  str(folder / REPLIES))
        # no timings: the same release in the same environment gives the same bytes (like the rest of a build)
        verdicts = {name: {**v, "seconds": 0.0} for name, v in self.verdicts.items()}
        data = {"format": FORMAT, "fingerprint": self.fingerprint, "defined": self.defined, "status": self.status,
                "verdicts": verdicts, "modules": self.modules, "replies": self.replies}
        write_atomic(folder / RECORDING, json.dumps(data, indent=1, sort_keys=True))

    @classmethod
    def read(cls, folder: Path) -> "Recording | None":
        """The recording in `folder`, whatever environment made it (check its fingerprint before using it)."""
        try:
            data = json.loads((folder / RECORDING).read_text(encoding="utf-8"))
            if data.get("format") != FORMAT:
                return None
            tensors = load_file(str(folder / REPLIES))
            return cls(data["fingerprint"], data["defined"], data["status"], data["verdicts"], data["modules"],
                       data["replies"], tensors)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def reply(self, key: str) -> tuple[dict, dict] | None:
        header = self.replies.get(key)
        if header is None:
            return None
        tensors = {name: self.tensors[f"{key}/{name}"] for name in header.get("_tensors", [])}
        return {k: v for k, v in header.items() if k != "_tensors"}, tensors


class RecordingWorker(WorkerProcess):
    """The live reference worker, noting every request and reply of each check into a Recording."""

    def __init__(self, spec, recording: Recording):
        super().__init__(spec)
        self.recording = recording
        self.key = START

    def roundtrip(self, header: dict, tensors: dict, what: str) -> tuple[dict, dict]:
        if header.get("op") in BOOKKEEPING:  # done by the replaying worker itself
            return super().roundtrip(header, tensors, what)
        self.key = chain(self.key, header, tensors)
        reply, reply_tensors = super().roundtrip(header, tensors, what)
        self.recording.replies[self.key] = {**reply, "_tensors": sorted(reply_tensors)}
        for name, t in reply_tensors.items():
            self.recording.tensors[f"{self.key}/{name}"] = t
        return reply, reply_tensors

    def end_check(self, seed: int) -> bool:
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
        self.misses = 0  # requests that were not recorded (for benchmarks and tests)

    manages_helpers = True  # loads the grader's helper code itself, when it goes live (judge.Program.start)

    def ensure_started(self) -> LoadReport:
        if self.live:
            return super().ensure_started()
        if self.report is None:
            self.report = LoadReport(dict(self.recording.defined), {}, self.recording.status)
        return self.report

    def start_check(self, seed: int) -> None:
        self.seed = seed  # a check starts replayed: the live worker is seeded only if it goes live (_go_live)

    def roundtrip(self, header: dict, tensors: dict, what: str) -> tuple[dict, dict]:
        if not self.live and header.get("op") in BOOKKEEPING:
            return {"ok": False if header.get("op") == "end_check" else None}, {}  # what the live worker answers
        if not self.live:
            self.key = chain(self.key, header, tensors)
            recorded = self.recording.reply(self.key)
            if recorded is not None:
                self.sent.append((header, tensors, what))
                return recorded
            self.misses += 1
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
        try:
            return super().end_check(seed) if self.live else False
        finally:
            self.key, self.sent, self.live = START, [], False


def record(release, confinement_status: str, cuda: bool | None = None) -> Recording:
    """Grade the reference against itself with a live, recording reference worker; return the Recording."""
    from autograder.grade import GradeOptions, Grader

    start = time.monotonic()
    grader = Grader(release, GradeOptions(release.dir / ".recording-out", quiet=True, cuda=cuda,
                                          confinement_status=confinement_status), [], self_grade=False,
                    recording=None)
    recording = Recording(fingerprint(release.manifest_digest, confinement_status, grader.cuda), {}, "")
    worker = RecordingWorker(grader.reference.worker.spec, recording)
    grader.reference.worker = worker
    worker.explain_name = grader.reference.explain_unbound
    try:
        grader.warm_up()
        program = grader.reference_as_submission()
        results = grader.judge.grade(program, confirm=False)
        recording.verdicts = {r.name: r.to_dict() for r in results}
        recording.modules = sorted(set(grader.worker_modules(program)) | set(grader.worker_modules(grader.reference)))
        report = grader.reference.start()
        recording.defined, recording.status = dict(report.defined), report.status
    finally:
        grader.close()
    recording.seconds = time.monotonic() - start
    return recording


def record_release(release_dir: Path, cuda: bool | None = None) -> tuple[Recording | None, str]:
    """Record the release's reference and save it next to it: (the recording or None, a line saying what
    happened). Nothing is recorded where student code cannot be confined (the preflight fails)."""
    from autograder.grade import ConfinementUnavailable, GradeOptions, preflight
    from autograder.release import load_release

    release = load_release(release_dir)
    try:
        status = preflight(release, GradeOptions(release_dir, cuda=cuda))
    except ConfinementUnavailable as exc:
        return None, f"reference not recorded ({exc}); grading runs will use a live reference"
    recording = record(release, status, cuda)
    recording.save(release_dir)
    failed = [name for name, v in recording.verdicts.items() if v["status"] not in ("passed", "pending")]
    line = (f"reference recorded: {len(recording.replies)} replies, {len(recording.modules)} modules, "
            f"{len(recording.verdicts)} verdicts in {recording.seconds:.1f} s")
    if failed:
        line += f"; WARNING: the reference does not pass {', '.join(failed)} here (autograder verify says why)"
    return recording, line


def modules_hint(assignment: str) -> list[str]:
    """The modules of the recording of `assignment` (a name, a release folder or a solutions folder), read before
    anything else so that the fork server can start importing them; [] when there is none (no check made: a
    guess of what the workers will import, nothing more)."""
    given = Path(assignment)
    for folder in (given, Path("release") / given.name, given.parent.parent / "release" / given.name):
        try:
            return list(json.loads((folder / RECORDING).read_text(encoding="utf-8")).get("modules", []))
        except (OSError, ValueError, AttributeError):
            continue
    return []
