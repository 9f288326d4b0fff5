"""Where `strata mcp serve --http HOST:PORT` listens: a loopback host (`127.0.0.1`, `localhost`, or IPv6 `[::1]`) and
a port from 1 to 65535, read from the flag (a UsageError naming what is wrong otherwise), and checked free before the
server starts, so a port in use, out of range or not a number is one line and a non-zero exit, never the HTTP
server's traceback."""

from __future__ import annotations

import contextlib
import errno
import re
import socket

from core.errors import StrataError, UsageError
from core.record import record

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
EXAMPLE = "127.0.0.1:8765, localhost:8765 or [::1]:8765"
_BRACKETED = re.compile(r"^\[(?P<host>::1)\]:(?P<port>.*)$")
_PORT = re.compile(r"^[0-9]{1,5}$")


@record
class ListenAddress:
    host: str
    """As the HTTP server takes it (an IPv6 address without brackets)."""
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_listen(text: str) -> ListenAddress:
    """The address `text` (HOST:PORT; the IPv6 host in brackets, `[::1]:8765`, or bare, `::1:8765`) names; UsageError
    when the host is not loopback or the port is not a number from 1 to 65535."""
    bracketed = _BRACKETED.match(text.strip())
    if bracketed is not None:
        host, raw = bracketed["host"], bracketed["port"]
    else:
        host, _, raw = text.strip().rpartition(":")
    if host.lower() not in LOOPBACK_HOSTS:
        raise UsageError(f"--http takes a loopback HOST:PORT such as {EXAMPLE} (got {text!r})")
    if not _PORT.match(raw) or not 1 <= int(raw) <= 65535:
        raise UsageError(f"--http's port must be a number from 1 to 65535, as in {EXAMPLE} (got {text!r})")
    return ListenAddress(host.lower(), int(raw))


def check_free(address: ListenAddress) -> None:
    """StrataError when the server could not listen at `address` (the port in use, the address not on this machine):
    a socket is bound there as the HTTP server binds its own (address reuse on), then closed. A process taking the
    port in between is told by the HTTP server's own one-line error."""
    try:
        infos = socket.getaddrinfo(address.host, address.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise StrataError(f"cannot listen on {address}: {exc.strerror}") from None
    for family, kind, proto, _, sockaddr in infos:
        with contextlib.closing(socket.socket(family, kind, proto)) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(sockaddr)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise StrataError(f"cannot listen on {address}: the port is in use (another process listens "
                                      "there; choose another port)") from None
                raise StrataError(f"cannot listen on {address}: {exc.strerror or exc}") from None
