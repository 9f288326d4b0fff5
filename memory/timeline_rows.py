"""The timeline table's columns and how a stored row is read back: exactly as the table holds it, so that verify
can name a row edited behind the store's back (the store and the chain binding read rows the same way)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from core.timeline import TimelineRow, marked_damaged
from memory._encoding import (
    stored_data,
    stored_datetime,
    timeline_words,
    unpack_data,
    unpack_hash,
    unpack_summary,
    unpack_values,
)
from memory.read_sql import SEQ_MASK as SEQ_MASK
from memory.read_sql import TIMELINE_COLS as TIMELINE_COLS
from memory.read_sql import with_prev_hash as with_prev_hash
from memory.rows import shown_value, validation_problem

_UNREADABLE = datetime.min.replace(tzinfo=UTC)


def timeline_row(session_id: str, row: Any) -> TimelineRow:
    """A stored row (the columns of TIMELINE_COLS) exactly as the table holds it. A row edited into something the
    row type does not allow is still read, unvalidated, so that `verify` can name it by its hash; it is marked
    with what is wrong (core/timeline.py `marked_damaged`), so that a surface showing rows reports it instead."""
    key, kind, turn, tool, decision, at, call_id, check, outcome, duration, prev_hash, digest, summary, data = row
    prev_hash, digest = unpack_hash(prev_hash), unpack_hash(digest)
    kind, check, outcome, data = timeline_words(kind, check, outcome, data)
    problem = None
    try:
        stamp = stored_datetime(at)
    except (TypeError, ValueError, OverflowError):
        stamp, problem = _UNREADABLE, f"at: not a time, it holds {shown_value(at)}"
    try:
        values = stored_data(kind, check, data)
    except (TypeError, ValueError):
        problem = problem or f"data: not JSON, it holds {shown_value(data)}"
        try:  # NaN, an infinity, a lone surrogate (an older Strata stored `Retry-After: inf`): verify hashes it as is
            values = unpack_values(kind, json.loads(unpack_data(kind, check, data)))
        except (TypeError, ValueError):
            values = {"unreadable": data}
    summary = unpack_summary(summary, outcome, tool, values)
    if isinstance(duration, float) and not math.isfinite(duration):
        problem = problem or f"duration_ms: not a finite number, it holds {shown_value(duration)}"
    fields = {"session_id": session_id, "seq": key & SEQ_MASK, "at": stamp, "kind": kind, "turn": turn,
              "call_id": call_id, "tool": tool, "decision": decision, "check": check, "outcome": outcome,
              "duration_ms": duration, "summary": summary, "data": values, "prev_hash": prev_hash, "hash": digest}
    if problem is not None:
        return marked_damaged(fields, problem)
    try:
        return TimelineRow.model_validate(fields)
    except ValidationError as err:
        return marked_damaged(fields, validation_problem(err, path=True))
