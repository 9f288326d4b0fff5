"""The session writer's blobs and snapshots, and restore: large outputs leave the log as blobs in the result's
own commit, snapshots ride along with commits the writer makes anyway, and restore uses a snapshot only when it
can be trusted, on both stores."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.blobs import BLOB_THRESHOLD, EXCERPT_CHARS
from core.clock import SteppingClock
from core.errors import InconsistentLog, StrataError
from core.events import (
    BatchCompleted,
    BatchProposed,
    CallResult,
    PlannedCall,
    SessionStarted,
    StoredEvent,
    UserMessage,
)
from core.messages import ToolUseBlock
from core.snapshot import SNAPSHOT_VERSION, dump_state
from core.state import FoldError, SessionState, apply, fold
from memory import InMemoryEventStore, SessionRecord, Snapshot, SqliteEventStore, Write
from memory.restore import restore, restore_or_report
from memory.session_writer import SessionWriter
from memory.store import EventStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "memory"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[EventStore]:
    s: EventStore
    if request.param == "sqlite":
        s = await SqliteEventStore.open(tmp_path / "strata.db", clock=SteppingClock(start=T0))
    else:
        s = InMemoryEventStore(clock=SteppingClock(start=T0))
    try:
        yield s
    finally:
        await s.close()


def record(session_id: str) -> SessionRecord:
    return SessionRecord(id=session_id, created_at=T0, updated_at=T0, mode="headless", workspace="/ws",
                         model="script:test", status="idle")


def started(session_id: str = "s1") -> SessionStarted:
    return SessionStarted(session_id=session_id, mode="headless", workspace="/ws", model="script:test",
                          max_turns=10, plan_digest="p")


def proposal(batch_id: str, call_id: str) -> BatchProposed:
    call = PlannedCall(call_id=call_id, tool="read_file", input={"path": call_id}, input_sha256="x")
    return BatchProposed(batch_id=batch_id, calls=(call,),
                         content=(ToolUseBlock(id=call_id, name="read_file", input=call.input),))


def result(batch_id: str, call_id: str, content: str) -> CallResult:
    return CallResult(batch_id=batch_id, call_id=call_id, tool="read_file", status="ok", content=content,
                      is_error=False)


async def live_writer(store: EventStore, snapshot_every: int = 0) -> tuple[SessionWriter, SessionState]:
    """A writer wired like the loop's: every commit is applied to the live state it snapshots."""
    state = fold(await store.create_session(record("s1"), Write(events=[(started(), 0)])))

    def applied(stored: list[StoredEvent]) -> None:
        for item in stored:
            apply(state, item)

    return SessionWriter(store, "s1", on_commit=applied, state=state, snapshot_every=snapshot_every), state


async def round_trip(writer: SessionWriter, i: int, content: str = "ok") -> None:
    writer.stage(proposal(f"b{i}", f"c{i}"), i)
    await writer.flush()
    writer.stage(result(f"b{i}", f"c{i}", content), i)
    writer.stage(BatchCompleted(batch_id=f"b{i}"), i)
    await writer.flush()


# -- blobs --------------------------------------------------------------------------------------------------


async def test_large_output_becomes_one_blob_and_a_small_event(store: EventStore) -> None:
    """A 100 KiB output is stored whole as a blob in the result's commit; the event and the conversation hold a
    bounded excerpt that names the blob."""
    writer, state = await live_writer(store)
    output = "".join(f"line {i}: {'x' * 60}\n" for i in range(1_600))
    assert len(output.encode()) > 100 * 1024
    commits = store.commits
    await round_trip(writer, 1, output)
    assert store.commits == commits + 2, "no commit of its own"
    (stored,) = [e.event for e in await store.read_events("s1") if isinstance(e.event, CallResult)]
    sha = hashlib.sha256(output.encode()).hexdigest()
    assert stored.blob is not None and (stored.blob.sha256, stored.blob.size) == (sha, len(output.encode()))
    assert len(stored.content) < EXCERPT_CHARS + 200
    assert stored.content.startswith("line 0: ") and "line 1599: " in stored.content
    assert stored.content.endswith(f"[full output ({len(output.encode())} bytes) kept as blob sha256:{sha}]")
    assert await store.get_blob(sha) == output.encode()
    assert state.messages[-1].content[0].content == stored.content  # type: ignore[union-attr]


