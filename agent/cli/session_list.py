"""What `strata sessions` prints: each session as one JSON object (part of the contract: fields are added, never
renamed) or one line of the table. It takes any record and counters with the fields it shows: the store's
SessionRecord and the folded state's Counters (the full way, agent/cli/inspect_cmds.py), or the quick read's
(agent/cli/quick_sessions.py), so both print exactly the same."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from agent.cli.output import echo, echo_json
from core.clock import iso
from core.masking import Masker
from memory.liveness import Holder
from observability.session_tree import Linked


class Record(Linked, Protocol):
    @property
    def created_at(self) -> datetime: ...
    @property
    def updated_at(self) -> datetime: ...
    @property
    def status(self) -> str: ...
    @property
    def mode(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def workspace(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def lease(self) -> Holder | None: ...


class Counted(Protocol):
    @property
    def assistant_turns(self) -> int: ...
    @property
    def tool_calls(self) -> int: ...
    @property
    def denials(self) -> int: ...


WAITING_FOR_CHILD = "waiting_for_child"


def shown_status(rec: Record, alive: Callable[[Holder], bool], awaited: Record | None = None) -> str:
    """A session whose row says `active` but whose driver is gone shows as `interrupted`. One parked
    (`awaiting_approval`) on a delegate call whose child (`awaited`, the child its `dispatched` delegate receipt
    names) another process drives now shows as `waiting_for_child`: it waits for that process, not for a decision."""
    if rec.status == "active" and (rec.lease is None or not alive(rec.lease)):
        return "interrupted"
    if rec.status == "awaiting_approval" and awaited is not None and awaited.lease is not None \
            and alive(awaited.lease):
        return WAITING_FOR_CHILD
    return rec.status


def session_view(rec: Record, display_status: str, masker: Masker, unknown_receipts: int = 0,
                 counters: Counted | None = None, depth: int = 0) -> dict[str, Any]:
    """`turns`, `tool_calls` and `denials` are None when the counters were not read (or the log does not fold).
    The title (the first line of the prompt), the model spec and the workspace are masked, as every export masks
    them: a listing of sessions is an observation surface. `depth`:
    delegations deep (0: top level; a delegated child's `parent_id` is its parent, and its `fork_seq` None)."""
    return {
        "id": rec.id,
        "status": display_status,
        "stored_status": rec.status,
        "mode": rec.mode,
        "model": masker.mask(rec.model),
        "workspace": masker.mask(rec.workspace),
        "title": masker.mask(rec.title),
        "parent_id": rec.parent_id,
        "created_at": iso(rec.created_at),
        "updated_at": iso(rec.updated_at),
        "lease_owner": None if rec.lease is None else {"pid": rec.lease.pid, "host": rec.lease.host},
        "unknown_receipts": unknown_receipts,
        "turns": counters.assistant_turns if counters else None,
        "tool_calls": counters.tool_calls if counters else None,
        "denials": counters.denials if counters else None,
        "fork_seq": rec.fork_seq,
        "depth": depth,
    }


def _cut(text: str, limit: int) -> str:
    """`text` on one line, cut to `limit` characters with an ellipsis when it is longer."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "\u2026"


def print_sessions(views: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        for v in views:
            echo_json(v)
        return
    if not views:
        echo("no sessions yet")
        return
    width = 36 + 2 * max(v["depth"] for v in views)
    echo(f"{'id':<{width}}  {'status':<17} {'mode':<11} {'turns':>5} {'calls':>5} {'denied':>6} "
         f"{'unknown':>7}  {'updated (UTC)':<19}  title")
    for v in views:
        def n(key: str, view: dict[str, Any] = v) -> str:
            return "?" if view[key] is None else str(view[key])
        shown = "  " * v["depth"] + v["id"]
        echo(f"{shown:<{width}}  {v['status']:<17} {v['mode']:<11} {n('turns'):>5} {n('tool_calls'):>5} "
             f"{n('denials'):>6} {v['unknown_receipts']:>7}  {v['updated_at'][:19]:<19}  {_cut(v['title'], 40)}")
