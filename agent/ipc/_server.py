"""The daemon's listening side: one Unix socket per Strata home, every connection a task in one task group.

`IpcServer.open` claims the home (the daemon lock, see _endpoint.py) and publishes the socket; `serve` accepts
until `stop` (or cancellation), checking each peer's uid with SO_PEERCRED before reading a byte from it; leaving
`open`'s context closes every connection, removes the socket and frees the lock."""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
import structlog
from anyio.abc import SocketAttribute, SocketListener, SocketStream, TaskStatus, UNIXSocketStream

from agent.ipc._connection import ClientConnection, Dispatcher
from agent.ipc._endpoint import (
    DaemonLock,
    DaemonPaths,
    acquire_lock,
    daemon_paths,
    prepare_socket_path,
    publish_socket,
    remove_socket,
)
from agent.ipc._errors import SocketUnusable
from agent.ipc._limits import Limits
from agent.ipc._messages import Attach, ErrorCode, ErrorReply, Notice, encode
from agent.ipc._peer import UNSEEN_PID, peer_credentials, same_user
from agent.ipc._sockio import accept
from observability.counted_log import CountedLog

_log = structlog.get_logger("strata.ipc")

TRANSIENT_ACCEPT_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM, errno.ECONNABORTED,
                                     errno.EINTR, errno.EPROTO, errno.EPERM})
"""Why an accept may fail while the listener is fine: out of descriptors or memory, a peer gone before it was
taken, a security module's refusal. anyio reports them as BrokenResourceError, which is not a closed listener."""


