"""The conformance suite of the `EventStore` contract (memory/store.py): whatever one store promises, every store
keeps (events, receipts, leases, fork, timeline, blobs, snapshots, keyed chains). Strata runs it against the
SQLite store (a real file) and the in-memory store (tests/memory/test_store_conformance.py); a new store runs it
by subclassing `StoreConformance` with its own `store` fixture. One concept, hence over 400 lines."""

from __future__ import annotations

import hashlib
import itertools
import time
from datetime import UTC, datetime, timedelta

import anyio
import pytest

from core.blobs import Blob
from core.chain import ChainHead, ChainKey, EventChainRow, EventChainVerifier, VerifyResult
from core.errors import LeaseGone, PersistError, ReceiptError, SessionActive, SessionNotFound, UnstorableEvent
from core.events import (
    AssistantMessage,
    BatchCompleted,
    BatchProposed,
    BlobRef,
    CallResult,
    Event,
    PlannedCall,
    SessionStarted,
    StoredEvent,
    UserMessage,
)
from core.messages import TextBlock, ToolUseBlock
from core.processes import ProcessGroup
from core.timeline import GENESIS_HASH, TimelineEntry, TimelineRow, verify_chain
from memory import (
    LeaseHolder,
    NewReceipt,
    ReceiptUpdate,
    SessionRecord,
    Snapshot,
    Write,
)
from memory.store import EventStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def record(session_id: str, **extra: object) -> SessionRecord:
    return SessionRecord(id=session_id, created_at=T0, updated_at=T0, mode="headless", workspace="/ws",
                         model="script:test", status="idle", **extra)  # type: ignore[arg-type]


def started(session_id: str) -> SessionStarted:
    return SessionStarted(session_id=session_id, mode="headless", workspace="/ws", model="script:test",
                          max_turns=10, plan_digest="plan-1")


def user(text: str) -> UserMessage:
    return UserMessage(text=text)


def assistant(text: str) -> AssistantMessage:
    return AssistantMessage(content=(TextBlock(text=text),))


def batch(batch_id: str, *call_ids: str) -> BatchProposed:
    calls = tuple(PlannedCall(call_id=c, tool="write_file", input={"path": c}, input_sha256=f"sha-{c}")
                  for c in call_ids)
    content = tuple(ToolUseBlock(id=c.call_id, name=c.tool, input=c.input) for c in calls)
    return BatchProposed(batch_id=batch_id, content=content, calls=calls)


def receipt(receipt_id: str, call_id: str, key: str | None = None, session: str = "s1") -> NewReceipt:
    """A receipt for `session` (the stores require its idempotency key to start with the session id)."""
    return NewReceipt(id=receipt_id, call_id=call_id, tool="write_file",
                      idempotency_key=f"{session}:{key or f'idem-{receipt_id}'}", args_sha256=f"sha-{call_id}",
                      resource_keys=("file:/ws/a",))


def events(*items: Event, turn: int = 0) -> Write:
    return Write(events=[(e, turn) for e in items])


def holder(token: str, *, pid: int = 4242, host: str = "host-a") -> LeaseHolder:
    return LeaseHolder(token=token, pid=pid, host=host, proc_start="100", expires_at=T0 + timedelta(minutes=1))


def alive(_: LeaseHolder) -> bool:
    return True


def dead(_: LeaseHolder) -> bool:
    return False


async def new_session(store: EventStore, session_id: str = "s1", *more: Event) -> list[StoredEvent]:
    return await store.create_session(record(session_id), events(started(session_id), *more))


# -- sessions and events ------------------------------------------------------------------------------------


