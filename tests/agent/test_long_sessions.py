"""Long sessions through the real loop: a large tool output is one blob and a small event, a resumed long
session starts from its snapshot and reads only the tail, and compaction under a tiny budget keeps every request
valid and within the budget."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import AsyncIterator, Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from agent.phases.perceive import overhead_chars
from agent.prompts import SYSTEM_PROMPT
from agent.session import Runtime, resume_session, start_session
from core.clock import SystemClock
from core.compaction import SUMMARY_HEADER, messages_chars, tokens
from core.events import CallResult, Compacted, StoredEvent
from core.ids import IdFactory
from core.messages import TextBlock
from core.state import fold
from core.tools import ToolContext, ToolOutput, ToolSpec
from memory import EventStore, InMemoryEventStore, SqliteEventStore
from tests.agent.test_loop import RecordingModel, allow, text, use
from tests.core.test_fold import assert_request_valid

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "additionalProperties": False}
BIG = "".join(f"row {i:05d} " + "x" * 90 + "\n" for i in range(1_050))  # a little over 100 KiB


async def _dump(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
    return ToolOutput(BIG)


async def _echo(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
    return ToolOutput(f"result {args.get('n')}: " + "y" * 400)


TOOLS = [ToolSpec("dump", "prints a large report", SCHEMA, _dump, safety="write", effect="effectful"),
         ToolSpec("echo", "echoes", SCHEMA, _echo, safety="read", effect="read_only")]


class CountingReads:
    """Counts the events the store hands out, to see how much of the log a resume reads."""

    events_read = 0

    async def read_events(self, session_id: str, after_seq: int = 0,
                          upto_seq: int | None = None) -> list[StoredEvent]:
        out = await super().read_events(session_id, after_seq, upto_seq)  # type: ignore[misc]
        self.events_read += len(out)
        return out


class CountingMemoryStore(CountingReads, InMemoryEventStore):
    pass


class CountingSqliteStore(CountingReads, SqliteEventStore):
    pass


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[EventStore]:
    if request.param == "memory":
        yield CountingMemoryStore()
        return
    sqlite = await CountingSqliteStore.open(tmp_path / "strata.db")
    try:
        yield sqlite
    finally:
        await sqlite.close()


def runtime(store: EventStore, **settings: Any) -> Runtime:
    return Runtime(store=store, clock=SystemClock(), ids=IdFactory(), tools=TOOLS, **settings)


async def test_large_output_is_one_blob_and_a_small_event(store: EventStore, workspace: Path,
                                                         tmp_path: Path) -> None:
    """A tool returning 100 KiB stores one blob (the whole output) with its result; the event stays small, the
    model sees a bounded excerpt naming the blob, and the receipt's outcome digest is the blob's key."""
    model = RecordingModel([use("dump", "d1")], [text("done")])
    live = await start_session(runtime(store), model=model, workspace=workspace, mode="headless",
                               rules=allow("dump"), prompt="report", max_turns=5)
    assert (await live.run()).status == "completed"
    (stored,) = [e for e in await store.read_events(live.id) if isinstance(e.event, CallResult)]
    result = stored.event
    assert isinstance(result, CallResult)
    data = BIG.encode()
    sha = hashlib.sha256(data).hexdigest()
    assert len(data) > 100 * 1024
    assert result.blob is not None and (result.blob.sha256, result.blob.size) == (sha, len(data))
    assert len(stored.model_dump_json()) < 10 * 1024
    assert await store.get_blob(sha) == data
    (receipt,) = await store.list_receipts(live.id)
    assert receipt.outcome_sha256 == sha
    seen = model.requests[-1].messages[-1].content[0]
    assert getattr(seen, "content", None) == result.content
    assert result.content.endswith(f"kept as blob sha256:{sha}]")
    if isinstance(store, SqliteEventStore):
        with closing(sqlite3.connect(tmp_path / "strata.db")) as conn:
            assert conn.execute("SELECT COUNT(*), SUM(size) FROM blobs").fetchone() == (1, len(data))


async def test_resumed_long_session_starts_from_its_snapshot(store: EventStore, workspace: Path) -> None:
    """A session of 60 rounds with a snapshot every 50 events resumes from the latest snapshot, reading only the
    events after it, to the same state as a full fold; the model then continues at the right turn."""
    assert isinstance(store, CountingReads)
    rounds = 60
    turns = [[use("echo", f"e{i}", n=i)] for i in range(rounds)] + [[text("first answer")], [text("second answer")]]
    model = RecordingModel(*turns)
    rt = runtime(store, snapshot_every=50)
    live = await start_session(rt, model=model, workspace=workspace, mode="headless", rules=[], prompt="go",
                               max_turns=100)
    assert (await live.run()).status == "completed"
    await live.release(None)
    total = len(await store.read_events(live.id))
    assert total > 3 * 50
    snapshot = await store.read_latest_snapshot(live.id)
    assert snapshot is not None and total - snapshot.seq < 50 + 5

    store.events_read = 0
    resumed = await resume_session(rt, live.id, model=model, rules=[])
    assert store.events_read == total - snapshot.seq
    assert resumed.state == fold(await store.read_events(live.id))
    assert (await resumed.run("once more")).status == "completed"
    assert model.requests[-1].turn == rounds + 1
    assert resumed.state == fold(await store.read_events(live.id))


async def test_compaction_under_a_tiny_budget_keeps_requests_valid(store: EventStore, workspace: Path) -> None:
    """With a budget a few rounds wide, older rounds are compacted: every request fits the budget, pairs every
    tool_use with its tool_result first in the next user message, and a resume restores the same
    conversation the model last saw."""
    rt = runtime(store)
    overhead = overhead_chars(rt.plan("headless"), SYSTEM_PROMPT)
    rt.context_budget = tokens(overhead) + 800
    rounds = 40
    model = RecordingModel(*[[use("echo", f"e{i}", n=i)] for i in range(rounds)], [text("all done")])
    live = await start_session(rt, model=model, workspace=workspace, mode="headless", rules=[],
                               prompt="walk through the data", max_turns=100)
    assert (await live.run()).status == "completed"

    log = await store.read_events(live.id)
    compactions = [e.event for e in log if isinstance(e.event, Compacted)]
    assert len(compactions) >= 3
    for request in model.requests:
        assert_request_valid(list(request.messages))
        assert request.messages[0].role == "user"
        assert tokens(overhead + messages_chars(request.messages)) <= rt.context_budget
    late = model.requests[-1].messages
    first = late[0].content[0]
    assert isinstance(first, TextBlock) and first.text.startswith(SUMMARY_HEADER)
    assert late[1].role == "assistant"
    assert len(late) < 2 * rounds
    rows = await store.read_timeline(live.id, kinds=["lifecycle"])
    assert sum(r.outcome == "compacted" for r in rows) == len(compactions)
    await live.release(None)

    resumed = await resume_session(rt, live.id, model=model, rules=[])
    assert resumed.state.messages == live.state.messages
    assert resumed.state.compactions == len(compactions)
