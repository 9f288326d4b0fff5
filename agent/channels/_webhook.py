"""The `webhook` channel: an HTTP endpoint the daemon serves on loopback, in front of a spool kept in the home.

    POST /messages        Authorization: Bearer TOKEN; a JSON message as a spool file holds it
                          -> 202 {"accepted": ID, "reply": "/replies/KEY"} once the message is durably queued
    GET  /replies/KEY     Authorization: Bearer TOKEN -> 200 and the reply, or 404 while there is none

With `callback_url`, every reply is also POSTed there (see `deliver`), with its key as `Idempotency-Key`; a
delivery is recorded as `<home>/channels/NAME/delivered/KEY`. These folders of the home's (`in/`, `out/`,
`delivered/`, `ids/`) are made again, with a warning in the log, when removed while the daemon runs.

The token comes from the environment variable the channel's `token_env` names (removed from the daemon's
environment once every channel is open, so no `bash` command or hook a session runs inherits it) and is compared
in constant time; a request without it, or with another, gets 401 before its body is read, and nothing is created.
A body over `max_body_bytes` (by its Content-Length, which is required: 411 without it) gets 413 unread (a client
that sent `Expect: 100-continue` gets its 100 Continue only once its request passed these checks); a body that is not
a JSON message gets 400 with the reason; a thread the channel may not take 403; a message id another thread's
message took 409 (an id names one message and its reply; the same message POSTed again, same thread, is 202).
One request a connection, each bounded in time, so a slow or hostile client holds nothing for long: a request's
head must arrive within `HEAD_TIMEOUT_S`, and of the connections still waiting for theirs at most `MAX_WAITING` are
kept (a newer one closes the one waiting longest, so silent connections never keep out a client that sends its
request); a request then has `REQUEST_TIMEOUT_S`; at most `MAX_REQUESTS` are served at once (503 beyond);
running out of file descriptors pauses accepting, never the daemon.
An accepted message is written to `<home>/channels/NAME/in/` (write, fsync, rename) before the 202, and from
there it is a spool message like any other: its reply lands in `<home>/channels/NAME/out/KEY.json`.

`ids/` holds one record a message id (named by the id's sha256, holding its thread), made when the id's first message
is accepted and touched when its thread sends it again. It is pruned when the daemon starts and every
`ID_PRUNE_INTERVAL_S`: a record untouched for `keep_ids_days` goes, unless its message still waits in `in/` (put off,
however long). An id whose record went is still refused to another thread while its reply is in `out/` (the reply
names its thread); and once taken in, the channel book keeps its thread for good (a message reusing it is rejected
when handled).

`out/` is pruned in the same hourly round, after `ids/` (agent/channels/_retention.py): a reply goes
`keep_replies_days` after it was written once it was taken (posted to the callback when there is one; else fetched
with GET, which leaves `delivered/KEY.fetched`) and its id's record is gone, with its markers; `in/rejected/` goes
`keep_rejected_days` after each file was set aside. A reply that went answers GET 404."""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import hmac
import http.client
import json
import os
import re
import stat
import threading
import time
import urllib.parse
from collections.abc import Collection
from pathlib import Path

import anyio
import h11
import structlog
from anyio.abc import SocketListener, SocketStream, TaskGroup, TaskStatus
from pydantic import ValidationError

from agent.channels._messages import InboundMessage, reply_key
from agent.channels._retention import PRUNE_INTERVAL_S
from agent.channels._spool import MAX_DEPTH, OldReply, SpoolChannel, _one_line, _write_atomically
from agent.channels._waiting_room import WaitingRoom
from config.channels import DEFAULT_KEEP_IDS_DAYS
from core import bounded_json
from core.hashing import sha256_text

log = structlog.get_logger("strata.channels")

REQUEST_TIMEOUT_S = 30.0
MAX_REQUESTS = 64
"""Requests served at once (their heads read); one beyond them is answered 503 at once, so a flood holds no more."""
HEAD_TIMEOUT_S = 10.0
MAX_WAITING = 64
"""Connections whose request head has not arrived yet; a newer one beyond them closes the one waiting longest."""
ACCEPT_PAUSE_S = 0.1
BUSY_ANSWER_S = 1.0
_SHORT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
CALLBACK_TIMEOUT_S = 10.0
DELIVERY_PAUSE_S = 0.2
MAX_HEADER_BYTES = 16 * 1024
ID_PRUNE_INTERVAL_S = PRUNE_INTERVAL_S
FETCHED = ".fetched"
"""`delivered/KEY.fetched`: the reply KEY was fetched with GET (taken, for a channel without a callback)."""
DAY_S = 86400.0
_REPLY_PATH = re.compile(r"^/replies/(reply-[0-9a-f]{32})$")


