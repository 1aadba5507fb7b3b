"""The environments the package's processes start with, and how they are started: nothing else.

- `worker_environment`: what every worker (and the fork server it is forked from) sees: a short list passed
  through (PATH, locale, CUDA's and Hugging Face's switches), this package's folder as PYTHONPATH, one thread.
  Never the caller's tokens, keys or paths.
- `start_environment`: what a grading process (the pool's, the clean restart of a command) starts with, before
  it is handed the caller's environment (`adopt_environment`) after its fork server is forked.
- `python_command(role, ...)`: the command line of a new interpreter in one of the roles of
  autograder/entrypoints.py (the map of every process the package starts).
- `fork_server_enabled`: the one reading of AUTOGRADER_FORK_SERVER (0: every worker is a new interpreter).

Imports nothing of the package, and not torch.
"""
from __future__ import annotations

import contextlib
import gc
import os
import sys
from pathlib import Path

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
_ENV_PASSTHROUGH = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "HF_HUB_OFFLINE", "HF_HOME",
                    "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "NVIDIA_VISIBLE_DEVICES")
ENTRY_MODULE = "autograder.entrypoints"  # see python_command


def fork_server_enabled() -> bool:
    """Workers are forked from a fork server unless AUTOGRADER_FORK_SERVER=0 (then each is a new interpreter)."""
    return os.environ.get("AUTOGRADER_FORK_SERVER", "1") != "0"


def python_command(role: str, *args: str, isolated: bool = False) -> list[str]:
    """`python -m autograder.entrypoints ROLE ARGS...` with this interpreter (`isolated`: -P, the current
    folder is not on the import path)."""
    return [sys.executable, *(["-P"] if isolated else []), "-m", ENTRY_MODULE, role, *args]


def worker_environment(threads: int = 1) -> dict[str, str]:
    """The environment every worker starts with (the fork server's too)."""
    env = {k: os.environ[k] for k in _ENV_PASSTHROUGH if k in os.environ}
    env.update(PYTHONPATH=_PACKAGE_ROOT, PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1",
               OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="false",
               PYTHONWARNINGS="ignore")
    # cuBLAS picks reduction orders per run unless its workspace is fixed (read when CUDA starts)
    env.setdefault("CUBLAS_WORKSPACE_CONFIG", os.environ.get("CUBLAS_WORKSPACE_CONFIG", ":4096:8"))
    return env



@contextlib.contextmanager
def imports_without_collector():
    """Import large libraries (torch, transformers) with the cyclic garbage collector paused: it would walk every
    object imported so far, again and again (a fifth of their import time), and what they import lives as long as
    the process. Afterwards gc.freeze(): later collections skip all of it, in this process and in the processes
    forked from it (no walk over it, and no copy-on-write of the pages it is on)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        gc.freeze()


# What a grading process needs from its environment to start the same Python as its caller: nothing secret.
# (PYTHONPATH is this package's folder only: the caller's, perhaps a course's folder, is added after the fork.)
START_ENVIRONMENT = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "LD_LIBRARY_PATH", "PYTHONHOME", "PYTHONNOUSERSITE",
                     "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED", "AUTOGRADER_FORK_SERVER")


def start_environment() -> dict[str, str]:
    """The environment a grading process starts with (see START_ENVIRONMENT)."""
    env = {k: os.environ[k] for k in START_ENVIRONMENT if k in os.environ}
    env.update(PYTHONPATH=_PACKAGE_ROOT, OMP_NUM_THREADS="1")  # one thread: torch's pool would start with its import
    return env


def adopt_environment(env: dict[str, str]) -> None:
    """After the fork: the caller's environment, and its PYTHONPATH on this process's import path (the judge may
    import what the caller's path holds; the fork server and the workers never saw it)."""
    os.environ.clear()
    os.environ.update(env)
    for entry in reversed([e for e in env.get("PYTHONPATH", "").split(os.pathsep) if e]):
        if entry not in sys.path:
            sys.path.insert(1, entry)
