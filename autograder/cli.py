"""The `autograder` command line: a parser built from the verb registry (autograder/commands/), and dispatch.

`main(argv)` parses and runs one verb in this process; errors that are the user's to fix print one line and exit
2, never a traceback. A write the machine's storage refuses (no space, quota, a file system turned read-only),
wherever the command meets it, is one line and exit 4. Ctrl-C, SIGTERM and SIGHUP stop a command the same orderly
way (`stopped_by_signals`): one line, exit 128 + the signal's number (130, 143, 129). How the command's process is
started, restarted clean and ended with its fork server is autograder/entrypoints.py's (`command_line`, the console
script).
"""
from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

from autograder.commands import Command, commands_dict, create_command
from autograder.files import DiskFull, storage_failure

# what `timeout`, systemd, Kubernetes, a CI cancel and Gradescope send (SIGTERM), and a closed terminal (SIGHUP)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised in the main thread where the command is: a KeyboardInterrupt, so that it takes
    Ctrl-C's path (every `finally` and `except BaseException` on the way: workers and grading processes stopped,
    the tables written whole, staged copies removed, the --out lock released); the command then exits
    128 + its number, as a shell reports a process ended by that signal."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def stopped_by_signals() -> Iterator[None]:
    """While the command runs, SIGTERM and SIGHUP raise Terminated. Once: the same signals coming again while it stops
    are ignored, so that the stop is not cut short halfway (a table half written is the one thing it must not leave).
    A signal the caller ignores stays ignored (`nohup` means it); outside the main thread nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.getsignal(s) for s in STOP_SIGNALS}

    def stop(signum: int, frame) -> None:
        for s in STOP_SIGNALS:
            if before[s] is not signal.SIG_IGN:
                signal.signal(s, signal.SIG_IGN)
        raise Terminated(signum)

    for s, handler in before.items():
        if handler is not signal.SIG_IGN:
            signal.signal(s, stop)
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)


def exit_code_of(interrupt: KeyboardInterrupt) -> int:
    """128 + the signal: 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP."""
    return 128 + (interrupt.signum if isinstance(interrupt, Terminated) else signal.SIGINT)


def say_interrupted(interrupt: KeyboardInterrupt) -> int:
    """The one line of a command stopped by a signal; its exit code."""
    name = signal.Signals(interrupt.signum).name if isinstance(interrupt, Terminated) else "Ctrl-C (SIGINT)"
    print(f"interrupted by {name}; results written so far are kept: run the same command again to go on",
          file=sys.stderr, flush=True)
    return exit_code_of(interrupt)


def _user_errors() -> tuple:
    """Errors that are the user's to fix: a message, no traceback (every project error of that kind subclasses
    autograder.errors.UserError), and a path given on the command line that is missing, a file where a folder goes,
    a folder that cannot be written."""
    from autograder.errors import UserError

    return (UserError, FileNotFoundError, FileExistsError, NotADirectoryError, IsADirectoryError, PermissionError)


def parser() -> argparse.ArgumentParser:
    """The `autograder` argument parser: one subcommand per entry of commands_dict, each command created to declare
    its arguments."""
    p = argparse.ArgumentParser(prog="autograder", description="Build, verify and grade notebook assignments.")
    sub = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    for name in commands_dict:
        command = create_command(name)
        verb = sub.add_parser(name, help=command.summary, description=command.summary)
        command.add_arguments(verb)
        verb.set_defaults(command=command)
    return p


def parse(argv: list[str] | None) -> tuple[Command, argparse.Namespace]:
    """The command and its arguments (argparse exits with its message on bad ones, and on --help)."""
    args = parser().parse_args(argv)
    return args.command, args


def run(command: Command, args: argparse.Namespace) -> int:
    """Run `command` and return its exit code: a user error is one line and 2; an interruption or a full disk is
    one line and its own code (say_interrupted, say_disk_full). Anything else propagates: it is the grader's fault."""
    try:
        return command.run(args)
    except KeyboardInterrupt as interrupt:  # Ctrl-C, or SIGTERM / SIGHUP (Terminated); first: the clause below
        return say_interrupted(interrupt)  # imports the build's modules (seconds) to name the errors it catches
    except _user_errors() as exc:
        print(f"error: {_said(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:  # DiskFull, or a raw OSError of a write the storage refused, wherever it was met
        full = storage_failure(exc)
        if full is None:
            raise
        return say_disk_full(full)


def say_disk_full(full: DiskFull) -> int:
    """The one line of a write the storage refused; exit code 4."""
    print(f"error: {full.strerror}. Results written so far are kept: {full.remedy}, then run the same command again "
          "to go on.", file=sys.stderr, flush=True)
    return 4


def _said(exc: Exception) -> str:
    """An error in one line: an OS error about a path as `path: what` (not `[Errno 17] File exists: 'path'`)."""
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    return str(exc)


def main(argv: list[str] | None = None) -> int:
    """Parse `argv` (default: sys.argv[1:]) and run the verb here, in this process."""
    return run(*parse(argv))
