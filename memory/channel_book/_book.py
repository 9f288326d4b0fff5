"""ChannelBook: four tables, in the home's SQLite file or in the event store's PostgreSQL database (_sql.py),
each write its own transaction.

- `channel_threads`: (channel, thread_id) -> session_id, written once (INSERT OR IGNORE) and never changed;
- `channel_intake`: one row per (channel, message_id), in arrival order (`num`), with the message's status:
  `started` (taken in; its turn is recorded in the session with the message id), `replied` (the reply is in the
  outbox) and `acked` (the channel was told; a redelivery of the id is acknowledged again, never processed);
- `channel_tasks`: one per message the gate judged action-required (unique per message), with the deciding rule;
- `channel_claims`: which worker drives a thread now (a lease: holder and expiry, taken over from a holder that is
  dead or whose claim expired), so that of several daemons on one database one at a time handles a thread.

Blocking calls: the daemon runs them in a worker thread."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from core.errors import StoreError
from memory.channel_book._sql import BookDb, PostgresBookDb, SqliteBookDb, Tx, now
from memory.rows import LeaseHolder

if TYPE_CHECKING:
    from config import Settings

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


_Row = TypeVar("_Row", ThreadRow, IntakeRow, TaskRow)


class ChannelBook:
    def __init__(self, db: BookDb, where: str) -> None:
        self._db = db
        self.where = where

    @classmethod
    def open(cls, path: Path, *, read_only: bool = False) -> ChannelBook:
        """The book in the SQLite file at `path` (created and migrated, unless `read_only`). StoreError when it
        cannot be opened."""
        return cls(SqliteBookDb.open(path, read_only=read_only), str(path))

    @classmethod
    def open_for(cls, settings: Settings, *, read_only: bool = False) -> ChannelBook | None:
        """The book of the settings' store: in its PostgreSQL database when one is named (its tables made by the
        store's migrations), else `<home>/channels.db`. None for a reading command where no book exists yet."""
        if settings.db is not None:
            db = PostgresBookDb.open(settings.db, read_only=read_only)
            return None if db is None else cls(db, db.where)
        path = settings.home / BOOK_FILE
        if read_only and not path.is_file():
            return None
        return cls.open(path, read_only=read_only)

    def close(self) -> None:
        self._db.close()

    # ---- threads ------------------------------------------------------------------------------------------------

    def session_of(self, channel: str, thread_id: str) -> str | None:
        row = self._one("SELECT session_id FROM channel_threads WHERE channel = ? AND thread_id = ?",
                        (channel, thread_id))
        return None if row is None else str(row[0])

    def bind(self, channel: str, thread_id: str, session_id: str) -> str:
        """Bind the thread to `session_id` unless it is bound already; the session it is bound to, for ever."""
        self._write("INSERT INTO channel_threads VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (channel, thread_id, session_id, now()))
        bound = self.session_of(channel, thread_id)
        assert bound is not None
        return bound

    def threads(self) -> list[ThreadRow]:
        rows = self._db.read("SELECT channel, thread_id, session_id, created_at FROM channel_threads "
                             "ORDER BY channel, created_at")
        keys = ("channel", "thread_id", "session_id", "created_at")
        return [self._row(ThreadRow, "channel_threads", keys, r) for r in rows]

    # ---- claims -------------------------------------------------------------------------------------------------

    def claim(self, channel: str, thread_id: str, holder: LeaseHolder, alive: Callable[[LeaseHolder], bool]) -> bool:
        """Take the thread for `holder` unless another holder that `alive` says lives has it. In one transaction
        that locks the claim's row, so of two workers claiming at once one wins."""
        def steps(tx: Tx) -> bool:
            tx.execute("INSERT INTO channel_claims VALUES (?, ?, '', 0, '', '', '', '', '') ON CONFLICT DO NOTHING",
                       (channel, thread_id))
            (row,) = tx.fetch(f"SELECT token, pid, host, proc_start, boot_id, pid_ns, expires_at FROM channel_claims "
                              f"WHERE channel = ? AND thread_id = ?{self._db.row_lock}", (channel, thread_id))
            token = str(row[0])
            if token and token != holder.token:
                other = LeaseHolder(token=token, pid=int(str(row[1])), host=str(row[2]), proc_start=str(row[3]),
                                    boot_id=str(row[4]), pid_ns=str(row[5]),
                                    expires_at=datetime.fromisoformat(str(row[6])))
                if alive(other):
                    return False
            tx.execute("UPDATE channel_claims SET token = ?, pid = ?, host = ?, proc_start = ?, boot_id = ?, "
                       "pid_ns = ?, expires_at = ? WHERE channel = ? AND thread_id = ?",
                       (holder.token, holder.pid, holder.host, holder.proc_start, holder.boot_id, holder.pid_ns,
                        holder.expires_at.isoformat(), channel, thread_id))
            return True

        return self._db.write(steps)

    def renew_claim(self, channel: str, thread_id: str, token: str, expires_at: datetime) -> bool:
        """Move the claim's expiry on; False when `token` no longer holds it."""
        return self._db.write(lambda tx: tx.execute(
            "UPDATE channel_claims SET expires_at = ? WHERE channel = ? AND thread_id = ? AND token = ?",
            (expires_at.isoformat(), channel, thread_id, token))) == 1

    def release_claim(self, channel: str, thread_id: str, token: str) -> None:
        self._write("UPDATE channel_claims SET token = '' WHERE channel = ? AND thread_id = ? AND token = ?",
                    (channel, thread_id, token))

    def claimed_by(self, channel: str, thread_id: str) -> str | None:
        """The token holding the thread now (whether it lives or not), None when nobody does."""
        row = self._one("SELECT token FROM channel_claims WHERE channel = ? AND thread_id = ?", (channel, thread_id))
        return str(row[0]) or None if row is not None else None

    # ---- intake -------------------------------------------------------------------------------------------------

    def intake(self, channel: str, message_id: str) -> IntakeRow | None:
        row = self._one(f"SELECT {_INTAKE_COLS} FROM channel_intake WHERE channel = ? AND message_id = ?",
                        (channel, message_id))
        return None if row is None else self._row(IntakeRow, "channel_intake", _INTAKE_COLS.split(", "), row)

    def take_in(self, row: IntakeRow) -> IntakeRow:
        """Record a message as taken in (once: a second call for the same id returns the first record)."""
        self._write("INSERT INTO channel_intake (channel, message_id, thread_id, session_id, sender, status, rule, "
                    "reply_key, after_seq, at) SELECT ?, ?, ?, ?, ?, 'started', ?, ?, ?, ? WHERE NOT EXISTS "
                    f"({_SAME_MESSAGE.format(table='channel_intake')}) ON CONFLICT DO NOTHING",
                    (row.channel, row.message_id, row.thread_id, row.session_id, row.sender, row.rule,
                     row.reply_key, row.after_seq, now(), row.channel, row.message_id))
        found = self.intake(row.channel, row.message_id)
        assert found is not None
        return found

    def advance(self, channel: str, message_id: str, status: IntakeStatus) -> None:
        """Move a message's status forward (never back)."""
        later = _ORDER[_ORDER.index(status):]
        self._write(f"UPDATE channel_intake SET status = ? WHERE channel = ? AND message_id = ? AND status NOT IN "
                    f"({', '.join('?' * len(later))})", (status, channel, message_id, *later))

    def intakes(self, channel: str | None = None) -> list[IntakeRow]:
        where, args = ("WHERE channel = ?", (channel,)) if channel else ("", ())
        return [self._row(IntakeRow, "channel_intake", _INTAKE_COLS.split(", "), r)
                for r in self._db.read(f"SELECT {_INTAKE_COLS} FROM channel_intake {where} ORDER BY num", args)]

    # ---- tasks --------------------------------------------------------------------------------------------------

    def add_task(self, channel: str, thread_id: str, message_id: str, session_id: str, rule: str) -> TaskRow:
        """The message's task (created once)."""
        self._write("INSERT INTO channel_tasks (channel, thread_id, message_id, session_id, status, rule, created_at) "
                    "SELECT ?, ?, ?, ?, 'open', ?, ? WHERE NOT EXISTS "
                    f"({_SAME_MESSAGE.format(table='channel_tasks')}) ON CONFLICT DO NOTHING",
                    (channel, thread_id, message_id, session_id, rule, now(), channel, message_id))
        return next(t for t in self.tasks() if (t.channel, t.message_id) == (channel, message_id))

    def set_task_status(self, task_id: int, status: str) -> None:
        self._write("UPDATE channel_tasks SET status = ? WHERE id = ?", (status, task_id))

    def settle_parked(self, session_id: str, status: str) -> int:
        """The session's `parked` tasks (their turn waited for approval) ended as `status`: the turn that ran the
        decided calls is over. How many there were (0: none was parked, or they were settled already)."""
        return self._db.write(lambda tx: tx.execute(
            "UPDATE channel_tasks SET status = ? WHERE session_id = ? AND status = 'parked'", (status, session_id)))

    def tasks(self) -> list[TaskRow]:
        rows = self._db.read("SELECT id, channel, thread_id, message_id, session_id, status, rule, created_at "
                             "FROM channel_tasks ORDER BY id")
        keys = ("id", "channel", "thread_id", "message_id", "session_id", "status", "rule", "created_at")
        return [self._row(TaskRow, "channel_tasks", keys, r) for r in rows]

    # ---- sql ----------------------------------------------------------------------------------------------------

    def _write(self, sql: str, args: tuple[object, ...]) -> None:
        self._db.write(lambda tx: tx.execute(sql, args))

    def _row(self, model: type[_Row], table: str, keys: Sequence[str], r: tuple[object, ...]) -> _Row:
        """One row read back as `model`; a row edited outside Strata (a blob or NULL where text belongs) is a
        StoreError naming the book, the table and the column, not pydantic's report."""
        try:
            return model.model_validate(dict(zip(keys, r, strict=True)))
        except ValidationError as exc:
            err = exc.errors()[0]
            column = ".".join(str(p) for p in err["loc"])
            raise StoreError(f"the channel book {self.where} has a damaged row in {table}: {column}: {err['msg']}",
                             path=self.where, hint="the row was edited outside Strata; restore the book from a "
                                                   "backup, or delete that row") from None

    def _one(self, sql: str, args: tuple[object, ...]) -> tuple[object, ...] | None:
        rows = self._db.read(sql, args)
        return rows[0] if rows else None


_SAME_MESSAGE = "SELECT 1 FROM {table} WHERE channel = ? AND message_id = ?"
"""An insert that checks first takes no number (of the intake's order, of a task's id) when the row exists; its
`ON CONFLICT DO NOTHING` covers two inserts at once on PostgreSQL."""
_INTAKE_COLS = "num, channel, message_id, thread_id, session_id, sender, status, rule, reply_key, after_seq, at"

