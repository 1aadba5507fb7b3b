"""Every process the package starts, and where each one begins: the process map.

    autograder VERB ...            (console script: command_line)
      |  a verb that starts workers restarts itself clean: same interpreter, an environment of a few
      |  harmless variables (sandbox/environment.py); argv and the caller's environment travel in a memfd
      v
    python -P -m autograder.entrypoints command FD               (resumed_command)
      |-- fork -> fork server  (sandbox/forkserver_loop.py serve_fork_server; forked first thing, before FD is read:
      |             it never holds the caller's environment or argv; "the zygote")
      |             |-- fork -> worker (sandbox/worker.py run_worker): confines itself, runs student or reference code
      |-- python -m autograder.entrypoints probe CONFIG           (sandbox/isolation.py probe_confinement: the preflight
      |                                                            builds the confinement once, no student code)
      |-- python -m autograder.entrypoints pool                   (grading/pool.py serve: --jobs N, one per job)
              |-- fork -> its own fork server -> workers, as above

    python -m autograder.entrypoints fork-server FD JUDGE_PID     a fork server started as a new interpreter
                                                                  (a judge that was not started as a command)
    python -m autograder.entrypoints worker CONFIG                a worker as a new interpreter
                                                                  (AUTOGRADER_FORK_SERVER=0)
    python -m autograder.entrypoints gradescope run ...           Gradescope's run_autograder
                                                                  (export/gradescope.py main)

What ends each process, so that nothing outlives the command:
- fork server: its parent-death signal (SIGKILL when the process that started it ends: forkserver_loop.serve_fork_server);
- worker and probe: their parent-death signal, set again after they change credentials (isolation.py);
- grading process (pool): the end of its input, which the run closes, or the kernel closes when the run dies
  (grading/pool.py serve returns at EOF); the run kills it too when it stops;
- Chromium (`autograder report --png`): a child of the command, waited for with a timeout (reports/html.py);
- `autograder review`'s server: it is the command process itself (uvicorn in it), no child.
Signals that stop a
command (Ctrl-C, SIGTERM, SIGHUP) are the command process's to act on: it stops in order (cli.stopped_by_signals) and
ends the processes under it; fork servers and grading processes ignore them, which a group-wide signal (`timeout`,
systemd, a terminal) would otherwise end halfway; workers have them as a new interpreter does. This module is the
top of the package: it may import anything (inside the role that needs it, so a worker imports only a worker's
code); nothing imports it. Lower layers start these processes by role name (environment.python_command).
"""
from __future__ import annotations

import json
import os
import sys


def command_line(argv: list[str] | None = None) -> int:
    """The `autograder` command. From a shell (argv None), a verb that starts workers restarts itself clean
    first (restart_clean); called with `argv` (tests, a notebook) it runs in this process."""
    from autograder import cli
    from autograder.sandbox import fork_server_enabled

    command, args = cli.parse(argv)
    if command.starts_workers and argv is None and fork_server_enabled():
        restart_clean(sys.argv[1:])  # does not return, unless the restart cannot be done
    return _run_command(command, args, restarted=False)


def restart_clean(argv: list[str]) -> None:
    """Start this command again as a process whose command line and environment hold nothing of the caller's:
    both travel through an in-memory file that the new process reads only after it has forked its fork server
    (resumed_command). So the fork server, and every worker forked from it, has never held the caller's
    environment (tokens, keys) or command line (the paths of the submissions). Returns only if it could not."""
    from autograder.sandbox import python_command, start_environment

    try:
        fd = os.memfd_create("autograder-command", 0)  # not inherited by a fork server: it closes every descriptor
        os.write(fd, json.dumps({"argv": list(argv), "env": dict(os.environ)}).encode())
        os.lseek(fd, 0, os.SEEK_SET)
        command = python_command("command", str(fd), isolated=True)
        os.execve(command[0], command, start_environment())
    except OSError:
        return


