"""The sandbox's public face: everything outside autograder/sandbox/ imports sandbox names from here, and only
from here (`from autograder.sandbox import WorkerProcess`); tools/imports.py refuses an import of a submodule from
outside (FACES there), and tests/test_layers.py runs it. The process map (autograder/entrypoints.py) starts each
kind of process at its entry function here: run_worker, serve_fork_server, probe_confinement.

Names load lazily (PEP 562 `__getattr__`, from the submodule _WHERE names): a worker and the fork server import
this package first, and must not pay for the judge's side (client, cgroups...) by doing so. The TYPE_CHECKING
imports give type checkers the same names.

- Workers, judge side: WorkerProcess (one worker: load definitions, send requests, answer its calls; restarted
  after a failure), WorkerSpec (what it loads and how it is confined), LoadReport.
- What a request can end in: WorkerError (WorkerTimeout, WorkerDied, SystemFault: never a student's score),
  StudentError (the student's code raised), MissingName, TrippedCall; Hang (a request that did not finish) and
  StopCause (why a worker ended).
- Objects that stay in a worker: Remote and its helpers (keep, remote_*), Handle.
- Confinement: Confinement, level_of; the ladder that picks a mechanism (choose, Choice, describe_choice,
  ConfinementUnavailable).
- Where processes begin: run_worker (a worker), serve_fork_server (the fork server), probe_confinement (the
  preflight's probe).
- Processes: the fork server (start_fork_server_early, preload_modules, shutdown_fork_server, fork_zygote, Child), the workers' environment (python_command,
  start_environment, adopt_environment, worker_environment, fork_server_enabled), the run's memory cgroups
  (run_memory_groups, current_run_group, use_run_group, joined_run_group).
- A notebook's folder and what a check undid: NotebookFolder, environment_set, undone_after.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autograder.sandbox.client import LoadReport, WorkerProcess
    from autograder.sandbox.lifecycle import WorkerSpec
    from autograder.sandbox.faults import (
        MissingName, StudentError, SystemFault, TrippedCall, WorkerDied, WorkerError, WorkerTimeout,
    )
    from autograder.sandbox.diagnosis import (
        Hang, StopCause,
    )
    from autograder.sandbox.remote import (
        HELPERS_LABEL, PROTOCOL_METHODS, Remote, keep, proxy_class, remote_attr, remote_isinstance, remote_items,
        remote_repr, remote_type,
    )
    from autograder.sandbox.protocol import (
        Handle,
    )
    from autograder.sandbox.changes import (
        undone_after,
    )
    from autograder.sandbox.workdir import (
        NotebookFolder, environment_set,
    )
    from autograder.sandbox.isolation import (
        Confinement, level_of, probe_confinement,
    )
    from autograder.sandbox.ladder import (
        Choice, ConfinementUnavailable, choose, describe_choice,
    )
    from autograder.sandbox.environment import (
        adopt_environment, fork_server_enabled, python_command, start_environment, worker_environment,
    )
    from autograder.sandbox.forkserver import (
        Child, fork_zygote, preload_modules, shutdown_fork_server, start_fork_server_early,
    )
    from autograder.sandbox.forkserver_loop import serve_fork_server
    from autograder.sandbox.worker import run_worker
    from autograder.sandbox.cgroups import (
        current_run_group, joined_run_group, run_memory_groups, use_run_group,
    )

_WHERE = {  # name -> the submodule that defines it
    "LoadReport": "client",
    "WorkerProcess": "client",
    "WorkerSpec": "lifecycle",
    "MissingName": "faults",
    "StudentError": "faults",
    "SystemFault": "faults",
    "TrippedCall": "faults",
    "WorkerDied": "faults",
    "WorkerError": "faults",
    "WorkerTimeout": "faults",
    "Hang": "diagnosis",
    "StopCause": "diagnosis",
    "HELPERS_LABEL": "remote",
    "PROTOCOL_METHODS": "remote",
    "Remote": "remote",
    "keep": "remote",
    "proxy_class": "remote",
    "remote_attr": "remote",
    "remote_isinstance": "remote",
    "remote_items": "remote",
    "remote_repr": "remote",
    "remote_type": "remote",
    "Handle": "protocol",
    "undone_after": "changes",
    "NotebookFolder": "workdir",
    "environment_set": "workdir",
    "Confinement": "isolation",
    "level_of": "isolation",
    "probe_confinement": "isolation",
    "Choice": "ladder",
    "ConfinementUnavailable": "ladder",
    "choose": "ladder",
    "describe_choice": "ladder",
    "adopt_environment": "environment",
    "fork_server_enabled": "environment",
    "python_command": "environment",
    "start_environment": "environment",
    "worker_environment": "environment",
    "Child": "forkserver",
    "fork_zygote": "forkserver",
    "preload_modules": "forkserver",
    "shutdown_fork_server": "forkserver",
    "start_fork_server_early": "forkserver",
    "serve_fork_server": "forkserver_loop",
    "run_worker": "worker",
    "current_run_group": "cgroups",
    "joined_run_group": "cgroups",
    "run_memory_groups": "cgroups",
    "use_run_group": "cgroups",
}

__all__ = [
    "Child", "Choice", "Confinement", "ConfinementUnavailable", "HELPERS_LABEL", "Handle", "Hang", "LoadReport",
    "MissingName", "NotebookFolder", "PROTOCOL_METHODS", "Remote", "StopCause", "StudentError", "SystemFault",
    "TrippedCall", "WorkerDied", "WorkerError", "WorkerProcess", "WorkerSpec", "WorkerTimeout",
    "adopt_environment", "choose", "current_run_group", "describe_choice", "environment_set",
    "fork_server_enabled", "fork_zygote", "joined_run_group", "keep", "level_of", "preload_modules",
    "proxy_class", "python_command", "remote_attr", "remote_isinstance", "remote_items", "remote_repr",
    "remote_type", "run_memory_groups", "start_environment", "undone_after", "use_run_group", "worker_environment",
    "probe_confinement", "run_worker", "serve_fork_server", "shutdown_fork_server", "start_fork_server_early",
]


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # the next lookup is a plain one
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
