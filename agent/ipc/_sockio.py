"""Deadlines on a client's socket that measure the client, not the daemon.

A client that takes nothing of what is written to it for `timeout_s` is given up. The deadline cannot be one
timer around the whole write: a daemon that was stopped (SIGSTOP, a frozen VM, a swap storm) for longer than it
finds it passed when it runs again, although the client read on all the while. So the bytes are written here, with
how much went out known at every step, and a deadline that passed is checked against the kernel before it counts:
the socket has room now, or holds fewer unsent bytes than when the wait began (Linux's SIOCOUTQ), and the client
took data, so the write goes on under a new deadline. A client that reads a trickle is kept (its outbox bounds what
waits for it); one that reads nothing is not. Reading is the same: a client whose idle or hello deadline passed
while the daemon was stopped, but whose bytes wait in the socket (`readable`), did speak in time."""

from __future__ import annotations

import errno
import fcntl
import select
import socket
import struct
import termios

import anyio
import anyio.lowlevel

_OUTQ = getattr(termios, "TIOCOUTQ", None)
"""SIOCOUTQ on Linux: the bytes a socket holds that its peer has not taken."""


async def send_all(sock: socket.socket, data: bytes, timeout_s: float) -> bool:
    """Write `data` whole to the non-blocking `sock`. False when the client took none of it for `timeout_s` (then
    part of it may have gone out: the connection is unusable). OSError when the connection broke."""
    view = memoryview(data)
    while view:
        try:
            sent = sock.send(view)
        except BlockingIOError:
            if not await _progress(sock, timeout_s):
                return False
            continue
        view = view[sent:]
        await anyio.lowlevel.checkpoint()  # a client that reads fast does not keep the others waiting
    return True


async def _progress(sock: socket.socket, timeout_s: float) -> bool:
    """Wait until `sock` takes more; False when it took nothing for `timeout_s`, as the kernel tells it."""
    unsent = _unsent(sock)
    with anyio.move_on_after(timeout_s):
        await anyio.wait_writable(sock)
        return True
    if _writable(sock):
        return True
    now = _unsent(sock)
    return unsent is not None and now is not None and now < unsent


async def accept(listener: socket.socket) -> socket.socket:
    """The next connection of the non-blocking listening `listener`, non-blocking too. OSError as accept(2) fails
    (anyio's listener reports it as BrokenResourceError; the caller tells a passing failure from a lasting one), and
    EINVAL once the listener was shut down: accept(2) on a shut-down non-blocking listener says only EAGAIN while
    epoll reports it ready (hung up) for ever, which anyio's own accept loop turns into a busy loop. A readiness
    that accepts nothing for another reason waits a little longer each time, never spinning."""
    idle = 0
    while True:
        try:
            sock, _ = listener.accept()
        except BlockingIOError:
            if _hung_up(listener):
                raise OSError(errno.EINVAL, "the listening socket was shut down") from None
            if idle:
                await anyio.sleep(min(0.5, 0.001 * 2**idle))
            idle += 1
            await anyio.wait_readable(listener)
            continue
        sock.setblocking(False)
        return sock


def _hung_up(sock: socket.socket) -> bool:
    """The socket was shut down (a listener that can accept nothing more, and to which nobody can connect)."""
    return _ready(sock, select.POLLHUP | select.POLLRDHUP)


def readable(sock: socket.socket) -> bool:
    """Bytes (or the end of the stream) wait to be read now."""
    return _ready(sock, select.POLLIN)


def _writable(sock: socket.socket) -> bool:
    return _ready(sock, select.POLLOUT)


def _ready(sock: socket.socket, event: int) -> bool:
    try:
        poller = select.poll()
        poller.register(sock.fileno(), event)
        return any(events & event for _, events in poller.poll(0))
    except (OSError, ValueError):  # closed meanwhile
        return False


def _unsent(sock: socket.socket) -> int | None:
    if _OUTQ is None:
        return None
    try:
        raw = fcntl.ioctl(sock.fileno(), _OUTQ, b"\0" * 4)
    except OSError:
        return None
    return int(struct.unpack("i", raw)[0])
