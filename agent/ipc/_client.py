"""A client of the daemon: connect, hello, requests matched to their replies by id, and a stream of pushes.

One task reads the socket for the life of the client: a reply wakes the request waiting for it, a push goes to
`pushes()`. The push buffer is bounded; a client that stops taking pushes stops reading the socket, and the
daemon in time disconnects it (as it would any client that does not read). So read `pushes()` in a task of its
own while sending requests from another."""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import SocketAttribute, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from pydantic import ValidationError

from agent.ipc._errors import (
    DaemonGone,
    ForeignListener,
    NoDaemon,
    PeerRefused,
    RequestFailed,
    VersionRefused,
)
from agent.ipc._limits import Limits
from agent.ipc._messages import (
    PROTOCOL_VERSION,
    ErrorReply,
    Hello,
    HelloOk,
    OkReply,
    Push,
    ServerMessageAdapter,
    SessionRequest,
    encode,
)
from agent.ipc._peer import peer_credentials, same_user

MAX_REPLY_BYTES = 64 * 1024 * 1024
"""The longest line this client reads from a daemon (an event carrying a large tool output)."""
PUSH_BUFFER = 1024

MAX_LINE_BYTES = Limits().max_line_bytes
"""The daemon's cap on a request line (newline excluded): a longer one ends the connection."""


class IpcClient:
    def __init__(self, path: Path, stream: SocketStream, reader: BufferedByteReceiveStream, hello: HelloOk) -> None:
        self.path = path
        self.hello = hello
        self._stream = stream
        self._reader = reader
        self._ids = itertools.count(1)
        self._waiting: dict[str, _Slot] = {}
        self._gone: str | None = None
        self._push_in: MemoryObjectSendStream[Push]
        self._push_out: MemoryObjectReceiveStream[Push]
        self._push_in, self._push_out = anyio.create_memory_object_stream[Push](PUSH_BUFFER)
        self._send_lock = anyio.Lock()

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(cls, path: Path, *, client_name: str = "strata", timeout: float = 10.0,
                      version: int = PROTOCOL_VERSION) -> AsyncIterator[IpcClient]:
        """Connect and say hello. Raises NoDaemon, PeerRefused (ForeignListener: what listens there runs as another
        user, and nothing was sent to it) or VersionRefused, each one line."""
        shown = str(path)
        try:
            with anyio.fail_after(timeout):
                stream = await anyio.connect_unix(os.fspath(path))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise NoDaemon(shown, "nothing is listening there" if isinstance(exc, ConnectionRefusedError)
                           else "no socket there") from None
        except PermissionError:
            raise PeerRefused(shown, "permission denied (the socket belongs to another user)") from None
        except TimeoutError:
            raise NoDaemon(shown, f"no answer within {timeout:g} s") from None
        except OSError as exc:
            raise NoDaemon(shown, exc.strerror or str(exc)) from None
        async with stream:
            listener = peer_credentials(stream.extra(SocketAttribute.raw_socket))
            if not same_user(listener):  # a path in a shared directory may be another user's impostor
                raise ForeignListener(shown, None if listener is None else listener.uid)
            reader = BufferedByteReceiveStream(stream)
            hello = await _say_hello(shown, stream, reader, client_name, timeout, version)
            client = cls(path, stream, reader, hello)
            with client._push_in, client._push_out:
                try:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(client._read_loop)
                        try:
                            yield client
                        finally:
                            tg.cancel_scope.cancel()
                except BaseExceptionGroup as group:  # the body's own error comes out as itself (one line for a user)
                    if len(group.exceptions) == 1:
                        raise group.exceptions[0] from None
                    raise

    async def request(self, kind: type[SessionRequest], **fields: Any) -> OkReply:
        """Send one request (its id is chosen here) and wait for its reply. Raises RequestFailed on an `error`
        reply (typed `code`), DaemonGone when the connection ends first."""
        request_id = f"r{next(self._ids)}"
        try:
            message = kind(id=request_id, **fields)
        except ValidationError as exc:  # what the daemon would refuse is refused here, in one line
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "request"
            raise RequestFailed("invalid", f"cannot send this {kind.model_fields['type'].default} ({where}: "
                                f"{first['msg']})", request_id) from None
        line = encode(message)
        if len(line) - 1 > MAX_LINE_BYTES:  # the daemon would close the connection over it
            raise RequestFailed("too_large", f"this {kind.model_fields['type'].default} is {len(line) - 1} bytes "
                                f"on the wire; a request may hold at most {MAX_LINE_BYTES}", request_id)
        slot = _Slot()
        self._waiting[request_id] = slot
        try:
            await self._send(line)
            await slot.done.wait()
        finally:
            self._waiting.pop(request_id, None)
        reply = slot.reply
        if isinstance(reply, OkReply):
            return reply
        if isinstance(reply, ErrorReply):
            raise RequestFailed(reply.code, reply.message, reply.id)
        raise DaemonGone(str(self.path), self._gone or "")

    async def send_raw(self, line: bytes) -> None:
        """Send bytes as they are (for tests of the daemon's defences, and for forwarding a user's JSON)."""
        await self._send(line)

    async def pushes(self) -> AsyncIterator[Push]:
        """Every push, in the order the daemon sent them, until the connection ends."""
        async for push in self._push_out:
            yield push

    async def _send(self, data: bytes) -> None:
        if self._gone is not None:
            raise DaemonGone(str(self.path), self._gone)
        try:
            async with self._send_lock:
                await self._stream.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise DaemonGone(str(self.path), f"{type(exc).__name__}") from None

    async def _read_loop(self) -> None:
        try:
            while True:
                try:
                    line = await self._reader.receive_until(b"\n", MAX_REPLY_BYTES)
                except anyio.DelimiterNotFound:
                    self._gone = f"the daemon sent a line over {MAX_REPLY_BYTES} bytes"
                    return
                except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError,
                        anyio.ClosedResourceError, OSError):
                    self._gone = self._gone or "the daemon closed it"
                    return
                try:
                    message = ServerMessageAdapter.validate_json(line)
                except ValidationError:
                    self._gone = "the daemon sent a message this client cannot read"
                    return
                if isinstance(message, OkReply | ErrorReply | HelloOk):
                    if isinstance(message, ErrorReply) and message.fatal and message.id is None:
                        self._gone = f"{message.message} ({message.code})"
                    slot = self._waiting.get(message.id or "")
                    if slot is not None:
                        slot.reply = message
                        slot.done.set()
                    continue
                await self._push_in.send(message)
        finally:
            self._gone = self._gone or "the daemon closed it"
            for slot in self._waiting.values():
                slot.done.set()
            self._push_in.close()