def resumed_command(fd: int) -> None:
    """In the process restart_clean started: fork the fork server first, then read the command line and the
    environment, restore the environment, run the command. Ends the process without the interpreter's teardown
    of torch (half a second): everything it wrote is closed."""
    from autograder import cli
    from autograder.sandbox import adopt_environment, fork_zygote

    fork_zygote()
    with os.fdopen(fd, "rb") as fh:
        saved = json.loads(fh.read())
    adopt_environment(saved["env"])
    sys.argv = ["autograder", *saved["argv"]]
    code = 1
    try:
        code = _run_command(*cli.parse(saved["argv"]), restarted=True)
    except KeyboardInterrupt as interrupt:  # Ctrl-C or SIGTERM while the arguments are parsed
        code = cli.say_interrupted(interrupt)
    except SystemExit as exc:  # argparse's
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - report, then leave without running the server's loop
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


class _PipeSafe:
    """A standard stream that outlives its reader: once the pipe it writes into is closed (`... | head -1`, a
    pager quit), what follows goes to /dev/null and the command goes on. A grading run never stops because nobody
    reads its progress."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._to_null()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._to_null()
            self._stream.flush()  # what was buffered goes to /dev/null now

    def _to_null(self) -> None:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, self._stream.fileno())
        os.close(null)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _outlive_closed_pipes() -> None:
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, _PipeSafe):
            try:
                stream.fileno()
            except (OSError, ValueError, AttributeError):  # not a file (a notebook's, a test's capture)
                continue
            setattr(sys, name, _PipeSafe(stream))


def _run_command(command, args, restarted: bool) -> int:
    """Run a parsed command; one that starts workers gets its fork server early and ends it when done. SIGTERM and
    SIGHUP stop it as Ctrl-C does, wherever they come (cli.stopped_by_signals): the signal reaches this process
    (Kubernetes and `kill` send it here only; `timeout`, systemd and a closed terminal to its children too, which
    leave it to this one: the fork servers and grading processes ignore them as they ignore Ctrl-C), which stops
    its grading processes and fork server, whose workers follow (parent-death signals)."""
    from autograder import cli

    _outlive_closed_pipes()
    with cli.stopped_by_signals():
        try:
            return _run_verb(command, args, restarted)
        except KeyboardInterrupt as interrupt:  # before or after the verb's own run (which reports its own)
            return cli.say_interrupted(interrupt)


def _run_verb(command, args, restarted: bool) -> int:
    from autograder import cli

    if not command.starts_workers:
        return cli.run(command, args)
    from autograder.recording import modules_hint
    from autograder.sandbox import preload_modules, shutdown_fork_server, start_fork_server_early

    if not restarted:
        start_fork_server_early()  # in a process that is not a clean command: its torch import beside ours
    assignment = command.assignment_to_preload(args)
    if assignment:  # the fork server imports what the workers will need while this process goes on
        preload_modules(modules_hint(assignment), wait=False)
    try:
        return cli.run(command, args)
    finally:  # the command is done: its fork server and the workers it started end with it
        shutdown_fork_server()


def _fork_server(fd: str, judge_pid: str) -> None:
    from autograder.sandbox import serve_fork_server

    serve_fork_server(int(fd), int(judge_pid))


def _worker(config: str) -> None:
    from autograder.sandbox import run_worker

    run_worker(config)


def _probe(config: str) -> None:
    from autograder.sandbox import probe_confinement

    probe_confinement(config)


def _pool() -> None:
    from autograder.grading.pool import serve

    serve()


def _gradescope(*argv: str) -> None:
    from autograder.export.gradescope import main

    sys.exit(main(list(argv)))


ROLES = {"command": lambda fd: resumed_command(int(fd)), "fork-server": _fork_server, "worker": _worker,
         "probe": _probe, "pool": _pool, "gradescope": _gradescope}


def main(argv: list[str]) -> None:
    """`python -m autograder.entrypoints ROLE ARGS...`"""
    if not argv or argv[0] not in ROLES:
        sys.exit(f"usage: python -m autograder.entrypoints {{{','.join(ROLES)}}} ARGS...")
    ROLES[argv[0]](*argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
