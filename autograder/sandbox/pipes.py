"""The judge's ends of a worker's channel: requests go out on one pipe, replies come back on the other, each
message framed as protocol.write_message frames it. Reading never blocks past a deadline and never buffers more
than one check may receive (MAX_CHECK_BYTES); writing goes out whole or stops at the request's deadline (a worker
that stops reading its requests never blocks the judge)."""
from __future__ import annotations

import os
import select
import struct
import time
from typing import BinaryIO

from autograder.sandbox.protocol import MAX_BLOB_BYTES, MAX_HEADER_BYTES, ProtocolError, decode_message

MAX_CHECK_BYTES = 512 << 20  # what one check may receive from a worker, in total (Replies.check_bytes)
# a header's JSON becomes up to some 36 times its size in Python objects (`[[{}]],` is 7 bytes, two lists, a dict and
# a slot 248): counted 40 times, what one check receives stays under MAX_CHECK_BYTES of the judge's memory
HEADER_WEIGHT = 40
PIPE_BYTES = 1 << 20  # the channel's pipes hold this much: a large tensor crosses in a few writes, not hundreds
_IOV_MAX = 1024  # buffers one writev takes (Linux's UIO_MAXIOV)


class OverBudget(ProtocolError):
    """A worker sent more than MAX_CHECK_BYTES during one check."""


class Replies:
    """The worker's replies, read in the calling thread with a deadline (no reader thread: one less
    thread hand-off per request). A reply is framed as protocol.write_message frames it; lengths
    over the protocol's limits are refused before anything is buffered. A frame's tensor data is read
    straight into the buffer its tensors then use (no copy on the judge's side)."""

    def __init__(self, fd: int):
        self.fd = fd
        os.set_blocking(fd, False)
        self.buf = bytearray()  # bytes read and not yet part of a message
        self.head: bytes | None = None  # the current frame's header, once read
        self.blob: bytearray | None = None  # its tensor data, filled up to self.got
        self.got = 0
        self.check_bytes = 0  # received since the current check began (WorkerProcess.start_check resets it)
        self.closed = False
        self.poller = select.poll()
        self.poller.register(fd, select.POLLIN)

    def _message(self):
        """The first frame as a message, once it is all read; else None."""
        if self.head is None:
            if len(self.buf) < 8:
                return None
            (n_head,) = struct.unpack_from("<Q", self.buf, 0)
            if n_head > MAX_HEADER_BYTES:
                raise ProtocolError(f"message header of {n_head} bytes is over the limit")
            if len(self.buf) < 16 + n_head:
                return None
            (n_blob,) = struct.unpack_from("<Q", self.buf, 8 + n_head)
            if n_blob > MAX_BLOB_BYTES:
                raise ProtocolError(f"message of {n_blob} bytes is over the limit")
            self.check_bytes += 16 + HEADER_WEIGHT * n_head + n_blob
            if self.check_bytes > MAX_CHECK_BYTES:  # before its data is read: the judge never holds it
                raise OverBudget(f"{self.check_bytes} bytes in one check")
            take = min(n_blob, len(self.buf) - 16 - n_head)
            self.head = bytes(self.buf[8:8 + n_head])
            self.blob = bytearray(n_blob)
            self.blob[:take] = self.buf[16 + n_head:16 + n_head + take]
            self.got = take
            del self.buf[:16 + n_head + take]
        assert self.blob is not None  # set with self.head, above or by an earlier call
        if self.got < len(self.blob):
            return None
        head, blob, self.head, self.blob = self.head, self.blob, None, None
        return decode_message(head, blob)

    def _read(self) -> bool:
        """Read what the pipe holds: into the current frame's tensor data, or the buffer. False at its end."""
        if self.blob is not None:
            with memoryview(self.blob) as view:
                n = os.readv(self.fd, [view[self.got:]])
            self.got += n
            return n > 0
        chunk = os.read(self.fd, 65536)
        self.buf += chunk
        return bool(chunk)

    def get(self, deadline: float):
        """(header, tensors); an EOFError or ProtocolError instance when the channel ended or carried
        garbage; None at the deadline."""
        while True:
            try:
                message = self._message()
                if message is not None:
                    return message
            except (ProtocolError, EOFError, ValueError) as exc:
                return exc if isinstance(exc, (ProtocolError, EOFError)) else ProtocolError(str(exc))
            if self.closed:
                return EOFError("the worker closed the channel")
            wait = None if deadline == float("inf") else max(0.0, deadline - time.monotonic()) * 1000
            try:
                if not self.poller.poll(wait):
                    return None
            except (OSError, ValueError) as exc:
                return EOFError(str(exc))
            try:
                self.closed = not self._read()
            except BlockingIOError:
                continue
            except OSError as exc:
                return EOFError(str(exc))

    def close(self) -> None:
        """Close the read end of the worker's replies (already closed: nothing)."""
        try:
            os.close(self.fd)
        except OSError:
            pass


class Pipes:
    """A worker's channel, the judge's ends: `stdin` its requests are written to (non-blocking: written by the
    request's deadline), `replies` read from."""

    def __init__(self, w_in: int, r_out: int):
        os.set_blocking(w_in, False)  # written by write_all, by the request's deadline
        self.stdin: BinaryIO = os.fdopen(w_in, "wb")
        self.replies = Replies(r_out)

    def fds(self) -> tuple[int, int]:
        """The judge's two descriptors (requests' write end, replies' read end): what tells a process holding the
        channel (client.WorkerProcess.sweep_forked compares their files)."""
        return self.stdin.fileno(), self.replies.fd

    def close(self) -> None:
        """Close the judge's ends of both pipes; a worker still reading then sees EOF and ends."""
        for end in (self.stdin, self.replies):
            try:
                end.close()
            except OSError:
                pass


def write_all(fd: int, views: list[memoryview], deadline: float) -> bool:
    """Write `views` whole, as far as the pipe takes them each time; False when the deadline passed first (the
    reader stopped reading)."""
    while views:
        try:
            written = os.writev(fd, views[:_IOV_MAX])
        except BlockingIOError:
            written = 0
        if written:
            views = _after(views, written)
            continue
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([], [fd], [], None if left == float("inf") else left)[1]:
            return False
    return True


def _after(views: list[memoryview], n: int) -> list[memoryview]:
    """What is left of `views` once their first `n` bytes are written."""
    while views and n >= views[0].nbytes:
        n -= views[0].nbytes
        views = views[1:]
    return [views[0][n:], *views[1:]] if views and n else views


def widen_pipe(fd: int) -> None:
    """Make the pipe's buffer PIPE_BYTES where the system allows (fewer wake-ups for large messages); otherwise leave
    it."""
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (OSError, AttributeError, ImportError):
        pass  # the system's limit is lower (fs.pipe-max-size): the default size works, with more wake-ups
