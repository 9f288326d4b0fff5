"""The IPC server's Dispatcher over a SessionHost: requests become host calls, and each attachment a connection
holds is pumped to it by a task of its own, so committed events reach the client as they are committed.

A connection holds at most one attachment per session. Its pump runs on the daemon's event loop and never waits
on the client for what is live: `Connection.push` only queues (a client that does not read is disconnected by the
IPC layer, and its attachments detached here). Two things are paced by the client's outbox instead: a replay of
committed events (the attach's `since_seq`) waits while the outbox is half full, so a long session's history
never overflows it (the attachment reads the next page only when it is taken); and a text delta is dropped unless,
with it, the outbox stays under half full: never pushed at the price of the connection or of an event's room.

When a connection ends, however it ends, each of its attachments is detached, so a call that waited for its
approval parks (agent/daemon/_approver.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import structlog
from anyio.abc import TaskGroup

from agent import daemon, ipc
from agent.reconcile import person
from agent.serve._translate import info_of, push_of, refusal_of
from core.errors import StrataError
from core.masking import Masker

log = structlog.get_logger("strata.serve")


@dataclass
class _Link:
    """One connection's attachment to one session, and the scope of the task pumping it."""

    connection: ipc.Connection
    attachment: daemon.Attachment
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)


class HostDispatcher:
    def __init__(self, host: daemon.SessionHost, tg: TaskGroup, masker: Masker, *,
                 on_shutdown: Callable[[], None],
                 store_counts: Callable[[], ipc.StoreCounts | None] = lambda: None) -> None:
        """`tg`: where the pumps run (it must outlive the IPC server); `on_shutdown`: a client asked the daemon to
        drain (`shutdown`); `store_counts`: the store's commits and fsyncs so far, for the `status` reply."""
        self._host = host
        self._tg = tg
        self._masker = masker
        self._on_shutdown = on_shutdown
        self._store_counts = store_counts
        self._links: dict[tuple[int, str], _Link] = {}

    async def handle(self, request: ipc.SessionRequest, connection: ipc.Connection) -> ipc.Ok | ipc.Refused:
        try:
            return await self._handle(request, connection)
        except StrataError as err:  # a refusal, or an error of the session services: the client's to read
            return refusal_of(err, self._masker)

    async def _handle(self, request: ipc.SessionRequest, connection: ipc.Connection) -> ipc.Ok | ipc.Refused:
        host = self._host
        match request:
            case ipc.Status():
                return ipc.Ok(sessions=tuple(info_of(i) for i in await host.status()), store=self._store_counts())
            case ipc.Shutdown():
                log.info("shutdown asked by a client", connection=connection.id, peer_pid=connection.peer.pid)
                self._on_shutdown()
                return ipc.Ok()
            case ipc.NewSession():
                workspace = Path(request.workspace)
                if not workspace.is_absolute():
                    return ipc.Refused(code="refused", message="the workspace must be an absolute path (the "
                                       "daemon does not share the client's working directory)")
                return ipc.Ok(session_id=await host.new_session(workspace=workspace, model=request.model))
            case ipc.Attach():
                return await self._attach(request, connection)
        link = self._links.get((connection.id, request.session_id))
        if isinstance(request, ipc.Approve | ipc.Deny):  # the attachment that was asked, whichever session it is to
            link = self._asked_for_child(connection, request.session_id, request.call_id) or link
        if link is None:
            return ipc.Refused(code="not_attached", message=f"this connection is not attached to session "
                               f"{request.session_id}; attach first")
        attachment = link.attachment
        match request:
            case ipc.Prompt():
                await host.prompt(attachment, request.text)
            case ipc.Approve():
                await host.approve(attachment, request.call_id, args_sha256=request.args_sha256,
                                   plan_digest=request.plan_digest, always=request.scope == "session")
            case ipc.Deny():
                await host.deny(attachment, request.call_id, request.reason, interrupt=request.interrupt)
            case ipc.Interrupt():
                if not await host.interrupt(attachment):
                    return ipc.Refused(code="refused", message=f"no turn of session {request.session_id} is "
                                       "running")
            case ipc.Detach():
                # The attachment ends here: its pump stops (a replay it was pacing included) and its `detached`
                # notice goes out now, the last message of it, so a client attaching again at once gets nothing of
                # this attachment after its new one began.
                del self._links[(connection.id, request.session_id)]
                link.scope.cancel()
                await host.detach(attachment)
                connection.push(push_of(attachment.closed_by or daemon.Notice(
                    session_id=request.session_id, kind="detached", text="detached")))
        return ipc.Ok(session_id=request.session_id)

    def _asked_for_child(self, connection: ipc.Connection, session_id: str, call_id: str) -> _Link | None:
        """The link through which this connection was asked about call `call_id` of `session_id`: a child's call is
        asked of the parent's driver, its approval request naming the child, and an answer naming what the request
        named is taken (as one naming the parent is), even when this connection also watches the child itself (that
        attachment was asked nothing)."""
        links = {link.attachment: link for (conn, _), link in self._links.items() if conn == connection.id}
        asked = self._host.asked_through(links, session_id, call_id)
        return None if asked is None else links[asked]

    async def _attach(self, request: ipc.Attach, connection: ipc.Connection) -> ipc.Ok | ipc.Refused:
        key = (connection.id, request.session_id)
        if key in self._links:
            return ipc.Refused(code="refused", message=f"this connection is attached to session "
                               f"{request.session_id} already; detach first to change its role")
        who = person(f"strata attach (client pid {connection.peer.pid})")
        attachment = await self._host.attach(request.session_id, request.role, who=who,
                                             since_seq=request.since_seq)
        if connection.closed:  # it left while the session was being opened
            await self._host.detach(attachment)
            return ipc.Refused(code="refused", message="the connection closed")
        link = _Link(connection, attachment)
        self._links[key] = link
        self._tg.start_soon(self._pump, key, link)
        log.debug("client attached", connection=connection.id, session_id=request.session_id, role=request.role)
        return ipc.Ok(session_id=request.session_id, role=request.role)

    async def _pump(self, key: tuple[int, str], link: _Link) -> None:
        """The attachment's messages to the connection, in order, until either ends."""
        with link.scope:
            try:
                async for message in link.attachment:
                    if link.scope.cancel_called:  # ended (a detach): a task woken already runs on until it awaits
                        break
                    if isinstance(message, daemon.TextDelta):  # streamed text is not owed: the committed
                        link.connection.push_droppable(push_of(message))  # message has it, if it is dropped here
                        continue
                    if link.attachment.replaying:
                        await link.connection.wait_for_room()
                        if link.scope.cancel_called:
                            break
                    if not link.connection.push(push_of(message)):
                        break
            except Exception as exc:  # a bug here ends this attachment, never the daemon; the client is told
                log.error("attachment pump failed", error_type=type(exc).__name__, exc_info=True)
                link.connection.push(ipc.Notice(
                    session_id=key[1], kind="closed", level="warning",
                    text="the daemon failed on this attachment (its log says why) and detached it; the session "
                    "goes on: attach again"))
        if self._links.get(key) is link:
            del self._links[key]
        if link.attachment.attached:  # the connection went first: the session goes on without it
            with anyio.CancelScope(shield=True), contextlib.suppress(StrataError):
                await self._host.detach(link.attachment)

    def holds(self, connection: ipc.Connection) -> bool:
        return any(key[0] == connection.id for key in self._links)

    async def closed(self, connection: ipc.Connection) -> None:
        for key, link in list(self._links.items()):
            if key[0] != connection.id:
                continue
            del self._links[key]
            link.scope.cancel()
            with contextlib.suppress(StrataError):
                await self._host.detach(link.attachment)
            log.debug("client detached: its connection ended", connection=connection.id, session_id=key[1])
