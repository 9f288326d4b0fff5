"""`run_agent`, `get_timeline` and `list_sessions` as plain async functions over the Strata home: what the MCP
tools of `strata mcp serve` call. A run is a headless one-shot session in mode `mcp`: its plan leaves out the
default deny list (core/tools/modes.py), and `ask` means deny (there is no person to ask)."""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from agent.mcp import with_mcp_tools
from agent.mcp_serve._roots import allowed_roots, model_in_roots, workspace_in_roots
from agent.models import closed_on_failure, model_from_spec
from agent.outcome import RunOutcome
from agent.reading import recorded_session
from agent.session import Asking, LiveSession, Runtime, resume_session, start_session
from config import LoadedConfig, load_config
from config.settings import MAX_TURNS_LIMIT
from core.errors import SessionActive, StrataError, UsageError
from core.events import AssistantMessage, BatchProposed, StoredEvent
from core.messages import TextBlock
from core.record import record
from core.timeline_rows import ROW_KINDS
from core.vocabulary import TIMELINE_DECISIONS
from memory.leases import make_liveness
from memory.liveness import held_here
from observability.session_timeline import load_timeline, shown_record

Progress = Callable[[float, str], Awaitable[None]]
DEFAULT_MAX_TURNS = 20
CANCELLED = "the MCP client cancelled the run_agent call"
"""How a run_agent run that was cut short names it (its interrupt note, its open calls' results and receipts): no
person is there to interrupt it, the MCP host's cancellation of the call (`notifications/cancelled`) is what does."""


@record
class Serving:
    """What the server was started with: its config (no project layer), working directory and flags."""

    config: LoadedConfig
    cwd: Path
    flags: dict[str, Any]

    def roots(self) -> list[Path]:
        return allowed_roots(self.config.mcp.serve.roots, self.cwd)

    def for_workspace(self, workspace: Path, model: str | None = None) -> LoadedConfig:
        flags = dict(self.flags)
        if model is not None:
            flags["model"] = model
        return load_config(workspace=workspace, flags=flags)


async def run_agent(serving: Serving, prompt: str, *, workspace: str | None = None, model: str | None = None,
                    max_turns: int | None = None, session_id: str | None = None,
                    progress: Progress | None = None, notify: Callable[[str], None]) -> dict[str, Any]:
    """A new session on `prompt` in `workspace` (or `session_id` resumed with it); its outcome as the tool's
    result. StrataError for anything refused (a workspace outside the roots, an unknown session, a busy one)."""
    if max_turns is not None and not 1 <= max_turns <= MAX_TURNS_LIMIT:  # the bounds `--max-turns` has
        raise UsageError(f"max_turns must be from 1 to {MAX_TURNS_LIMIT:,} (got {max_turns})")
    if model is not None:
        model = model_in_roots(model, serving.roots())
    if session_id is not None:
        base = await anyio.to_thread.run_sync(lambda: serving.for_workspace(serving.cwd))
        recorded = await recorded_session(base.settings, session_ref=session_id)
        session_id = recorded.session_id
        ws = workspace_in_roots(str(recorded.workspace), serving.roots())
    else:
        ws = workspace_in_roots(workspace, serving.roots())
    loaded = await anyio.to_thread.run_sync(lambda: serving.for_workspace(ws, model))
    send, receive = anyio.create_memory_object_stream[tuple[int, str]](math.inf)
    final: list[str] = []

    def observe(item: StoredEvent) -> None:
        event = item.event
        if isinstance(event, BatchProposed):
            tools = ", ".join(c.tool for c in event.calls)
            send.send_nowait((item.turn, f"turn {item.turn}: {len(event.calls)} tool call(s): {tools}"))
        elif isinstance(event, AssistantMessage):
            final[:] = [b.text for b in event.content if isinstance(b, TextBlock)]
            send.send_nowait((item.turn, f"turn {item.turn}: answered"))

    async def forward() -> None:
        async with receive:
            async for turn, message in receive:
                if progress is not None:
                    await progress(float(turn), message)

    rt = await Runtime.open(loaded)
    rt.stop.reason = CANCELLED  # only read when the run is cut short (agent/loop.py, as a daemon's shutdown is)
    try:
        # A notice can quote an MCP server's secret: masked by the run's masker, which knows this workspace's.
        async with with_mcp_tools(rt, loaded, lambda line: notify(rt.masker.mask(line))) as session_rt, \
                anyio.create_task_group() as tg:
            tg.start_soon(forward)
            try:
                try:
                    live = await _session(session_rt, loaded, ws, prompt, model, max_turns, session_id, observe)
                except SessionActive as busy:
                    raise _busy_here(busy) from None
                outcome = await _drive(live, prompt if session_id is not None else None)
            finally:
                send.close()
    finally:
        with anyio.CancelScope(shield=True):
            await rt.close()
    return {"session_id": outcome.session_id, "status": outcome.status, "exit_code": outcome.exit_code,
            "reason": outcome.reason, "final_text": "\n".join(final), "unknown_effects": outcome.unknown_receipts,
            "resume": f"strata resume {outcome.session_id}"}


