"""Opening the database for reading only, so that commands that only read work in a home that cannot be written
(a read-only mount, a home owned by someone else, a backup copy).

SQLite opens a WAL database read-only (`mode=ro`) as long as it can use the `-shm` file: an existing one, even
read-only, or one it creates. A home at rest has neither `-wal` nor `-shm` (the last connection to close removes
them), and a home that cannot be written cannot get a new `-shm`: SQLite then refuses with SQLITE_CANTOPEN. In
that one case the database file holds every commit (there is no WAL to read), so it is opened `immutable=1`: no
locks, no `-shm`, the file read as it stands. If a non-empty `-wal` is there but no `-shm` can be had, immutable
would ignore the WAL's commits, so that is refused with one line instead.

A read-only open of a home at rest in a directory it can write creates the `-wal` (empty) and the `-shm`, and
leaves them when it closes: removing them takes a checkpoint, which a read-only connection cannot run, and
removing them by hand could pull the `-shm` from under a writer that opened meanwhile. They hold no commit; the
next writer's close removes both (tests/cli/test_reader_files.py).

What `immutable` does not cover: it assumes nobody writes the file meanwhile. In a home this process cannot write,
only someone with more rights could (or a writer through another mount of the same directory); such a reader
may miss that writer's commits or, during its checkpoint, fail with a malformed-database error, and a retry
reads the new state. A home that can be written is always opened plain `mode=ro`, which sees concurrent
writers as any reader does (`timeline --follow`)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path


def uris(path: str) -> Iterator[str]:
    """The URIs to try, in order: plain read-only, then (only while there is no WAL to lose) immutable."""
    base = Path(path).absolute().as_uri()
    yield f"{base}?mode=ro"
    yield f"{base}?mode=ro&immutable=1"


def needs_shm(exc: sqlite3.Error) -> bool:
    """SQLite could not open (or create) the `-shm` a read-only WAL open needs."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name.startswith("SQLITE_CANTOPEN") or "unable to open database file" in str(exc)


def wal_holds_commits(path: str) -> bool:
    try:
        return os.stat(path + "-wal").st_size > 0
    except FileNotFoundError:
        return False


def connect(path: str, *, timeout_s: float = 5.0) -> sqlite3.Connection:
    """A plain (blocking) read-only connection, tried the same way the store's read-only open does: for checks
    that run outside the store (`strata doctor`). Raises sqlite3.Error as sqlite3.connect would."""
    for uri in uris(path):
        conn = sqlite3.connect(uri, uri=True, timeout=timeout_s)
        try:
            conn.execute("PRAGMA schema_version").fetchone()
        except sqlite3.Error as exc:
            conn.close()
            if needs_shm(exc) and "immutable" not in uri and not wal_holds_commits(path):
                continue
            raise
        return conn
    raise sqlite3.OperationalError(f"unable to open database file {path} for reading")
