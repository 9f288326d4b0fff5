"""Databases as older Strata versions wrote them, for the migration tests: the first `version` migrations, then
rows written the way the store of that version wrote them (the state log unchained, the timeline chained with the
unkeyed sha256 rule, no heads, no chain key). The current store cannot write them itself: it chains under a key."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from core.chain import GENESIS_HASH
from core.clock import iso
from core.events import SCHEMA_VERSION, StoredEvent
from core.timeline import TimelineRow, canonical_time, legacy_row_hash
from memory import migrations
from memory.rows import Write

SEQ_BITS = 40


@dataclass
class LegacySession:
    events: list[StoredEvent] = field(default_factory=list)
    timeline: list[TimelineRow] = field(default_factory=list)


def without_chain(rows: list[TimelineRow]) -> list[dict[str, Any]]:
    """Rows compared by what they say: a database re-chained under the key keeps every field but the hashes."""
    return [r.model_dump(exclude={"prev_hash", "hash"}) for r in rows]


def legacy_db(path: Path, version: int, writes: list[tuple[str, Write]], start: datetime,
              step: timedelta = timedelta(milliseconds=1)) -> dict[str, LegacySession]:
    """Write `writes` (session id, what one commit carried; a session's first write creates it) into a new file at
    schema `version` (< 5). Returns each session as a store reads it back."""
    assert version < 5
    out: dict[str, LegacySession] = {}
    nums: dict[str, int] = {}
    now = start
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
        for name, migration in migrations.MIGRATIONS[:version]:
            migration(conn)
            conn.execute("INSERT INTO schema_migrations(name, applied_at) VALUES (?, ?)", (name, iso(start)))
        conn.execute(f"PRAGMA user_version = {version}")
        for session_id, write in writes:
            now += step
            at = iso(now)
            if session_id not in nums:
                nums[session_id] = len(nums) + 1
                conn.execute("INSERT INTO sessions(num, id, created_at, updated_at, mode, workspace, model, status) "
                             "VALUES (?, ?, ?, ?, 'headless', '/ws', 'script:test', 'idle')",
                             (nums[session_id], session_id, at, at))
                out[session_id] = LegacySession()
            base = nums[session_id] << SEQ_BITS
            session = out[session_id]
            for event, turn in write.events:
                seq = len(session.events) + 1
                conn.execute("INSERT INTO events(key, seq, kind, at, turn, payload, schema_version) "
                             "VALUES (?, ?, ?, ?, ?, ?, ?)",
                             (base | seq, seq, event.kind, at, turn, event.model_dump_json(), SCHEMA_VERSION))
                session.events.append(StoredEvent(session_id=session_id, seq=seq, at=now, turn=turn, event=event))
            for entry in write.timeline:
                assert version >= 2, "no timeline before migration 002"
                seq = len(session.timeline) + 1
                prev = session.timeline[-1].hash if session.timeline else GENESIS_HASH
                data = json.loads(json.dumps(entry.data))
                row = TimelineRow(session_id=session_id, seq=seq, at=now, prev_hash=prev, hash="",
                                  **entry.model_dump(exclude={"data"}), data=data)
                row = row.model_copy(update={"hash": legacy_row_hash(prev, row)})
                conn.execute("INSERT INTO timeline(key, kind, turn, tool, decision, at, call_id, check_name, "
                             "outcome, duration_ms, prev_hash, hash, summary, data) "
                             "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             (base | seq, row.kind, row.turn, row.tool, row.decision, canonical_time(now),
                              row.call_id, row.check, row.outcome, row.duration_ms, prev, row.hash, row.summary,
                              json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)))
                session.timeline.append(row)
    return out
