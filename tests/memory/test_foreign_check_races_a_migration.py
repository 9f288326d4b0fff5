"""The foreign-database check (memory/_foreign.py) reads the schema version and the table list as two statements,
each its own snapshot. A process that opens a new home while another migrates it can read version 0 and then,
after the other's first migration committed, its tables: that is a Strata database, not another program's. Seen
in CI as one of ten processes opening a new home at the same instant refused with "not a Strata one"
(tests/cli/test_many_processes_one_home.py). Here the other process's migration is made to land exactly between
the two reads, on a real SQLite file."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from memory._foreign import ForeignDatabase, refuse_foreign
from memory.migrations import migrate


class _MigratedAfterTheVersionRead(sqlite3.Connection):
    """A connection that, right after its first `PRAGMA user_version`, lets another connection migrate the file."""

    migrated = False

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        cursor = super().execute(sql, *args)
        if sql.strip() != "PRAGMA user_version" or self.migrated:
            return cursor
        self.migrated = True
        ((version,),) = cursor.fetchall()  # read whole before the other connection writes
        other = sqlite3.connect(self.path, isolation_level=None)
        try:
            migrate(other, self.path, "2026-12-07T00:00:00+00:00")
        finally:
            other.close()
        return super().execute("SELECT ?", (version,))  # what this read saw: the version before the migration

    @property
    def path(self) -> str:
        (_, _, file), *_ = super().execute("PRAGMA database_list").fetchall()
        return str(file)


def test_a_home_migrated_by_another_process_between_the_checks_reads_is_not_taken_for_another_programs(
        tmp_path: Path) -> None:
    path = tmp_path / "strata.db"
    conn = sqlite3.connect(path, isolation_level=None, factory=_MigratedAfterTheVersionRead)
    assert isinstance(conn, _MigratedAfterTheVersionRead)
    try:
        refuse_foreign(conn, str(path))  # no ForeignDatabase: the tables it saw are the other process's migration
        assert conn.migrated
        assert int(conn.execute("PRAGMA user_version").fetchone()[0]) > 0
    finally:
        conn.close()


def test_another_programs_tables_are_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "strata.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        with pytest.raises(ForeignDatabase, match="not a Strata one"):
            refuse_foreign(conn, str(path))
    finally:
        conn.close()
