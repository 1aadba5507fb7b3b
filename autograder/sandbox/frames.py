"""Length-framed JSON messages over a stream socket, file descriptors riding along: how a judge process and
its fork server talk (autograder/sandbox/forkserver.py and forkserver_loop.py). The worker protocol is
another (protocol.py): it carries tensors and is read by confined, untrusted code."""
from __future__ import annotations

import json
import socket
import struct
from collections.abc import Sequence

FRAME = struct.Struct("<Q")


def send_frame(sock: socket.socket, data: dict, fds: Sequence[int] = ()) -> None:
    """Send `data` as one length-framed JSON message, the descriptors `fds` passed with it (SCM_RIGHTS)."""
    payload = json.dumps(data).encode()
    blob = FRAME.pack(len(payload)) + payload
    if fds:
        socket.send_fds(sock, [blob], list(fds))
    else:
        sock.sendall(blob)


class Channel:
    """Length-framed JSON messages over a stream socket, file descriptors riding along."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = b""
        self.fds: list[int] = []

    def buffered(self) -> bool:
        """A whole frame is already read (requests sent back to back arrive in one read)."""
        return len(self.buf) >= 8 and len(self.buf) >= 8 + FRAME.unpack(self.buf[:8])[0]

    def recv(self) -> dict:
        """The next frame. Descriptors are kept as they arrive (a spawn's come with its frame, which may be
        read together with the frames sent before it): take them with take_fds."""
        while True:
            if self.buffered():
                (n,) = FRAME.unpack(self.buf[:8])
                payload, self.buf = self.buf[8:8 + n], self.buf[8 + n:]
                return json.loads(payload)
            data, fds, _, _ = socket.recv_fds(self.sock, 65536, 16)
            self.fds += fds
            if not data:
                raise EOFError("fork server channel closed")
            self.buf += data

    def take_fds(self, n: int) -> list[int]:
        """The first `n` descriptors received and not yet taken, in order of arrival (fewer where fewer came)."""
        fds, self.fds = self.fds[:n], self.fds[n:]
        return fds
