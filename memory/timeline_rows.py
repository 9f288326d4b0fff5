"""The timeline table's columns and how a stored row is read back: exactly as the table holds it, so that verify
can name a row edited behind the store's back (the store and the chain binding read rows the same way)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from core.timeline import TimelineRow

SEQ_MASK = (1 << 40) - 1
TIMELINE_COLS = ("key, kind, turn, tool, decision, at, call_id, check_name, outcome, duration_ms, prev_hash, hash, "
                 "summary, data")

_UNREADABLE = datetime.min.replace(tzinfo=UTC)


def timeline_row(session_id: str, row: Any) -> TimelineRow:
    """A stored row (the columns of TIMELINE_COLS) exactly as the table holds it. A row edited into something the
    row type does not allow is still read, unvalidated, so that `verify` can name it by its hash."""
    key, kind, turn, tool, decision, at, call_id, check, outcome, duration, prev_hash, digest, summary, data = row
    try:
        stamp = datetime.fromisoformat(at)
    except (TypeError, ValueError):
        stamp = _UNREADABLE
    try:
        values = json.loads(data)
    except (TypeError, ValueError):
        values = {"unreadable": data}
    fields = {"session_id": session_id, "seq": key & SEQ_MASK, "at": stamp, "kind": kind, "turn": turn,
              "call_id": call_id, "tool": tool, "decision": decision, "check": check, "outcome": outcome,
              "duration_ms": duration, "summary": summary, "data": values, "prev_hash": prev_hash, "hash": digest}
    try:
        return TimelineRow.model_validate(fields)
    except ValidationError:
        return TimelineRow.model_construct(**fields)
