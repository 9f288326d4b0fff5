"""JSONL export: one JSON object per line, each with a `type`. A `session` header first, then the state log
(`event`, in seq order), the observations (`timeline`, in seq order, with their hash chain), and the session's
effect receipts (`receipt`). Everything masked; the event and row shapes are those of `strata run --json` and
`strata timeline --json`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from core.masking import Masker
from observability.export._masked_json import (
    EXPORT_VERSION,
    event_record,
    receipt_record,
    session_record,
    timeline_row_record,
)
from observability.export._snapshot import SessionSnapshot


def jsonl_records(snapshot: SessionSnapshot, masker: Masker) -> Iterator[dict[str, Any]]:
    yield {"type": "session", "format": "strata.export.jsonl", "version": EXPORT_VERSION,
           "session": session_record(snapshot, masker)}
    for stored in snapshot.events:
        yield event_record(stored, masker)
    for row in snapshot.timeline:
        yield timeline_row_record(row, masker)
    for receipt in snapshot.receipts:
        yield receipt_record(receipt, masker)


def render_jsonl(snapshot: SessionSnapshot, masker: Masker) -> str:
    return "".join(json.dumps(obj, ensure_ascii=False) + "\n" for obj in jsonl_records(snapshot, masker))