class IpcServer:
    def __init__(self, paths: DaemonPaths, listener: SocketListener, dispatcher: Dispatcher, limits: Limits,
                 server_name: str, on_failure: Callable[[str], None] | None = None) -> None:
        self.paths = paths
        self._on_failure = on_failure
        self.failure: str | None = None
        """Why the listener failed for good (None: it did not); see `open`'s `on_failure`."""
        self._listener = listener
        self._raw_listener: socket.socket = listener.extra(SocketAttribute.raw_socket)
        """Accepted from by `accept` (_sockio.py), not by anyio's loop: see there why."""
        self._dispatcher = dispatcher
        self._limits = limits
        self._server_name = server_name
        self._pid = os.getpid()
        self._ids = itertools.count(1)
        self._connections: dict[int, ClientConnection] = {}
        self._none_left = anyio.Event()
        self._none_left.set()
        self._accepting = anyio.CancelScope()
        self._stopping = False
        self._tally = CountedLog("strata.ipc")

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, home: Path, dispatcher: Dispatcher, *, socket_path: Path | None = None,
                   limits: Limits | None = None, server_name: str = "strata",
                   lock: DaemonLock | None = None,
                   on_failure: Callable[[str], None] | None = None) -> AsyncIterator[IpcServer]:
        """Claim `home` for this daemon and listen. Raises DaemonRunning (another daemon holds the home) or
        SocketUnusable (the path is too long or its directory missing; something that is not a socket, or another
        process's live socket, is there; or a dead socket there, or the temporary name beside it, cannot be
        removed by this user). A directory open to others is not refused: the socket is bound under a temporary
        name beside the path and made 0600 before it is renamed into place. `lock`: the home's lock, claimed
        already (`claim_home`) by a daemon that opens other things before it listens; it stays the caller's to
        release. `on_failure`: told why (once, from the event loop) when the listener fails for good (not for want of
        descriptors or memory): `serve` accepts no more, keeps the connections it has until `stop`, so that the
        caller can drain and stop (a daemon nobody can reach is of no use); without it, `serve` ends at once."""
        paths = daemon_paths(home, socket_path)
        owned = lock is None
        if lock is None:
            lock = await anyio.to_thread.run_sync(acquire_lock, paths)
        listener: SocketListener | None = None
        inode: int | None = None
        temporary = paths.socket
        try:
            temporary = await anyio.to_thread.run_sync(prepare_socket_path, paths.socket)
            try:
                listener = await anyio.create_unix_listener(temporary, mode=0o600)
            except OSError as exc:
                raise SocketUnusable(str(paths.socket), exc.strerror or str(exc)) from None
            inode = await anyio.to_thread.run_sync(publish_socket, temporary, paths.socket)
            lock.record(os.getpid(), paths.socket)
            _log.info("ipc listening", socket=str(paths.socket))
            server = cls(paths, listener, dispatcher, limits or Limits(), server_name, on_failure)
            try:
                yield server
            finally:
                server.stop()
        finally:
            with anyio.CancelScope(shield=True):
                if listener is not None:
                    with contextlib.suppress(Exception):
                        await listener.aclose()
                if inode is not None:
                    remove_socket(paths.socket, inode)
                elif temporary != paths.socket:
                    with contextlib.suppress(OSError):
                        os.unlink(temporary)
                if owned:
                    lock.release()

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Accept connections until `stop`; then say goodbye to every client (a `notice`, then what was queued
        for it, within `Limits.goodbye_timeout_s`) and return once every connection has ended."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._tally.run)
            with self._accepting:
                task_status.started()
                while not self._stopping:
                    try:
                        stream = await UNIXSocketStream.from_socket(await accept(self._raw_listener))
                    except anyio.ClosedResourceError:
                        break
                    except (anyio.BrokenResourceError, OSError) as exc:
                        error = exc.__cause__ if isinstance(exc, anyio.BrokenResourceError) else exc
                        if not (isinstance(error, OSError) and error.errno in TRANSIENT_ACCEPT_ERRORS):
                            self.failure = f"{type(error).__name__}: {error}"
                            _log.error("ipc listener failed: no more connections are accepted",
                                       error=self.failure)
                            if self._on_failure is None:
                                break
                            self._on_failure(self.failure)
                            await anyio.sleep_forever()  # until `stop`: the connections hear the drain
                            break
                        # out of descriptors (or memory) for now: free one held by an idle client, wait, go on
                        self._tally.note("ipc accept failed", error.strerror or str(error), level="warning")
                        self._shed_idle()
                        await anyio.sleep(0.1)
                        continue
                    tg.start_soon(self._serve_one, stream)
            for connection in list(self._connections.values()):
                connection.finish(Notice(level="warning", text="the daemon is shutting down"))
            with anyio.move_on_after(min(self._limits.goodbye_timeout_s, self._limits.send_timeout_s)):
                await self._none_left.wait()
            for connection in list(self._connections.values()):
                connection.close("the daemon stopped")
            self._tally.stop()

    def stop(self) -> None:
        """Stop accepting; `serve` then closes the connections and returns. Call from the event loop."""
        self._stopping = True
        self._accepting.cancel()

    async def _serve_one(self, stream: SocketStream) -> None:
        try:
            peer = peer_credentials(stream.extra(SocketAttribute.raw_socket))
            if not same_user(peer):
                await self._refuse(stream, "peer_refused", "this daemon serves only the user it runs as",
                                   peer_uid=None if peer is None else peer.uid,
                                   peer_pid=None if peer is None else peer.pid)
                return
            assert peer is not None
            if self._stopping:
                await self._refuse(stream, "shutting_down", "the daemon is shutting down")
                return
            if not self._make_room():
                await self._refuse(stream, "too_many_connections",
                                   f"the daemon serves at most {self._limits.max_connections} connections, "
                                   "and every one is attached to a session or busy with a request")
                return
            conn_id = next(self._ids)
            connection = ClientConnection(conn_id, stream, peer, self._limits, self._server_name, self._pid,
                                          self._tally, self._admit)
            self._connections[conn_id] = connection
            self._none_left = anyio.Event() if self._none_left.is_set() else self._none_left
            try:
                await connection.serve(self._dispatcher)
            finally:
                self._connections.pop(conn_id, None)
                if not self._connections:
                    self._none_left.set()
        except Exception as exc:  # nothing about one connection may end the accept loop
            _log.error("ipc connection setup failed", error_type=type(exc).__name__, exc_info=True)
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await stream.aclose()

    def _admit(self, connection: ClientConnection, request: Attach) -> ErrorReply | None:
        """Refuse an attach that would make one more connection of its client process hold a session past
        `Limits.max_held_per_peer` (an attach on a connection that holds one already costs no slot). Clients whose
        pid the daemon cannot see (UNSEEN_PID) share one cap: counted one by one, one of them could hold every
        slot; together they cannot keep the other clients out."""
        if self._dispatcher.holds(connection):
            return None
        pid = connection.peer.pid
        held = sum(1 for c in self._connections.values() if c is not connection and c.peer.pid == pid
                   and not c.leaving and (c.attaching or (c.greeted and self._dispatcher.holds(c))))
        cap = self._limits.max_held_per_peer
        if held < cap:
            return None
        self._tally.note("ipc attach refused", "too_many_attachments", peer_pid=pid)
        if pid == UNSEEN_PID:
            return ErrorReply(id=request.id, code="too_many_attachments", message="the daemon cannot see which "
                              "process this client is (it runs in another PID namespace, as a container's host "
                              f"does): such clients share one cap, and they hold {held} connections attached to "
                              f"sessions, the most it allows (the daemon serves {self._limits.max_connections} in "
                              "all); attach over a connection that holds one already, or detach one")
        return ErrorReply(id=request.id, code="too_many_attachments", message=f"this client process (pid {pid}) "
                          f"holds {held} connections attached to sessions, the most one process may hold (the daemon "
                          f"serves {self._limits.max_connections} in all); attach over one of them, or detach one")

    def _make_room(self) -> bool:
        """Whether a new connection may be served: a slot is free, or one is freed by closing the connection idle
        longest among those that hold nothing (see `Limits.max_connections`)."""
        limit = self._limits.max_connections
        if len(self._connections) >= 2 * limit:  # the closing ones too: closing cannot be outrun
            return False
        if sum(1 for c in self._connections.values() if not c.leaving) < limit:
            return True
        return self._shed_idle()

    def _shed_idle(self) -> bool:
        """Close the connection idle longest among those that hold nothing (no request in hand, attached to no
        session); whether there was one. For a new connection when every slot is taken, and when the daemon is out
        of descriptors (a client waiting to be accepted gets in by the one this frees)."""
        idle = [c for c in self._connections.values() if c.idle and not (c.greeted and self._dispatcher.holds(c))]
        if not idle:
            return False
        min(idle, key=lambda c: c.last_line_at).evict()
        return True

    async def _refuse(self, stream: SocketStream, code: ErrorCode, message: str, *, peer_uid: int | None = None,
                      peer_pid: int | None = None) -> None:
        self._tally.note("ipc connection refused", code, peer_uid=peer_uid, peer_pid=peer_pid)
        with anyio.move_on_after(1), contextlib.suppress(Exception):
            await stream.send(encode(ErrorReply(id=None, code=code, message=message, fatal=True)))
        with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
            await stream.aclose()
