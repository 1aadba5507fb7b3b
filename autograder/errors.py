"""The one base of the errors that are the user's to fix (pip's PipError): the command line prints their message
in one line, no traceback, and exits 2. Each layer's own error (a malformed marker, a stale release, a busy results
folder) subclasses it beside the built-in error it has always been (ValueError, RuntimeError), so code that catches
those keeps working."""
from __future__ import annotations


class UserError(Exception):
    """Something the person running the command can fix: say what, and how, in the message."""
