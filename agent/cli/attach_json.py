"""`strata attach --json`: the scriptable client. It reads JSON lines on stdin and writes JSON lines on stdout.

In (one object a line):
    {"type": "prompt", "text": "..."}                   start a turn (driver)
    {"type": "approve", "call_id": "...", "scope": "once"|"session"}   approve a call this client was asked about
    {"type": "deny", "call_id": "...", "reason": "..."}
    {"type": "interrupt"}                               stop the running turn as Ctrl-C does
    {"type": "detach"}                                  leave; the session goes on (a waiting call parks)

Out: `{"type": "attached", "session_id", "role"}` first; then every push of the daemon as it sends it (`event`
exactly as `run --json` prints it plus `session_id`, `approval_request` with the full input and `args_sha256`,
`result` at the end of each turn, `notice`); and `{"type": "error", "code", "message", "request"}` when a line
cannot be read or the daemon refuses what it asked (the client goes on).

An approval answers the `approval_request` this client got for that call: its `args_sha256` and `plan_digest` are
filled in from it, so an approval is bound to exactly what was shown. When stdin ends, the client waits for the
turn it started to end, then detaches; if a call waits for approval then, nobody is left to answer, so it detaches
at once and the call parks. Exit 0 when it detached; 1 when the daemon ended the attachment or the connection."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from collections.abc import Iterator
from typing import Annotated, Literal

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from agent import ipc
from agent.cli.output import echo, echo_json
from core.errors import StrataError

ENDING_NOTICES = frozenset({"detached", "dropped", "closed"})
"""Notice kinds that end an attachment (agent/daemon/_messages.py)."""
MAX_INPUT_LINE = 1024 * 1024


class _In(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class PromptIn(_In):
    type: Literal["prompt"]
    text: str


class ApproveIn(_In):
    type: Literal["approve"]
    call_id: str
    scope: Literal["once", "session"] = "once"


class DenyIn(_In):
    type: Literal["deny"]
    call_id: str
    reason: str = ""
    interrupt: bool = False
    """And stop the turn with the denial, in one request (the protocol's `deny` with `interrupt`)."""


class InterruptIn(_In):
    type: Literal["interrupt"]


class DetachIn(_In):
    type: Literal["detach"]


ClientLine = Annotated[PromptIn | ApproveIn | DenyIn | InterruptIn | DetachIn, Field(discriminator="type")]
_LINE: TypeAdapter[ClientLine] = TypeAdapter(ClientLine)


def stdin_lines() -> MemoryObjectReceiveStream[bytes]:
    """stdin's lines, read by a daemon thread from file descriptor 0 itself (a blocked read never holds the process
    at exit: no buffered reader's lock is held by it). A last line without its newline counts."""
    send, receive = anyio.create_memory_object_stream[bytes](16)
    token = anyio.lowlevel.current_token()

    def lines() -> Iterator[bytes]:
        pending = b""
        while chunk := os.read(0, 65536):
            pending += chunk
            *complete, pending = pending.split(b"\n")
            yield from complete
        if pending:
            yield pending

    def read() -> None:
        # stdin broke, or the event loop is gone: the stream simply ends
        with contextlib.suppress(Exception):
            for line in lines():
                anyio.from_thread.run(send.send, line, token=token)
        with contextlib.suppress(Exception):  # the event loop ended first
            anyio.from_thread.run_sync(send.close, token=token)

    threading.Thread(target=read, name="stdin", daemon=True).start()
    return receive


def _error(code: str, message: str, request: str | None) -> None:
    echo_json({"type": "error", "code": code, "message": message, "request": request})


class JsonAttach:
    def __init__(self, client: ipc.IpcClient, session_id: str, role: str) -> None:
        self.client = client
        self.session_id = session_id
        self.role = role
        self._asked: dict[str, ipc.ApprovalRequest] = {}
        self._turn_running = False
        self._stdin_done = False
        self._done = anyio.Event()
        self._exit_code = 0

    async def run(self) -> int:
        echo_json({"type": "attached", "session_id": self.session_id, "role": self.role})
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._pushes)
            tg.start_soon(self._inputs)
            await self._done.wait()
            tg.cancel_scope.cancel()
        return self._exit_code

    def _finish(self, code: int, why: str | None = None) -> None:
        if self._done.is_set():
            return
        if why:
            echo(f"strata: {why}", err=True)
        self._exit_code = code
        self._done.set()

    async def _pushes(self) -> None:
        async for push in self.client.pushes():
            echo_json(json.loads(push.model_dump_json()))
            sys.stdout.flush()
            if isinstance(push, ipc.ApprovalRequest):
                self._asked[push.call_id] = push
                if self._stdin_done:  # nobody is left to answer it: leave, and it parks
                    await self._detach()
            elif isinstance(push, ipc.ResultPush):
                self._turn_running = False
                self._asked.clear()
                if self._stdin_done:
                    await self._detach()
            elif isinstance(push, ipc.Notice) and push.kind in ENDING_NOTICES and push.session_id == self.session_id:
                self._finish(0 if push.kind == "detached" else 1,
                             None if push.kind == "detached" else f"the daemon ended this attachment: {push.text}")
                return
        self._finish(1, "the connection to the daemon ended")

    async def _inputs(self) -> None:
        lines = stdin_lines()
        async with lines:
            async for raw in lines:
                if not raw.strip():
                    continue
                await self._line(raw)
        self._stdin_done = True
        if not self._turn_running or self._asked:
            await self._detach()

    async def _line(self, raw: bytes) -> None:
        if len(raw) > MAX_INPUT_LINE:
            _error("too_large", f"an input line may hold at most {MAX_INPUT_LINE} bytes", None)
            return
        try:
            line = _LINE.validate_json(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "line"
            _error("invalid", f"not a client line ({where}: {first['msg']}); see `strata attach --help`", None)
            return
        sid = self.session_id
        try:
            match line:
                case PromptIn():
                    running, self._turn_running = self._turn_running, True
                    try:
                        await self.client.request(ipc.Prompt, session_id=sid, text=line.text)
                    except StrataError:  # refused: a turn it started earlier may still run (session_busy)
                        self._turn_running = running
                        raise
                case ApproveIn():
                    asked = self._asked.get(line.call_id)
                    if asked is None:
                        _error("no_such_call", f"no approval request for call {line.call_id} reached this client",
                               line.type)
                        return
                    await self.client.request(ipc.Approve, session_id=sid, call_id=line.call_id,
                                              args_sha256=asked.args_sha256, plan_digest=asked.plan_digest,
                                              scope=line.scope)
                    self._asked.pop(line.call_id, None)
                case DenyIn():
                    await self.client.request(ipc.Deny, session_id=sid, call_id=line.call_id, reason=line.reason,
                                              interrupt=line.interrupt)
                    self._asked.pop(line.call_id, None)
                case InterruptIn():
                    await self.client.request(ipc.Interrupt, session_id=sid)
                case DetachIn():
                    await self._detach()
        except ipc.RequestFailed as exc:
            _error(exc.code, exc.message, line.type)
        except ipc.DaemonGone as exc:
            self._finish(1, exc.message)

    async def _detach(self) -> None:
        try:
            await self.client.request(ipc.Detach, session_id=self.session_id)
        except ipc.RequestFailed as exc:
            if exc.code != "not_attached":  # detached already (the daemon closed it): nothing to undo
                _error(exc.code, exc.message, "detach")
        except ipc.DaemonGone:
            pass
        self._finish(0)
