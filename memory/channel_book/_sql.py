"""Where the channel book's rows live: a SQLite file in the home (one daemon), or the event store's PostgreSQL
database (several daemons sharing its sessions as workers). Both take the same SQL, written with `?` placeholders
(the PostgreSQL side turns them into its driver's own), and every write is one transaction.

The tables: `channel_threads`, `channel_intake`, `channel_tasks` and `channel_claims` (which worker drives a
thread now). On PostgreSQL they are the store's migration `002_channel_book` (memory/postgres/_schema.py); the
SQLite file has its own ordered, recorded migrations below."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from core.errors import StoreError
from memory._journal import use_wal
from memory.migrations import apply_in_order

if TYPE_CHECKING:
    import psycopg

T = TypeVar("T")
Row = tuple[object, ...]


class Tx(Protocol):
    """One transaction's statements."""

    def execute(self, sql: str, args: tuple[object, ...] = ()) -> int:
        """Run a statement; how many rows it changed."""
        ...

    def fetch(self, sql: str, args: tuple[object, ...] = ()) -> list[Row]: ...


class BookDb(Protocol):
    row_lock: str
    """What makes a SELECT lock the rows it reads until the transaction ends (` FOR UPDATE` on PostgreSQL; SQLite's
    write transactions are exclusive already)."""

    def write(self, steps: Callable[[Tx], T]) -> T:
        """`steps` in one write transaction (rolled back when it raises)."""
        ...

    def read(self, sql: str, args: tuple[object, ...] = ()) -> list[Row]: ...

    def close(self) -> None: ...


def now() -> str:
    return datetime.now(UTC).isoformat()


# ---- SQLite --------------------------------------------------------------------------------------------------------


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


def _m002_claims(conn: sqlite3.Connection) -> None:
    """The tables get the names they have on PostgreSQL (one SQL for both), and the thread claims."""
    for table in ("threads", "intake", "tasks"):
        conn.execute(f"ALTER TABLE {table} RENAME TO channel_{table}")
    conn.execute(CLAIMS_TABLE)


CLAIMS_TABLE = """CREATE TABLE channel_claims (channel TEXT NOT NULL, thread_id TEXT NOT NULL, token TEXT NOT NULL,
    pid BIGINT NOT NULL, host TEXT NOT NULL, proc_start TEXT NOT NULL, boot_id TEXT NOT NULL, pid_ns TEXT NOT NULL,
    expires_at TEXT NOT NULL, PRIMARY KEY (channel, thread_id))"""
"""A thread's claim: the worker holding it (a lease holder, memory/leases.py; token '' when nobody does)."""

SQLITE_MIGRATIONS: tuple[tuple[str, Callable[[sqlite3.Connection], None]], ...] = (
    ("001_book", _m001_book), ("002_claims", _m002_claims))


class _SqliteTx:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, args: tuple[object, ...] = ()) -> int:
        return self._conn.execute(sql, args).rowcount

    def fetch(self, sql: str, args: tuple[object, ...] = ()) -> list[Row]:
        return list(self._conn.execute(sql, args).fetchall())


class SqliteBookDb:
    row_lock = ""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self.path = path

    @classmethod
    def open(cls, path: Path, *, read_only: bool = False) -> SqliteBookDb:
        """The book at `path`; StoreError when it cannot be used (the connection is closed then: a file whose schema
        is newer than this Strata knows, or that is not a database, is not kept open by the failed attempt)."""
        conn: sqlite3.Connection | None = None
        try:
            if read_only:
                conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None,
                                       check_same_thread=False, timeout=10)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10)
                use_wal(conn, 10)
                conn.execute("PRAGMA synchronous=FULL")
                apply_in_order(conn, SQLITE_MIGRATIONS, str(path), now())
        except BaseException as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"the channel book {path} cannot be used: {exc}", path=str(path)) from None
            raise
        return cls(conn, path)

    def write(self, steps: Callable[[Tx], T]) -> T:
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                result = steps(_SqliteTx(self._conn))
                self._conn.execute("COMMIT")
                return result
            except sqlite3.Error as exc:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise StoreError(f"the channel book {self.path} cannot be written: {exc}", path=str(self.path)) \
                    from None
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    def read(self, sql: str, args: tuple[object, ...] = ()) -> list[Row]:
        with self._lock:
            try:
                return list(self._conn.execute(sql, args).fetchall())
            except sqlite3.Error as exc:
                raise StoreError(f"the channel book {self.path} cannot be read: {exc}", path=str(self.path)) \
                    from None

    def close(self) -> None:
        with self._lock:
            self._conn.close()


# ---- PostgreSQL ----------------------------------------------------------------------------------------------------


def _pg(sql: str) -> str:
    return sql.replace("?", "%s")


class _PostgresTx:
    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, args: tuple[object, ...] = ()) -> int:
        return self._conn.execute(_pg(sql).encode(), args).rowcount

    def fetch(self, sql: str, args: tuple[object, ...] = ()) -> list[Row]:
        return list(self._conn.execute(_pg(sql).encode(), args).fetchall())


class PostgresBookDb:
    row_lock = " FOR UPDATE"

    def __init__(self, conn: psycopg.Connection[Any], where: str) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self.where = where

    @classmethod
    def open(cls, url: str, *, read_only: bool = False) -> PostgresBookDb | None:
        """The book in the store's database; None when that database has no book (the store's migration
        002_channel_book not applied yet: a reading command then shows no book, a daemon opens the store first)."""
        import psycopg

        from memory.postgres import redact, use_nul_safe_text

        where = redact(url)
        try:
            conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
            use_nul_safe_text(conn)  # a channel's ids and senders are a remote service's text
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to {where}: {_one_line(exc)}", path=where,
                             hint="check the URL, that the server runs, and the credentials") from None
        try:
            found = conn.execute("SELECT to_regclass('channel_claims') IS NOT NULL").fetchone()
        except psycopg.Error as exc:
            conn.close()
            raise StoreError(f"the channel book in {where} cannot be read: {_one_line(exc)}", path=where) from None
        if not (found and found[0]):
            conn.close()
            if read_only:
                return None
            raise StoreError(f"{where} has no channel book tables", path=where,
                             hint="the event store's migrations create them: open the store first")
        return cls(conn, where)

    def write(self, steps: Callable[[Tx], T]) -> T:
        import psycopg

        with self._lock:
            try:
                with self._conn.transaction():
                    return steps(_PostgresTx(self._conn))
            except psycopg.Error as exc:
                raise StoreError(f"the channel book in {self.where} cannot be written: {_one_line(exc)}",
                                 path=self.where) from None

    def read(self, sql: str, args: tuple[object, ...] = ()) -> list[Row]:
        import psycopg

        with self._lock:
            try:
                return list(self._conn.execute(_pg(sql).encode(), args).fetchall())
            except psycopg.Error as exc:
                raise StoreError(f"the channel book in {self.where} cannot be read: {_one_line(exc)}",
                                 path=self.where) from None

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300] or type(exc).__name__
