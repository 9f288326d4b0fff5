"""What `strata run` / `strata resume` say after Ctrl-C (exit 130): what became of each call the interrupt caught
and the commands that go on from there, naming the session and the calls by their ids. `strata reconcile` takes a
call id as well as a receipt id (agent/ids.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import anyio

from memory.opening import open_store
from memory.rows import Receipt
from tool_executor.result import VERDICT_MARK

if TYPE_CHECKING:
    from agent.cli._common import Command


def _group(r: Receipt) -> str:
    """What became of the command's process group, when the call started one (`bash`)."""
    if r.process is None:
        return ""
    state = r.process.state()
    if state == "gone":
        return f"; its {r.process.describe()} was killed and nothing of it runs any more"
    if state == "running":
        return f"; its {r.process.describe()} still runs"
    return ""


def hint_lines(session_id: str, unknown: Sequence[Receipt], others: Sequence[Receipt] = ()) -> list[str]:
    """The lines after `strata: interrupted` for session `session_id` whose `unknown` receipts await a decision.
    `others`: other sessions' unknown receipts; a call id one of them shares (a scripted model's `c1`) would name
    several, so the reconcile command names the receipt then."""
    lines = [f"session {session_id} was stopped safely: its open batch was closed and its lease released"]
    for r in unknown:
        _, found, verdict = (r.note or "").partition(VERDICT_MARK)
        known = f"; {verdict}" if found else _group(r)
        shared = any(o.call_id == r.call_id for o in others)
        lines.append(f"call {r.call_id} ({r.tool}) had started when it was interrupted: its outcome is unknown "
                     f"(receipt {r.id}){known}; check the workspace, then: strata reconcile "
                     f"{r.id if shared else r.call_id} --applied|--not-applied")
    if unknown:
        lines.append(f"or let each tool's probe decide: strata reconcile --probe {session_id}")
    lines.append(f"continue it: strata resume {session_id}    see what happened: strata timeline {session_id}")
    lines.append("(exit code 130: interrupted by Ctrl-C)")
    return lines


def interrupted_hints(cmd: Command) -> Callable[[], list[str]]:
    """The `on_interrupt` of a session command: reads the session's unknown receipts once the run has stopped."""

    def lines() -> list[str]:
        loaded = cmd.loaded
        if not cmd.session_id or loaded is None:
            return []
        session_id = cmd.session_id
        if not cmd.took_session:  # interrupted before it had the lease (waiting for another process to let go)
            return [f"session {session_id} was not resumed: this process had not taken it, and it is as it was",
                    f"continue it: strata resume {session_id}    see what happened: strata timeline {session_id}",
                    "(exit code 130: interrupted by Ctrl-C)"]

        async def read() -> list[Receipt]:
            store = await open_store(loaded.settings, read_only=True)
            try:
                return await store.list_receipts(None, "unknown")
            finally:
                with anyio.CancelScope(shield=True):
                    await store.close()

        every = anyio.run(read)
        return hint_lines(session_id, [r for r in every if r.session_id == session_id],
                          [r for r in every if r.session_id != session_id])

    return lines
