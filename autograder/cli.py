"""The `autograder` command line: a parser built from the verb registry (autograder/commands/), and dispatch.

`main(argv)` parses and runs one verb in this process; errors that are the user's to fix print one line and exit
2, never a traceback. How the command's process is started, restarted clean and ended with its fork server is
autograder/entrypoints.py's (`command_line`, the console script).
"""
from __future__ import annotations

import argparse
import sys

from autograder.commands import Command, commands_dict, create_command
from autograder.files import DiskFull


def _user_errors() -> tuple:
    """Errors that are the user's to fix: a message, no traceback (every project error of that kind subclasses
    autograder.errors.UserError), and a path given on the command line that is missing, a file where a folder goes,
    a folder that cannot be written."""
    from autograder.errors import UserError

    return (UserError, FileNotFoundError, FileExistsError, NotADirectoryError, IsADirectoryError, PermissionError)


def parser() -> argparse.ArgumentParser:
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
    try:
        return command.run(args)
    except _user_errors() as exc:
        print(f"error: {_said(exc)}", file=sys.stderr)
        return 2
    except DiskFull as exc:
        print(f"error: {exc.strerror}. Results written so far are kept: free some space and run the same command "
              "again to go on.", file=sys.stderr)
        return 4
    except KeyboardInterrupt:
        print("interrupted; results written so far are kept", file=sys.stderr)
        return 130


def _said(exc: Exception) -> str:
    """An error in one line: an OS error about a path as `path: what` (not `[Errno 17] File exists: 'path'`)."""
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    return str(exc)


def main(argv: list[str] | None = None) -> int:
    """Parse `argv` (default: sys.argv[1:]) and run the verb here, in this process."""
    return run(*parse(argv))
