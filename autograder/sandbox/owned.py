"""The worker's end of its channel to the judge, usable by the worker's own process only.

A process forked from the worker inherits the channel's descriptors and the worker's Python objects. `os.fork`
children lose the descriptors at once (isolation.py: the severed channel); a fork that bypasses Python's fork hooks
(`ctypes.CDLL(None).fork()`, `syscall(SYS_clone, ...)`) keeps them. Such a child runs on in the worker's code: the
student function returns (or raises SystemExit) into the request loop, which would reply, or read the judge's next
request; its interpreter's shutdown would flush a buffered half message. Every read and write of the channel goes
through `OwnedPipe`, which compares the calling process with the worker's: a child that reaches it exits at once
(status 0), before a byte moves. What a child does with the descriptors directly (os.write, os.read) is beyond
this module: the judge kills such children when a check ends (client.WorkerProcess.sweep_forked) and charges
what they did to the check in which they did it.
"""
from __future__ import annotations

import io
import os

FORKED_CHILD_EXIT = 0  # what a forked child that reaches the channel exits with: it never answers the judge


class OwnedPipe(io.RawIOBase):
    """A raw, unbuffered file over one descriptor that only the process that made it may read or write."""

    def __init__(self, fd: int, owner: int, readable: bool):
        super().__init__()
        self.fd, self.owner, self._readable = fd, owner, readable

    def _owned(self) -> None:
        if os.getpid() != self.owner:
            os._exit(FORKED_CHILD_EXIT)

    def readable(self) -> bool:
        return self._readable

    def writable(self) -> bool:
        return not self._readable

    def fileno(self) -> int:
        return self.fd

    def readinto(self, buffer) -> int:
        self._owned()
        return os.readv(self.fd, [buffer])  # straight into the reader's buffer (or a tensor blob's)

    def write(self, data) -> int:
        self._owned()
        return os.write(self.fd, data)

    def close(self) -> None:
        if not self.closed and os.getpid() == self.owner:
            os.close(self.fd)  # a child closing its copy at shutdown: harmless, but left to the kernel
        super().close()


def owned_channel(fd_in: int, fd_out: int) -> tuple[io.BufferedReader, io.BufferedWriter]:
    """Buffered streams over the channel's two descriptors, for the calling process only."""
    owner = os.getpid()
    return (io.BufferedReader(OwnedPipe(fd_in, owner, readable=True)),
            io.BufferedWriter(OwnedPipe(fd_out, owner, readable=False)))
