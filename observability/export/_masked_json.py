"""Masked JSON records of a session's parts: the header, one state event, one timeline row, one receipt. Every
exporter writes these shapes (or values taken from them), so nothing reaches a file without passing the masker.

Raw values are masked before they are serialised or cut: a secret is recognised in its own text (a PEM block
with real newlines, not `\\n` escapes), and an excerpt taken after masking can never hold half a secret."""

from __future__ import annotations

from typing import Any

from core.clock import iso
from core.events import StoredEvent
from core.masking import Masker
from core.timeline import TimelineRow
from core.timeline_rows import ModelAttemptRow, observation
from memory.rows import Receipt
from observability.export._snapshot import SessionSnapshot
from observability.session_timeline import timeline_record

EXPORT_VERSION = 1


def counts(snapshot: SessionSnapshot) -> dict[str, int]:
    """The numbers a reader looks for first. Token totals come from the model attempts the timeline recorded."""
    c = snapshot.state.counters
    attempts = [r for r in snapshot.timeline if r.kind == "model_attempt"]
    typed = [observation(r) for r in attempts]
    usage = [t.usage for t in typed if isinstance(t, ModelAttemptRow) and t.usage is not None]
    return {
        "turns": c.assistant_turns,
        "tool_calls": c.tool_calls,
        "denials": c.denials,
        "unknown_outcomes": c.unknown_outcomes,
        "unknown_receipts": snapshot.unknown_receipts,
        "repairs": c.repairs,
        "resumes": c.resumes,
        "model_attempts": len(attempts),
        "input_tokens": sum(u.input_tokens for u in usage),
        "output_tokens": sum(u.output_tokens for u in usage),
        "events": len(snapshot.events),
        "timeline_rows": len(snapshot.timeline),
    }


def session_record(snapshot: SessionSnapshot, masker: Masker) -> dict[str, Any]:
    rec, state = snapshot.record, snapshot.state
    body: dict[str, Any] = masker.mask_value({
        "id": rec.id,
        "title": rec.title,
        "status": rec.status,
        "mode": rec.mode,
        "model": state.model or rec.model,
        "workspace": rec.workspace,
        "parent_id": rec.parent_id,
        "fork_seq": rec.fork_seq,
        "ended": state.ended,
        "end_reason": state.end_reason,
        "open_batch": state.open_batch.batch_id if state.open_batch else None,
    })
    body["created_at"] = iso(rec.created_at)
    body["updated_at"] = iso(rec.updated_at)
    body["counts"] = counts(snapshot)
    return body


def event_record(stored: StoredEvent, masker: Masker) -> dict[str, Any]:
    """The shape of `strata run --json` event lines, masked."""
    return {"type": "event", "seq": stored.seq, "at": iso(stored.at), "turn": stored.turn,
            **masker.mask_value(stored.event.model_dump(mode="json"))}


_ROW_TEXT = ("kind", "call_id", "tool", "check", "outcome", "summary", "data")


def timeline_row_record(row: TimelineRow, masker: Masker) -> dict[str, Any]:
    """The shape of `strata timeline --json` rows. Summaries were masked when written and masking is idempotent,
    so masking again changes nothing and the hashes still verify; it is done anyway, for rows written by
    anything that forgot to."""
    record = timeline_record(row)
    masked = masker.mask_value({k: record[k] for k in _ROW_TEXT})
    return {"type": "timeline", **{k: masked.get(k, v) for k, v in record.items()}}


def receipt_record(r: Receipt, masker: Masker) -> dict[str, Any]:
    return {"type": "receipt", "id": r.id, "session_id": r.session_id, "call_id": masker.mask(r.call_id),
            "tool": masker.mask(r.tool), "status": r.status, "idempotency_key": masker.mask(r.idempotency_key),
            "args_sha256": r.args_sha256,
            "resource_keys": masker.mask_value(list(r.resource_keys)), "created_at": iso(r.created_at),
            "updated_at": iso(r.updated_at), "outcome_sha256": r.outcome_sha256,
            "note": None if r.note is None else masker.mask(r.note),
            "reconciled_by": None if r.reconciled_by is None else masker.mask(r.reconciled_by)}
