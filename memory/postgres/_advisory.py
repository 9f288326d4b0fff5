"""Resource locks across machines: PostgreSQL session-level advisory locks, one per resource key, on one
connection of this process kept for them alone (opened at the first lock). The server frees them when the process
gives them back, or when its connection ends: a worker that dies (SIGKILL, a lost machine) holds nothing once the
server sees its connection gone, at once when the kernel closes the socket, else at TCP keepalive's verdict.

A key is a 64-bit number: the first 8 bytes of its SHA-256. Advisory locks are reentrant within one connection;
the executor's in-process lock (tool_executor/locks.py) already keeps two calls of this process from the same key.
A connection lost while a lock is held loses the lock with it: the next take reconnects; what ran meanwhile is
the limit the README names."""

from __future__ import annotations

import contextlib
import hashlib
from typing import Any

import anyio
import psycopg

from core.errors import StoreError


def lock_id(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big", signed=True)


class AdvisoryLocks:
    def __init__(self, conninfo: str, where: str) -> None:
        self._conninfo = conninfo
        self._where = where
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._lock = anyio.Lock()

    async def _connection(self) -> psycopg.AsyncConnection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True, connect_timeout=10)
        return self._conn

    async def try_take(self, key: str) -> bool:
        async with self._lock:
            kept = self._conn is not None and not self._conn.closed
            while True:
                try:
                    conn = await self._connection()
                    cur = await conn.execute("SELECT pg_try_advisory_lock(%s)", (lock_id(key),))
                    row = await cur.fetchone()
                except psycopg.Error as exc:
                    await self._drop()
                    if kept and isinstance(exc, psycopg.OperationalError):
                        # The kept connection was ended by the server (a restart, a failover): its locks went
                        # with it, so taking this one on a new connection is what a first take would do.
                        kept = False
                        continue
                    raise StoreError(f"the resource lock {key} cannot be taken on {self._where}: "
                                     f"{' '.join(str(exc).split())[:200]}", path=self._where) from None
                return bool(row and row[0])

    async def give_back(self, key: str) -> None:
        async with self._lock:
            if self._conn is None or self._conn.closed:
                return  # the connection ended: the server freed its locks then
            try:
                await self._conn.execute("SELECT pg_advisory_unlock(%s)", (lock_id(key),))
            except psycopg.Error:
                await self._drop()  # a broken connection frees every lock it held

    async def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                await self._conn.close()
        self._conn = None

    async def close(self) -> None:
        async with self._lock:
            await self._drop()
