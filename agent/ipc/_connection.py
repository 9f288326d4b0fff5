"""One client connection: a reader that turns lines into requests, a writer that drains the outbox.

Everything the daemon sends a client (replies and pushes alike, in the order they were made) goes through the
connection's outbox, so a session pushing an event never waits on a client's socket: `push` only appends, and a
client that lets its outbox grow past `Limits.outbox_max_bytes`, or takes nothing written to it for
`Limits.send_timeout_s`, is disconnected. A slow client costs its own connection, never the others.

Requests of one connection are handled one at a time, in order: a Dispatcher's `handle` must return promptly
(starting a turn, not running it), and report what follows through pushes. Nothing a client sends can raise out
of `serve`: what cannot be read earns an error reply (see _codec.py), and a Dispatcher that fails answers
`internal`."""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Callable
from typing import Protocol

import anyio
import structlog
from anyio.abc import SocketAttribute, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from agent.ipc._codec import read_request
from agent.ipc._limits import Limits
from agent.ipc._messages import (
    PROTOCOL_VERSION,
    Attach,
    ErrorReply,
    Hello,
    HelloOk,
    Ok,
    OkReply,
    Push,
    Refused,
    SessionRequest,
    encode,
)
from agent.ipc._peer import PeerCredentials
from agent.ipc._sockio import readable, send_all
from observability.counted_log import CountedLog

_log = structlog.get_logger("strata.ipc")

_STREAM_ERRORS = (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, anyio.ClosedResourceError,
                  OSError)


class Connection(Protocol):
    """What a Dispatcher sees of a client."""

    @property
    def id(self) -> int: ...

    @property
    def peer(self) -> PeerCredentials: ...

    @property
    def client_name(self) -> str: ...

    @property
    def closed(self) -> bool: ...

    def push(self, message: Push) -> bool:
        """Queue `message` for the client without waiting. False when the connection is closed, or is being
        closed now because its outbox overflowed. Call it from the daemon's event loop thread."""
        ...

    def push_droppable(self, message: Push) -> bool:
        """Queue `message` only if, with it, the outbox stays less than half full (what may be dropped: a text
        delta), so that it never costs the client its connection nor a committed event its room. Whether it was
        queued; never closes the connection."""
        ...

    @property
    def has_room(self) -> bool:
        """The outbox is less than half full: what may wait (a replay) is pushed only then, so that it never costs
        the client its connection."""
        ...

    async def wait_for_room(self) -> None:
        """Until `has_room`, or the connection is closed. Only for what may wait on this client (a replay)."""
        ...


class Dispatcher(Protocol):
    """The session side, plugged into the server: it gets every request but the hello."""

    async def handle(self, request: SessionRequest, connection: Connection) -> Ok | Refused:
        """Answer one request. Return promptly; what takes long goes on in the session's task and reaches the
        client as pushes. Runs shielded: a request the session side took is finished by it, even when the
        connection is closed meanwhile (its reply is then dropped). An exception is answered `internal` and
        logged."""
        ...

    async def closed(self, connection: Connection) -> None:
        """The connection ended (the client left, misbehaved, or the daemon stopped): detach it everywhere.
        Runs shielded, under a short deadline."""
        ...

    def holds(self, connection: Connection) -> bool:
        """The connection is attached to something live (a session): it is never closed for being idle, nor to
        make room for a new one. Called from the event loop; answers at once."""
        ...


class _Outbox:
    """Encoded lines waiting for the writer, bounded in bytes."""

    def __init__(self, max_bytes: int) -> None:
        self._lines: collections.deque[bytes] = collections.deque()
        self._size = 0
        self._max = max_bytes
        self._wake = anyio.Event()
        self._taken = anyio.Event()
        self.finished = False

    @property
    def half_empty(self) -> bool:
        return self._size < self._max // 2

    async def wait_half_empty(self) -> None:
        while not (self.half_empty or self.finished):
            self._taken = anyio.Event()
            await self._taken.wait()

    def put_within_half(self, line: bytes) -> bool:
        """`put`, only if the outbox stays less than half full with `line`."""
        if self.finished or self._size + len(line) >= self._max // 2:
            return False
        return self.put(line)

    def put(self, line: bytes) -> bool:
        if self.finished:
            return False
        if self._lines and self._size + len(line) > self._max:
            return False
        self._lines.append(line)
        self._size += len(line)
        self._wake.set()
        return True

    def finish(self) -> None:
        """No more lines: the writer sends what is queued, then stops."""
        self.finished = True
        self._wake.set()
        self._taken.set()

    async def get(self, max_bytes: int = 256 * 1024) -> bytes | None:
        """The queued lines, joined up to about `max_bytes` (one write for many pipelined replies); None once
        finished and empty."""
        while not self._lines:
            if self.finished:
                return None
            self._wake = anyio.Event()
            await self._wake.wait()
        taken = [self._lines.popleft()]
        size = len(taken[0])
        while self._lines and size + len(self._lines[0]) <= max_bytes:
            taken.append(self._lines.popleft())
            size += len(taken[-1])
        self._size -= size
        self._taken.set()
        return b"".join(taken)


