"""The read SQL shared by the SQLite store (memory/sqlite_store.py) and the quick read of the command line
(memory/quick_read.py), so both select exactly the same rows: a session's row, and its timeline rows by the
filters `strata timeline` takes. Plain text and parameters: no models, no connection."""

from __future__ import annotations

from collections.abc import Collection

from memory._encoding import pack_time, time_sql

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
    for column, values in (("kind", kinds), ("tool", tools), ("decision", decisions)):
        if values:
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
