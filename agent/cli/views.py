"""Machine-readable shapes of the CLI's `--json` output. Part of the contract: fields are added, never renamed."""

from __future__ import annotations

from typing import Any

from agent.cli.receipt_lines import receipt_fields
from agent.cli.receipt_lines import receipt_reads as receipt_reads
from agent.cli.session_list import session_view
from core.clock import iso
from core.events import StoredEvent
from core.masking import Masker
from core.state import SessionState
from memory.rows import Receipt, SessionRecord


def receipt_view(r: Receipt, masker: Masker) -> dict[str, Any]:
    """A receipt as `strata receipts --json` shows it (agent/cli/receipt_lines.py `receipt_fields`)."""
    return receipt_fields(r, masker, None if r.process is None else r.process.model_dump(mode="json"))


def open_batch_view(state: SessionState) -> dict[str, Any] | None:
    batch = state.open_batch
    if batch is None:
        return None
    return {
        "batch_id": batch.batch_id,
        "calls": [
            {"call_id": c.call_id, "tool": c.tool, "input": c.input,
             "result": None if c.call_id not in batch.results else batch.results[c.call_id].status}
            for c in batch.calls
        ],
    }


def show_view(rec: SessionRecord, display_status: str, state: SessionState, masker: Masker,
              unknown_receipts: int = 0) -> dict[str, Any]:
    """`unknown_outcomes` counts the calls the log recorded as unknown (a reconciliation does not change it);
    `unknown_receipts` those still awaiting a decision, as `strata sessions` counts them."""
    session = session_view(rec, display_status, masker, unknown_receipts)
    session.update({
        "turns": state.counters.assistant_turns,
        "tool_calls": state.counters.tool_calls,
        "denials": state.counters.denials,
        "unknown_outcomes": state.counters.unknown_outcomes,
        "rules": [{"action": r.action, "rule": masker.mask(r.text()), "source": r.source} for r in state.rules],
        "ended": state.ended,
        "last_seq": state.last_seq,
    })
    return {"session": session, "messages": [m.to_api() for m in state.messages], "open_batch": open_batch_view(state)}


def event_view(item: StoredEvent) -> dict[str, Any]:
    return {"type": "event", "seq": item.seq, "turn": item.turn, "at": iso(item.at),
            **item.event.model_dump(mode="json")}
