"""Which key a database's chains are made with, checked each time it is opened.

A database records the id of its chain key (`chain_key`, migration 005). Opening it with the home's `chain.key`:
- nothing recorded yet (a new database, or one made before the chains were keyed): the home's key (created if the
  home has none) is recorded, and every session's rows are chained under it in the same transaction. An older
  session's timeline is first checked with the unkeyed rule it was written with, and what that found is kept in
  its `chain_note`, so re-chaining never hides an edit made before it;
- the same key: the store verifies and writes as usual;
- no key file, or another key: the store opens for reading, but cannot verify (verify says so, never "ok") and
  refuses to write, since new rows chained under another key would leave the session unverifiable for good."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from config.chain_key import chain_key_path, load_chain_key
from core.chain import GENESIS_HASH, ChainKey, event_canonical
from core.errors import ConfigError
from core.record import record
from core.timeline import ChainVerifier, row_hash
from memory._encoding import EVENT_KINDS, pack_hash, unpack_payload, unpack_time
from memory.timeline_rows import SEQ_MASK, TIMELINE_COLS, timeline_row, with_prev_hash

SEQ_BITS = 40


@record
class ChainBinding:
    """The chain key a store writes and verifies with, or why this home has none."""

    key: ChainKey | None
    """The key to chain and verify with; None when this home cannot (see `problem`)."""
    problem: str | None = None
    hint: str | None = None


def bind(conn: sqlite3.Connection, home: Path, now: str, *, read_only: bool = False) -> ChainBinding:
    """Check (or, for a database without one, record) the database's chain key against the home's. Runs on the
    store's connection, outside any transaction; the re-chaining is one IMMEDIATE transaction. `read_only`: a
    connection that cannot write records nothing and creates no key (the database is read as it is)."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'chain_key'").fetchone() is None:
        return ChainBinding(None, "the database has no chains yet (its schema is older than 005_keyed_chains)")
    recorded = _recorded(conn)
    if recorded is None and read_only:
        return ChainBinding(None, "the database's chains are not keyed yet (opened read-only: the first run in a "
                                  "home that can be written keys them)",
                            "run any strata command that writes (strata run, resume) where the home is writable")
    key = home_key(home, recorded)
    if isinstance(key, ChainBinding):
        return key
    if recorded is None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if _recorded(conn) is None:  # another process may have bound it while we waited for the lock
                _chain_all(conn, key, now)
                conn.execute("INSERT INTO chain_key(id, key_id, bound_at) VALUES (1, ?, ?)", (key.id, now))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        recorded = _recorded(conn)
    return matching(home, key, recorded)


def _restore_hint(path: Path) -> str:
    return (f"restore {path} from the home this database was made in; without that key no session in it can be "
            "verified or continued")


def home_key(home: Path, recorded: str | None) -> ChainKey | ChainBinding:
    """The home's chain key (created when the database has none recorded yet), or the binding that says why
    there is none to use. Shared by every store that chains under the home's key."""
    path = chain_key_path(home)
    try:
        secret = load_chain_key(home, create=recorded is None)
    except ConfigError as exc:
        return ChainBinding(None, f"cannot use the chain key {path}: {exc.message}", exc.hint)
    except OSError as exc:
        return ChainBinding(None, f"cannot create the chain key {path}: {exc.strerror or exc}",
                            "check the permissions of the Strata home")
    if secret is None:
        return ChainBinding(None, f"the chain key {path} is missing (this database was chained with key "
                                  f"{recorded})", _restore_hint(path))
    return ChainKey(secret)


def matching(home: Path, key: ChainKey, recorded: str | None) -> ChainBinding:
    """The binding of `key` to a database that recorded key `recorded`: usable only when they are the same."""
    if key.id != recorded:
        path = chain_key_path(home)
        return ChainBinding(None, f"the chain key {path} (key {key.id}) is not the key this database was "
                                  f"chained with (key {recorded})", _restore_hint(path))
    return ChainBinding(key)


def _recorded(conn: sqlite3.Connection) -> str | None:
    row = conn.execute("SELECT key_id FROM chain_key WHERE id = 1").fetchone()
    return None if row is None else str(row[0])


def _chain_all(conn: sqlite3.Connection, key: ChainKey, now: str) -> None:
    """Chain every session's events and timeline under `key`, record the heads and what the unkeyed timeline
    chain looked like. The append-only triggers are set aside for the length of this transaction only."""
    sessions = conn.execute("SELECT num, id FROM sessions ORDER BY num").fetchall()
    if not sessions:
        return
    triggers = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name IN "
                            "('events_no_update', 'timeline_no_update')").fetchall()
    for name, _ in triggers:
        conn.execute(f"DROP TRIGGER {name}")
    for num, session_id in sessions:
        _chain_session(conn, key, num, session_id, now)
    for _, sql in triggers:
        conn.execute(sql)


def _chain_session(conn: sqlite3.Connection, key: ChainKey, num: int, session_id: str, now: str) -> None:
    base = num << SEQ_BITS
    events = conn.execute("SELECT key, seq, kind, at, turn, payload, schema_version FROM events "
                          "WHERE key BETWEEN ? AND ? ORDER BY key", (base, base | SEQ_MASK)).fetchall()
    prev, updates = GENESIS_HASH, []
    for k, seq, code, at, turn, payload, version in events:
        kind = EVENT_KINDS.unpack(code)
        try:
            prev = key.digest(prev, event_canonical(session_id, seq, unpack_time(at), turn, kind,
                                                    unpack_payload(kind, payload), version))
        except (TypeError, ValueError):  # a row no store wrote: it will not verify, and verify names it
            prev = ""
        updates.append((pack_hash(prev), k))
    conn.executemany("UPDATE events SET hash = ? WHERE key = ?", updates)
    events_head = (events[-1][1] if events else 0, prev if events else GENESIS_HASH)

    raw = with_prev_hash(conn, conn.execute(f"SELECT {TIMELINE_COLS} FROM timeline WHERE key BETWEEN ? AND ? "
                                            "ORDER BY key", (base, base | SEQ_MASK)).fetchall())
    unkeyed = ChainVerifier.legacy()
    prev, row_updates = GENESIS_HASH, []
    for r in raw:
        row = timeline_row(session_id, r)
        unkeyed.feed(row)
        digest = row_hash(key, prev, row)
        # The new chain links every row to the one before it, so prev_hash is left NULL (memory/_encoding.py).
        row_updates.append((pack_hash(digest), r[0]))
        prev = digest
    conn.executemany("UPDATE timeline SET prev_hash = NULL, hash = ? WHERE key = ?", row_updates)
    timeline_head = ((raw[-1][0] & SEQ_MASK) if raw else 0, prev)
    found = unkeyed.result()
    note = {"at": now, "timeline_rows": len(raw), "events": len(events), "unkeyed_problem": found.reason}
    conn.execute("UPDATE sessions SET head_events_seq = ?, head_events_hash = ?, head_timeline_seq = ?, "
                 "head_timeline_hash = ?, chain_note = ? WHERE num = ?",
                 (*events_head, *timeline_head, json.dumps(note), num))