class ClientConnection:
    def __init__(self, conn_id: int, stream: SocketStream, peer: PeerCredentials, limits: Limits,
                 server_name: str, pid: int, tally: CountedLog,
                 admit: Callable[[ClientConnection, Attach], ErrorReply | None] = lambda c, r: None) -> None:
        """`tally`: where what ends a connection is logged (bounded: see observability/counted_log.py); `admit`:
        the server's word on an attach before the session side sees it (an error reply refuses it)."""
        self._id = conn_id
        self._stream = stream
        self._socket = stream.extra(SocketAttribute.raw_socket)
        self._peer = peer
        self._limits = limits
        self._server_name = server_name
        self._pid = pid
        self._outbox = _Outbox(limits.outbox_max_bytes)
        self._client_name = ""
        self._greeted = False
        self._errors = 0
        self._closed = False
        self._scope = anyio.CancelScope()
        self._read_scope = anyio.CancelScope()
        self._stop_reading = False
        self._handling = False
        self._attaching = False
        self._admit = admit
        self._leaving = False
        self._last_line_at = anyio.current_time()
        self._log = _log.bind(connection=conn_id, peer_pid=peer.pid)
        self._tally = tally

    @property
    def id(self) -> int:
        return self._id

    @property
    def peer(self) -> PeerCredentials:
        return self._peer

    @property
    def client_name(self) -> str:
        return self._client_name

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def greeted(self) -> bool:
        return self._greeted

    @property
    def leaving(self) -> bool:
        """It is being closed (or was): it takes no more requests."""
        return self._closed or self._leaving or self._outbox.finished

    @property
    def attaching(self) -> bool:
        """An attach of it is in the session side's hands now (it may hold a session once it returns)."""
        return self._attaching

    @property
    def idle(self) -> bool:
        """No request in hand, and not leaving: it may be closed to make room (unless the session side holds it)."""
        return not (self._handling or self.leaving)

    @property
    def last_line_at(self) -> float:
        """When its last whole line came (its start, before the first one): what makes it the longest idle."""
        return self._last_line_at

    def push(self, message: Push) -> bool:
        if self._closed or self._outbox.finished:
            return False
        if self._outbox.put(encode(message)):
            return True
        self.close("it does not read what the daemon sends (outbox full)")
        return False

    def push_droppable(self, message: Push) -> bool:
        if self._closed or self._outbox.finished:
            return False
        return self._outbox.put_within_half(encode(message))

    @property
    def has_room(self) -> bool:
        return not (self._closed or self._outbox.finished) and self._outbox.half_empty

    async def wait_for_room(self) -> None:
        await self._outbox.wait_half_empty()

    def close(self, reason: str) -> None:
        """Disconnect now, dropping what is queued."""
        if self._closed:
            return
        self._closed = True
        self._outbox.finish()
        self._tally.note("ipc client disconnected", reason, connection=self._id, peer_pid=self._peer.pid)
        self._scope.cancel()

    def evict(self) -> None:
        """Close it to make room for a new connection: an `idle_timeout` error, then the end, within
        `Limits.goodbye_timeout_s` whether or not the client reads. Only for an `idle` connection."""
        if self.leaving:
            return
        idle_s = anyio.current_time() - self._last_line_at
        self._reply(ErrorReply(id=None, code="idle_timeout", fatal=True,
                               message=f"closed to make room for a new connection: it sent nothing for {idle_s:.0f} "
                               "s and is attached to no session"))
        self._tally.note("ipc client disconnected", "idle, attached to nothing: closed to make room for a new one",
                         connection=self._id, peer_pid=self._peer.pid, idle_s=round(idle_s, 1))
        self._leaving = True
        self._stop_reading = True
        self._read_scope.cancel()
        self._scope.deadline = anyio.current_time() + self._limits.goodbye_timeout_s

    def finish(self, last: Push | None = None) -> None:
        """Stop reading (after the request being handled, whose reply is still sent), send what is queued (and
        `last`), then disconnect: the daemon's orderly goodbye."""
        if last is not None:
            self.push(last)
        self._stop_reading = True
        if not self._handling:
            self._read_scope.cancel()

    async def serve(self, dispatcher: Dispatcher) -> None:
        """Run the connection to its end. Never raises (cancellation aside)."""
        try:
            with self._scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._write_loop)
                    with self._read_scope:
                        await self._read_loop(dispatcher)
                    self._outbox.finish()  # the writer sends the last replies, then ends
        except Exception as exc:  # a bug here must not take the daemon down; the connection goes
            self._log.error("ipc connection failed", error_type=type(exc).__name__, exc_info=True)
        finally:
            self._closed = True
            with anyio.CancelScope(shield=True):
                with contextlib.suppress(Exception):
                    await self._stream.aclose()
                if self._greeted:
                    with anyio.move_on_after(5), contextlib.suppress(Exception):
                        await dispatcher.closed(self)

    async def _read_loop(self, dispatcher: Dispatcher) -> None:
        reader = BufferedByteReceiveStream(self._stream)
        limit = self._limits.max_line_bytes
        hello_deadline = anyio.current_time() + self._limits.hello_timeout_s
        hello_grace = False
        while not (self._closed or self._stop_reading):
            try:
                if self._greeted:
                    line = None
                    with anyio.move_on_after(self._limits.idle_timeout_s) as idle:
                        line = await reader.receive_until(b"\n", limit + 1)
                    if idle.cancelled_caught:
                        if dispatcher.holds(self) or readable(self._socket):  # held; or it spoke while the
                            continue  # daemon was stopped, and the deadline passed before the daemon could read
                        self._reply(ErrorReply(id=None, code="idle_timeout", fatal=True, message=f"no request "
                                               f"within {self._limits.idle_timeout_s:g} s, and attached to no session"))
                        self._tally.note("ipc client disconnected", "idle, attached to nothing: timed out",
                                         connection=self._id, peer_pid=self._peer.pid)
                        return
                else:
                    with anyio.fail_after(max(0.0, hello_deadline - anyio.current_time())):
                        line = await reader.receive_until(b"\n", limit + 1)
            except TimeoutError:
                if not hello_grace and readable(self._socket):  # it spoke while the daemon was stopped: read it
                    hello_grace = True
                    hello_deadline = anyio.current_time() + 1.0
                    continue
                self._reply(ErrorReply(id=None, code="hello_timeout", fatal=True,
                                       message=f"no hello within {self._limits.hello_timeout_s:g} s"))
                self._log.debug("ipc client sent no hello")
                return
            except anyio.DelimiterNotFound:
                line = None
            except _STREAM_ERRORS:
                return  # the client left (a half-written last line is dropped: every line ends in \n)
            if line is None or len(line) > limit:
                self._reply(ErrorReply(id=None, code="too_large", fatal=True,
                                       message=f"a line may hold at most {limit} bytes"))
                self._tally.note("ipc client disconnected", "it sent an oversized line", connection=self._id,
                                 peer_pid=self._peer.pid, limit=limit)
                return
            self._last_line_at = anyio.current_time()
            if not line.strip():
                continue
            if not await self._handle_line(line, dispatcher):
                return

    async def _handle_line(self, line: bytes, dispatcher: Dispatcher) -> bool:
        """False when the connection must end."""
        request = read_request(line, greeted=self._greeted)
        if isinstance(request, ErrorReply):
            self._errors += 1
            self._log.debug("ipc protocol error", code=request.code, bytes=len(line), errors=self._errors)
            if request.fatal:
                self._reply(request)
                return False
            if self._errors >= self._limits.max_errors:
                self._reply(request.model_copy(update={"fatal": True}))
                self._reply(ErrorReply(id=None, code="too_many_errors", fatal=True,
                                       message=f"{self._errors} protocol errors; closing the connection"))
                self._tally.note("ipc client disconnected", "too many protocol errors", connection=self._id,
                                 peer_pid=self._peer.pid)
                return False
            self._reply(request)
            return True
        if isinstance(request, Hello):
            self._greeted = True
            self._client_name = request.client
            self._log.debug("ipc client said hello")  # its self-chosen name is not logged: the pid says who
            self._reply(HelloOk(id=request.id, v=PROTOCOL_VERSION, pid=self._pid, server=self._server_name))
            return True
        if isinstance(request, Attach) and (refusal := self._admit(self, request)) is not None:
            self._reply(refusal)
            return True
        self._handling = True
        self._attaching = isinstance(request, Attach)
        try:
            self._reply(await self._dispatch(dispatcher, request))
        finally:
            self._handling = self._attaching = False
        return True

    async def _dispatch(self, dispatcher: Dispatcher, request: SessionRequest) -> OkReply | ErrorReply:
        try:
            with anyio.CancelScope(shield=True):  # a request the session side took is finished by it
                answer = await dispatcher.handle(request, self)
        except Exception as exc:
            self._log.error("ipc request failed in the session side", request_type=request.type,
                            error_type=type(exc).__name__, exc_info=True)
            return ErrorReply(id=request.id, code="internal", message="the daemon failed on this request; "
                              "its log says why")
        if isinstance(answer, Ok | Refused):
            return answer.reply(request.id)
        self._log.error("ipc dispatcher answered something that is not Ok or Refused", request_type=request.type,
                        answer_type=type(answer).__name__)
        return ErrorReply(id=request.id, code="internal", message="the daemon failed on this request")

    def _reply(self, message: HelloOk | OkReply | ErrorReply) -> None:
        if self._outbox.finished:
            return
        if not self._outbox.put(encode(message)):
            self.close("it does not read what the daemon sends (outbox full)")

    async def _write_loop(self) -> None:
        while True:
            data = await self._outbox.get()
            if data is None:
                return
            try:
                if not await send_all(self._socket, data, self._limits.send_timeout_s):
                    self.close(f"it took no data for {self._limits.send_timeout_s:g} s")
                    return
            except _STREAM_ERRORS:
                self.close("the connection broke")
                return
