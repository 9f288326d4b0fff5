"""The agentic loop in-process: commit costs, commit-before-act, result order, failure outcomes and resume of an
open batch. Real stores (in-memory and SQLite), a scripted model, real built-in tools and small fake tools."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent.phases.plan import propose
from agent.session import LiveSession, Runtime, resume_session, start_session
from agent.testing import StrictScriptedModel
from core.clock import SystemClock
from core.errors import PersistError
from core.events import (
    BatchCompleted,
    BatchProposed,
    CallResult,
    SessionStarted,
    StoredEvent,
    UserMessage,
)
from core.hashing import idempotency_key
from core.ids import IdFactory
from core.messages import Message, ToolResultBlock, ToolUseBlock
from core.model import ModelListener, ModelRequest, ModelResponse
from core.model.scripted import parse_script
from core.policy import PermissionRule, parse_rule
from core.tools import EffectClass, ToolContext, ToolOutput, ToolSpec
from memory import EventStore, InMemoryEventStore, NewReceipt, ReceiptUpdate, SessionRecord, SqliteEventStore, Write
from tool_executor import builtin_tools

# -- fakes and helpers -------------------------------------------------------------------------------------


class RecordingModel:
    """A scripted model that keeps every request it was sent, to check what the model saw."""

    def __init__(self, *turns: list[dict[str, Any]]) -> None:
        self._inner = StrictScriptedModel(parse_script(list(turns), "test-script"), name="script:test")
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        return self._inner.name

    async def complete(self, request: ModelRequest, listener: ModelListener | None = None) -> ModelResponse:
        # Snapshot the messages: the request's sequence is the live conversation and keeps growing afterwards.
        self.requests.append(dataclasses.replace(request, messages=tuple(request.messages)))
        return await self._inner.complete(request, listener)


class Recorder:
    """Fake tools whose handlers record each call, optionally after a delay or by raising."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def spec(self, name: str, *, effect: EffectClass = "effectful", delay_s: float = 0.0,
             raises: Exception | None = None, timeout_s: float = 30.0) -> ToolSpec:
        async def handler(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
            self.calls.append(ctx.call_id)
            if delay_s:
                await anyio.sleep(delay_s)
            if raises is not None:
                raise raises
            return ToolOutput(f"{name} ran {ctx.call_id} with {args.get('tag', '')}")

        return ToolSpec(name, f"fake tool {name}", {"type": "object", "properties": {"tag": {"type": "string"}},
                                                    "additionalProperties": False},
                        handler, safety="read" if effect == "read_only" else "write", effect=effect,
                        timeout_s=timeout_s)


def real(path: Path) -> str:
    return os.path.realpath(path)


def use(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "name": name, "id": call_id, "input": args}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def allow(*specs: str) -> list[PermissionRule]:
    return [parse_rule("allow", s) for s in specs]


def runtime(store: EventStore, *extra: ToolSpec) -> Runtime:
    return Runtime(store=store, clock=SystemClock(), ids=IdFactory(), tools=[*builtin_tools(), *extra])


async def start(rt: Runtime, model: RecordingModel, workspace: Path, rules: list[PermissionRule] | None = None,
                observer: Any = None) -> LiveSession:
    return await start_session(rt, model=model, workspace=workspace, mode="headless", rules=rules or [],
                               prompt="do the task", max_turns=10, observer=observer)


async def events_of(store: EventStore, session_id: str) -> list[StoredEvent]:
    return await store.read_events(session_id)


def results_by_call(events: list[StoredEvent]) -> dict[str, CallResult]:
    out: dict[str, CallResult] = {}
    for e in events:
        if isinstance(e.event, CallResult):
            assert e.event.call_id not in out, f"second result for {e.event.call_id}"
            out[e.event.call_id] = e.event
    return out


def tool_results_after_batch(request: ModelRequest) -> tuple[Message, list[ToolResultBlock]]:
    """The last assistant message with tool_use blocks, and the tool_result blocks of the user message after it."""
    messages = list(request.messages)
    assistant, user = messages[-2], messages[-1]
    assert assistant.role == "assistant" and user.role == "user"
    results = [b for b in user.content if isinstance(b, ToolResultBlock)]
    assert list(user.content[: len(results)]) == results, "tool_result blocks must come first"
    return assistant, results


class CommitMeter:
    """Observer: notes the store's commit count when a batch is proposed and when it completes."""

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self.proposed: dict[str, int] = {}
        self.completed: dict[str, int] = {}

    def __call__(self, stored: StoredEvent) -> None:
        if isinstance(stored.event, BatchProposed):
            self.proposed[stored.event.batch_id] = self.store.commits
        elif isinstance(stored.event, BatchCompleted):
            self.completed[stored.event.batch_id] = self.store.commits

    def cost(self) -> int:
        """Durable commits the (single) batch took, the one carrying BatchProposed included."""
        (batch_id,) = self.proposed
        return self.completed[batch_id] - self.proposed[batch_id] + 1


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[EventStore]:
    if request.param == "memory":
        yield InMemoryEventStore()
        return
    sqlite = await SqliteEventStore.open(tmp_path / "strata.db")
    try:
        yield sqlite
    finally:
        await sqlite.close()


# -- commit counts -----------------------------------------------------------------------------------------


async def test_read_only_batch_costs_two_commits(store: EventStore, workspace: Path) -> None:
    """A batch of 5 read-only calls costs exactly 2 durable commits: the proposal, then results + completion."""
    for i in range(5):
        (workspace / f"f{i}.txt").write_text(f"content {i}")
    model = RecordingModel([use("read_file", f"r{i}", path=f"f{i}.txt") for i in range(5)], [text("done")])
    meter = CommitMeter(store)
    live = await start(runtime(store), model, workspace, observer=meter)
    before = store.commits
    outcome = await live.run()
    assert outcome.status == "completed"
    assert meter.cost() == 2
    assert store.commits - before == 3  # the batch's 2, plus the final turn's one
    results = results_by_call(await events_of(store, live.id))
    assert [results[f"r{i}"].content for i in range(5)] == [f"content {i}" for i in range(5)]


@pytest.mark.parametrize("k", [1, 3])
async def test_effectful_batch_costs_k_plus_one_commits(store: EventStore, workspace: Path, k: int) -> None:
    """A batch of k allowed write_file calls costs k+1 commits: one per receipt barrier, plus the completion."""
    model = RecordingModel([use("write_file", f"w{i}", path=f"out/{i}.txt", content=f"v{i}") for i in range(k)],
                           [text("done")])
    meter = CommitMeter(store)
    live = await start(runtime(store), model, workspace, allow("write_file"), observer=meter)
    await live.run()
    assert meter.cost() == k + 1
    assert [(workspace / "out" / f"{i}.txt").read_text() for i in range(k)] == [f"v{i}" for i in range(k)]
    receipts = await store.list_receipts(live.id)
    assert sorted(r.call_id for r in receipts) == [f"w{i}" for i in range(k)]
    assert {r.status for r in receipts} == {"done"}


# -- commit before act -------------------------------------------------------------------------------------


async def test_batch_is_durable_before_first_handler(store: EventStore, workspace: Path) -> None:
    """When a handler starts, its BatchProposed is already stored, and an effectful call's receipt is dispatched."""
    seen: list[tuple[str, list[str], list[tuple[str, str]]]] = []

    def probe(name: str, effect: EffectClass) -> ToolSpec:
        async def handler(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
            kinds = [e.event.kind for e in await store.read_events(ctx.session_id)]
            receipts = [(r.call_id, r.status) for r in await store.list_receipts(ctx.session_id)]
            seen.append((ctx.call_id, kinds, receipts))
            return ToolOutput("probed")

        return ToolSpec(name, "reads the store", {"type": "object"}, handler, safety="read", effect=effect)

    model = RecordingModel([use("probe_ro", "p1"), use("probe_fx", "p2")], [text("done")])
    live = await start(runtime(store, probe("probe_ro", "read_only"), probe("probe_fx", "effectful")), model,
                       workspace, allow("probe_fx"))
    await live.run()
    (c1, kinds1, receipts1), (c2, kinds2, receipts2) = seen
    assert c1 == "p1" and "batch_proposed" in kinds1 and receipts1 == []
    assert c2 == "p2" and "batch_proposed" in kinds2
    assert ("p2", "dispatched") in receipts2


async def test_failed_batch_commit_runs_no_tool(workspace: Path) -> None:
    """If the commit carrying BatchProposed fails, run() raises PersistError and no handler ran at all."""
    store = InMemoryEventStore(fail_on_commit=lambda _sid, w: any(isinstance(e, BatchProposed) for e, _ in w.events))
    recorder = Recorder()
    model = RecordingModel([use("write_file", "w1", path="must-not-exist.txt", content="x"),
                            use("record_ro", "r1"), use("record", "r2")], [text("done")])
    live = await start(runtime(store, recorder.spec("record_ro", effect="read_only"), recorder.spec("record")),
                       model, workspace, allow("write_file", "record"))
    with pytest.raises(PersistError):
        await live.loop.run()
    assert recorder.calls == []
    assert not (workspace / "must-not-exist.txt").exists()
    assert [e.event.kind for e in await events_of(store, live.id)] == ["session_started", "user_message"]
    assert await store.list_receipts(live.id) == []


async def test_failed_receipt_commit_stops_before_that_handler(workspace: Path) -> None:
    """A failed commit of the second call's receipt stops the batch: call one ran, call two never started."""
    store = InMemoryEventStore(fail_on_commit=lambda _sid, w: any(r.call_id == "c2" for r in w.new_receipts))
    recorder = Recorder()
    model = RecordingModel([use("record", "c1"), use("record", "c2")], [text("done")])
    live = await start(runtime(store, recorder.spec("record")), model, workspace, allow("record"))
    with pytest.raises(PersistError):
        await live.loop.run()
    assert recorder.calls == ["c1"]
    assert [r.call_id for r in await store.list_receipts(live.id)] == ["c1"]


async def test_session_run_surfaces_persist_error_itself(workspace: Path) -> None:
    """LiveSession.run (what the CLI calls) raises the PersistError itself, not wrapped in an ExceptionGroup, so
    the CLI's `except StrataError` prints one clear line instead of a traceback."""
    store = InMemoryEventStore(fail_on_commit=lambda _sid, w: any(isinstance(e, BatchProposed) for e, _ in w.events))
    model = RecordingModel([use("read_file", "r1", path="a.txt")], [text("done")])
    live = await start(runtime(store), model, workspace)
    with pytest.raises(PersistError):
        await live.run()


# -- observe: results ----------------------------------------------------------------------------------------


async def test_results_follow_proposal_order(store: EventStore, workspace: Path) -> None:
    """Tool results reach the model in proposal order, each in its call's slot, whatever its speed or outcome."""
    (workspace / "a.txt").write_text("alpha")
    recorder = Recorder()
    slow = recorder.spec("slow", effect="read_only", delay_s=0.05)
    fast = recorder.spec("fast", effect="read_only")
    batch = [text("let me look"), use("slow", "c1", tag="one"), use("read_file", "c2", path="a.txt"),
             use("fast", "c3", tag="three"), use("read_file", "c4", path="missing.txt")]
    model = RecordingModel(batch, [text("done")])
    live = await start(runtime(store, slow, fast), model, workspace)
    await live.run()
    assistant, results = tool_results_after_batch(model.requests[1])
    assert [b.id for b in assistant.content if isinstance(b, ToolUseBlock)] == ["c1", "c2", "c3", "c4"]
    assert [r.tool_use_id for r in results] == ["c1", "c2", "c3", "c4"]
    assert [r.content for r in results[:3]] == ["slow ran c1 with one", "alpha", "fast ran c3 with three"]
    assert results[3].is_error and "missing.txt" in results[3].content
    assert not any(r.is_error for r in results[:3])


async def test_denied_calls_keep_their_place_in_the_results(store: EventStore, workspace: Path) -> None:
    """A denied call gets a denial result in its slot, saying no effect started; the others still run."""
    (workspace / "a.txt").write_text("alpha")
    model = RecordingModel([use("write_file", "c1", path="x.txt", content="x"), use("read_file", "c2", path="a.txt")],
                           [text("done")])
    live = await start(runtime(store), model, workspace)
    await live.run()
    _, results = tool_results_after_batch(model.requests[1])
    assert [r.tool_use_id for r in results] == ["c1", "c2"]
    assert results[0].is_error and "no effect started" in results[0].content
    assert results[1].content == "alpha"
    assert not (workspace / "x.txt").exists()


async def test_handler_exception_becomes_error_with_failed_receipt(store: EventStore, workspace: Path) -> None:
    """An effectful handler raising a generic exception yields an error result and a `failed` receipt."""
    recorder = Recorder()
    model = RecordingModel([use("boom", "c1")], [text("done")])
    live = await start(runtime(store, recorder.spec("boom", raises=ValueError("kaboom"))), model, workspace,
                       allow("boom"))
    outcome = await live.run()
    assert outcome.status == "completed"
    result = results_by_call(await events_of(store, live.id))["c1"]
    assert result.status == "error" and result.is_error
    assert "ValueError: kaboom" in result.content
    (receipt,) = await store.list_receipts(live.id)
    assert receipt.id == result.receipt_id and receipt.status == "failed"


async def test_effectful_deadline_is_unknown(store: EventStore, workspace: Path) -> None:
    """An effectful handler past its deadline is `unknown` (it may have acted), with an `unknown` receipt."""
    recorder = Recorder()
    model = RecordingModel([use("stuck", "c1")], [text("done")])
    live = await start(runtime(store, recorder.spec("stuck", delay_s=5, timeout_s=0.1)), model, workspace,
                       allow("stuck"))
    outcome = await live.run()
    result = results_by_call(await events_of(store, live.id))["c1"]
    assert result.status == "unknown" and result.is_error
    assert "will not be re-run" in result.content
    (receipt,) = await store.list_receipts(live.id)
    assert receipt.id == result.receipt_id and receipt.status == "unknown"
    assert outcome.unknown_receipts == 1 and outcome.exit_code == 5


async def test_read_only_deadline_is_timeout(store: EventStore, workspace: Path) -> None:
    """A read-only handler past its deadline is a plain `timeout` with no receipt."""
    recorder = Recorder()
    model = RecordingModel([use("stuck_ro", "c1")], [text("done")])
    live = await start(runtime(store, recorder.spec("stuck_ro", effect="read_only", delay_s=5, timeout_s=0.1)),
                       model, workspace)
    outcome = await live.run()
    result = results_by_call(await events_of(store, live.id))["c1"]
    assert result.status == "timeout" and result.is_error and result.receipt_id is None
    assert await store.list_receipts(live.id) == []
    assert outcome.unknown_receipts == 0


async def test_bash_timeout_through_the_loop_is_unknown(store: EventStore, workspace: Path) -> None:
    """bash's own timeout_s (the tool killing its process group) is also an `unknown` outcome for the effect."""
    model = RecordingModel([use("bash", "c1", command="sleep 10", timeout_s=0.3)], [text("done")])
    live = await start(runtime(store), model, workspace, allow("bash"))
    await live.run()
    result = results_by_call(await events_of(store, live.id))["c1"]
    assert result.status == "unknown"
    assert "process group was killed" in result.content
    (receipt,) = await store.list_receipts(live.id)
    assert receipt.status == "unknown"


# -- resume of an open batch -------------------------------------------------------------------------------


async def crashed_session(rt: Runtime, workspace: Path, batch_turn: list[dict[str, Any]],
                          rules: list[PermissionRule]) -> tuple[str, BatchProposed]:
    """A session whose process died mid-batch: started, one BatchProposed committed, nothing after it."""
    mode = "headless"
    sid = rt.ids.session_id()
    now = rt.clock.now()
    ws = real(workspace)
    record = SessionRecord(id=sid, created_at=now, updated_at=now, mode=mode, workspace=ws, model="script:test",
                           status="active", lease=None)
    started = SessionStarted(session_id=sid, mode=mode, workspace=ws, model="script:test", rules=tuple(rules),
                             max_turns=10, plan_digest=rt.plan(mode).digest)
    await rt.store.create_session(record, Write(events=[(started, 0), (UserMessage(text="do the task"), 0)]))
    (blocks,) = parse_script([batch_turn], "test-script")
    batch = propose(ModelResponse(content=blocks, stop_reason="tool_use"), batch_id=rt.ids.uuid7()).proposal
    assert isinstance(batch, BatchProposed)
    await rt.store.commit(sid, Write(events=[(batch, 1)]))
    return sid, batch


def new_receipt(rt: Runtime, sid: str, batch: BatchProposed, call_id: str) -> NewReceipt:
    call = next(c for c in batch.calls if c.call_id == call_id)
    return NewReceipt(id=rt.ids.receipt_id(), call_id=call_id, tool=call.tool,
                      idempotency_key=idempotency_key(sid, call_id, call.input_sha256), args_sha256=call.input_sha256)


async def test_resume_open_batch(store: EventStore, workspace: Path) -> None:
    """Resume keeps finished results, turns `dispatched` calls into `unknown` without re-running them, and runs
    calls that never started (effectful with no receipt, and read-only)."""
    (workspace / "a.txt").write_text("alpha")
    recorder = Recorder()
    rt = runtime(store, recorder.spec("record"))
    batch_turn = [text("working"), use("record", "c1", tag="done-before"), use("record", "c2", tag="in-flight"),
                  use("write_file", "c3", path="w.txt", content="in-flight write"),
                  use("record", "c4", tag="never-started"), use("read_file", "c5", path="a.txt")]
    sid, batch = await crashed_session(rt, workspace, batch_turn, allow("record", "write_file"))
    # Before the crash: c1 finished (receipt done, result stored); c2 and c3 were dispatched; c4, c5 never started.
    r1 = new_receipt(rt, sid, batch, "c1")
    await store.commit(sid, Write(new_receipts=[r1]))
    earlier = CallResult(batch_id=batch.batch_id, call_id="c1", tool="record", status="ok",
                         content="record ran c1 before the crash", is_error=False, receipt_id=r1.id)
    r2, r3 = new_receipt(rt, sid, batch, "c2"), new_receipt(rt, sid, batch, "c3")
    await store.commit(sid, Write(events=[(earlier, 1)], receipt_updates=[ReceiptUpdate(id=r1.id, status="done")],
                                  new_receipts=[r2, r3]))

    model = RecordingModel(batch_turn, [text("done")])
    live = await resume_session(rt, sid, model=model, rules=[])
    outcome = await live.run()

    assert recorder.calls == ["c4"], "only the call with no receipt runs again"
    assert not (workspace / "w.txt").exists(), "a dispatched write_file is not re-run"
    results = results_by_call(await events_of(store, sid))
    assert results["c1"] == earlier
    assert results["c2"].status == "unknown" and results["c2"].receipt_id == r2.id
    assert results["c3"].status == "unknown" and results["c3"].receipt_id == r3.id
    assert "not re-run" in results["c2"].content
    assert results["c4"].status == "ok" and results["c4"].content == "record ran c4 with never-started"
    assert results["c5"].status == "ok" and results["c5"].content == "alpha"
    receipts = {r.call_id: r.status for r in await store.list_receipts(sid)}
    assert receipts == {"c1": "done", "c2": "unknown", "c3": "unknown", "c4": "done"}

    assert len(model.requests) == 1, "the model is asked only after the open batch is closed"
    _, blocks = tool_results_after_batch(model.requests[0])
    assert [b.tool_use_id for b in blocks] == ["c1", "c2", "c3", "c4", "c5"]
    assert blocks[0].content == "record ran c1 before the crash"
    assert outcome.status == "completed" and outcome.unknown_receipts == 2 and outcome.exit_code == 5


async def test_resume_reruns_open_read_only_batch(store: EventStore, workspace: Path) -> None:
    """An open batch of read-only calls with no results is simply run again on resume, and the session ends."""
    (workspace / "a.txt").write_text("alpha")
    rt = runtime(store)
    batch_turn = [use("read_file", "c1", path="a.txt"), use("list_dir", "c2", path=".")]
    sid, _ = await crashed_session(rt, workspace, batch_turn, [])
    model = RecordingModel(batch_turn, [text("done")])
    outcome = await (await resume_session(rt, sid, model=model, rules=[])).run()
    results = results_by_call(await events_of(store, sid))
    assert results["c1"].content == "alpha" and results["c2"].content == "a.txt"
    assert outcome.status == "completed" and outcome.unknown_receipts == 0
    assert [e.event.kind for e in await events_of(store, sid)].count("batch_completed") == 1
