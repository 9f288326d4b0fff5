"""Who is on the other end of a Unix socket: the kernel's record of the peer's pid, uid and gid at connect time
(SO_PEERCRED), which the peer cannot forge. The daemon serves only its own user."""

from __future__ import annotations

import os
import socket
import struct

from core.record import record

_UCRED = struct.Struct("3i")
UNSEEN_PID = 0
"""The pid SO_PEERCRED gives for a peer outside the daemon's PID namespace (a daemon in a container, its socket
shared with the host): the kernel cannot name that process here. Such peers are told apart by nothing, so they
share one per-client cap (agent/ipc/_server.py)."""


@record
class PeerCredentials:
    pid: int
    uid: int
    gid: int


def peer_credentials(sock: socket.socket) -> PeerCredentials | None:
    """The connected peer's credentials, or None where the kernel does not tell (then the peer is refused)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, option, _UCRED.size)
    except OSError:
        return None
    pid, uid, gid = _UCRED.unpack(raw)
    return PeerCredentials(pid=pid, uid=uid, gid=gid)


def same_user(peer: PeerCredentials | None) -> bool:
    """Only the daemon's own (effective) uid. Root is not let in to a user's daemon: it can read the home
    anyway, but it would drive sessions as that user."""
    return peer is not None and peer.uid == os.geteuid()
