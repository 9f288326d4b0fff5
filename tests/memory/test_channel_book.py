"""The channel book on a real SQLite file: a thread is bound to one session for ever, a message is taken in once
and its status only moves forward, a message makes at most one task, the schema's migrations are recorded, and
everything survives closing and reopening the file."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from core.errors import StoreError
from memory.channel_book import BOOK_FILE, ChannelBook, IntakeRow


def _row(message_id: str, thread: str = "t1", session: str = "s1") -> IntakeRow:
    return IntakeRow(channel="team", message_id=message_id, thread_id=thread, session_id=session, sender="a",
                     rule="question", reply_key=f"reply-{message_id}")


def test_a_thread_keeps_the_first_session_it_was_bound_to(tmp_path: Path) -> None:
    book = ChannelBook.open(tmp_path / BOOK_FILE)
    assert book.session_of("team", "t1") is None
    assert book.bind("team", "t1", "s1") == "s1"
    assert book.bind("team", "t1", "s2") == "s1"
    assert book.bind("other", "t1", "s3") == "s3"  # the same thread id on another channel is another thread
    book.close()
    reopened = ChannelBook.open(tmp_path / BOOK_FILE)
    assert [(t.channel, t.thread_id, t.session_id) for t in reopened.threads()] == [
        ("other", "t1", "s3"), ("team", "t1", "s1")]


def test_a_message_is_taken_in_once_and_its_status_only_moves_forward(tmp_path: Path) -> None:
    book = ChannelBook.open(tmp_path / BOOK_FILE)
    first = book.take_in(_row("m1"))
    again = book.take_in(_row("m1", session="elsewhere"))
    assert again == first and again.session_id == "s1" and again.status == "started"
    book.advance("team", "m1", "acked")
    book.advance("team", "m1", "replied")  # never back
    found = book.intake("team", "m1")
    assert found is not None and found.status == "acked"
    book.take_in(_row("m2"))
    assert [i.message_id for i in book.intakes("team")] == ["m1", "m2"]  # arrival order


def test_a_message_makes_at_most_one_task(tmp_path: Path) -> None:
    book = ChannelBook.open(tmp_path / BOOK_FILE)
    a = book.add_task("team", "t1", "m1", "s1", "imperative")
    b = book.add_task("team", "t1", "m1", "s1", "imperative")
    c = book.add_task("team", "t1", "m2", "s1", "attachment")
    assert a == b and c.id == a.id + 1
    book.set_task_status(a.id, "done")
    assert [(t.id, t.status, t.rule) for t in book.tasks()] == [(a.id, "done", "imperative"),
                                                                (c.id, "open", "attachment")]


def test_the_schema_migrations_are_recorded_and_a_reopen_does_not_repeat_them(tmp_path: Path) -> None:
    ChannelBook.open(tmp_path / BOOK_FILE).close()
    ChannelBook.open(tmp_path / BOOK_FILE).close()
    with sqlite3.connect(tmp_path / BOOK_FILE) as conn:
        assert conn.execute("SELECT name FROM schema_migrations").fetchall() == [("001_book",), ("002_claims",)]
        assert conn.execute("PRAGMA user_version").fetchone() == (2,)


def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / BOOK_FILE).write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(StoreError, match="cannot be used"):
        ChannelBook.open(tmp_path / BOOK_FILE)


def test_a_missing_book_opened_read_only_is_a_store_error_and_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(StoreError):
        ChannelBook.open(tmp_path / BOOK_FILE, read_only=True)
    assert not (tmp_path / BOOK_FILE).exists()


def _open_fds_to(path: Path) -> list[str]:
    """This process's open file descriptors on `path` (or its -wal/-shm files)."""
    fds = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(path)):
            fds.append(target)
    return fds


def test_a_book_whose_schema_is_newer_is_a_store_error_and_not_left_open(tmp_path: Path) -> None:
    path = tmp_path / BOOK_FILE
    ChannelBook.open(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 99")
    conn.close()
    assert _open_fds_to(path) == []
    with pytest.raises(StoreError, match="newer than this Strata knows") as caught:
        ChannelBook.open(path)
    assert _open_fds_to(path) == [], caught.value  # closed, even while the error (and its traceback) is kept
