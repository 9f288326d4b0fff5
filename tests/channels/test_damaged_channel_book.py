"""A channel book row edited outside Strata (a blob or NULL where the daemon writes text) is named in one line by
`strata tasks` and `strata channels`, never an internal error with pydantic's report (real processes, real SQLite
file)."""

from __future__ import annotations

import sqlite3

import pytest

from memory.channel_book import BOOK_FILE, ChannelBook
from tests.conftest import StrataCLI


def _damage(cli: StrataCLI, sql: str) -> None:
    path = cli.home / BOOK_FILE
    ChannelBook.open(path).close()  # created and migrated, as the daemon leaves it
    with sqlite3.connect(path) as db:
        db.execute(sql)


@pytest.mark.parametrize(("command", "sql", "table"), [
    ("tasks", "INSERT INTO channel_tasks (channel, thread_id, message_id, session_id, status, rule, created_at) "
              "VALUES ('inbox', 't1', 'm1', X'00ff', 'open', 'keyword', '2026-01-01T00:00:00Z')", "channel_tasks"),
    ("channels", "INSERT INTO channel_threads VALUES ('inbox', X'00ff', 's1', '2026-01-01T00:00:00Z')",
     "channel_threads"),
])
def test_a_damaged_channel_book_row_is_one_clear_line(cli: StrataCLI, command: str, sql: str, table: str) -> None:
    _damage(cli, sql)
    proc = cli.run(command)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "internal error" not in proc.stderr and "pydantic" not in proc.stderr, proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first.startswith("strata: error: ") and table in first and str(cli.home / BOOK_FILE) in first, first
