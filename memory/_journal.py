"""Switching a SQLite database to write-ahead logging when several processes open it at the same instant."""

from __future__ import annotations

import sqlite3
import time


def is_locked(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused because another connection holds a lock (busy or locked)."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc)
    return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in text or "busy" in text


def use_wal(conn: sqlite3.Connection, timeout_s: float) -> str:
    """Put the database in WAL mode and return the journal mode it is in.

    A database already in WAL mode is only asked (no lock). Switching takes an exclusive lock, and SQLite answers
    "database is locked" at once, without waiting its busy timeout, while another connection holds a write lock
    on the still rollback-journal file (ten processes opening a new home at the same instant hit it): the switch
    is retried here until `timeout_s` has passed. Runs on the connection's thread: the waits block only it."""
    deadline = time.monotonic() + timeout_s
    delay = 0.001
    while True:
        try:
            mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0])
            if mode.lower() != "wal":
                mode = str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            return mode
        except sqlite3.OperationalError as exc:
            if not is_locked(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
