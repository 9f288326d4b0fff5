"""The SQL that picks a session's timeline rows by the filters `strata timeline` takes, shared by the store
(memory/sqlite_store.py) and the quick read of the command line (memory/quick_read.py), so both select exactly
the same rows. Plain text and parameters: no models, no connection."""

from __future__ import annotations

from collections.abc import Collection

from memory._encoding import pack_time

SEQ_BITS = 40
SEQ_MASK = (1 << SEQ_BITS) - 1


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
