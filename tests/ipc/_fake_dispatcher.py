"""A stand-in for the session side (which a later change plugs in): sessions that exist only in memory, and
turns scripted by the prompt's text, so the IPC layer can be driven through every path it has."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import anyio

from agent.ipc import (
    ApprovalRequest,
    Connection,
    EventPush,
    Notice,
    Ok,
    Refused,
    ResultPush,
    SessionInfo,
    SessionRequest,
    WaitingCall,
)
from core.events import StoredEvent, UserMessage

ARGS_SHA = "a" * 64
PLAN = "p" * 64


@dataclass
class FakeSession:
    id: str
    driver: Connection | None = None
    watchers: list[Connection] = field(default_factory=list)
    seq: int = 0
    waiting: dict[str, str] = field(default_factory=dict)

    def audience(self) -> list[Connection]:
        return [c for c in [self.driver, *self.watchers] if c is not None and not c.closed]


class FakeDispatcher:
    """Prompt texts script the turn: `ask` pushes an event and an approval request; `flood:N:SIZE` pushes N
    events of SIZE characters each; `sleep:S` takes S seconds to answer; `raise` fails inside the dispatcher;
    anything else ends the turn at once."""

    def __init__(self, stop: Callable[[], None] | None = None) -> None:
        self.sessions: dict[str, FakeSession] = {}
        self._ids = itertools.count(1)
        self._stop = stop
        self.closed_connections = 0

    async def handle(self, request: SessionRequest, connection: Connection) -> Ok | Refused:
        match request.type:
            case "new_session":
                session = FakeSession(f"s{next(self._ids)}")
                self.sessions[session.id] = session
                return Ok(session_id=session.id)
            case "status":
                return Ok(sessions=tuple(
                    SessionInfo(session_id=s.id, status="idle", drivers=int(s.driver is not None),
                                watchers=len(s.watchers),
                                waiting=tuple(WaitingCall(call_id=c, tool=t) for c, t in s.waiting.items()))
                    for s in self.sessions.values()))
            case "shutdown":
                if self._stop is not None:
                    self._stop()
                return Ok()
        session = self.sessions.get(request.session_id)  # type: ignore[union-attr]
        if session is None:
            return Refused(code="unknown_session", message=f"no session {request.session_id}")  # type: ignore[union-attr]
        match request.type:
            case "attach":
                if request.role == "watch":
                    session.watchers.append(connection)
                    return Ok(session_id=session.id, role="watch")
                if session.driver is not None and not session.driver.closed and session.driver is not connection:
                    return Refused(code="session_busy", message=f"session {session.id} has a driving client")
                session.driver = connection
                return Ok(session_id=session.id, role="drive")
            case "detach":
                self._forget(session, connection)
                return Ok(session_id=session.id)
            case _ if session.driver is not connection:
                return Refused(code="not_driver", message="attach with role drive first")
            case "prompt":
                return await self._turn(session, request.text)
            case "approve" | "deny":
                if session.waiting.pop(request.call_id, None) is None:
                    return Refused(code="no_such_call", message=f"no call {request.call_id} waits")
                self._fan_out(session, ResultPush(session_id=session.id, status="completed", exit_code=0))
                return Ok(session_id=session.id)
            case "interrupt":
                self._fan_out(session, ResultPush(session_id=session.id, status="interrupted", exit_code=130))
                return Ok(session_id=session.id)
        return Refused(code="refused", message=f"the fake daemon does not serve {request.type}")

    async def closed(self, connection: Connection) -> None:
        self.closed_connections += 1
        for session in self.sessions.values():
            self._forget(session, connection)

    def holds(self, connection: Connection) -> bool:
        return any(connection in s.audience() for s in self.sessions.values())

    async def _turn(self, session: FakeSession, text: str) -> Ok | Refused:
        if text == "raise":
            raise RuntimeError("the fake session side failed")
        if text.startswith("sleep:"):
            await anyio.sleep(float(text.split(":")[1]))
            return Ok(session_id=session.id)
        if text.startswith("flood:"):
            _, count, size = text.split(":")
            for _ in range(int(count)):
                self._fan_out(session, self._event(session, "x" * int(size)))
            return Ok(session_id=session.id)
        self._fan_out(session, self._event(session, text))
        if text == "ask":
            call_id = f"toolu_{session.seq}"
            session.waiting[call_id] = "write_file"
            self._fan_out(session, ApprovalRequest(
                session_id=session.id, call_id=call_id, tool="write_file", input={"path": "a.txt", "content": "hi"},
                args_sha256=ARGS_SHA, asked_by="policy", reasons=("write_file asks by default",), safety="write",
                effect="effectful", plan_digest=PLAN))
        else:
            self._fan_out(session, ResultPush(session_id=session.id, status="completed", exit_code=0))
        return Ok(session_id=session.id)

    def _event(self, session: FakeSession, text: str) -> EventPush:
        session.seq += 1
        return EventPush.of(StoredEvent(session_id=session.id, seq=session.seq, turn=1,
                                        at=datetime(2026, 1, 1, tzinfo=UTC), event=UserMessage(text=text)))

    def _fan_out(self, session: FakeSession, message: EventPush | ApprovalRequest | ResultPush | Notice) -> None:
        for connection in session.audience():
            connection.push(message)

    @staticmethod
    def _forget(session: FakeSession, connection: Connection) -> None:
        if session.driver is connection:
            session.driver = None
        if connection in session.watchers:
            session.watchers.remove(connection)
