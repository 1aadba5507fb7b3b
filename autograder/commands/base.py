"""What every verb of the command line is: a Command with a name, a summary, its arguments and `run`.

A command module imports only what parsing needs at its top (argparse, pathlib): the layer below is imported
inside `run`, so that `autograder grade` pays neither nbformat's import nor the build's.
"""
from __future__ import annotations

import argparse


def positive(kind):
    """An argparse type: a number of `kind` (int, float) above 0, else argparse's own one-line error."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{text} is not above 0")
        return value
    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


class Command:
    """One verb of the command line; its subclass is named in commands_dict and created once per run of the CLI."""
    name = ""
    summary = ""
    starts_workers = False  # runs student or reference code: restarted clean, with its own fork server

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Declare the verb's arguments on its subparser."""

    def run(self, args: argparse.Namespace) -> int:
        """Do the work; the exit status (0 success, 1 some failed, 2 a user error, 3 not final)."""
        raise NotImplementedError

    def assignment_to_preload(self, args: argparse.Namespace) -> str | None:
        """The assignment whose workers' modules the fork server may import while the command starts (a guess:
        autograder/recording.py modules_hint), or None."""
        return getattr(args, "assignment", None) if self.starts_workers else None
