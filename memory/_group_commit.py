"""Group commit: the store's transactions that arrive while one is being made durable wait for it, then go
together in the next one: one `BEGIN IMMEDIATE ... COMMIT`, so one fsync, for all of them.

Many sessions in one process (the daemon) share the store's one writer connection; without grouping each of
their commits would pay its own fsync in turn. With it, a commit waits at most for the one in flight, and the
sessions' commits that queued meanwhile share the next fsync. Nothing about a single session changes: its commit
returns only once it is durable, so its barrier (a batch durable before any dispatch) holds as before.

Inside a group each transaction runs in a savepoint, in arrival order:
- a transaction whose body fails is undone alone and gets its own error; the others go on;
- a failed COMMIT (a full disk, an I/O error, a refused commit) fails every transaction in the group with that
  error: none of them is durable, and each session is told so and stops before its next effect;
- if SQLite itself ends the transaction while a body runs (it rolls back on some errors), everything before it in
  the group is lost too and fails with that error.

A group holds at most one transaction per session: a session's next transaction reads what its previous one
wrote into the store's caches after COMMIT (the chain heads), so it waits for the next group. Transactions of no
session (a receipt update) group freely.

The first transaction to arrive while none is in flight leads: it takes the queue as a group, runs it on the
connection's thread (shielded: a group half-finished for its other members cannot be abandoned), hands every
member its outcome, and passes the lead to the next waiting transaction, if any. A waiter cancelled before its
group started is taken out of the queue and never runs."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import anyio

from core.record import record

CALLER_SHIELDED: ContextVar[bool] = ContextVar("strata_group_commit_caller_shielded", default=False)
"""Set (and reset right after) by a caller that awaits `submit` inside a shielded cancel scope of its own (the
session writer's flush): the lead then needs no second shield, since no cancellation reaches through the first.
Only the task that set it sees it (a task spawned meanwhile would copy it, and none is: the hop to the
connection's thread spawns no task)."""
_NO_SCOPE = contextlib.nullcontext()

Body = Callable[[sqlite3.Connection, str, list[Callable[[], None]]], Any]
"""A transaction's work: (connection, the commit's timestamp, callbacks to run right after COMMIT) -> result."""


@dataclass(eq=False)
class _Txn:
    """One transaction waiting in the group commit's queue, and what became of it."""

    session_id: str | None
    body: Body
    at: str
    wake: anyio.Event | None = None
    """Made only when the transaction has to wait (another leads): a leader alone, the usual case, needs none."""
    started: bool = False
    done: bool = False
    lead: bool = False
    result: Any = None
    error: BaseException | None = None


@record
class GroupHooks:
    """What the store adds around a group, on the connection's thread."""

    before_commit: Callable[[sqlite3.Connection], None]
    """Raises to refuse the COMMIT (the store checks that its files are still the ones it opened)."""
    after_failure: Callable[[sqlite3.Connection, BaseException], None]
    """Told the error after a group was rolled back (the store salvages a deleted WAL's commits)."""
    forget: Callable[[str], None]
    """Drop what the store cached about a session whose transaction did not commit."""


class GroupCommit:
    def __init__(self, run: Callable[[Callable[[sqlite3.Connection], None]], Awaitable[None]],
                 hooks: GroupHooks) -> None:
        self._run = run
        self._hooks = hooks
        self._queue: list[_Txn] = []
        self._leading = False
        self.groups = 0
        """COMMITs made (one fsync each): `commits / groups` is how many transactions an fsync carried."""
        self.largest = 0

    async def submit(self, session_id: str | None, body: Body, at: str) -> Any:
        """Run `body` in the next group; its result, or its (raw) error, or the group's failed COMMIT's."""
        txn = _Txn(session_id, body, at)
        self._queue.append(txn)
        if self._leading:
            txn.wake = anyio.Event()  # before any await: whoever sets it runs only once this task waits
            try:
                await txn.wake.wait()
            except BaseException:
                if not txn.started:
                    self._queue.remove(txn)
                if txn.lead:
                    self._pass_lead()
                raise
            if not txn.done:  # the lead was passed to this transaction
                await self._lead()
        else:
            self._leading = True
            await self._lead()
        if txn.error is not None:
            raise txn.error
        return txn.result

    async def _lead(self) -> None:
        try:
            group = self._take()
            # A cancel scope is ~30 Python calls to enter and leave; under the caller's own shield it adds nothing.
            with _NO_SCOPE if CALLER_SHIELDED.get() else anyio.CancelScope(shield=True):
                try:
                    await self._run(lambda conn: self._execute(conn, group))
                except BaseException as exc:  # the thread hop itself failed: nothing of the group is known durable
                    for txn in group:
                        txn.result, txn.error = None, exc
                finally:
                    for txn in group:
                        txn.done = True
                        if txn.wake is not None:
                            txn.wake.set()
        finally:
            self._pass_lead()

    def _take(self) -> list[_Txn]:
        group: list[_Txn] = []
        sessions: set[str] = set()
        rest: list[_Txn] = []
        for txn in self._queue:
            if txn.session_id is not None and txn.session_id in sessions:
                rest.append(txn)
                continue
            if txn.session_id is not None:
                sessions.add(txn.session_id)
            txn.started = True
            group.append(txn)
        self._queue = rest
        return group

    def _pass_lead(self) -> None:
        if self._queue:
            nxt = self._queue[0]
            nxt.lead = True
            assert nxt.wake is not None  # a queued transaction is one that waits
            nxt.wake.set()
        else:
            self._leading = False

    # -- on the connection's thread ------------------------------------------------------------------------

    def _execute(self, conn: sqlite3.Connection, group: list[_Txn]) -> None:
        """Every member ends with a result or an error, and the connection outside any transaction, whatever
        fails (a savepoint statement included)."""
        self.groups += 1
        self.largest = max(self.largest, len(group))
        try:
            if len(group) == 1:
                self._alone(conn, group[0])
            else:
                self._together(conn, group)
        except BaseException as exc:
            self._rolled_back(conn, [t for t in group if t.error is None], exc)

    def _alone(self, conn: sqlite3.Connection, txn: _Txn) -> None:
        """One transaction: exactly the plain BEGIN ... COMMIT, no savepoint."""
        committed: list[Callable[[], None]] = []
        conn.execute("BEGIN IMMEDIATE")
        try:
            txn.result = txn.body(conn, txn.at, committed)
            self._hooks.before_commit(conn)
            conn.execute("COMMIT")
        except BaseException as exc:
            self._rolled_back(conn, [txn], exc)
            return
        for callback in committed:
            callback()

    def _together(self, conn: sqlite3.Connection, group: list[_Txn]) -> None:
        live: list[tuple[_Txn, list[Callable[[], None]]]] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            self._rolled_back(conn, group, exc)
            return
        for n, txn in enumerate(group):
            committed: list[Callable[[], None]] = []
            conn.execute(f"SAVEPOINT g{n}")
            try:
                txn.result = txn.body(conn, txn.at, committed)
            except BaseException as exc:
                if not conn.in_transaction:  # SQLite ended the whole transaction: the earlier ones are gone too
                    self._rolled_back(conn, [t for t, _ in live] + group[n:], exc)
                    return
                conn.execute(f"ROLLBACK TO g{n}")
                conn.execute(f"RELEASE g{n}")
                txn.error = exc
                if txn.session_id is not None:
                    self._hooks.forget(txn.session_id)
                continue
            conn.execute(f"RELEASE g{n}")
            live.append((txn, committed))
        try:
            self._hooks.before_commit(conn)
            conn.execute("COMMIT")
        except BaseException as exc:
            self._rolled_back(conn, [t for t, _ in live], exc)
            return
        for _, committed in live:
            for callback in committed:
                callback()

    def _rolled_back(self, conn: sqlite3.Connection, failed: list[_Txn], exc: BaseException) -> None:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):  # nothing more to undo: the members fail with their error
                conn.execute("ROLLBACK")
        for txn in failed:
            txn.result, txn.error = None, exc
            if txn.session_id is not None:
                self._hooks.forget(txn.session_id)
        self._hooks.after_failure(conn, exc)
