"""Group commit (memory/_group_commit.py): transactions that queue while one is made durable share the next
COMMIT, each in a savepoint; a failing one is undone alone, a failed COMMIT fails them all, and a session never
has two transactions in one group. The unit tests drive `GroupCommit` on a real SQLite file with bodies that
hold the first group until the others have queued, so the grouping is deterministic; the store tests run many
sessions against one real store."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from memory import SqliteEventStore
from memory._group_commit import CALLER_SHIELDED, GroupCommit, GroupHooks
from observability.chain_verify import verify_chains
from tests.memory.test_sqlite_append_order import started, turn


class _Thread:
    """One worker thread that owns the connection, as aiosqlite's does: bodies run there, one group at a time."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("CREATE TABLE t (session TEXT, n INTEGER)")
        self.limiter = anyio.CapacityLimiter(1)

    async def run(self, fn: Callable[[sqlite3.Connection], None]) -> None:
        await anyio.to_thread.run_sync(fn, self.conn, limiter=self.limiter)


@contextmanager
def _committer(tmp_path: Path, *, refuse: Callable[[], bool] = lambda: False,
               forgotten: list[str] | None = None) -> Iterator[tuple[GroupCommit, _Thread]]:
    worker = _Thread(tmp_path / "g.db")

    def before_commit(conn: sqlite3.Connection) -> None:
        if refuse():
            raise sqlite3.OperationalError("database or disk is full")

    hooks = GroupHooks(before_commit=before_commit, after_failure=lambda conn, exc: None,
                       forget=(forgotten.append if forgotten is not None else lambda sid: None))
    try:
        yield GroupCommit(worker.run, hooks), worker
    finally:
        worker.conn.close()


def _insert(session: str, n: int) -> Callable[..., Any]:
    def body(conn: sqlite3.Connection, at: str, committed: list[Callable[[], None]]) -> int:
        conn.execute("INSERT INTO t VALUES (?, ?)", (session, n))
        return n

    return body


def _held(gate: threading.Event) -> Callable[..., Any]:
    """A first transaction that waits on its thread until the test has queued the others behind it."""
    def body(conn: sqlite3.Connection, at: str, committed: list[Callable[[], None]]) -> str:
        conn.execute("INSERT INTO t VALUES ('first', 0)")
        assert gate.wait(10), "the test never released the first group"
        return "first"

    return body


def _rows(path: Path) -> list[tuple[str, int]]:
    with closing(sqlite3.connect(path)) as conn:
        return sorted(conn.execute("SELECT session, n FROM t").fetchall())


async def _queue_behind_first(group: GroupCommit, gate: threading.Event,
                              others: list[tuple[str | None, Callable[..., Any]]]) -> dict[int, Any]:
    """Submit the held first transaction, then the others while it is in flight; release it once all queued.
    Returns each submission's result or exception by index (0 is the first)."""
    outcomes: dict[int, Any] = {}

    async def submit(i: int, sid: str | None, body: Callable[..., Any]) -> None:
        try:
            outcomes[i] = await group.submit(sid, body, "2026-01-01T00:00:00+00:00")
        except Exception as exc:
            outcomes[i] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(submit, 0, "first", _held(gate))
        await anyio.sleep(0.05)  # the first group is on the thread now, waiting on the gate
        for i, (sid, body) in enumerate(others, start=1):
            tg.start_soon(submit, i, sid, body)
        await anyio.sleep(0.05)
        gate.set()
    return outcomes


async def test_transactions_queued_behind_a_commit_share_the_next_one(tmp_path: Path) -> None:
    """Eight sessions' transactions that arrive while one is in flight are made durable by one more COMMIT."""
    with _committer(tmp_path) as (group, _):
        gate = threading.Event()
        outcomes = await _queue_behind_first(group, gate, [(f"s{i}", _insert(f"s{i}", i)) for i in range(8)])
        assert outcomes == {0: "first", **{i + 1: i for i in range(8)}}
        assert group.groups == 2 and group.largest == 8
    assert _rows(tmp_path / "g.db") == [("first", 0)] + [(f"s{i}", i) for i in range(8)]


