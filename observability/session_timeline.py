"""The timeline's read side: filtered loads, verification of its keyed hash chain as the database holds it (the
whole of `--verify`, both logs and their heads, is observability/chain_verify.py), and following a live session.
Presentation stays with the surfaces; `timeline_record` is the one JSON shape of a row (the CLI's `--json` and
exports use it)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection
from datetime import UTC, datetime
from typing import Any

import anyio

from core.clock import SystemClock
from core.timeline import ChainVerifier, TimelineDecision, TimelineRow, VerifyResult, canonical_time, shown_rows
from memory.leases import make_liveness
from memory.rows import SessionRecord
from memory.store import EventStore, LivenessCheck
from observability.chain_verify import VERIFY_PAGE
from observability.record_masking import mask_record


def _aware(t: datetime | None) -> datetime | None:
    """A time without an offset is read as UTC, the zone the timeline shows."""
    return t.replace(tzinfo=UTC) if t is not None and t.tzinfo is None else t


async def load_timeline(store: EventStore, session_id: str, *, kinds: Collection[str] | None = None,
                        tools: Collection[str] | None = None, decisions: Collection[TimelineDecision] | None = None,
                        turn: int | None = None, since_seq: int | None = None, since_at: datetime | None = None,
                        limit: int | None = None) -> list[TimelineRow]:
    """A session's timeline rows in seq order, filtered (filters combine with AND). SessionNotFound for an
    unknown id, so a typo is not mistaken for an empty timeline; DamagedRow for a row edited into something a row
    cannot hold (`--verify` reads such rows as they are)."""
    await store.get_session(session_id)
    return shown_rows(await store.read_timeline(session_id, kinds=kinds, tools=tools, decisions=decisions, turn=turn,
                                                since_seq=since_seq, since_at=_aware(since_at), limit=limit))


async def verify_session(store: EventStore, session_id: str, *, page: int = VERIFY_PAGE) -> VerifyResult:
    """Recompute the timeline's chain under the store's key from the rows exactly as stored (the stores read them
    back unvalidated), page by page. An edited, removed or moved row is named in the result; without the key the
    result is not ok and says why."""
    await store.get_session(session_id)
    if store.chain_key is None:
        return VerifyResult(ok=False, reason=f"cannot verify: {store.chain_problem}")
    verifier = ChainVerifier(store.chain_key)
    since = 1
    while True:
        rows = await store.read_timeline(session_id, since_seq=since, limit=page)
        for row in rows:
            if not verifier.feed(row):
                return verifier.result()
        if len(rows) < page:
            return verifier.result()
        since = rows[-1].seq + 1


def _driven(rec: SessionRecord, alive: LivenessCheck) -> bool:
    return rec.status == "active" and rec.lease is not None and alive(rec.lease)


async def follow(store: EventStore, session_id: str, *, poll_s: float = 0.5, alive: LivenessCheck | None = None,
                 kinds: Collection[str] | None = None, tools: Collection[str] | None = None,
                 decisions: Collection[TimelineDecision] | None = None, turn: int | None = None,
                 since_seq: int | None = None, since_at: datetime | None = None) -> AsyncIterator[TimelineRow]:
    """Yield the session's rows (filtered), then new ones as they are committed, until no live process drives
    the session any more. The status is read before the rows, so the rows of a session's last commit are
    always yielded before the iterator ends."""
    await store.get_session(session_id)
    alive = alive or make_liveness(SystemClock())
    next_seq = max(1, since_seq or 1)
    since_at = _aware(since_at)
    while True:
        rec = await store.get_session(session_id)
        rows = await store.read_timeline(session_id, kinds=kinds, tools=tools, decisions=decisions, turn=turn,
                                         since_seq=next_seq, since_at=since_at)
        for row in shown_rows(rows):
            yield row
        if rows:
            next_seq = rows[-1].seq + 1
        if not _driven(rec, alive):
            return
        await anyio.sleep(poll_s)


def timeline_record(row: TimelineRow) -> dict[str, Any]:
    """A row as one JSON object: the hashed fields plus `hash`, so `HMAC-SHA256(chain key, prev_hash + canonical
    JSON of the object without "hash")` re-checks it. Part of the CLI contract: fields are added, never
    renamed."""
    return {
        "session_id": row.session_id,
        "seq": row.seq,
        "at": canonical_time(row.at),
        "turn": row.turn,
        "kind": row.kind,
        "call_id": row.call_id,
        "tool": row.tool,
        "decision": row.decision,
        "check": row.check,
        "outcome": row.outcome,
        "duration_ms": row.duration_ms,
        "summary": row.summary,
        "data": row.data,
        "prev_hash": row.prev_hash,
        "hash": row.hash,
    }


def shown_record(row: TimelineRow, mask: Callable[[str], str]) -> dict[str, Any]:
    """`timeline_record` as an output shows it: masked on the way out (observability/record_masking.py)."""
    return mask_record(timeline_record(row), mask)
