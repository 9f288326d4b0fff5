"""A home's database file that SQLite opens but Strata did not make: refused, and left exactly as it was.

Every database Strata makes records its schema version (`PRAGMA user_version`, set by the migration that creates
its first table, in the same transaction), so a database at version 0 that holds tables is another program's.
It gets there as another program's file copied over strata.db, or as a `strata.db-wal` of another database left
next to the home's file: SQLite applies a write-ahead log to whatever file bears its name, and the pages it holds
then stand for the home's own. Taking such a database for a new home would migrate Strata's schema into it (and
the home's sessions would seem gone).

Refusing is not enough on its own: the last connection to close a WAL database checkpoints the log into the
file, which would copy the foreign pages over the home's for good. `kept_from_checkpoint` holds a read-only
connection (which never checkpoints) over the writer's close, so the close is not the last one and leaves the
log where it is."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from core.errors import StoreError

_SHOWN = 3


class ForeignDatabase(StoreError):
    """The database file is SQLite, but not a Strata database."""


def refuse_foreign(conn: sqlite3.Connection, path: str) -> None:
    """Raise ForeignDatabase when the database has no schema version and holds tables. One PRAGMA on a database
    Strata made (page 1 is already read)."""
    if int(conn.execute("PRAGMA user_version").fetchone()[0]) != 0:
        return
    tables = [str(name) for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
        "ORDER BY name")]
    if not tables:
        return  # a new database (or an empty one): made a Strata database as usual
    if int(conn.execute("PRAGMA user_version").fetchone()[0]) != 0:
        return  # another process migrated it between the two reads above (each its own snapshot): Strata's
        # first migration sets the version in the transaction that makes the tables, and it never goes back to 0
    shown = ", ".join(tables[:_SHOWN]) + (f" and {len(tables) - _SHOWN} more" if len(tables) > _SHOWN else "")
    raise ForeignDatabase(f"{path} is an SQLite database, but not a Strata one (no schema version, and tables "
                          f"Strata does not make: {shown}); it was left untouched", path=path,
                          hint=f"if a {path}-wal of another database lies next to it, move that aside; otherwise "
                               "the file is another program's: use another path (for a home's database, set "
                               "STRATA_HOME to another directory)")


@contextlib.contextmanager
def kept_from_checkpoint(path: str) -> Iterator[None]:
    """While the block closes the writer's connection, another (read-only) one holds the database open, so the
    writer's close does not checkpoint the write-ahead log into the file."""
    guard: sqlite3.Connection | None = None
    try:
        guard = sqlite3.connect(f"{Path(path).absolute().as_uri()}?mode=ro", uri=True)
        guard.execute("SELECT count(*) FROM sqlite_master").fetchone()  # a read: the file's shared lock is held
    except sqlite3.Error:
        if guard is not None:
            guard.close()
        guard = None
    try:
        yield
    finally:
        if guard is not None:
            guard.close()
