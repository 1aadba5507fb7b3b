"""The confinement ladder: the strongest confinement this machine allows, chosen once per run, never less
than the run allows, and a refusal that says how to get more.

The rungs (sandbox/isolation.py builds each, all or nothing):

1. `full`: namespaces and an allowlist root (nothing of the machine but the software exists for the worker).
2. `restricted`: where namespaces or mounts are refused (Ubuntu 24.04's AppArmor default, Docker's default
   seccomp profile, a JupyterHub container): the machine's files are still hidden (Landlock, or a root
   grader's uid of its own), so the hidden tests, the answer key, other submissions and the results stay
   unreadable. Taken by default: those are what a grade's integrity rests on. What it does not hold is in
   `RESTRICTED_LIMITS` and docs/isolation.md.
3. `trusted`: only with --trusted-submissions (or, for `autograder check`, the student's own code on the
   student's own machine): resource limits only.

`choose` probes each rung from the top in a throw-away process (no student code) and takes the first that
works among those allowed. When none does it raises `ConfinementUnavailable`, whose message names what failed
at each rung and the remedy for the platform it detects (`detect_platform`): never a silent fallback.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from autograder.errors import UserError
from autograder.sandbox.isolation import FULL, RESTRICTED, TRUSTED, Confinement, probe

RESTRICTED_LIMITS = ("the worker reads the machine's /proc files that are not processes' (cpuinfo, meminfo...)",
                     "its scratch folder lies on the machine's disk (each file capped, not the folder)",
                     "without a network namespace, UDP and UNIX sockets stay open (Landlock ABI 4+ closes TCP)",
                     "without a PID namespace and below Landlock ABI 6, it may signal the grader's own processes")
Probe = Callable[[Confinement], tuple[bool, str]]


class ConfinementUnavailable(UserError, RuntimeError):
    """Student code cannot be confined here at any level the run allows."""


@dataclass
class Choice:
    """The confinement level chosen for the run, the worker's status line at it, and why each stronger level was
    refused."""
    level: str
    status: str  # the probe's status line, as a worker says it
    refused: list[tuple[str, str]] = field(default_factory=list)  # (level, why) of the rungs above

    @property
    def weaker(self) -> bool:
        """Whether the run is confined less than fully (the commands then say so once)."""
        return self.level != FULL


def allowed_levels(trusted: bool) -> tuple[str, ...]:
    """The levels the run may use, strongest first: `trusted` (resource limits only) only where the run allows it
    (--trusted-submissions)."""
    return (FULL, RESTRICTED, TRUSTED) if trusted else (FULL, RESTRICTED)


def choose(conf: Confinement, trusted: bool, run_probe: Probe = probe, platform: str | None = None) -> Choice:
    """The first level, strongest first, that `run_probe` builds; ConfinementUnavailable when none does."""
    refused: list[tuple[str, str]] = []
    for level in allowed_levels(trusted):
        ok, status = run_probe(replace(conf, level=level))
        if ok:
            return Choice(level, status, refused)
        refused.append((level, status))
    raise ConfinementUnavailable(refusal(refused, trusted, platform or detect_platform()))


def detect_platform(env: Mapping[str, str] | None = None, root: str = "/") -> str:
    """Where this runs, for the remedy: "github", "jupyterhub", "docker", "kubernetes" or "linux"."""
    env = os.environ if env is None else env
    if env.get("GITHUB_ACTIONS") == "true":
        return "github"
    if env.get("JUPYTERHUB_API_TOKEN") or env.get("JUPYTERHUB_USER"):
        return "jupyterhub"
    if env.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes"
    if os.path.exists(os.path.join(root, ".dockerenv")) or os.path.exists(os.path.join(root, "run/.containerenv")):
        return "docker"
    return "linux"


REMEDIES = {
    "github": ("on GitHub's hosted runner, grade as root: `sudo -E env \"PATH=$PATH\" autograder grade ...` (the "
               "runner has passwordless sudo), or first allow unprivileged user namespaces: `sudo sysctl -w "
               "kernel.apparmor_restrict_unprivileged_userns=0`"),
    "jupyterhub": ("on JupyterHub, let the single-user container create namespaces: KubeSpawner "
                   "`c.KubeSpawner.extra_container_config = {\"securityContext\": {\"seccompProfile\": {\"type\": "
                   "\"Unconfined\"}, \"appArmorProfile\": {\"type\": \"Unconfined\"}}}`, DockerSpawner "
                   "`c.DockerSpawner.extra_host_config = {\"security_opt\": [\"seccomp=unconfined\", "
                   "\"apparmor=unconfined\"]}`; or grade outside the hub, on a machine that allows them"),
    "kubernetes": ("in a Kubernetes pod, set the container's `securityContext: {seccompProfile: {type: Unconfined}, "
                   "appArmorProfile: {type: Unconfined}}`, or run the grader as root in it"),
    "docker": ("in Docker, start the container with `docker run --security-opt seccomp=unconfined --security-opt "
               "apparmor=unconfined ...` (namespaces for a non-root grader), or as root with `--cap-add SYS_ADMIN` "
               "as well"),
    "linux": ("allow unprivileged user namespaces (Ubuntu 24.04: `sudo sysctl -w "
              "kernel.apparmor_restrict_unprivileged_userns=0`; elsewhere `sudo sysctl -w "
              "user.max_user_namespaces=15000`), or grade as root"),
}


def refusal(refused: list[tuple[str, str]], trusted: bool, platform: str) -> str:
    """What failed at each rung, the platform's remedy and, unless already given, the flag."""
    tried = "; ".join(f"{level}: {why}" for level, why in refused)
    flag = "" if trusted else (" Or pass --trusted-submissions to grade submissions you trust (your own, a TA's) "
                               "with resource limits only: their code then sees whatever your user may read.")
    return (f"student code cannot be confined here, so nothing was graded ({tried}). To confine it, "
            f"{REMEDIES.get(platform, REMEDIES['linux'])}.{flag}")


def describe_choice(choice: Choice) -> str:
    """One line for a run's log and summary: the level, and what a weaker level does not hold."""
    if choice.level == FULL:
        return f"confinement: full ({choice.status})"
    above = "".join(f"; {level} refused: {why}" for level, why in choice.refused)
    if choice.level == RESTRICTED:
        return (f"confinement: restricted, the strongest this machine allows ({choice.status}){above}; not held: "
                + "; ".join(RESTRICTED_LIMITS))
    return f"confinement: none beyond resource limits (trusted submissions) ({choice.status}){above}"