async def test_a_failing_transaction_is_undone_alone(tmp_path: Path) -> None:
    """One body that raises in the middle of a group gets its own error and leaves nothing; the others commit;
    its session's cached state is forgotten."""
    forgotten: list[str] = []

    def bad(conn: sqlite3.Connection, at: str, committed: list[Callable[[], None]]) -> None:
        conn.execute("INSERT INTO t VALUES ('bad', 99)")
        raise sqlite3.IntegrityError("UNIQUE constraint failed: receipts.idempotency_key")

    with _committer(tmp_path, forgotten=forgotten) as (group, _):
        gate = threading.Event()
        outcomes = await _queue_behind_first(group, gate, [("a", _insert("a", 1)), ("bad", bad),
                                                           (None, _insert("none", 2))])
    assert outcomes[1] == 1 and outcomes[3] == 2
    assert isinstance(outcomes[2], sqlite3.IntegrityError)
    assert forgotten == ["bad"]
    assert _rows(tmp_path / "g.db") == [("a", 1), ("first", 0), ("none", 2)]


async def test_a_failed_commit_fails_every_transaction_in_the_group(tmp_path: Path) -> None:
    """When the group's COMMIT is refused, no member is durable and each gets the error (each session stops)."""
    forgotten: list[str] = []
    refusing = {"on": False}
    with _committer(tmp_path, refuse=lambda: refusing["on"], forgotten=forgotten) as (group, _):
        gate = threading.Event()

        def first_then_refuse(conn: sqlite3.Connection, at: str, committed: list[Callable[[], None]]) -> str:
            result = _held(gate)(conn, at, committed)
            refusing["on"] = True  # the first group commits; the next one's COMMIT is refused
            return str(result)

        outcomes: dict[int, Any] = {}

        async def submit(i: int, sid: str, body: Callable[..., Any]) -> None:
            try:
                outcomes[i] = await group.submit(sid, body, "t")
            except Exception as exc:
                outcomes[i] = exc

        async with anyio.create_task_group() as tg:
            tg.start_soon(submit, 0, "first", first_then_refuse)
            await anyio.sleep(0.05)
            for i in range(1, 4):
                tg.start_soon(submit, i, f"s{i}", _insert(f"s{i}", i))
            await anyio.sleep(0.05)
            gate.set()
        # The first transaction's COMMIT came after its body set the flag: refused too, alone.
        assert all(isinstance(outcomes[i], sqlite3.OperationalError) for i in range(4))
        assert sorted(forgotten) == ["first", "s1", "s2", "s3"]
        refusing["on"] = False
        assert await group.submit("s1", _insert("s1", 10), "t") == 10  # the committer goes on afterwards
    assert _rows(tmp_path / "g.db") == [("s1", 10)]


async def test_sqlite_ending_the_transaction_fails_what_came_before_it(tmp_path: Path) -> None:
    """A body during which SQLite ends the whole transaction (it rolls back on some errors) takes the earlier
    members' work with it: they fail with its error, and the members after it are not run in a dead
    transaction but fail too."""
    def ends_it(conn: sqlite3.Connection, at: str, committed: list[Callable[[], None]]) -> None:
        conn.execute("ROLLBACK")  # what SQLite does itself on SQLITE_FULL or SQLITE_IOERR in some statements
        raise sqlite3.OperationalError("disk I/O error")

    with _committer(tmp_path) as (group, _):
        gate = threading.Event()
        outcomes = await _queue_behind_first(group, gate, [("a", _insert("a", 1)), ("b", ends_it),
                                                           ("c", _insert("c", 3))])
        assert outcomes[0] == "first"
        assert all(isinstance(outcomes[i], sqlite3.OperationalError) for i in (1, 2, 3))
        assert await group.submit("d", _insert("d", 4), "t") == 4
    assert _rows(tmp_path / "g.db") == [("d", 4), ("first", 0)]


async def test_one_session_never_has_two_transactions_in_a_group(tmp_path: Path) -> None:
    """A session's second queued transaction waits for the next group (it reads what the first one wrote into
    the store's caches after COMMIT); order within the session is kept."""
    with _committer(tmp_path) as (group, _):
        gate = threading.Event()
        outcomes = await _queue_behind_first(group, gate, [("s", _insert("s", 1)), ("s", _insert("s", 2)),
                                                           ("t", _insert("t", 3))])
        assert [outcomes[i] for i in (1, 2, 3)] == [1, 2, 3]
        assert group.groups == 3  # first; then s#1 with t; then s#2
    with closing(sqlite3.connect(tmp_path / "g.db")) as conn:
        assert [r[0] for r in conn.execute("SELECT n FROM t WHERE session = 's' ORDER BY rowid")] == [1, 2]


