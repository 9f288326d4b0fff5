"""`strata sessions` and `strata receipts [ID]` (the full ways), and `strata show ID`: reading commands. They open the
database read-only (a home that cannot be written still serves) and mask what they print with the home's masker."""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any

import click

from agent.cli._common import Command, json_option
from agent.cli.logging_setup import full_way
from agent.cli.output import echo, echo_json, say_error
from agent.cli.receipt_lines import print_receipts
from agent.cli.session_list import print_sessions, session_view, shown_status
from agent.cli.views import receipt_view, show_view
from agent.reading import Reader
from core.delegate_keys import DELEGATE, child_of
from core.errors import DamagedEvent, DamagedSession, SessionNotFound
from core.state import Counters, FoldError
from memory.leases import make_liveness
from memory.restore import restore, restore_or_report
from memory.rows import SessionRecord
from memory.store import EventStore
from observability.session_tree import tree_order


def display_status(rt: Reader, rec: SessionRecord, awaited: SessionRecord | None = None) -> str:
    """A session whose row says `active` but whose driver is gone shows as `interrupted`; one parked on a child
    (`awaited`) another process drives, as `waiting_for_child` (agent/cli/session_list.py `shown_status`)."""
    return shown_status(rec, make_liveness(rt.clock), awaited)


async def awaited_children(store: EventStore, session_id: str | None = None) -> dict[str, str]:
    """The child each session's `dispatched` delegate receipt names (the one its open batch waits on)."""
    found: dict[str, str] = {}
    for receipt in await store.list_receipts(session_id, status="dispatched"):
        if receipt.tool == DELEGATE and (child := child_of(receipt.resource_keys)) is not None:
            found.setdefault(receipt.session_id, child)
    return found


def list_sessions(as_json: bool) -> None:
    """`strata sessions` the full way: the store opened by the reading parts, each session's state restored for
    its counters (agent/cli/sessions_cmd.py tries the quick way first)."""
    cmd = Command()
    loaded = cmd.config(None, quiet=True)

    damaged: list[DamagedSession] = []

    async def main() -> list[dict[str, Any]]:
        async with cmd.reader(loaded) as rt:
            records = await rt.store.list_sessions(damaged=damaged)
            unknown: dict[str, int] = {}
            for receipt in await rt.store.list_receipts(status="unknown"):
                unknown[receipt.session_id] = unknown.get(receipt.session_id, 0) + 1
            by_id = {r.id: r for r in records}
            awaited = await awaited_children(rt.store)
            views = []
            for r, depth in tree_order(records):
                try:  # the counters come from the folded state: one snapshot plus a short tail per session
                    counters: Counters | None = (await restore(rt.store, r.id)).state.counters
                except (FoldError, DamagedEvent):  # a broken log is listed with unknown counters ('?')
                    counters = None
                views.append(session_view(r, display_status(rt, r, by_id.get(awaited.get(r.id, ""))), rt.masker,
                                          unknown.get(r.id, 0), counters, depth=depth))
            return views

    print_sessions(cmd.run(main), as_json)
    if damaged:  # the others are listed; each damaged row is one error line, and the command fails
        for err in damaged[:-1]:
            say_error(cmd.masker.mask(err.message))
        say_error(cmd.masker.mask(damaged[-1].message), cmd.masker.mask(damaged[0].hint or ""))
        sys.exit(damaged[0].exit_code)


@click.command()
@click.argument("session_id")
@json_option
def show(session_id: str, as_json: bool) -> None:
    """Show a session and its conversation as the next model request would carry it."""
    full_way.enter_at_first_record()  # structlog only if something is logged (a snapshot ignored, say)
    cmd = Command()

    async def main() -> dict[str, Any]:
        loaded = await cmd.session_config(session_id=session_id)
        async with cmd.reader(loaded) as rt:
            rec = await rt.store.get_session(cmd.session_id)
            state = (await restore_or_report(rt.store, cmd.session_id)).state
            unknown = await rt.store.list_receipts(cmd.session_id, "unknown")
            child = (await awaited_children(rt.store, cmd.session_id)).get(cmd.session_id)
            awaited = None
            if child is not None:
                with contextlib.suppress(SessionNotFound):
                    awaited = await rt.store.get_session(child)
            return show_view(rec, display_status(rt, rec, awaited), state, rt.masker, len(unknown))

    view = cmd.run(main)
    if as_json:
        echo_json(view)
        return
    s = view["session"]
    echo(f"session {s['id']}  {s['status']}  mode {s['mode']}  model {s['model']}")
    echo(f"workspace {s['workspace']}")
    settled = s["unknown_outcomes"] - s["unknown_receipts"]
    reconciled = f" ({settled} reconciled since)" if settled > 0 else ""
    echo(f"turns {s['turns']}  tool calls {s['tool_calls']}  denials {s['denials']}  "
         f"unknown outcomes {s['unknown_receipts']}{reconciled}")
    for m in view["messages"]:
        for block in m["content"]:
            if block["type"] == "text":
                echo(f"{m['role']}: {block['text']}")
            elif block["type"] == "tool_use":
                echo(f"{m['role']}: -> {block['name']} {json.dumps(block['input'])[:100]} [{block['id']}]")
            else:
                first = block["content"].strip().splitlines()[0] if block["content"].strip() else ""
                mark = "error" if block["is_error"] else "ok"
                echo(f"{m['role']}: <- [{block['tool_use_id']}] {mark}: {first[:100]}")
    if view["open_batch"]:
        echo(f"open batch {view['open_batch']['batch_id']}: resume the session to finish it")


def list_receipts(session_id: str | None, status: str | None, as_json: bool) -> None:
    """`strata receipts` the full way: the store opened by the reading parts (agent/cli/receipts_cmd.py tries the
    quick way first)."""
    cmd = Command()

    async def main() -> list[dict[str, Any]]:
        if session_id is None:
            loaded = cmd.config(None, quiet=True)
        else:
            loaded = await cmd.session_config(session_id=session_id)
        async with cmd.reader(loaded) as rt:
            rows = await rt.store.list_receipts(cmd.session_id or None, status)  # type: ignore[arg-type]
            return [receipt_view(r, rt.masker) for r in rows]

    print_receipts(cmd.run(main), as_json)
