"""Shared by the SQLite-only tests: the fixed start time, a second plain connection to the same file (as another
process would have), and a session row."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from pathlib import Path

from memory import SessionRecord

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@contextmanager
def raw(path: Path) -> Iterator[sqlite3.Connection]:
    """A second, plain sqlite3 connection to the same file, as another process would have."""
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        yield conn


def record(session_id: str) -> SessionRecord:
    return SessionRecord(id=session_id, created_at=T0, updated_at=T0, mode="headless", workspace="/ws",
                         model="script:test", status="idle")
