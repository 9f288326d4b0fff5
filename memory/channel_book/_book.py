"""ChannelBook: three tables in one SQLite file, each write its own transaction.

- `threads`: (channel, thread_id) -> session_id, written once (INSERT OR IGNORE) and never changed;
- `intake`: one row per (channel, message_id), in arrival order (`num`), with the message's status:
  `started` (taken in; its turn is recorded in the session with the message id), `replied` (the reply is in the
  outbox) and `acked` (the channel was told; a redelivery of the id is acknowledged again, never processed);
- `tasks`: one per message the gate judged action-required (unique per message), with the deciding rule.

Blocking calls: the daemon runs them in a worker thread."""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from core.errors import StoreError

BOOK_FILE = "channels.db"
IntakeStatus = Literal["started", "replied", "acked"]
_ORDER: tuple[IntakeStatus, ...] = ("started", "replied", "acked")


class ThreadRow(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    channel: str
    thread_id: str
    session_id: str
    created_at: str


class IntakeRow(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    num: int = 0
    channel: str
    message_id: str
    thread_id: str
    session_id: str
    sender: str
    status: IntakeStatus = "started"
    rule: str = ""
    reply_key: str = ""
    after_seq: int = 0
    """The session's last seq when the message was taken in: its turn-starting event comes after it."""
    at: str = ""


class TaskRow(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    id: int
    channel: str
    thread_id: str
    message_id: str
    session_id: str
    status: str
    rule: str
    created_at: str


def _m001_book(conn: sqlite3.Connection) -> None:
    conn.execute("""CREATE TABLE threads (channel TEXT NOT NULL, thread_id TEXT NOT NULL, session_id TEXT NOT NULL,
                    created_at TEXT NOT NULL, PRIMARY KEY (channel, thread_id))""")
    conn.execute("""CREATE TABLE intake (num INTEGER PRIMARY KEY AUTOINCREMENT, channel TEXT NOT NULL,
                    message_id TEXT NOT NULL, thread_id TEXT NOT NULL, session_id TEXT NOT NULL, sender TEXT NOT NULL,
                    status TEXT NOT NULL, rule TEXT NOT NULL, reply_key TEXT NOT NULL, after_seq INTEGER NOT NULL,
                    at TEXT NOT NULL, UNIQUE (channel, message_id))""")
    conn.execute("""CREATE TABLE tasks (id INTEGER PRIMARY KEY AUTOINCREMENT, channel TEXT NOT NULL,
                    thread_id TEXT NOT NULL, message_id TEXT NOT NULL, session_id TEXT NOT NULL, status TEXT NOT NULL,
                    rule TEXT NOT NULL, created_at TEXT NOT NULL, UNIQUE (channel, message_id))""")


MIGRATIONS = (("001_book", _m001_book),)


def _now() -> str:
    return datetime.now(UTC).isoformat()


class ChannelBook:
    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self.path = path

    @classmethod
    def open(cls, path: Path, *, read_only: bool = False) -> ChannelBook:
        """Open (creating and migrating, unless `read_only`) the book at `path`. StoreError when it cannot."""
        try:
            if read_only:
                conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None,
                                       check_same_thread=False, timeout=10)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=FULL")
                _migrate(conn)
        except sqlite3.Error as exc:
            raise StoreError(f"the channel book {path} cannot be used: {exc}", path=str(path)) from None
        return cls(conn, path)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # ---- threads ------------------------------------------------------------------------------------------------

    def session_of(self, channel: str, thread_id: str) -> str | None:
        row = self._one("SELECT session_id FROM threads WHERE channel = ? AND thread_id = ?", (channel, thread_id))
        return None if row is None else str(row[0])

    def bind(self, channel: str, thread_id: str, session_id: str) -> str:
        """Bind the thread to `session_id` unless it is bound already; the session it is bound to, for ever."""
        self._write("INSERT OR IGNORE INTO threads VALUES (?, ?, ?, ?)", (channel, thread_id, session_id, _now()))
        bound = self.session_of(channel, thread_id)
        assert bound is not None
        return bound

    def threads(self) -> list[ThreadRow]:
        rows = self._all("SELECT channel, thread_id, session_id, created_at FROM threads ORDER BY channel, created_at")
        keys = ("channel", "thread_id", "session_id", "created_at")
        return [ThreadRow.model_validate(dict(zip(keys, r, strict=True))) for r in rows]

    # ---- intake -------------------------------------------------------------------------------------------------

    def intake(self, channel: str, message_id: str) -> IntakeRow | None:
        row = self._one(f"SELECT {_INTAKE_COLS} FROM intake WHERE channel = ? AND message_id = ?",
                        (channel, message_id))
        return None if row is None else _intake(row)

    def take_in(self, row: IntakeRow) -> IntakeRow:
        """Record a message as taken in (once: a second call for the same id returns the first record)."""
        self._write("INSERT INTO intake (channel, message_id, thread_id, session_id, sender, status, rule, "
                    "reply_key, after_seq, at) SELECT ?, ?, ?, ?, ?, 'started', ?, ?, ?, ? WHERE NOT EXISTS "
                    "(SELECT 1 FROM intake WHERE channel = ? AND message_id = ?)",
                    (row.channel, row.message_id, row.thread_id, row.session_id, row.sender, row.rule,
                     row.reply_key, row.after_seq, _now(), row.channel, row.message_id))
        found = self.intake(row.channel, row.message_id)
        assert found is not None
        return found

    def advance(self, channel: str, message_id: str, status: IntakeStatus) -> None:
        """Move a message's status forward (never back)."""
        later = _ORDER[_ORDER.index(status):]
        self._write(f"UPDATE intake SET status = ? WHERE channel = ? AND message_id = ? AND status NOT IN "
                    f"({', '.join('?' * len(later))})", (status, channel, message_id, *later))

    def intakes(self, channel: str | None = None) -> list[IntakeRow]:
        where, args = ("WHERE channel = ?", (channel,)) if channel else ("", ())
        return [_intake(r) for r in self._all(f"SELECT {_INTAKE_COLS} FROM intake {where} ORDER BY num", args)]

    # ---- tasks --------------------------------------------------------------------------------------------------

    def add_task(self, channel: str, thread_id: str, message_id: str, session_id: str, rule: str) -> TaskRow:
        """The message's task (created once)."""
        self._write("INSERT INTO tasks (channel, thread_id, message_id, session_id, status, rule, created_at) "
                    "SELECT ?, ?, ?, ?, 'open', ?, ? WHERE NOT EXISTS "
                    "(SELECT 1 FROM tasks WHERE channel = ? AND message_id = ?)",
                    (channel, thread_id, message_id, session_id, rule, _now(), channel, message_id))
        return next(t for t in self.tasks() if (t.channel, t.message_id) == (channel, message_id))

    def set_task_status(self, task_id: int, status: str) -> None:
        self._write("UPDATE tasks SET status = ? WHERE id = ?", (status, task_id))

    def tasks(self) -> list[TaskRow]:
        rows = self._all("SELECT id, channel, thread_id, message_id, session_id, status, rule, created_at FROM tasks "
                         "ORDER BY id")
        keys = ("id", "channel", "thread_id", "message_id", "session_id", "status", "rule", "created_at")
        return [TaskRow.model_validate(dict(zip(keys, r, strict=True))) for r in rows]

    # ---- sql ----------------------------------------------------------------------------------------------------

    def _write(self, sql: str, args: tuple[object, ...]) -> None:
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                self._conn.execute(sql, args)
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise StoreError(f"the channel book {self.path} cannot be written: {exc}", path=str(self.path)) \
                    from None

    def _one(self, sql: str, args: tuple[object, ...]) -> tuple[object, ...] | None:
        rows = self._all(sql, args)
        return rows[0] if rows else None

    def _all(self, sql: str, args: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        with self._lock:
            try:
                return list(self._conn.execute(sql, args).fetchall())
            except sqlite3.Error as exc:
                raise StoreError(f"the channel book {self.path} cannot be read: {exc}", path=str(self.path)) \
                    from None


_INTAKE_COLS = "num, channel, message_id, thread_id, session_id, sender, status, rule, reply_key, after_seq, at"


def _intake(r: tuple[object, ...]) -> IntakeRow:
    keys = _INTAKE_COLS.split(", ")
    return IntakeRow.model_validate(dict(zip(keys, r, strict=True)))


def _migrate(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    for index, (name, step) in enumerate(MIGRATIONS):
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("PRAGMA user_version").fetchone()[0] > index:
                conn.execute("COMMIT")
                continue
            step(conn)
            conn.execute("INSERT INTO schema_migrations(name, applied_at) VALUES (?, ?)", (name, _now()))
            conn.execute(f"PRAGMA user_version = {index + 1}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