class _Slot:
    def __init__(self) -> None:
        self.done = anyio.Event()
        self.reply: OkReply | ErrorReply | HelloOk | None = None


async def _say_hello(shown: str, stream: SocketStream, reader: BufferedByteReceiveStream, client_name: str,
                     timeout: float, version: int) -> HelloOk:
    try:
        with anyio.fail_after(timeout):
            # a daemon that refuses the peer answers and closes before the hello: its answer is still read below
            with contextlib.suppress(anyio.BrokenResourceError, OSError):
                await stream.send(encode(Hello(id="hello", v=version, client=client_name)))
            line = await reader.receive_until(b"\n", MAX_REPLY_BYTES)
    except TimeoutError:
        raise DaemonGone(shown, f"no answer to the hello within {timeout:g} s") from None
    except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError, anyio.DelimiterNotFound, OSError):
        raise DaemonGone(shown, "it closed during the hello") from None
    try:
        reply = ServerMessageAdapter.validate_json(line)
    except ValidationError:
        raise DaemonGone(shown, "the daemon answered the hello with something this client cannot read") from None
    if isinstance(reply, HelloOk):
        return reply
    if isinstance(reply, ErrorReply):
        if reply.code == "bad_version":
            raise VersionRefused(shown, version, reply.versions or ())
        if reply.code == "peer_refused":
            raise PeerRefused(shown, reply.message)
        raise RequestFailed(reply.code, reply.message, reply.id)
    raise DaemonGone(shown, f"the daemon answered the hello with {reply.type}")
