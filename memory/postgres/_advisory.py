"""Resource locks across machines: PostgreSQL session-level advisory locks, one per resource key, on one
connection of this process kept for them alone (opened at the first lock). The server frees them when the process
gives them back, or when its connection ends: a worker that dies (SIGKILL, a lost machine) holds nothing once the
server sees its connection gone, at once when the kernel closes the socket, else at TCP keepalive's verdict.

A key is a 64-bit number: the first 8 bytes of its SHA-256. Advisory locks are reentrant within one connection;
the executor's in-process lock (tool_executor/locks.py) already keeps two calls of this process from the same key.

A server restart (or failover) ends the kept connection, and with it every lock the process held while its calls
still run. So, while it holds keys, a watcher thread checks the connection every `WATCH_S` and, once it is gone,
opens another and takes the held keys again; and a process that sees the server started anew since it last
connected (`pg_postmaster_start_time`) takes no key for `RESTART_GRACE_S` after that start, other than its own, so
that their holders take theirs back first. A process whose first lock comes after the restart cannot tell (README,
limits). The connection is blocking (psycopg's sync one), used from worker threads under one lock."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
from collections import Counter
from typing import Any

import anyio
import psycopg

from core.errors import StoreError

WATCH_S = 0.5
RESTART_GRACE_S = 5.0
log = logging.getLogger("strata.store")


def lock_id(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big", signed=True)


class AdvisoryLocks:
    def __init__(self, conninfo: str, where: str) -> None:
        self._conninfo = conninfo
        self._where = where
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()
        self._held: Counter[str] = Counter()
        """The keys this process holds, with how often (the server counts a reentrant lock as often)."""
        self._server_start: float | None = None
        """The server's start (epoch seconds, its clock) when this process last connected."""
        self._restarted_at: float | None = None
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None

    async def try_take(self, key: str) -> bool:
        return await anyio.to_thread.run_sync(self._try_take, key)

    async def give_back(self, key: str) -> None:
        # Shielded: a call ended by a cancellation (its driver's interrupt, Ctrl-C, a drain) gives its keys back in
        # the cancelled scope; unshielded, the give-back was cancelled before it began and the key stayed held by
        # this connection, refusing every other worker's call on it for as long as this process ran.
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._give_back, key)

    async def close(self) -> None:
        await anyio.to_thread.run_sync(self._close)

    def _connection(self) -> psycopg.Connection[Any]:
        """The kept connection; a new one takes the held keys again (the server freed them with the old one)."""
        if self._conn is not None and not self._conn.closed:
            return self._conn
        conn = psycopg.Connection.connect(self._conninfo, autocommit=True, connect_timeout=10)
        try:
            row = conn.execute("SELECT extract(epoch FROM pg_postmaster_start_time())::float8").fetchone()
            started = float(row[0]) if row else 0.0
            if self._server_start is not None and started != self._server_start:
                self._restarted_at = started
            self._server_start = started
            for key, times in self._held.items():
                for _ in range(times):
                    back = conn.execute("SELECT pg_try_advisory_lock(%s)", (lock_id(key),)).fetchone()
                    if not (back and back[0]):
                        log.error("the resource lock %s was lost when the connection to %s ended, and another "
                                  "process took it", key, self._where)
        except BaseException:
            with contextlib.suppress(psycopg.Error):
                conn.close()
            raise
        self._conn = conn
        return conn

    def _try_take(self, key: str) -> bool:
        with self._lock:
            kept = self._conn is not None and not self._conn.closed
            while True:
                try:
                    conn = self._connection()
                    # The server started anew under this process: a key it does not hold may be a lock its holder
                    # lost with the restart and is about to take back, so it is not taken (not even for a moment:
                    # that could make the holder's take-back fail) until the grace has passed.
                    waits = not self._held[key] and self._restarted_at is not None
                    row = conn.execute("SELECT CASE WHEN %s AND now() - pg_postmaster_start_time() < "
                                       "make_interval(secs => %s) THEN false ELSE pg_try_advisory_lock(%s) END",
                                       (waits, RESTART_GRACE_S, lock_id(key))).fetchone()
                    taken = bool(row and row[0])
                except psycopg.Error as exc:
                    self._drop()
                    if kept and isinstance(exc, psycopg.OperationalError):
                        # The kept connection was ended by the server (a restart, a failover): taking this one
                        # on a new connection is what a first take would do.
                        kept = False
                        continue
                    raise StoreError(f"the resource lock {key} cannot be taken on {self._where}: "
                                     f"{' '.join(str(exc).split())[:200]}", path=self._where) from None
                if taken:
                    self._held[key] += 1
                    self._watch()
                return taken

    def _give_back(self, key: str) -> None:
        with self._lock:
            if self._held[key] > 0:
                self._held[key] -= 1
            if self._held[key] <= 0:
                del self._held[key]
            if self._conn is None or self._conn.closed:
                return  # the connection ended: the server freed its locks then
            try:
                self._conn.execute("SELECT pg_advisory_unlock(%s)", (lock_id(key),))
            except psycopg.Error:
                self._drop()  # a broken connection frees every lock it held

    def _watch(self) -> None:
        if self._watcher is None or not self._watcher.is_alive():
            self._watcher = threading.Thread(target=self._watching, name="strata-advisory-locks", daemon=True)
            self._watcher.start()

    def _watching(self) -> None:
        """While keys are held: a connection the server ended is replaced, and the held keys taken again."""
        while not self._stop.wait(WATCH_S):
            with self._lock:
                if not self._held:
                    continue
                try:
                    if self._conn is None or self._conn.closed:
                        raise psycopg.OperationalError("the connection is closed")
                    self._conn.execute("SELECT 1")
                except psycopg.Error:
                    self._drop()
                    with contextlib.suppress(psycopg.Error):
                        self._connection()

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
        self._conn = None

    def _close(self) -> None:
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join()
        self._watcher, self._stop = None, threading.Event()
        with self._lock:
            self._drop()
