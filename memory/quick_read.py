"""A plain, blocking, read-only look at the SQLite store for the command line's quick way (agent/cli/
quick_timeline.py): a session found by its id or a prefix, and its timeline rows picked by the same filter the
store uses (memory/timeline_query.py), read with the standard library alone. No models, no event loop, no chain
binding: it answers only when the database is current and everything it reads is as the store writes it, and
says None otherwise, so that the caller takes the full way (the store, which reports what is wrong)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from memory import _read_only
from memory._encoding import stored_datetime, unpack_data
from memory.migrations import MIGRATIONS
from memory.timeline_query import SEQ_BITS, SEQ_MASK, timeline_filter


@dataclass(frozen=True, slots=True)
class ShownRow:
    """A timeline row's fields a table shows (core/timeline.py TimelineRow has them all, and its hashes)."""

    seq: int
    at: datetime
    turn: int
    kind: str
    tool: str | None
    decision: str | None
    check: str | None
    outcome: str | None
    duration_ms: float | None
    summary: str
    data: Any


@dataclass(frozen=True, slots=True)
class FoundSession:
    id: str
    workspace: str
    num: int
    updated_at: str


class QuickRead:
    """An open read-only connection to a current database (see `open`)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    @classmethod
    def open(cls, path: Path) -> QuickRead | None:
        """The database read-only, or None when the full way must open it: no file, a schema this Strata would
        migrate (or does not know), or any error opening it."""
        if not path.is_file():
            return None
        try:
            conn = _read_only.connect(str(path), timeout_s=5.0)
        except sqlite3.Error:
            return None
        try:
            if int(conn.execute("PRAGMA user_version").fetchone()[0]) == len(MIGRATIONS):
                return cls(conn)
        except sqlite3.Error:
            pass
        conn.close()
        return None

    def close(self) -> None:
        self._conn.close()

    def sessions(self, *, exact: str | None = None, prefix: str | None = None) -> list[FoundSession]:
        """The session with id `exact`, or those whose id starts with `prefix`, or (neither) every session."""
        sql = "SELECT id, workspace, num, updated_at FROM sessions"
        params: tuple[Any, ...] = ()
        if exact is not None:
            sql, params = f"{sql} WHERE id = ?", (exact,)
        elif prefix is not None:
            sql, params = f"{sql} WHERE substr(id, 1, ?) = ?", (len(prefix), prefix)
        return [FoundSession(*row) for row in self._conn.execute(sql, params).fetchall()]

    def kinds_held(self, session: FoundSession, kinds: Collection[str]) -> set[str]:
        where, params = timeline_filter(session.num << SEQ_BITS, kinds=kinds)
        return {row[0] for row in self._conn.execute(f"SELECT DISTINCT kind FROM timeline WHERE {where}", params)}

    def timeline(self, session: FoundSession, *, kinds: Collection[str] | None = None,
                 tools: Collection[str] | None = None, decisions: Collection[str] | None = None,
                 turn: int | None = None, since_seq: int | None = None) -> list[ShownRow] | None:
        """The session's rows in seq order, filtered as the store filters them; None when a row is not as the
        store writes it (the full way reads such a row unvalidated, for `--verify` to name)."""
        where, params = timeline_filter(session.num << SEQ_BITS, kinds=kinds, tools=tools, decisions=decisions,
                                        turn=turn, since_seq=since_seq)
        cursor = self._conn.execute(
            "SELECT key, at, turn, kind, tool, decision, check_name, outcome, duration_ms, summary, data "
            f"FROM timeline WHERE {where} ORDER BY key", params)
        rows = []
        try:
            for key, at, turn_, kind, tool, decision, check, outcome, duration, summary, data in cursor:
                rows.append(ShownRow(key & SEQ_MASK, stored_datetime(at), turn_, kind, tool,
                                     decision, check, outcome, duration, summary,
                                     json.loads(unpack_data(kind, check, data))))
        except (TypeError, ValueError):
            return None
        return rows