async def _session(rt: Runtime, loaded: LoadedConfig, ws: Path, prompt: str, model: str | None,
                   max_turns: int | None, session_id: str | None,
                   observe: Callable[[StoredEvent], None]) -> LiveSession:
    asking = Asking(on_ask="deny")  # no person: `ask` means deny
    if session_id is not None:
        mode = (await rt.store.get_session(session_id)).mode
        if mode != "mcp":  # its plan was made for a person's mode (bash, delegation): not for an MCP host to drive
            raise UsageError(f"session {session_id} was started in mode {mode}, not by run_agent; an MCP host may "
                             "continue only the sessions run_agent started",
                             hint=f"continue it from a terminal with `strata resume {session_id}`")
        async with closed_on_failure(model_from_spec(model) if model else None) as given:
            return await resume_session(rt, session_id, rules=[], model=given, model_factory=model_from_spec,
                                        max_turns=max_turns, observer=observe, asking=asking, prompt=prompt)
    async with closed_on_failure(model_from_spec(loaded.settings.model)) as made:
        return await start_session(rt, model=made, workspace=ws, mode="mcp", rules=[], prompt=prompt,
                                   max_turns=max_turns or DEFAULT_MAX_TURNS, observer=observe, asking=asking)


def _busy_here(busy: SessionActive) -> StrataError:
    """The refusal of a session whose lease is held: `busy` itself when another process holds it; when it is this
    server (another `run_agent` call of it runs the session: the lease's holder is this process, memory/liveness.py
    held_here), said so, not as "another process (pid N)" with N the server's own pid."""
    if busy.holder is None or not held_here(busy.holder):
        return busy
    return UsageError(f"session {busy.session_id} is being run by another run_agent call of this server "
                      f"(pid {os.getpid()})",
                      hint="wait for that call to return, then call run_agent again with this session_id")


async def _drive(live: LiveSession, prompt: str | None) -> RunOutcome:
    try:
        outcome = await live.run(prompt)
    except BaseException:
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(StrataError):
                await live.release(None)
        raise
    await live.release(None)
    return outcome


async def get_timeline(serving: Serving, session_id: str, *, kind: str | None = None, tool: str | None = None,
                       decision: str | None = None, since: int | None = None) -> list[dict[str, Any]]:
    """The session's timeline rows (masked when written; call ids and a row's workspace masked again on the way
    out), filtered. A kind or decision Strata does not write is refused (an empty answer would say that nothing of
    the kind happened), unless the session holds rows of that kind (an older Strata's), as `strata timeline` does."""
    if decision is not None and decision not in TIMELINE_DECISIONS:
        raise UsageError(f"get_timeline: decision {decision!r} is not one of {', '.join(TIMELINE_DECISIONS)}")
    loaded = await anyio.to_thread.run_sync(lambda: serving.for_workspace(serving.cwd))
    rt = await Runtime.open(loaded, read_only=True)
    try:
        rows = await load_timeline(rt.store, session_id, kinds=[kind] if kind else None,
                                   tools=[tool] if tool else None,
                                   decisions=[decision] if decision else None,
                                   since_seq=since)
        if kind is not None and kind not in ROW_KINDS and not rows and \
                not await rt.store.read_timeline(session_id, kinds=[kind]):
            raise UsageError(f"get_timeline: kind {kind!r} is not one of {', '.join(ROW_KINDS)}")
        return [shown_record(row, rt.masker.mask) for row in rows]  # as `timeline --json` shows them
    finally:
        with anyio.CancelScope(shield=True):
            await rt.close()


async def list_sessions(serving: Serving) -> list[dict[str, Any]]:
    """Every session of the home, oldest first: id, status, mode, masked workspace, model and title, times."""
    loaded = await anyio.to_thread.run_sync(lambda: serving.for_workspace(serving.cwd))
    rt = await Runtime.open(loaded, read_only=True)
    try:
        alive = make_liveness(rt.clock)
        out = []
        for rec in await rt.store.list_sessions():
            status: str = rec.status
            if status == "active" and (rec.lease is None or not alive(rec.lease)):
                status = "interrupted"
            out.append({"id": rec.id, "status": status, "mode": rec.mode, "workspace": rt.masker.mask(rec.workspace),
                        "model": rt.masker.mask(rec.model), "title": rt.masker.mask(rec.title),
                        "created_at": rec.created_at.isoformat(), "updated_at": rec.updated_at.isoformat()})
        return out
    finally:
        with anyio.CancelScope(shield=True):
            await rt.close()


