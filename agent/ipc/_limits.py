"""What one client may cost the daemon. Every bound here is per connection except `max_connections`, so the
worst a hostile client can hold is one line buffer plus one outbox, and the daemon's memory stays bounded by
twice `max_connections` times that (connections closed to make room count until they are gone, at most
`goodbye_timeout_s` later)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

MiB = 1024 * 1024


class Limits(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    max_line_bytes: int = Field(default=1 * MiB, gt=0)
    """A request line longer than this (newline excluded) gets `too_large` and the connection is closed: its id
    cannot be read without reading all of it."""
    max_errors: int = Field(default=8, gt=0)
    """Protocol errors (bad JSON, not an object, unknown type, invalid fields, wrong version) one connection may
    make; the next error closes it with `too_many_errors`. Refusals by the session side do not count."""
    hello_timeout_s: float = Field(default=10.0, gt=0)
    """The first line must come within this; a connection that says nothing is closed (`hello_timeout`)."""
    max_connections: int = Field(default=64, gt=0)
    """Connections the daemon serves at once. When all are taken, a new one is let in by closing the one that has
    been idle longest among those that hold nothing (no hello yet, or attached to no session, and no request in
    hand; it gets `idle_timeout`); when none is idle so, the new one gets `too_many_connections` and is closed at
    once. Connections being closed still count against twice this bound, so that closing cannot be outrun."""
    max_held_per_peer: int = Field(default=16, gt=0)
    """Connections attached to a session that one client process (the peer's pid, SO_PEERCRED) may hold at once:
    an attach past it on another of its connections is refused (`too_many_attachments`, the connection stays), so
    that one client, by attaching on connection after connection, cannot hold every one of `max_connections`
    (attached ones are never closed to make room). Every peer is the daemon's own user, so a cap per uid would be
    the whole bound; one connection may attach to any number of sessions. Peers in another PID namespace (pid 0)
    cannot be told apart: together they hold at most this many."""
    idle_timeout_s: float = Field(default=60.0, gt=0)
    """A connection past its hello that holds nothing (attached to no session) and sends no whole line for this
    long is closed (`idle_timeout`); one attached to a session may stay silent as long as it likes."""
    outbox_max_bytes: int = Field(default=4 * MiB, gt=0)
    """Replies and pushes waiting for one client; a client that lets more pile up (it does not read) is
    disconnected. One message is always accepted into an empty outbox, whatever its size."""
    send_timeout_s: float = Field(default=10.0, gt=0)
    """A client that takes none of what is written to it for this long (its socket buffer stays full) is
    disconnected. Measured by the kernel, not by the daemon's clock alone: a daemon that was stopped longer than this
    keeps the clients that read meanwhile (_send.py)."""
    goodbye_timeout_s: float = Field(default=1.0, gt=0)
    """When the daemon stops, how long its clients get to take their last messages (the goodbye notice and what
    was queued) before their connections are closed: a client that does not read cannot hold the daemon's exit
    for a whole `send_timeout_s`."""
