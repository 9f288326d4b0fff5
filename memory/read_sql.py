"""The read SQL shared by the SQLite store (memory/sqlite_store.py) and the quick read of the command line
(memory/quick_read.py), so both select exactly the same rows: a session's row, and its timeline rows by the
filters `strata timeline` takes. Plain text and parameters: no models, no connection."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection
from typing import Any

from core.vocabulary import GENESIS_HASH
from memory._encoding import TIMELINE_KINDS, pack_time, time_sql

SEQ_BITS = 40
SEQ_MASK = (1 << SEQ_BITS) - 1

SESSION_UPDATED = (f"MAX(updated_at, COALESCE((SELECT {time_sql('at')} FROM events e WHERE e.key BETWEEN "
                   "sessions.num << 40 AND (sessions.num << 40) | 1099511627775 ORDER BY e.key DESC LIMIT 1), ''))")
"""When a session was last updated: its row's time, or its last event's when that is later (a commit that appends
events without touching the row)."""
SESSION_SELECT = (f"id, created_at, {SESSION_UPDATED}, mode, workspace, model, title, parent_id, fork_seq, status, "
                  "lease_token, lease_pid, lease_host, lease_proc_start, lease_expires, lease_boot, lease_pid_ns")
"""A session's row as the SQLite store and the quick read select it (memory/rows.py `session_from_row` reads it)."""


def timeline_filter(base: int, *, kinds: Collection[str] | None = None, tools: Collection[str] | None = None,
                    decisions: Collection[str] | None = None, turn: int | None = None,
                    since_seq: int | None = None, since_at: str | None = None) -> tuple[str, list[int | str]]:
    """The WHERE clause (without the word) and its parameters for the rows of the session numbered `base >>
    SEQ_BITS`; `since_at` is a time in its canonical text form (core/timeline.py `canonical_time`)."""
    first = min(max(1, since_seq or 1), SEQ_MASK)
    clauses = ["key BETWEEN ? AND ?"]
    params: list[int | str] = [base | first, base | SEQ_MASK]
    for column, values in (("kind", TIMELINE_KINDS.matching(kinds or ())), ("tool", tools), ("decision", decisions)):
        if values:  # a kind as its number (memory/_encoding.py `Words`) or as text
            clauses.append(f"{column} IN ({','.join('?' for _ in values)})")
            params.extend(values)
    if decisions and "allowed" not in decisions:  # true of those rows; lets SQLite read them through the partial
        clauses.append("decision <> 'allowed'")  # index of the rare decisions (migration 007)
    if turn is not None:
        clauses.append("turn = ?")
        params.append(turn)
    if since_at is not None:  # a packed time (memory/_encoding.py) is compared as a number, one kept as text as text
        clauses.append("(CASE typeof(at) WHEN 'integer' THEN at >= ? ELSE at >= ? END)")
        params.extend((pack_time(since_at), since_at))
    return " AND ".join(clauses), params


TIMELINE_COLS = ("key, kind, turn, tool, decision, at, call_id, check_name, outcome, duration_ms, prev_hash, hash, "
                 "summary, data")
"""A timeline row's columns as the SQLite store writes and reads them (memory/timeline_rows.py `timeline_row`)."""

_PREV = 10  # the index of prev_hash in TIMELINE_COLS
_HASH = 11


def with_prev_hash(conn: sqlite3.Connection, rows: list[Any]) -> list[Any]:
    """SQLite rows (the columns of TIMELINE_COLS, in key order) with every `prev_hash` the table leaves NULL
    filled in: the hash of the row before it (memory/_encoding.py). Read from the rows at hand when the row before
    is among them, else looked up by key (one query for all). A row whose row before is gone (removed behind the
    store's back) gets "", which links to nothing: verify names the missing row."""
    out: list[Any] = []
    wanted: set[int] = set()
    before_key, before_hash = None, None
    for row in rows:
        key = row[0]
        if row[_PREV] is None and key & SEQ_MASK != 1 and before_key != key - 1:
            wanted.add(key - 1)
        before_key, before_hash = key, row[_HASH]
    found: dict[int, Any] = {}
    if wanted:
        keys = sorted(wanted)
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            found.update(conn.execute(f"SELECT key, hash FROM timeline WHERE key IN ({','.join('?' * len(chunk))})",
                                      chunk).fetchall())
    before_key, before_hash = None, None
    for row in rows:
        key, prev = row[0], row[_PREV]
        if prev is None:
            if key & SEQ_MASK == 1:
                prev = GENESIS_HASH
            elif before_key == key - 1:
                prev = before_hash
            else:
                prev = found.get(key - 1, "")
            row = (*row[:_PREV], prev, *row[_PREV + 1:])
        out.append(row)
        before_key, before_hash = key, row[_HASH]
    return out


def receipts_filter(session_id: str | None, status: str | None) -> tuple[str, list[str]]:
    """The WHERE clause (with the word, or "") and its parameters for the receipts `strata receipts` lists: one
    session's (or all), of one status (or any). A session's by a range of the idempotency key's unique index (a key
    starts with its session id and a colon, which the store enforces): no scan of the table, and no index of its
    own, which would cost every receipt insert another page. The `unknown` ones (asked for at the end of every run,
    resume and channel turn) through the partial index of them (migration 011), whose condition the query names as
    a literal: SQLite proves it from the literal when it prepares the statement, where a bound value is only seen
    by preparing it again at every execution."""
    if status == "unknown":
        if session_id is None:
            return "WHERE status = 'unknown'", []
        return "WHERE session_id = ? AND status = 'unknown'", [session_id]
    clauses, params = [], []
    if session_id is not None:
        clauses.append("idempotency_key > ? AND idempotency_key < ? AND session_id = ?")
        params += [f"{session_id}:", f"{session_id};", session_id]
    if status is not None:
        clauses.append("status = ?")
        params.append(status)
    return (f"WHERE {' AND '.join(clauses)}" if clauses else ""), params