def _busy(seconds: float) -> None:
    """Keep the event loop busy (CPU work, not a sleep), as a daemon rendering output or parsing would."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


# -- receipts -----------------------------------------------------------------------------------------------


def deep_batch(batch_id: str, call_id: str, levels: int) -> BatchProposed:
    """A batch whose one input nests `levels` deep: it serialises, but past ~200 levels its JSON does not read
    back (the decoder's recursion limit), and past ~250 it does not serialise at all."""
    value: dict[str, object] = {}
    for _ in range(levels):
        value = {"a": value}
    call = PlannedCall(call_id=call_id, tool="write_file", input=value, input_sha256=f"sha-{call_id}")
    return BatchProposed(batch_id=batch_id, content=(ToolUseBlock(id=call_id, name="write_file", input=value),),
                         calls=(call,))


# -- leases -------------------------------------------------------------------------------------------------


# -- fork -----------------------------------------------------------------------------------------------------


# -- timeline -------------------------------------------------------------------------------------------------


def call_row(call_id: str, tool: str, decision: str, *, turn: int = 1, **extra: object) -> TimelineEntry:
    return TimelineEntry(kind="call", turn=turn, call_id=call_id, tool=tool, decision=decision,  # type: ignore[arg-type]
                         check="policy", outcome="ok" if decision == "allowed" else "denied", duration_ms=2.5,
                         summary=f"{tool} {call_id}", **extra)  # type: ignore[arg-type]


async def seeded_timeline(store: EventStore) -> None:
    """Session s1 with seven timeline rows over three commits (one of them with no events at all)."""
    await store.create_session(record("s1"), Write(events=[(started("s1"), 0)],
                                                   timeline=[TimelineEntry(kind="lifecycle", summary="started")]))
    await store.commit("s1", Write(events=[(batch("b1", "c1", "c2"), 1)], timeline=[
        TimelineEntry(kind="phase", turn=1, summary="plan"),
        call_row("c1", "write_file", "allowed"),
        call_row("c2", "bash", "denied"),
    ]))
    await store.commit("s1", Write(timeline=[
        call_row("c3", "bash", "allowed", turn=2),
        call_row("c4", "read_file", "denied", turn=2),
        TimelineEntry(kind="approval", turn=2, call_id="c5", tool="bash", decision="approved", check="alice"),
    ]))


# -- blobs and snapshots ------------------------------------------------------------------------------------


def big_result(call_id: str, text: str) -> tuple[CallResult, Blob]:
    data = text.encode()
    ref = BlobRef(sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    event = CallResult(batch_id="b1", call_id=call_id, tool="write_file", status="ok", content="excerpt",
                       is_error=False, blob=ref)
    return event, Blob(ref.sha256, data)


# -- keyed chains and heads ------------------------------------------------------------------------------------


def _key(store: EventStore) -> ChainKey:
    key = store.chain_key
    assert key is not None, "the store has no chain key"
    return key


def event_chain_ok(store: EventStore, rows: list[EventChainRow]) -> VerifyResult:
    assert store.chain_key is not None
    verifier = EventChainVerifier(store.chain_key)
    for row in rows:
        if not verifier.feed(row):
            break
    return verifier.result()


class StoreConformance:
    """The contract every `EventStore` keeps. Subclass it in a test module and give the subclass a `store`
    fixture that yields a fresh, empty store whose clock steps from `T0` (`core.clock.SteppingClock(start=T0)`),
    and closes it afterwards; pytest then runs every test below against that store."""

    async def test_create_session_numbers_first_events_from_one(self, store: EventStore) -> None:
        """create_session stores the row and its first events with seq 1..n and the store's envelope."""
        stored = await new_session(store, "s1", user("hello"), assistant("hi"))
        assert [e.seq for e in stored] == [1, 2, 3]
        assert {e.session_id for e in stored} == {"s1"}
        assert [e.event.kind for e in stored] == ["session_started", "user_message", "assistant_message"]
        rec = await store.get_session("s1")
        assert (rec.id, rec.mode, rec.workspace, rec.model, rec.status) == (
            "s1", "headless", "/ws", "script:test", "idle")
        assert rec.created_at.tzinfo is not None


    async def test_commit_appends_with_increasing_seq_and_store_envelope(self, store: EventStore) -> None:
        """Each commit continues the seq after the last stored event; session_id, seq, turn and at come from the
        store."""
        first = await new_session(store, "s1")
        second = await store.commit("s1", Write(events=[(user("do it"), 0), (batch("b1", "c1"), 1)]))
        third = await store.commit("s1", events(CallResult(batch_id="b1", call_id="c1", tool="write_file", status="ok",
                                                           content="written", is_error=False), turn=1))
        assert [e.seq for e in first + second + third] == [1, 2, 3, 4]
        assert [e.turn for e in second] == [0, 1]
        assert third[0].turn == 1
        assert all(e.session_id == "s1" for e in second + third)
        assert all(e.at.tzinfo is not None for e in first + second + third)
        assert second[0].at == second[1].at, "events of one commit share the commit's time"
        assert first[0].at < second[0].at < third[0].at


    async def test_commit_returns_exactly_what_read_events_reads(self, store: EventStore) -> None:
        """The events a commit returns equal the ones read back later (payload and envelope round-trip)."""
        stored = await new_session(store, "s1", user("hello"))
        stored += await store.commit("s1", events(batch("b1", "c1", "c2"), turn=1))
        stored += await store.commit("s1", events(BatchCompleted(batch_id="b1"), turn=1))
        assert await store.read_events("s1") == stored


    async def test_read_events_after_and_upto(self, store: EventStore) -> None:
        """read_events honours after_seq (exclusive) and upto_seq (inclusive)."""
        await new_session(store, "s1", user("a"), user("b"), user("c"), user("d"))
        assert [e.seq for e in await store.read_events("s1")] == [1, 2, 3, 4, 5]
        assert [e.seq for e in await store.read_events("s1", after_seq=2)] == [3, 4, 5]
        assert [e.seq for e in await store.read_events("s1", upto_seq=3)] == [1, 2, 3]
        assert [e.seq for e in await store.read_events("s1", after_seq=1, upto_seq=4)] == [2, 3, 4]
        assert await store.read_events("s1", after_seq=5) == []


    async def test_read_events_of_unknown_session_is_empty(self, store: EventStore) -> None:
        """Reading the log of a session that does not exist gives an empty list."""
        assert await store.read_events("nope") == []


    async def test_logs_of_sessions_are_separate(self, store: EventStore) -> None:
        """Each session has its own seq numbering and its own log."""
        await new_session(store, "s1", user("one"))
        await new_session(store, "s2")
        more = await store.commit("s2", events(user("two")))
        assert [e.seq for e in more] == [2]
        assert [e.event.text for e in await store.read_events("s2") if isinstance(e.event, UserMessage)] == ["two"]
        assert [e.event.text for e in await store.read_events("s1") if isinstance(e.event, UserMessage)] == ["one"]


    async def test_list_sessions_oldest_first(self, store: EventStore) -> None:
        """list_sessions orders by creation time, not by id."""
        for sid in ("s-b", "s-c", "s-a"):
            await new_session(store, sid)
        assert [r.id for r in await store.list_sessions()] == ["s-b", "s-c", "s-a"]


    async def test_get_session_of_missing_id_raises_session_not_found(self, store: EventStore) -> None:
        """An unknown session id is SessionNotFound carrying the id."""
        with pytest.raises(SessionNotFound) as info:
            await store.get_session("missing")
        assert info.value.session_id == "missing"


    async def test_create_session_with_existing_id_fails_and_keeps_original(self, store: EventStore) -> None:
        """Creating a session whose id exists is a PersistError; the existing session and its log are untouched."""
        original = await new_session(store, "s1", user("original"))
        with pytest.raises(PersistError):
            await store.create_session(record("s1"), events(started("s1"), user("impostor")))
        assert await store.read_events("s1") == original


    async def test_commit_to_missing_session_raises_persist_error(self, store: EventStore) -> None:
        """Appending events to a session that does not exist fails and stores nothing."""
        with pytest.raises(PersistError):
            await store.commit("ghost", events(user("hello")))
        assert await store.read_events("ghost") == []


    async def test_commit_sets_session_status(self, store: EventStore) -> None:
        """A Write's status changes the session row in the same commit; a write without one keeps it."""
        await new_session(store, "s1")
        await store.commit("s1", Write(events=[(user("x"), 0)], status="completed"))
        assert (await store.get_session("s1")).status == "completed"
        await store.commit("s1", events(user("y")))
        assert (await store.get_session("s1")).status == "completed"


    async def test_commit_counter_counts_successful_commits(self, store: EventStore) -> None:
        """`commits` counts one per durable commit; a failed commit (a receipt id already taken) is not counted."""
        await new_session(store, "s1")
        await store.commit("s1", Write(events=[(batch("b1", "c1"), 1)], new_receipts=[receipt("r1", "c1")]))
        assert store.commits == 2
        with pytest.raises(PersistError):
            await store.commit("s1", Write(new_receipts=[receipt("r1", "c2", key="other")]))
        assert store.commits == 2
        await store.update_receipt(ReceiptUpdate(id="r1", status="done"))
        assert store.commits == 3


    async def test_concurrent_commits_to_different_sessions_keep_each_log_consistent(self, store: EventStore) -> None:
        """Commits to two sessions in flight at once (loop busy meanwhile) keep each session's seq cache right."""
        await new_session(store, "s1")
        await new_session(store, "s2")

        async def busy_loop() -> None:
            _busy(0.2)

        async with anyio.create_task_group() as tg:
            tg.start_soon(store.commit, "s1", events(user("to s1")))
            tg.start_soon(store.commit, "s2", events(user("to s2")))
            tg.start_soon(busy_loop)
        for sid in ("s1", "s2"):
            tail = await store.commit(sid, events(user("after")))
            assert [e.seq for e in tail] == [3]
            assert [e.seq for e in await store.read_events(sid)] == [1, 2, 3]


    async def test_new_receipt_is_inserted_as_dispatched(self, store: EventStore) -> None:
        """A NewReceipt committed with its batch is a 'dispatched' row with every field kept and times stamped."""
        await new_session(store, "s1")
        await store.commit("s1", Write(events=[(batch("b1", "c1"), 1)], new_receipts=[receipt("r1", "c1")]))
        r = await store.get_receipt("r1")
        assert (r.id, r.session_id, r.call_id, r.tool, r.status) == ("r1", "s1", "c1", "write_file", "dispatched")
        assert (r.idempotency_key, r.args_sha256, r.resource_keys) == ("s1:idem-r1", "sha-c1", ("file:/ws/a",))
        assert r.created_at == r.updated_at
        assert r.created_at.tzinfo is not None
        assert (r.outcome_sha256, r.note, r.reconciled_by) == (None, None, None)


    async def test_list_receipts_filters_by_session_and_status(self, store: EventStore) -> None:
        """list_receipts filters by session, by status, by both, or lists all (oldest first)."""
        await new_session(store, "s1")
        await new_session(store, "s2")
        await store.commit("s1", Write(new_receipts=[receipt("r1", "c1")]))
        await store.commit("s1", Write(new_receipts=[receipt("r2", "c2")]))
        await store.commit("s2", Write(new_receipts=[receipt("r3", "c1", session="s2")]))
        await store.update_receipt(ReceiptUpdate(id="r2", status="done"))
        assert [r.id for r in await store.list_receipts()] == ["r1", "r2", "r3"]
        assert [r.id for r in await store.list_receipts(session_id="s1")] == ["r1", "r2"]
        assert [r.id for r in await store.list_receipts(status="dispatched")] == ["r1", "r3"]
        assert [r.id for r in await store.list_receipts(session_id="s1", status="dispatched")] == ["r1"]
        assert await store.list_receipts(session_id="s2", status="done") == []


    async def test_receipt_update_with_wrong_expect_in_commit_changes_nothing(self, store: EventStore) -> None:
        """A ReceiptUpdate with a wrong `expect` is a ReceiptError and nothing of its Write is stored."""
        await new_session(store, "s1")
        await store.commit("s1", Write(new_receipts=[receipt("r1", "c1")]))
        before = await store.get_receipt("r1")
        log = await store.read_events("s1")
        with pytest.raises(ReceiptError) as info:
            await store.commit("s1", Write(events=[(user("should vanish"), 1)],
                                           receipt_updates=[ReceiptUpdate(id="r1", status="done", expect=("unknown",))],
                                           status="completed"))
        assert info.value.receipt_id == "r1"
        assert await store.get_receipt("r1") == before
        assert await store.read_events("s1") == log
        assert (await store.get_session("s1")).status == "idle"
        assert [e.seq for e in await store.commit("s1", events(user("next")))] == [2]


    async def test_receipt_update_in_commit_applies_with_events(self, store: EventStore) -> None:
        """A matching ReceiptUpdate commits together with the call's result."""
        await new_session(store, "s1")
        await store.commit("s1", Write(events=[(batch("b1", "c1"), 1)], new_receipts=[receipt("r1", "c1")]))
        result = CallResult(batch_id="b1", call_id="c1", tool="write_file", status="ok", content="ok", is_error=False,
                            receipt_id="r1")
        await store.commit("s1", Write(events=[(result, 1)],
                                       receipt_updates=[ReceiptUpdate(id="r1", status="done", outcome_sha256="out")]))
        r = await store.get_receipt("r1")
        assert (r.status, r.outcome_sha256) == ("done", "out")
        assert r.updated_at > r.created_at
        assert [e.event.kind for e in await store.read_events("s1")] == ["session_started", "batch_proposed",
                                                                         "call_result"]


    async def test_duplicate_idempotency_key_in_later_commit_fails_atomically(self, store: EventStore) -> None:
        """A second receipt with an existing idempotency key is a PersistError and nothing of that Write is stored."""
        await new_session(store, "s1")
        await store.commit("s1", Write(events=[(batch("b1", "c1"), 1)], new_receipts=[receipt("r1", "c1", key="K")]))
        log = await store.read_events("s1")
        with pytest.raises(PersistError):
            await store.commit("s1", Write(events=[(BatchCompleted(batch_id="zzz"), 2), (user("vanish"), 2)],
                                           new_receipts=[receipt("r2", "c2", key="K")], status="failed"))
        assert await store.read_events("s1") == log
        assert [r.id for r in await store.list_receipts()] == ["r1"]
        assert (await store.get_session("s1")).status == "idle"
        assert [e.seq for e in await store.commit("s1", events(user("next")))] == [3]


    async def test_duplicate_idempotency_key_within_one_write_fails_atomically(self, store: EventStore) -> None:
        """Two new receipts sharing an idempotency key in one Write fail the whole Write."""
        await new_session(store, "s1")
        with pytest.raises(PersistError):
            await store.commit("s1", Write(events=[(batch("b1", "c1", "c2"), 1)],
                                           new_receipts=[receipt("r1", "c1", key="K"), receipt("r2", "c2", key="K")]))
        assert await store.list_receipts() == []
        assert [e.seq for e in await store.read_events("s1")] == [1]


    async def test_redispatch_of_same_call_is_refused(self, store: EventStore) -> None:
        """A second receipt for the same call with the same key (a re-dispatch after resume) is a PersistError."""
        await new_session(store, "s1")
        await store.commit("s1", Write(new_receipts=[receipt("r1", "c1", key="K")]))
        await store.update_receipt(ReceiptUpdate(id="r1", status="unknown"))
        with pytest.raises(PersistError):
            await store.commit("s1", Write(events=[(user("vanish"), 1)], new_receipts=[receipt("r2", "c1", key="K")]))
        assert [(r.id, r.status) for r in await store.list_receipts()] == [("r1", "unknown")]
        assert [e.seq for e in await store.read_events("s1")] == [1]


    async def test_failed_first_write_leaves_no_session(self, store: EventStore) -> None:
        """If the first Write of create_session fails (here: a receipt id already taken), no session row is left."""
        await new_session(store, "s1")
        await store.commit("s1", Write(new_receipts=[receipt("r1", "c1")]))
        with pytest.raises(PersistError):
            await store.create_session(record("s2"), Write(
                events=[(started("s2"), 0)], new_receipts=[receipt("r1", "c9", key="other", session="s2")]))
        with pytest.raises(SessionNotFound):
            await store.get_session("s2")
        assert await store.read_events("s2") == []
        assert [r.id for r in await store.list_sessions()] == ["s1"]


    @pytest.mark.parametrize(("name", "bad"), [
        ("unpaired surrogate", lambda: user("broken \ud800 text")),
        ("reads back too deep", lambda: deep_batch("b9", "c9", 220)),
        ("does not serialise", lambda: deep_batch("b9", "c9", 300)),
    ])
    async def test_an_event_that_would_not_read_back_refuses_the_whole_commit(self, store: EventStore, name: str,
                                                                              bad: object) -> None:
        """A commit holding an event whose JSON would not read back as an event is refused (UnstorableEvent, a
        PersistError naming the event's kind), and nothing of it is kept: not the events before it, not its receipt,
        status or timeline rows. The log still reads, and the next commit goes on from where it was."""
        await new_session(store, "s1")
        log = await store.read_events("s1")
        event = bad()  # type: ignore[operator]
        with pytest.raises(UnstorableEvent) as info:
            await store.commit("s1", Write(
                events=[(user("kept?"), 1), (event, 1)], new_receipts=[receipt("r1", "c1")],
                status="failed", timeline=[TimelineEntry(kind="phase", turn=1, summary="x")]))
        assert isinstance(info.value, PersistError)
        assert (info.value.kind, info.value.session_id) == (event.kind, "s1")
        assert event.kind in str(info.value)
        assert await store.read_events("s1") == log
        assert await store.list_receipts() == []
        assert (await store.get_session("s1")).status == "idle"
        assert await store.read_timeline("s1") == []
        assert [e.seq for e in await store.commit("s1", events(user("next")))] == [2]


    async def test_an_unstorable_first_write_leaves_no_session(self, store: EventStore) -> None:
        """create_session whose first events cannot be read back creates nothing."""
        with pytest.raises(UnstorableEvent):
            await store.create_session(record("s2"), events(started("s2"), user("\udfff")))
        with pytest.raises(SessionNotFound):
            await store.get_session("s2")
        assert await store.read_events("s2") == []


    async def test_update_receipt_reconciles_an_unknown_outcome(self, store: EventStore) -> None:
        """update_receipt moves dispatched -> unknown -> done, keeping note and reconciler, guarded by `expect`."""
        await new_session(store, "s1")
        await store.commit("s1", Write(new_receipts=[receipt("r1", "c1")]))
        unknown = await store.update_receipt(ReceiptUpdate(id="r1", status="unknown", note="process died"))
        assert (unknown.status, unknown.note) == ("unknown", "process died")
        done = await store.update_receipt(ReceiptUpdate(id="r1", status="done", expect=("unknown",),
                                                        reconciled_by="alice", outcome_sha256="abc"))
        assert (done.status, done.reconciled_by, done.outcome_sha256) == ("done", "alice", "abc")
        assert done.note == "process died", "a None field in an update keeps the stored value"
        assert done.updated_at > unknown.updated_at
        assert await store.get_receipt("r1") == done
        assert [r.id for r in await store.list_receipts(status="done")] == ["r1"]


    async def test_update_receipt_with_wrong_expect_raises_and_changes_nothing(self, store: EventStore) -> None:
        """A standalone reconciliation of a receipt in another state raises ReceiptError naming it."""
        await new_session(store, "s1")
        await store.commit("s1", Write(new_receipts=[receipt("r1", "c1")]))
        before = await store.get_receipt("r1")
        with pytest.raises(ReceiptError) as info:
            await store.update_receipt(ReceiptUpdate(id="r1", status="done", expect=("unknown",)))
        assert info.value.receipt_id == "r1"
        assert "dispatched" in str(info.value)
        assert await store.get_receipt("r1") == before


    async def test_update_or_get_of_missing_receipt_raises(self, store: EventStore) -> None:
        """An unknown receipt id is a ReceiptError on read and on update."""
        with pytest.raises(ReceiptError):
            await store.get_receipt("nope")
        with pytest.raises(ReceiptError) as info:
            await store.update_receipt(ReceiptUpdate(id="nope", status="done"))
        assert info.value.receipt_id == "nope"
        assert await store.list_receipts() == []


    async def test_acquire_lease_on_session_held_by_live_holder_raises(self, store: EventStore) -> None:
        """A second holder meets SessionActive while the first one's owner is alive; the lease is unchanged."""
        await new_session(store, "s1")
        first = holder("tok-1", pid=111)
        await store.acquire_lease("s1", first, alive, T0)
        with pytest.raises(SessionActive) as info:
            await store.acquire_lease("s1", holder("tok-2"), alive, T0)
        assert info.value.session_id == "s1"
        assert "111" in info.value.owner
        assert (await store.get_session("s1")).lease == first


    async def test_acquire_lease_when_owner_is_dead_succeeds(self, store: EventStore) -> None:
        """A lease whose owner the liveness check finds dead is taken over, and the session becomes active."""
        await new_session(store, "s1")
        await store.acquire_lease("s1", holder("tok-1"), alive, T0)
        second = holder("tok-2", pid=222)
        rec = await store.acquire_lease("s1", second, dead, T0)
        assert rec.lease == second
        assert rec.status == "active"
        assert (await store.get_session("s1")).lease == second


    async def test_acquire_lease_on_free_session_and_reacquire_by_same_token(self, store: EventStore) -> None:
        """A free session is leased without asking liveness; the same token may acquire again."""
        await new_session(store, "s1")
        me = holder("tok-1")

        def never_asked(_: LeaseHolder) -> bool:
            raise AssertionError("liveness consulted for a free session or for the holder itself")

        assert (await store.acquire_lease("s1", me, never_asked, T0)).lease == me
        assert (await store.acquire_lease("s1", me, never_asked, T0)).lease == me


    async def test_release_then_acquire_by_another_holder(self, store: EventStore) -> None:
        """After release (with the owner's token) the lease is free, the status is set, and another holder takes it."""
        await new_session(store, "s1")
        await store.acquire_lease("s1", holder("tok-1"), alive, T0)
        await store.release_lease("s1", "tok-1", "completed")
        rec = await store.get_session("s1")
        assert (rec.lease, rec.status) == (None, "completed")
        other = holder("tok-2")
        assert (await store.acquire_lease("s1", other, alive, T0)).lease == other


    async def test_release_with_wrong_token_is_a_no_op(self, store: EventStore) -> None:
        """Releasing with a token that does not own the lease changes neither the lease nor the status."""
        await new_session(store, "s1")
        mine = holder("tok-1")
        await store.acquire_lease("s1", mine, alive, T0)
        await store.release_lease("s1", "not-mine", "failed")
        rec = await store.get_session("s1")
        assert (rec.lease, rec.status) == (mine, "active")
        with pytest.raises(SessionActive):
            await store.acquire_lease("s1", holder("tok-2"), alive, T0)


    async def test_name_session_sets_the_title_only_for_the_lease_holder(self, store: EventStore) -> None:
        """The holder names the session (listings show it); another token changes nothing; the log is untouched."""
        before = await new_session(store, "s1")
        await store.acquire_lease("s1", holder("tok-1"), alive, T0)
        await store.name_session("s1", "not-mine", "stolen")
        assert (await store.get_session("s1")).title == ""
        await store.name_session("s1", "tok-1", "tidy the changelog…")
        assert (await store.get_session("s1")).title == "tidy the changelog…"
        assert [r.title for r in await store.list_sessions()] == ["tidy the changelog…"]
        assert await store.read_events("s1") == before


    async def test_renew_lease_only_by_its_holder(self, store: EventStore) -> None:
        """renew_lease extends the expiry for the token that holds the lease and ignores any other token."""
        await new_session(store, "s1")
        await store.acquire_lease("s1", holder("tok-1"), alive, T0)
        later = T0 + timedelta(hours=1)
        renewed = holder("tok-1").model_copy(update={"expires_at": later})
        await store.renew_lease("s1", renewed)
        lease = (await store.get_session("s1")).lease
        assert lease is not None and lease.expires_at == later
        await store.renew_lease("s1", holder("tok-x").model_copy(update={"expires_at": T0 + timedelta(days=9)}))
        lease = (await store.get_session("s1")).lease
        assert lease is not None and (lease.token, lease.expires_at) == ("tok-1", later)


    async def test_renew_lease_says_whether_the_token_still_holds_it(self, store: EventStore) -> None:
        """renew_lease returns True for the holder and False for a token whose lease another process has taken."""
        await new_session(store, "s1")
        await store.acquire_lease("s1", holder("tok-1"), alive, T0)
        assert await store.renew_lease("s1", holder("tok-1")) is True
        await store.acquire_lease("s1", holder("tok-2"), dead, T0)  # tok-1's owner was judged gone
        assert await store.renew_lease("s1", holder("tok-1")) is False
        lease = (await store.get_session("s1")).lease
        assert lease is not None and lease.token == "tok-2"


    async def test_a_commit_under_a_lease_another_process_took_is_refused_whole(self, store: EventStore) -> None:
        """A write carrying its lease token is committed while that token holds the session's lease; once another
        process took the lease over, the same kind of write is refused whole (LeaseGone): no event, receipt or
        status of it is kept, and the new holder's writes go on. A write without a token is not checked."""
        before = await new_session(store, "s1")
        await store.acquire_lease("s1", holder("tok-1"), alive, T0)
        mine = events(user("first"), turn=1)
        mine.lease_token = "tok-1"
        assert [e.seq for e in await store.commit("s1", mine)] == [2]
        await store.acquire_lease("s1", holder("tok-2"), dead, T0)  # tok-1's owner was judged gone
        late = events(user("late"), turn=1)
        late.lease_token, late.status = "tok-1", "idle"
        late.new_receipts = [receipt("r-late", "c-late")]
        with pytest.raises(LeaseGone):
            await store.commit("s1", late)
        assert [e.seq for e in await store.read_events("s1")] == [1, 2]
        assert await store.list_receipts("s1") == []
        assert (await store.get_session("s1")).status == "active"
        theirs = events(user("next"), turn=1)
        theirs.lease_token = "tok-2"
        assert [e.seq for e in await store.commit("s1", theirs)] == [3]
        assert [e.seq for e in await store.commit("s1", events(user("unchecked"), turn=1))] == [4]
        assert (await store.read_events("s1"))[0] == before[0]

    async def test_a_status_or_timeline_write_under_a_lease_another_process_took_is_refused(
            self, store: EventStore) -> None:
        """Writes without events are checked too: a status alone, and timeline rows alone, carrying a lease token
        another process has taken over are refused (LeaseGone) and leave nothing; with the holder's token they are
        kept."""
        await new_session(store, "s1")
        await store.acquire_lease("s1", holder("tok-1"), alive, T0)
        await store.acquire_lease("s1", holder("tok-2"), dead, T0)
        rows_before = len(await store.read_timeline("s1"))
        status_only = Write(status="idle")
        status_only.lease_token = "tok-1"
        rows_only = Write(timeline=[TimelineEntry(kind="phase", turn=1, summary="late")])
        rows_only.lease_token = "tok-1"
        for late in (status_only, rows_only):
            with pytest.raises(LeaseGone):
                await store.commit("s1", late)
        assert (await store.get_session("s1")).status == "active"
        assert len(await store.read_timeline("s1")) == rows_before
        held = Write(status="idle", timeline=[TimelineEntry(kind="phase", turn=1, summary="mine")])
        held.lease_token = "tok-2"
        await store.commit("s1", held)
        assert (await store.get_session("s1")).status == "idle"
        assert len(await store.read_timeline("s1")) == rows_before + 1

    async def test_lease_holder_boot_and_namespace_round_trip(self, store: EventStore) -> None:
        """A holder's boot id and PID namespace are stored with the lease (taken, or given at creation) and read back;
        release clears them."""
        taken = holder("tok-1").model_copy(update={"boot_id": "boot-1", "pid_ns": "pid:[1]"})
        await new_session(store, "s1")
        await store.acquire_lease("s1", taken, alive, T0)
        assert (await store.get_session("s1")).lease == taken
        given = holder("tok-2").model_copy(update={"boot_id": "boot-2", "pid_ns": "pid:[2]"})
        await store.create_session(record("s2", lease=given), events(started("s2")))
        assert (await store.get_session("s2")).lease == given
        await store.release_lease("s1", "tok-1", None)
        assert (await store.get_session("s1")).lease is None


    async def test_receipt_keeps_the_process_its_settlement_records(self, store: EventStore) -> None:
        """A ReceiptUpdate with a process group stores it on the receipt; a later update without one keeps it."""
        group = ProcessGroup(pid=321, pgid=321, start="9876", boot_id="boot", pid_ns="pid:[7]", host="h")
        await new_session(store, "s1")
        await store.commit("s1", Write(events=[(batch("b1", "c1"), 1)], new_receipts=[receipt("r1", "c1")]))
        assert (await store.get_receipt("r1")).process is None
        await store.commit("s1", Write(receipt_updates=[ReceiptUpdate(id="r1", status="unknown", process=group)]))
        assert (await store.get_receipt("r1")).process == group
        await store.update_receipt(ReceiptUpdate(id="r1", status="done", expect=("unknown",), note="by hand"))
        (listed,) = await store.list_receipts("s1")
        assert (listed.status, listed.process) == ("done", group)


    async def test_acquire_lease_on_missing_session_raises(self, store: EventStore) -> None:
        """A lease on an unknown session is SessionNotFound, not a new row."""
        with pytest.raises(SessionNotFound):
            await store.acquire_lease("ghost", holder("tok-1"), alive, T0)
        assert await store.list_sessions() == []



    async def test_timeline_rows_get_seq_from_one_and_a_valid_chain_across_commits(self, store: EventStore) -> None:
        """Timeline rows are numbered 1..n per session across commits and chain from the genesis hash."""
        await seeded_timeline(store)
        rows = await store.read_timeline("s1")
        assert [r.seq for r in rows] == [1, 2, 3, 4, 5, 6, 7]
        assert {r.session_id for r in rows} == {"s1"}
        assert rows[0].prev_hash == GENESIS_HASH
        assert all(b.prev_hash == a.hash for a, b in itertools.pairwise(rows))
        assert verify_chain(rows, _key(store)).ok
        assert verify_chain(rows, _key(store)).rows == 7


    async def test_timeline_rows_keep_the_entry_fields_and_share_the_commit_time(self, store: EventStore) -> None:
        """Every field of an entry reads back as given; rows of one commit share that commit's time (the events')."""
        await new_session(store, "s1")
        entry = TimelineEntry(kind="call", turn=3, call_id="c1", tool="bash", decision="parked", check="policy: ask",
                              outcome="awaiting approval", duration_ms=7, summary="ünïcode [MASKED:key:ab12]",
                              data={"args_sha256": "abc", "keys": ("a", "b"), "n": 1.5, "nested": {"ok": True}})
        stored = await store.commit("s1", Write(events=[(user("x"), 3)], timeline=[entry, TimelineEntry(kind="phase")]))
        row, other = await store.read_timeline("s1")
        assert (row.kind, row.turn, row.call_id, row.tool, row.decision, row.check, row.outcome) == (
            "call", 3, "c1", "bash", "parked", "policy: ask", "awaiting approval")
        assert row.duration_ms == 7.0 and isinstance(row.duration_ms, float)
        assert row.summary == "ünïcode [MASKED:key:ab12]"
        assert row.data == {"args_sha256": "abc", "keys": ["a", "b"], "n": 1.5, "nested": {"ok": True}}
        assert row.at == other.at == stored[0].at
        assert row.at.tzinfo is not None
        assert (other.call_id, other.tool, other.decision, other.duration_ms, other.summary, other.data) == (
            None, None, None, None, "", {})


    async def test_timeline_rows_are_not_events_and_add_no_commit(self, store: EventStore) -> None:
        """Timeline rows ride in the commit they were written with: no extra commit, no event, no seq taken."""
        await new_session(store, "s1")
        before = store.commits
        await store.commit("s1", Write(events=[(user("a"), 0)], timeline=[TimelineEntry(kind="phase")] * 50))
        assert store.commits == before + 1
        assert [e.seq for e in await store.read_events("s1")] == [1, 2]
        assert [e.seq for e in await store.commit("s1", events(user("b")))] == [3]


    async def test_a_write_with_only_timeline_rows_is_a_commit(self, store: EventStore) -> None:
        """A Write that holds nothing but timeline rows is truthy (SessionWriter.flush commits it)."""
        assert Write(timeline=[TimelineEntry(kind="phase")])
        assert not Write()


    async def test_timeline_data_that_is_not_json_is_stored_as_text(self, store: EventStore) -> None:
        """An emitter's mistake (a set, a datetime, a non-string key in `data`) never fails the commit it rides
        with: the value is stored as text, the events are stored, and the chain verifies."""
        await new_session(store, "s1")
        odd = TimelineEntry(kind="call", data={"when": T0, "tags": {"b"}, "nested": {1: ("x", None)}})
        stored = await store.commit("s1", Write(events=[(user("kept"), 1)], timeline=[odd]))
        assert [e.seq for e in stored] == [2]
        (row,) = await store.read_timeline("s1")
        assert row.data == {"when": str(T0), "tags": "{'b'}", "nested": {"1": ["x", None]}}
        assert verify_chain([row], _key(store)).ok


    async def test_a_timeline_number_json_has_not_is_stored_as_its_text(self, store: EventStore) -> None:
        """NaN and the infinities (a server's `Retry-After: inf` once was one) are stored as their text: the row
        reads back sound, as JSON every reader takes, and the chain verifies."""
        await new_session(store, "s1")
        odd = TimelineEntry(kind="model_attempt", data={"wait": float("inf"), "ratio": float("nan"), "n": 1.5})
        await store.commit("s1", Write(events=[(user("kept"), 1)], timeline=[odd]))
        (row,) = await store.read_timeline("s1")
        assert type(row) is TimelineRow and row.data == {"wait": "inf", "ratio": "nan", "n": 1.5}
        assert verify_chain([row], _key(store)).ok

    async def test_text_holding_nul_or_starting_with_u_ffff_reads_back_exactly(self, store: EventStore) -> None:
        """A NUL (a call's output may hold one) and U+FFFF are text like any other, in every free-text field: the
        session's title, events, timeline rows and receipts read back as written, a filter on such a tool name
        finds its row, and both chains verify. (PostgreSQL's text cannot hold a NUL: its store encodes it.)"""
        odd = ["a\x00b", "\uffff0 starts with U+FFFF", "\x00", "\uffff1\x00\uffff"]
        await store.create_session(record("s1", title=odd[1]), events(started("s1"), user(odd[0])))
        await store.commit("s1", Write(
            events=[(CallResult(batch_id="b1", call_id=odd[2], tool="bash", status="ok", content=odd[3],
                                is_error=False), 1)],
            new_receipts=[NewReceipt(id="r1", call_id=odd[2], tool="bash", idempotency_key=f"s1:{odd[0]}",
                                     args_sha256="sha", resource_keys=(odd[1],))],
            timeline=[TimelineEntry(kind="call", turn=1, call_id=odd[2], tool=odd[0], decision="denied",
                                    check=odd[3], outcome="ok", summary=odd[1], data={"o": odd[3]})]))
        assert (await store.get_session("s1")).title == odd[1]
        read = await store.read_events("s1")
        assert isinstance(read[1].event, UserMessage) and read[1].event.text == odd[0]
        assert isinstance(read[2].event, CallResult) and (read[2].event.call_id, read[2].event.content) == (
            odd[2], odd[3])
        (row,) = await store.read_timeline("s1", tools=[odd[0]])
        assert (row.call_id, row.tool, row.check, row.summary, row.data) == (odd[2], odd[0], odd[3], odd[1],
                                                                            {"o": odd[3]})
        assert verify_chain(await store.read_timeline("s1"), _key(store)).ok
        assert event_chain_ok(store, await store.read_event_chain("s1")).ok
        (kept,) = await store.list_receipts("s1")
        assert (kept.call_id, kept.idempotency_key, kept.resource_keys) == (odd[2], f"s1:{odd[0]}", (odd[1],))

    async def test_read_timeline_filters_combine_with_and(self, store: EventStore) -> None:
        """kinds, tools, decisions, turn, since_seq and since_at filter (together: AND); limit cuts; order is seq."""
        await seeded_timeline(store)
        rows = await store.read_timeline("s1")

        async def seqs(**filters: object) -> list[int]:
            return [r.seq for r in await store.read_timeline("s1", **filters)]  # type: ignore[arg-type]

        assert await seqs(kinds=["call"]) == [3, 4, 5, 6]
        assert await seqs(kinds=["call", "approval"]) == [3, 4, 5, 6, 7]
        assert await seqs(tools=["bash"]) == [4, 5, 7]
        assert await seqs(tools=["bash", "read_file"]) == [4, 5, 6, 7]
        assert await seqs(decisions=["denied"]) == [4, 6]
        assert await seqs(tools=["bash"], decisions=["denied"]) == [4]
        assert await seqs(kinds=["call"], turn=2) == [5, 6]
        assert await seqs(turn=0) == [1]
        assert await seqs(since_seq=5) == [5, 6, 7]
        assert await seqs(since_seq=5, decisions=["denied"]) == [6]
        assert await seqs(since_at=rows[4].at) == [5, 6, 7]
        assert await seqs(since_at=rows[4].at + timedelta(hours=1)) == []
        assert await seqs(limit=2) == [1, 2]
        assert await seqs(kinds=["call"], limit=1, since_seq=4) == [4]
        assert await seqs(kinds=[], tools=None) == [1, 2, 3, 4, 5, 6, 7], "an empty collection does not filter"
        assert await seqs(kinds=["nothing"]) == []
        assert await seqs(since_seq=8) == []


    async def test_timeline_rows_of_a_failed_commit_are_not_kept(self, store: EventStore) -> None:
        """A commit that fails stores none of its timeline rows; the next commit continues the chain where it was."""
        await seeded_timeline(store)
        await store.commit("s1", Write(new_receipts=[receipt("r1", "c1", key="K")]))
        before = await store.read_timeline("s1")
        with pytest.raises(PersistError):
            await store.commit("s1", Write(new_receipts=[receipt("r2", "c2", key="K")],
                                           timeline=[TimelineEntry(kind="receipt", summary="vanish")] * 3))
        assert await store.read_timeline("s1") == before
        await store.commit("s1", Write(timeline=[TimelineEntry(kind="phase", summary="after")]))
        rows = await store.read_timeline("s1")
        assert [r.seq for r in rows] == list(range(1, len(before) + 2))
        assert rows[-1].summary == "after"
        assert verify_chain(rows, _key(store)).ok


    async def test_timeline_of_a_failed_first_write_leaves_nothing(self, store: EventStore) -> None:
        """A create_session that fails keeps no timeline rows for that id."""
        await new_session(store, "s1")
        await store.commit("s1", Write(new_receipts=[receipt("r1", "c1")]))
        with pytest.raises(PersistError):
            await store.create_session(record("s2"), Write(
                events=[(started("s2"), 0)], new_receipts=[receipt("r1", "c9", key="other", session="s2")],
                timeline=[TimelineEntry(kind="lifecycle")]))
        assert await store.read_timeline("s2") == []


    async def test_timeline_of_another_or_unknown_session_is_empty(self, store: EventStore) -> None:
        """Each session has its own timeline; an unknown session's timeline is empty, not an error."""
        await seeded_timeline(store)
        await new_session(store, "s2")
        assert await store.read_timeline("s2") == []
        assert await store.read_timeline("ghost") == []
        await store.commit("s2", Write(timeline=[TimelineEntry(kind="phase", summary="s2 row")]))
        (row,) = await store.read_timeline("s2")
        assert (row.session_id, row.seq, row.prev_hash) == ("s2", 1, GENESIS_HASH)
        assert len(await store.read_timeline("s1")) == 7


    async def test_concurrent_commits_keep_each_timeline_chained(self, store: EventStore) -> None:
        """Timeline rows committed to two sessions at once (loop busy meanwhile) keep both chains gap-free."""
        await new_session(store, "s1")
        await new_session(store, "s2")

        async def busy_loop() -> None:
            _busy(0.2)

        async with anyio.create_task_group() as tg:
            for sid in ("s1", "s2"):
                tg.start_soon(store.commit, sid, Write(timeline=[TimelineEntry(kind="phase", summary=sid)] * 3))
            tg.start_soon(busy_loop)
        for sid in ("s1", "s2"):
            await store.commit(sid, Write(timeline=[TimelineEntry(kind="phase", summary="after")]))
            rows = await store.read_timeline(sid)
            assert [r.seq for r in rows] == [1, 2, 3, 4]
            assert verify_chain(rows, _key(store)).ok



    async def test_blob_is_stored_with_the_event_that_names_it(self, store: EventStore) -> None:
        """A Write's blobs are stored in its commit and read back by sha256; the event keeps only the reference."""
        await new_session(store, "s1", batch("b1", "c1"))
        event, blob = big_result("c1", "x" * 50_000)
        (stored,) = await store.commit("s1", Write(events=[(event, 1)], blobs=[blob]))
        assert isinstance(stored.event, CallResult) and stored.event.blob == BlobRef(sha256=blob.sha256, size=50_000)
        assert await store.get_blob(blob.sha256) == blob.data
        assert await store.get_blob("0" * 64) is None


    async def test_equal_blobs_are_stored_once(self, store: EventStore) -> None:
        """The same output twice (in one commit or across commits) is one blob: insert-or-ignore, no error."""
        await new_session(store, "s1", batch("b1", "c1", "c2", "c3"))
        first, blob = big_result("c1", "same output " * 2_000)
        second, again = big_result("c2", "same output " * 2_000)
        await store.commit("s1", Write(events=[(first, 1), (second, 1)], blobs=[blob, again]))
        third, once_more = big_result("c3", "same output " * 2_000)
        await store.commit("s1", Write(events=[(third, 1)], blobs=[once_more]))
        assert await store.get_blob(blob.sha256) == blob.data


    async def test_failed_commit_stores_neither_blob_nor_snapshot(self, store: EventStore) -> None:
        """A commit that fails keeps nothing of its write: no blob, no snapshot, no event."""
        await new_session(store, "s1", batch("b1", "c1", "c2"))
        await store.commit("s1", Write(new_receipts=[receipt("r1", "c1", key="k1")]))
        event, blob = big_result("c2", "y" * 40_000)
        with pytest.raises(PersistError):
            await store.commit("s1", Write(
                events=[(event, 1)], blobs=[blob], new_receipts=[receipt("r2", "c2", key="k1")],
                snapshot=Snapshot(seq=2, version="v", data=b"state")))
        assert await store.get_blob(blob.sha256) is None
        assert await store.read_latest_snapshot("s1") is None
        assert [e.seq for e in await store.read_events("s1")] == [1, 2]


    async def test_snapshot_round_trip_and_the_latest_wins(self, store: EventStore) -> None:
        """A session has no snapshot until a commit carries one; a later snapshot replaces the earlier one."""
        await new_session(store, "s1", user("a"), user("b"))
        assert await store.read_latest_snapshot("s1") is None
        await store.commit("s1", Write(events=[(user("c"), 0)], snapshot=Snapshot(seq=3, version="v1", data=b"at 3")))
        assert await store.read_latest_snapshot("s1") == Snapshot(seq=3, version="v1", data=b"at 3")
        await store.commit("s1", Write(events=[(user("d"), 0)], snapshot=Snapshot(seq=5, version="v1", data=b"at 5")))
        assert await store.read_latest_snapshot("s1") == Snapshot(seq=5, version="v1", data=b"at 5")


    async def test_snapshot_may_name_an_event_of_its_own_commit(self, store: EventStore) -> None:
        """The snapshot's seq may be any seq up to the last event the commit writes."""
        await new_session(store, "s1")
        await store.commit("s1", Write(events=[(user("a"), 0), (user("b"), 0)],
                                       snapshot=Snapshot(seq=3, version="v", data=b"s")))
        snapshot = await store.read_latest_snapshot("s1")
        assert snapshot is not None and snapshot.seq == 3


    async def test_snapshot_beyond_the_log_is_refused(self, store: EventStore) -> None:
        """A snapshot past the last event would hide events never written: PersistError, nothing stored."""
        await new_session(store, "s1", user("a"))
        with pytest.raises(PersistError):
            await store.commit("s1", Write(events=[(user("b"), 0)], snapshot=Snapshot(seq=9, version="v", data=b"s")))
        assert await store.read_latest_snapshot("s1") is None
        assert [e.seq for e in await store.read_events("s1")] == [1, 2]


    async def test_snapshots_of_sessions_are_separate(self, store: EventStore) -> None:
        """Each session has its own latest snapshot; an unknown session has none."""
        await new_session(store, "s1", user("a"))
        await new_session(store, "s2", user("b"), user("c"))
        await store.commit("s1", Write(snapshot=Snapshot(seq=2, version="v", data=b"one")))
        await store.commit("s2", Write(snapshot=Snapshot(seq=3, version="v", data=b"two")))
        one, two = await store.read_latest_snapshot("s1"), await store.read_latest_snapshot("s2")
        assert one is not None and two is not None
        assert (one.seq, one.data, two.seq, two.data) == (2, b"one", 3, b"two")
        assert await store.read_latest_snapshot("nope") is None


    async def test_read_events_after_a_snapshot_reads_only_the_tail(self, store: EventStore) -> None:
        """The tail after a snapshot's seq is exactly the later events, whatever the log's length."""
        await new_session(store, "s1", *[user(str(i)) for i in range(300)])
        tail = await store.read_events("s1", after_seq=295)
        assert [e.seq for e in tail] == [296, 297, 298, 299, 300, 301]
        assert await store.read_events("s1", after_seq=301) == []


    async def test_the_state_log_is_chained_under_the_store_key(self, store: EventStore) -> None:
        """Every event is stored with its HMAC chained after the one before; the rows read back as stored verify
        under the store's key and under no other."""
        await seeded_timeline(store)
        await store.commit("s1", events(user("more"), assistant("yes"), turn=3))
        rows = await store.read_event_chain("s1")
        assert [r.seq for r in rows] == [1, 2, 3, 4]
        assert rows[2].payload == user("more").model_dump_json() and rows[2].kind == "user_message"
        result = event_chain_ok(store, rows)
        assert (result.ok, result.rows, result.head) == (True, 4, rows[-1].hash)
        other = EventChainVerifier(ChainKey(bytes(32)))
        assert not other.feed(rows[0])
        assert [r.seq for r in await store.read_event_chain("s1", after_seq=2, limit=1)] == [3]


    async def test_each_commit_records_both_heads_in_the_session_row(self, store: EventStore) -> None:
        """After every commit the session row's head names the last event and the last timeline row, and the
        store's own head (what the evidence ledger writes down) is the same."""
        await seeded_timeline(store)
        for write in (events(user("a")), Write(timeline=[TimelineEntry(kind="phase", summary="only a row")])):
            await store.commit("s1", write)
            chain = await store.read_event_chain("s1")
            rows = await store.read_timeline("s1")
            expected = ChainHead(events_seq=chain[-1].seq, events_hash=chain[-1].hash, timeline_seq=rows[-1].seq,
                                 timeline_hash=rows[-1].hash)
            assert (await store.chain_record("s1")).head == expected
            assert store.chain_head("s1") == expected


    async def test_a_failed_commit_moves_no_head(self, store: EventStore) -> None:
        """A commit that does not hold leaves the recorded head (and the store's) where the last good one put it."""
        await seeded_timeline(store)
        before = (await store.chain_record("s1")).head
        with pytest.raises(PersistError):
            await store.commit("s1", Write(events=[(user("b"), 0)], timeline=[TimelineEntry(kind="phase")],
                                           snapshot=Snapshot(seq=99, version="v", data=b"s")))
        assert (await store.chain_record("s1")).head == before
        assert store.chain_head("s1") in (before, None)  # never a head that did not commit
        await store.commit("s1", events(user("after")))
        assert event_chain_ok(store, await store.read_event_chain("s1")).ok



    async def test_chain_record_of_an_unknown_session_raises(self, store: EventStore) -> None:
        """Asking for the head of a session that does not exist is an error, not an empty head."""
        with pytest.raises(SessionNotFound):
            await store.chain_record("nope")
        assert await store.read_event_chain("nope") == []
        assert store.chain_head("nope") is None