class WebhookChannel(SpoolChannel):
    def __init__(self, name: str, folder: Path, *, port: int, token: str, max_body_bytes: int,
                 threads: tuple[str, ...] = ("*",), host: str = "127.0.0.1", callback_url: str | None = None,
                 keep_ids_days: int = DEFAULT_KEEP_IDS_DAYS) -> None:
        super().__init__(name, folder / "in", folder / "out", threads)
        self.port = port
        self.host = host
        self.callback_url = callback_url
        self._expected = f"Bearer {token}".encode()
        self._cap = max_body_bytes
        self._delivered = folder / "delivered"
        self._delivered.mkdir(parents=True, exist_ok=True)
        self._ids = folder / "ids"
        """The thread of each message id taken (by sha256 of the id), kept `keep_ids_days` after its last use."""
        self._ids.mkdir(parents=True, exist_ok=True)
        self.keep_ids_days = keep_ids_days
        self._id_locks = tuple(threading.Lock() for _ in range(64))
        """One of these guards a record while it is taken or touched (a request) or looked at and removed (the
        prune), so the prune never removes a record a request has just used."""

    async def deliver(self) -> None:
        """POST every reply in the outbox not yet delivered to the callback, oldest first, with its key as the
        `Idempotency-Key` header; a 2xx answer is recorded as a marker file (the probe of delivery). A failure
        (refused, timed out, an answer that is not HTTP or not 2xx) is retried with a growing pause (up to 30 s); a
        reply file gone since the listing is skipped. A crash between the answer and the marker posts that reply once
        more, under the same key: a callback that keeps the keys it has seen takes every reply exactly once."""
        if self.callback_url is None:
            return
        pause = DELIVERY_PAUSE_S
        while True:
            waiting = await anyio.to_thread.run_sync(self._undelivered)
            failed = False
            for path in waiting:
                try:
                    await anyio.to_thread.run_sync(self._post, path)
                except (OSError, http.client.HTTPException) as exc:  # refused, cut, timed out, not HTTP, not 2xx
                    log.warning("reply not delivered to the callback; retrying", channel=self.name, reply=path.stem,
                                reason=_one_line(exc))
                    failed = True
                    break
            pause = min(pause * 2, 30.0) if failed else DELIVERY_PAUSE_S
            await anyio.sleep(pause)

    def _undelivered(self) -> list[Path]:
        found: list[tuple[int, Path]] = []
        for p in self.outbox.glob("reply-*.json"):
            if (self._delivered / p.stem).exists():
                continue
            try:
                info = p.stat()
            except FileNotFoundError:  # gone since the listing (or a link to nothing): nothing to deliver
                continue
            if stat.S_ISREG(info.st_mode):  # a folder (or a FIFO) of that name is no reply: it would hold up the rest
                found.append((info.st_mtime_ns, p))
        return [p for _, p in sorted(found)]

    def _post(self, path: Path) -> None:
        assert self.callback_url is not None
        url = urllib.parse.urlsplit(self.callback_url)
        conn_type = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
        conn = conn_type(url.hostname or "", url.port, timeout=CALLBACK_TIMEOUT_S)
        try:
            target = (url.path or "/") + (f"?{url.query}" if url.query else "")  # a token in the query goes too
            conn.request("POST", target, body=path.read_bytes(),
                         headers={"Content-Type": "application/json", "Idempotency-Key": path.stem})
            status = conn.getresponse().status
        finally:
            conn.close()
        if not 200 <= status < 300:
            raise OSError(f"the callback answered {status}")
        marker = self._delivered / path.stem
        try:
            _write_atomically(marker, b"")
        except FileNotFoundError:
            if self._delivered.is_dir():
                raise
            self._remake(self._delivered)  # removed while the daemon runs: else every reply is posted for ever
            _write_atomically(marker, b"")

    def _id_taken(self, message: InboundMessage) -> bool:
        """Whether another thread's message took this message's id. The first message with an id records its thread
        in `ids/` (a hard link, never replaced, so of two at once one wins); a message of the same thread (a retry)
        finds its own thread there, and the record is touched (kept `keep_ids_days` from now). With no record (a new
        id, or one pruned), a reply to the id in `out/` names the thread that took it."""
        name = sha256_text(message.id)
        record = self._ids / name
        with self._id_lock(name):
            if not os.path.lexists(record):
                replied = self._replied_thread(message.id)
                if replied is not None and replied != message.thread:
                    return True
            try:
                _write_atomically(record, message.thread.encode(), replace=False)
            except FileNotFoundError:
                if self._ids.is_dir():
                    raise
                self._remake(self._ids)  # removed while the daemon runs
                _write_atomically(record, message.thread.encode(), replace=False)
            if record.read_bytes().decode() != message.thread:
                return True
            os.utime(record)
            return False

    def _id_lock(self, name: str) -> threading.Lock:
        return self._id_locks[int(name[:2], 16) % len(self._id_locks)]

    def _replied_thread(self, message_id: str) -> str | None:
        """The thread of the reply to `message_id` in the outbox, if there is one."""
        try:
            with (self.outbox / f"{reply_key(self.name, message_id)}.json").open("rb") as f:
                reply = json.loads(f.read())
        except (OSError, ValueError):  # none (or unreadable, or cut): no reply to go by
            return None
        thread = reply.get("thread") if isinstance(reply, dict) else None
        return thread if isinstance(thread, str) else None

    def prune_ids(self) -> int:
        """Remove the id records untouched for `keep_ids_days` whose message no longer waits in `in/`; how many."""
        cutoff = time.time() - self.keep_ids_days * DAY_S
        waiting = self._waiting_ids()
        try:
            with os.scandir(self._ids) as entries:
                names = [e.name for e in entries if not e.name.startswith(".")]
        except FileNotFoundError:
            self._remake(self._ids)
            return 0
        removed = 0
        for name in names:
            if name[:16] in waiting or not re.fullmatch(r"[0-9a-f]{64}", name):
                continue
            record = self._ids / name
            with self._id_lock(name), contextlib.suppress(FileNotFoundError):
                if record.lstat().st_mtime < cutoff:
                    record.unlink()
                    removed += 1
        return removed

    def _waiting_ids(self) -> set[str]:
        """The id prefixes (16 hex digits of the id's sha256) of the messages waiting in `in/`, by their names."""
        try:
            with os.scandir(self.inbox) as entries:
                return {e.name.removesuffix(".json").rpartition("-")[2] for e in entries if e.name.endswith(".json")}
        except FileNotFoundError:
            return set()

    def _queue(self, target: Path, data: bytes) -> None:
        try:
            _write_atomically(target, data)
        except FileNotFoundError:
            if self.inbox.is_dir():
                raise
            self._remake(self.inbox)  # the home's folder, removed while the daemon runs: else every POST is a 500
            _write_atomically(target, data)

    def poll(self, skip: Collection[str] = ()) -> list[tuple[InboundMessage, str]]:
        if not self.inbox.is_dir():
            self._remake(self.inbox)
        return super().poll(skip)

    def delivered(self, key: str) -> bool:
        return (self._delivered / key).exists()

    def _may_go(self, key: str) -> bool:
        return self._taken(key)

    def _taken(self, key: str) -> bool:
        """Whether the reply KEY reached its client: posted to the callback (with one, nothing else counts: a
        reply fetched but not posted is still owed to it), else fetched with GET at least once."""
        if self.callback_url is not None:
            return self.delivered(key)
        return self.delivered(key) or (self._delivered / (key + FETCHED)).exists()

    def _fetched(self, key: str) -> None:
        marker = self._delivered / (key + FETCHED)
        if marker.exists():
            return
        try:
            marker.touch()
        except FileNotFoundError:
            self._remake(self._delivered)  # removed while the daemon runs
            marker.touch()

    def drop_reply(self, reply: OldReply) -> bool:
        """Remove the reply unless its id's record is kept (a retry of its message is then answered 202 with this
        reply's address), under the record's lock (so a retry that just found the reply keeps it); then its
        markers (after it, or the deliverer would post it again)."""
        name = sha256_text(reply.message_id)
        with self._id_lock(name):
            if os.path.lexists(self._ids / name) or not super().drop_reply(reply):
                return False
        for marker in (reply.key, reply.key + FETCHED):
            with contextlib.suppress(FileNotFoundError):
                (self._delivered / marker).unlink()
        return True

    def prune_markers(self, cutoff: float) -> int:
        """Remove the `delivered/` markers, older than `cutoff`, whose reply is gone (a crash between the two)."""
        try:
            with os.scandir(self._delivered) as entries:
                names = [e.name for e in entries if re.fullmatch(r"reply-[0-9a-f]{32}(\.fetched)?", e.name)]
        except FileNotFoundError:
            return 0
        removed = 0
        for name in names:
            marker = self._delivered / name
            with contextlib.suppress(FileNotFoundError):
                if (self.outbox / f"{name.removesuffix(FETCHED)}.json").exists() or marker.lstat().st_mtime >= cutoff:
                    continue
                marker.unlink()
                removed += 1
        return removed

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        listener = await anyio.create_tcp_listener(local_host=self.host, local_port=self.port, reuse_port=False)
        requests = anyio.Semaphore(MAX_REQUESTS)
        room = WaitingRoom(MAX_WAITING)
        async with listener, anyio.create_task_group() as tg:
            for one in listener.listeners:  # one a local address the host names
                assert isinstance(one, SocketListener)
                tg.start_soon(self._accept, one, requests, room, tg)
            task_status.started()

    async def _accept(self, listener: SocketListener, requests: anyio.Semaphore, room: WaitingRoom,
                      tg: TaskGroup) -> None:
        """Accept connections for ever. Out of file descriptors (an idle-connection flood, say), the error is
        logged once and accepting goes on after a pause (waiting connections stay in the kernel's backlog)."""
        short = False
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                if exc.errno not in _SHORT_OF_RESOURCES:  # the connection failed before it was taken: the next
                    continue
                if not short:
                    log.error("webhook cannot accept connections now; retrying", channel=self.name,
                              reason=exc.strerror or str(exc))
                    short = True
                await anyio.sleep(ACCEPT_PAUSE_S)
                continue
            if short:
                log.info("webhook accepting connections again", channel=self.name)
                short = False
            tg.start_soon(self._connection, stream, requests, room)

    async def _connection(self, stream: SocketStream, requests: anyio.Semaphore, room: WaitingRoom) -> None:
        """A request's head is read in the waiting room (within `HEAD_TIMEOUT_S`, and closed early when newer
        connections need the place); then the request takes one of the `MAX_REQUESTS` places, or gets 503."""
        async with stream:
            conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)
            request: object = None
            with room.place() as waiting, anyio.move_on_after(HEAD_TIMEOUT_S):
                try:
                    request = await _next_event(conn, stream)
                except h11.RemoteProtocolError as exc:
                    await self._send(conn, stream, 400, {"error": f"bad HTTP request: {exc}"})
                    return
                except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionError):
                    return
            if request is None:  # no request in time, or its place was given to a newer connection
                if waiting.cancel_called:
                    log.debug("webhook connection closed to make room", channel=self.name)
                return
            try:
                requests.acquire_nowait()
            except anyio.WouldBlock:
                with anyio.move_on_after(BUSY_ANSWER_S):
                    await _busy(conn, stream)
                return
            try:
                await self._request(conn, stream, request)
            finally:
                requests.release()

    async def _request(self, conn: h11.Connection, stream: SocketStream, request: object) -> None:
        with anyio.move_on_after(REQUEST_TIMEOUT_S):
            try:
                status, body = await self._answer(conn, stream, request)
            except h11.RemoteProtocolError as exc:
                status, body = 400, {"error": f"bad HTTP request: {exc}"}
            except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionError):
                return
            except Exception as exc:  # a bug here answers 500 and ends this connection, never the daemon
                log.error("webhook request failed", channel=self.name, error_type=type(exc).__name__,
                          exc_info=True)
                status, body = 500, {"error": "internal error"}
            await self._send(conn, stream, status, body)

    async def _answer(self, conn: h11.Connection, stream: SocketStream,
                      request: object) -> tuple[int, dict[str, object]]:
        if not isinstance(request, h11.Request):
            return 400, {"error": "expected an HTTP request"}
        headers = {k.lower(): v for k, v in request.headers}
        if not hmac.compare_digest(headers.get(b"authorization", b""), self._expected):
            return 401, {"error": "missing or wrong bearer token"}
        target = request.target.decode("ascii", "replace")
        if request.method == b"GET":
            match = _REPLY_PATH.match(target)
            if match is None:
                return 404, {"error": "no such resource"}
            key = match.group(1)
            try:
                reply = json.loads(await anyio.Path(self.outbox / f"{key}.json").read_text(encoding="utf-8"))
            except FileNotFoundError:
                return 404, {"error": "no reply yet (a reply once fetched is kept keep_replies_days)"}
            await anyio.to_thread.run_sync(self._fetched, key)
            return 200, reply
        if request.method != b"POST" or target != "/messages":
            return (405 if target == "/messages" else 404), {"error": "POST /messages or GET /replies/KEY"}
        length = headers.get(b"content-length")
        if length is None:
            return 411, {"error": "a Content-Length is required"}
        if not length.isdigit():
            return 400, {"error": "a Content-Length is a number"}
        if int(length) > self._cap:
            return 413, {"error": f"the body is larger than {self._cap} bytes"}
        if conn.they_are_waiting_for_100_continue:  # checked and fit to be read: the client may send it now
            await stream.send(conn.send(h11.InformationalResponse(status_code=100, headers=[])) or b"")
        raw = bytearray()
        while True:
            event = await _next_event(conn, stream)
            if isinstance(event, h11.Data):
                raw += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
            else:
                return 400, {"error": "the body ended early"}
        try:
            body = bounded_json.loads(bytes(raw).decode("utf-8"), max_depth=MAX_DEPTH)
            if not isinstance(body, dict):
                raise ValueError("not a JSON object")
            message = InboundMessage.model_validate({**body, "channel": self.name})
        except (ValueError, ValidationError) as exc:
            return 400, {"error": f"not a message: {_one_line(exc)}"}
        if not any(fnmatch.fnmatchcase(message.thread, glob) for glob in self.threads):
            return 403, {"error": f"thread {message.thread!r} is not one this channel may take"}
        if await anyio.to_thread.run_sync(self._id_taken, message):
            return 409, {"error": f"message id {message.id!r} is already taken by another thread's message; send "
                                  "this one under a new id"}
        name = f"{time.time_ns():020d}-{sha256_text(message.id)[:16]}.json"
        data = json.dumps(body, ensure_ascii=False).encode()
        await anyio.to_thread.run_sync(self._queue, self.inbox / name, data)
        return 202, {"accepted": message.id, "reply": f"/replies/{message.reply_key}"}

    @staticmethod
    async def _send(conn: h11.Connection, stream: SocketStream, status: int, body: dict[str, object],
                    extra: tuple[tuple[bytes, bytes], ...] = ()) -> None:
        data = json.dumps(body, ensure_ascii=False).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
                   (b"connection", b"close"), *extra]
        try:
            await stream.send(conn.send(h11.Response(status_code=status, headers=headers)) or b"")
            await stream.send(conn.send(h11.Data(data=data)) or b"")
            await stream.send(conn.send(h11.EndOfMessage()) or b"")
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError, h11.LocalProtocolError):
            return


async def _busy(conn: h11.Connection, stream: SocketStream) -> None:
    """503 to a request beyond `MAX_REQUESTS` at once, its body unread; what the client sends meanwhile is read and
    dropped for a moment, so the close does not reset the answer away."""
    await WebhookChannel._send(conn, stream, 503,
                               {"error": f"busy: {MAX_REQUESTS} requests are being served; retry later"},
                               ((b"retry-after", b"1"),))
    try:
        await stream.send_eof()
        for _ in range(16):
            await stream.receive(65536)
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
        return


async def _next_event(conn: h11.Connection, stream: SocketStream) -> object:
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            try:
                data = await stream.receive(65536)
            except anyio.EndOfStream:
                data = b""
            conn.receive_data(data)
            continue
        return event