async def test_a_waiter_cancelled_before_its_group_never_runs(tmp_path: Path) -> None:
    """Cancelling a queued transaction takes it out of the queue (nothing written); the others still commit and
    the lead passes on."""
    with _committer(tmp_path) as (group, _):
        gate = threading.Event()
        done: dict[str, Any] = {}

        async def submit(sid: str, body: Callable[..., Any]) -> None:
            done[sid] = await group.submit(sid, body, "t")

        doomed = anyio.CancelScope()

        async def cancelled() -> None:
            with doomed:
                await group.submit("x", _insert("x", 9), "t")
            done["x"] = "cancelled"

        async with anyio.create_task_group() as tg:
            tg.start_soon(submit, "first", _held(gate))
            await anyio.sleep(0.05)
            tg.start_soon(cancelled)
            tg.start_soon(submit, "b", _insert("b", 2))
            await anyio.sleep(0.05)
            doomed.cancel()  # "x" is queued behind the first group: it leaves the queue
            await anyio.sleep(0.05)
            gate.set()
        assert done == {"first": "first", "x": "cancelled", "b": 2}
        assert await group.submit("c", _insert("c", 3), "t") == 3
    assert _rows(tmp_path / "g.db") == [("b", 2), ("c", 3), ("first", 0)]


@pytest.mark.parametrize("sessions", [16])
async def test_many_sessions_on_one_store_share_fsyncs_and_stay_whole(db_path: Path, sessions: int) -> None:
    """Sessions committing concurrently through one real store: fewer durable COMMITs than commits, every event
    stored in order with its seq, and every session's chains verify."""
    store = await SqliteEventStore.open(db_path)
    try:
        ids = [f"s{i:02}" for i in range(sessions)]

        async def drive(sid: str) -> None:
            await store.create_session(_record(sid), started(sid))
            for i in range(10):
                await store.commit(sid, turn(f"{sid} turn {i}"))

        async with anyio.create_task_group() as tg:
            for sid in ids:
                tg.start_soon(drive, sid)
        assert store.commits == sessions * 11
        assert store.fsyncs < store.commits / 2, (store.fsyncs, store.commits)
        for sid in ids:
            events = await store.read_events(sid)
            assert [e.seq for e in events] == list(range(1, 22))
            report = await verify_chains(store, sid, None)
            assert report.verdict == "verified", report
    finally:
        await store.close()


def _record(session_id: str) -> Any:
    from tests.memory._sqlite import record

    return record(session_id)


async def test_a_group_led_under_the_callers_own_shield_is_not_cut_short_by_a_cancel(tmp_path: Path) -> None:
    """The session writer shields its commit and marks it (CALLER_SHIELDED), so the lead takes no second shield:
    a cancel of the caller's outer scope while the group is on the thread still gets the whole transaction, and
    the mark is gone once the writer resets it."""
    with _committer(tmp_path) as (group, _):
        gate = threading.Event()
        got: dict[str, Any] = {}
        outer = anyio.CancelScope()

        async def writer_like() -> None:
            with outer:
                with anyio.CancelScope(shield=True):
                    mark = CALLER_SHIELDED.set(True)
                    try:
                        got["result"] = await group.submit("s", _held(gate), "t")
                    finally:
                        CALLER_SHIELDED.reset(mark)
                await anyio.sleep(1)  # the cancel, held off by the shield, lands here
                got["after"] = "not reached"

        async with anyio.create_task_group() as tg:
            tg.start_soon(writer_like)
            await anyio.sleep(0.05)  # the group is on the thread, held on the gate
            outer.cancel()
            await anyio.sleep(0.05)
            gate.set()
        assert got == {"result": "first"}
        assert not CALLER_SHIELDED.get()
    assert _rows(tmp_path / "g.db") == [("first", 0)]