async def test_output_at_the_threshold_stays_in_the_event(store: EventStore) -> None:
    """Up to the threshold (UTF-8 bytes) the output is the event's content, with no blob."""
    writer, _ = await live_writer(store)
    output = "é" * (BLOB_THRESHOLD // 2)  # two bytes each: exactly the threshold
    await round_trip(writer, 1, output)
    (stored,) = [e.event for e in await store.read_events("s1") if isinstance(e.event, CallResult)]
    assert (stored.content, stored.blob) == (output, None)


# -- snapshots ----------------------------------------------------------------------------------------------


async def test_writer_snapshots_every_n_events_without_extra_commits(store: EventStore) -> None:
    """Snapshots ride with commits the writer makes anyway, every `snapshot_every` events, each holding the
    state as of the commit before it."""
    writer, state = await live_writer(store, snapshot_every=10)
    for i in range(1, 21):
        await round_trip(writer, i)
    assert store.commits == 1 + 2 * 20
    snapshot = await store.read_latest_snapshot("s1")
    assert snapshot is not None and snapshot.version == SNAPSHOT_VERSION
    assert state.last_seq - snapshot.seq < 10 + 3
    assert writer.snapshot_seq == snapshot.seq
    events = await store.read_events("s1")
    assert snapshot.data == dump_state(fold(e for e in events if e.seq <= snapshot.seq))


async def test_restore_reads_the_snapshot_and_only_the_tail(store: EventStore) -> None:
    """Restore starts from the latest snapshot and reads only the events after it; the state equals fold."""
    writer, state = await live_writer(store, snapshot_every=25)
    for i in range(1, 41):
        await round_trip(writer, i)
    restored = await restore(store, "s1")
    assert restored.snapshot_seq > 0
    assert restored.events_read == state.last_seq - restored.snapshot_seq < 25 + 3
    assert restored.state == state == fold(await store.read_events("s1"))


async def test_restore_without_snapshot_folds_the_whole_log(store: EventStore) -> None:
    """No snapshot (snapshots off, or a session from before them): the whole log is folded."""
    writer, state = await live_writer(store, snapshot_every=0)
    for i in range(1, 6):
        await round_trip(writer, i)
    restored = await restore(store, "s1")
    assert (restored.snapshot_seq, restored.events_read) == (0, state.last_seq)
    assert restored.state == state


async def _with_snapshot(store: EventStore, snapshot: Snapshot) -> SessionState:
    writer, state = await live_writer(store)
    for i in range(1, 4):
        await round_trip(writer, i)
    await store.commit("s1", Write(events=[(UserMessage(text="after"), 3)], snapshot=snapshot))
    state.messages.clear()  # the live copy is not what restore must return
    return fold(await store.read_events("s1"))


@pytest.mark.parametrize("bad", ["version", "data", "seq"])
async def test_untrusted_snapshot_is_ignored(store: EventStore, bad: str) -> None:
    """A snapshot of another version, unreadable data, or a state at another seq is ignored: restore folds the
    whole log instead and gets the same state."""
    good = dump_state(SessionState())
    snapshot = {"version": Snapshot(seq=4, version="0:old", data=good),
                "data": Snapshot(seq=4, version=SNAPSHOT_VERSION, data=b'{"session_id": '),
                "seq": Snapshot(seq=4, version=SNAPSHOT_VERSION, data=good)}[bad]
    expected = await _with_snapshot(store, snapshot)
    restored = await restore(store, "s1")
    assert restored.snapshot_seq == 0
    assert restored.state == expected


def _damage(data: bytes, kind: str) -> bytes:
    """A genuine snapshot with one kind of damage to its head or its conversation."""
    head_text, _, conversation_text = data.partition(b"\n")
    head, conversation = json.loads(head_text), json.loads(conversation_text)
    match kind:
        case "none":
            pass
        case "wrong type":
            head["counters"]["tool_calls"] = str(head["counters"]["tool_calls"])
        case "missing field":
            del head["depth"]
        case "extra field":
            head["open_batch"]["surprise"] = 1
        case "bad nested message":
            conversation[0]["role"] = "robot"
        case "bad nested model":
            head["open_batch"]["calls"][0]["input"] = "not an object"
    return json.dumps(head).encode() + b"\n" + json.dumps(conversation).encode()


async def _snapshot_with_a_batch_open(store: EventStore, kind: str) -> None:
    """Seven events, with a snapshot at seq 6 (damaged by `kind`) taken while a batch is open, so that its head
    holds the batch's content, calls and results, and its conversation the first round trip."""
    writer, _ = await live_writer(store)
    await round_trip(writer, 1)
    writer.stage(proposal("b2", "c2"), 2)
    await writer.flush()
    writer.stage(result("b2", "c2", "partial"), 2)
    await writer.flush()  # seq 6: the batch is open, with one result
    at_six = fold(await store.read_events("s1"))
    assert at_six.open_batch is not None and at_six.open_batch.results and at_six.messages
    snapshot = Snapshot(seq=6, version=SNAPSHOT_VERSION, data=_damage(dump_state(at_six), kind))
    await store.commit("s1", Write(events=[(BatchCompleted(batch_id="b2"), 2)], snapshot=snapshot))


@pytest.mark.parametrize("kind", ["wrong type", "missing field", "extra field", "bad nested message",
                                  "bad nested model"])
async def test_damaged_snapshot_is_ignored_and_the_whole_log_folded(store: EventStore, kind: str,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """A snapshot of this version whose data is damaged (a value of the wrong type, a field missing or unknown, a
    message or a model inside that does not validate) is ignored with a warning: restore folds the whole log and
    gets the same state as without any snapshot."""
    await _snapshot_with_a_batch_open(store, kind)
    with caplog.at_level("WARNING", logger="strata.restore"):
        restored = await restore(store, "s1")
    assert (restored.snapshot_seq, restored.events_read) == (0, 7)
    assert restored.state == fold(await store.read_events("s1"))
    assert any("snapshot ignored" in r.getMessage() for r in caplog.records)


async def test_undamaged_snapshot_with_a_batch_open_is_used(store: EventStore) -> None:
    """The control for the damage above: the same snapshot, rewritten by `_damage` unchanged, is used."""
    await _snapshot_with_a_batch_open(store, "none")
    restored = await restore(store, "s1")
    assert (restored.snapshot_seq, restored.events_read) == (6, 1)
    assert restored.state == fold(await store.read_events("s1"))


async def test_snapshot_whose_tail_does_not_apply_is_ignored(store: EventStore) -> None:
    """A snapshot that loads but disagrees with the log after it (the tail cannot be applied to it) is not
    trusted: restore falls back to folding the whole log."""
    writer, _ = await live_writer(store)
    writer.stage(UserMessage(text="go"), 0)
    await writer.flush()  # seq 2
    before_batch = fold(await store.read_events("s1"))
    writer.stage(proposal("b1", "c1"), 1)
    await writer.flush()  # seq 3: the batch opens
    lying = dataclasses.replace(before_batch, last_seq=3)  # claims seq 3 but has no open batch
    await store.commit("s1", Write(events=[(result("b1", "c1", "ok"), 1), (BatchCompleted(batch_id="b1"), 1)],
                                   snapshot=Snapshot(seq=3, version=SNAPSHOT_VERSION, data=dump_state(lying))))
    restored = await restore(store, "s1")
    assert restored.snapshot_seq == 0
    assert restored.state == fold(await store.read_events("s1"))
    assert restored.state.open_batch is None and restored.state.counters.tool_calls == 1


async def test_a_log_that_does_not_fold_is_one_inconsistent_log_error(store: EventStore) -> None:
    """`restore` raises FoldError for a log the state machine rejects; `restore_or_report`, which the commands
    use, turns it into the one-line InconsistentLog (a StrataError) naming the session."""
    await store.create_session(record("s1"), Write(events=[(started(), 0)]))
    await store.commit("s1", Write(events=[(started(), 0)]))  # a second session_started
    with pytest.raises(FoldError):
        await restore(store, "s1")
    with pytest.raises(InconsistentLog) as info:
        await restore_or_report(store, "s1")
    assert isinstance(info.value, StrataError) and info.value.exit_code == 1
    assert info.value.message == "session s1 has an inconsistent log: second session_started"
    assert info.value.hint and "strata timeline s1" in info.value.hint
