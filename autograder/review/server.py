"""Serving the review page: uvicorn (a production ASGI server) on a socket this module binds, so that `--port 0`
gets a free port and the address printed is the one served.

Access tokens: without `--graders`, one random token (the person who ran the command); with it, the file's
graders, one per line `name token` (a token of at least 16 characters; blank lines and `#` comments skipped), each
change recorded under its grader's name. Listening on anything but the loopback needs a graders file.
"""
from __future__ import annotations

import ipaddress
import secrets
import socket
from pathlib import Path

from autograder.errors import UserError


class ReviewError(UserError):
    """A review that cannot start: no results, a bad graders file, an address that cannot be listened on or needs
    tokens."""

    pass


def read_graders(path: Path) -> dict[str, str]:
    """token -> name, from a graders file."""
    graders: dict[str, str] = {}
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2 or len(parts[1]) < 16:
            raise ReviewError(f"{path}: line {n}: write `name token`, the token 16 characters or more")
        if parts[1] in graders:
            raise ReviewError(f"{path}: line {n}: this token is also {graders[parts[1]]}'s")
        graders[parts[1]] = parts[0]
    if not graders:
        raise ReviewError(f"{path}: no grader in it (a line `name token` each)")
    return graders


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback address (or "localhost"): served to this machine only."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def access(host: str, graders_file: str | None) -> tuple[dict[str, str], bool]:
    """(token -> grader, whether the tokens were made here and are to be printed)."""
    if graders_file:
        return read_graders(Path(graders_file)), False
    if not is_loopback(host):
        raise ReviewError(f"--host {host} serves other machines: give each grader a token with --graders FILE")
    return {secrets.token_urlsafe(24): "instructor"}, True


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on (host, port); port 0 takes a free one. ReviewError when it cannot bind."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ReviewError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(64)
    return sock


def address(sock: socket.socket, host: str) -> str:
    """The URL the socket serves (its real port, an IPv6 host in brackets)."""
    port = sock.getsockname()[1]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def serve(app, sock: socket.socket) -> None:
    """Run the application on the bound socket with uvicorn until the server is stopped (Ctrl-C, SIGTERM)."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False))
    server.run(sockets=[sock])
