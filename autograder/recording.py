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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from autograder.files import package_digest, write_atomic
from autograder.sandbox import worker_environment

if TYPE_CHECKING:
    import torch

RECORDING = "recording.json"
REPLIES = "recording.safetensors"
FORMAT = 2
BOOKKEEPING = ("seed", "end_check", "helpers")  # requests that are not part of a check's chain (see above)


# -- the fingerprint ------------------------------------------------------------------------------------

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


def run_fingerprint(manifest_digest: str, confinement_status: str, cuda: bool) -> str:
    """SHA-256 (hex) of everything a recording's replies depend on: the release's manifest, this package, Python, the
    installed distributions, torch, the worker's environment, the confinement's kind and CUDA. A recording replays
    only where it matches."""
    import torch

    parts = {
        "format": FORMAT, "manifest": manifest_digest, "package": package_digest(),
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


def chain(previous: str, header: dict, tensors: dict[str, "torch.Tensor"]) -> str:
    """The key of a request, given the key of the one before it in the same check."""
    import torch

    h = hashlib.sha256(previous.encode())
    h.update(json.dumps(header, sort_keys=True, allow_nan=False).encode())
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")  # (a 0-d one too)
    return h.hexdigest()


# -- the recording ---------------------------------------------------------------------------------------

@dataclass
class Recording:
    """The reference's worker as one grading run saw it: its load report, every reply to every check's requests
    (tensors apart), and its verdicts; valid where its fingerprint matches the run's."""
    fingerprint: str
    defined: dict[str, str]  # the reference worker's LoadReport.defined
    status: str  # its confinement status
    verdicts: dict[str, dict] = field(default_factory=dict)  # check name -> CheckResult as a dict
    modules: list[str] = field(default_factory=list)  # modules the reference's workers had imported
    replies: dict[str, dict] = field(default_factory=dict)  # request key -> reply header (tensors renamed)
    tensors: dict[str, "torch.Tensor"] = field(default_factory=dict)  # "<key>/<name>" -> tensor
    seconds: float = 0.0
    # the statements of the reference that failed to load in its worker: unit index (as text) -> LoadReport's why
    errors: dict[str, str] = field(default_factory=dict)

    def save(self, folder: Path) -> None:
        """Write it into `folder`: the tensors as safetensors, the rest as JSON written atomically (no timings: the
        same build gives the same bytes)."""
        import torch
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in self.tensors.items()} or {"_": torch.zeros(0)},
                  str(folder / REPLIES))
        # no timings: the same release in the same environment gives the same bytes (like the rest of a build)
        verdicts = {name: {**v, "seconds": 0.0} for name, v in self.verdicts.items()}
        data = {"format": FORMAT, "fingerprint": self.fingerprint, "defined": self.defined, "status": self.status,
                "verdicts": verdicts, "modules": self.modules, "replies": self.replies, "errors": self.errors}
        write_atomic(folder / RECORDING, json.dumps(data, indent=1, sort_keys=True))

    @classmethod
    def read(cls, folder: Path) -> "Recording | None":
        """The recording in `folder`, whatever environment made it (check its fingerprint before using it)."""
        from safetensors.torch import load_file

        try:
            data = json.loads((folder / RECORDING).read_text(encoding="utf-8"))
            if data.get("format") != FORMAT:
                return None
            tensors = load_file(str(folder / REPLIES))
            return cls(data["fingerprint"], data["defined"], data["status"], data["verdicts"], data["modules"],
                       data["replies"], tensors, errors=dict(data.get("errors", {})))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def reply(self, key: str) -> tuple[dict, dict] | None:
        """The recorded reply to the request chain `key` as (header, tensors); None where none was recorded."""
        header = self.replies.get(key)
        if header is None:
            return None
        tensors = {name: self.tensors[f"{key}/{name}"] for name in header.get("_tensors", [])}
        return {k: v for k, v in header.items() if k != "_tensors"}, tensors


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
