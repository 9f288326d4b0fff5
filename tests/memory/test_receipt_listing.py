"""`list_receipts(session)` reads one session's receipts without scanning the receipts table (issue 19, item 10),
on a real SQLite file holding several sessions' receipts: every statement it runs is planned by SQLite as a search
of an index, never a scan of `receipts`."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from core.errors import PersistError
from memory import NewReceipt, ReceiptUpdate, SqliteEventStore, Write
from tests.memory._receipts import new_receipt, started
from tests.memory._sqlite import record


async def _store_with_receipts(path: Path, sessions: list[str], per_session: int) -> SqliteEventStore:
    store = await SqliteEventStore.open(path)
    for sid in sessions:
        await store.create_session(record(sid), started(sid))
        await store.commit(sid, Write(new_receipts=[new_receipt(sid, n) for n in range(per_session)]))
    return store


def _plans(db: Path, statements: list[str]) -> list[str]:
    with closing(sqlite3.connect(db)) as conn:
        return [" | ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
                for sql in statements if "receipts" in sql]


async def test_one_sessions_receipts_are_searched_not_scanned(tmp_path: Path) -> None:
    """With and without a status filter, the listing of one session's receipts searches an index; the listing
    is exactly that session's receipts, in creation order."""
    db = tmp_path / "strata.db"
    sessions = ["01a00000-0000-7000-8000-00000000000a", "01a00000-0000-7000-8000-00000000000b",
                "01a00000-0000-7000-8000-00000000000c"]
    store = await _store_with_receipts(db, sessions, 30)
    try:
        await store.update_receipt(ReceiptUpdate(id=f"{sessions[1]}-r007", status="unknown"))
        seen: list[str] = []
        await store._run(lambda conn: conn.set_trace_callback(seen.append))
        mine = await store.list_receipts(sessions[1])
        unknown = await store.list_receipts(sessions[1], "unknown")
        await store._run(lambda conn: conn.set_trace_callback(None))
    finally:
        await store.close()
    assert [r.id for r in mine] == [f"{sessions[1]}-r{n:03d}" for n in range(30)]
    assert [r.id for r in unknown] == [f"{sessions[1]}-r007"]
    plans = _plans(db, seen)
    assert len(plans) == 2, seen
    for plan in plans:
        assert "SCAN receipts" not in plan and "SEARCH receipts USING" in plan, plan


async def test_a_receipt_whose_key_names_another_session_is_refused(tmp_path: Path) -> None:
    """The listing relies on every receipt's idempotency key starting with its session id, so the store refuses
    a receipt whose key does not (it would be missing from its session's listing)."""
    sid = "01a00000-0000-7000-8000-00000000000d"
    store = await _store_with_receipts(tmp_path / "strata.db", [sid], 1)
    try:
        stray = NewReceipt(id="stray", call_id="c9", tool="bash", idempotency_key="another-session:c9:0",
                           args_sha256="0" * 64)
        with pytest.raises(PersistError, match="idempotency key"):
            await store.commit(sid, Write(new_receipts=[stray]))
        assert [r.id for r in await store.list_receipts(sid)] == [f"{sid}-r000"]
    finally:
        await store.close()
