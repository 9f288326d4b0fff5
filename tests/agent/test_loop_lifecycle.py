"""The loop owns its lifecycle: `AgenticLoop.start` and `AgenticLoop.resume` write their own lifecycle events and
rows, the loop decides with the hooks it is given (not the executor's), and building or running one leaves the
process's logging alone (an entry point configures it), so one process can drive many sessions, each logging under
its own id."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import structlog

from agent.loop import AgenticLoop, LoopParts
from agent.session import Runtime, start_session
from agent.testing import StrictScriptedModel
from core.clock import SystemClock
from core.hooks import Hook, HookAllow, HookRepair, HookSet, ObserveInput, StopInput
from core.ids import IdFactory
from core.masking import Masker
from core.model.scripted import parse_script
from core.policy import parse_rule
from core.tools import BoundToolPlan, ToolContext, ToolOutput, ToolSpec
from memory import InMemoryEventStore, SessionRecord
from memory.leases import new_holder
from memory.restore import restore
from observability import attach_home, configure_logging, reset_logging
from tool_executor import ToolCallProcessor, builtin_tools


@pytest.fixture(autouse=True)
def clean_logging() -> Iterator[None]:
    reset_logging()
    structlog.contextvars.clear_contextvars()
    yield
    reset_logging()
    structlog.contextvars.clear_contextvars()


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def model(*turns: list[dict[str, Any]]) -> StrictScriptedModel:
    return StrictScriptedModel(parse_script(list(turns), "t"), name="script:t")


class Seen:
    """Python hooks that note what they were given: lifecycle events (observe) and proposals to finish (stop)."""

    def __init__(self, repairs: int = 0) -> None:
        self.events: list[str] = []
        self.stops = 0
        self.repairs = repairs

    async def observe(self, data: ObserveInput) -> None:
        self.events.append(data.event)

    async def stop(self, data: StopInput) -> HookRepair | HookAllow:
        self.stops += 1
        if self.stops <= self.repairs:
            return HookRepair("say it once more")
        return HookAllow()

    def hooks(self) -> HookSet:
        return HookSet((Hook("seen-observe", "observe", fn=self.observe), Hook("seen-stop", "stop", fn=self.stop)))


def parts(store: InMemoryEventStore, workspace: Path, scripted: StrictScriptedModel, hooks: HookSet) -> LoopParts:
    """A loop's parts assembled by hand, without agent/session.py: the executor gets no hooks at all."""
    plan = BoundToolPlan(builtin_tools(), "headless")
    ids = IdFactory()
    processor = ToolCallProcessor(plan, workspace=workspace, ids=ids)
    return LoopParts(store=store, model=scripted, plan=plan, processor=processor, hooks=hooks, ids=ids,
                     masker=Masker.throwaway())


def record(session_id: str, workspace: Path) -> SessionRecord:
    clock = SystemClock()
    now = clock.now()
    return SessionRecord(id=session_id, created_at=now, updated_at=now, mode="headless", workspace=str(workspace),
                         model="script:t", status="active", lease=new_holder("lease-1", clock))


async def test_a_loop_records_its_own_start_and_resume(workspace: Path) -> None:
    """Started and resumed by hand, a loop writes `SessionStarted` with the "started" row, then `SessionResumed`
    with the "resumed" row and the added rules, and its observation hooks hear both."""
    store = InMemoryEventStore()
    seen = Seen()
    sid = IdFactory().session_id()
    loop = await AgenticLoop.start(parts(store, workspace, model([text("done")]), seen.hooks()),
                                   record(sid, workspace), rules=(), max_turns=5, on_ask="deny",
                                   project_hooks_digest=None, prompt="go")
    assert [e.event.kind for e in await store.read_events(sid)] == ["session_started", "user_message"]
    (row,) = await store.read_timeline(sid)
    assert (row.kind, row.outcome, row.data["plan_digest"]) == ("lifecycle", "started", loop.plan.digest)
    outcome = await loop.run()
    assert outcome.status == "completed"
    assert seen.events == ["started", "ended"]

    seen.events.clear()
    again = await AgenticLoop.resume(parts(store, workspace, model([text("x")], [text("more")]), seen.hooks()),
                                     await restore(store, sid), rules=(parse_rule("allow", "bash"),), max_turns=9,
                                     on_ask="park", project_hooks_digest=None, waived_by=None)
    kinds = [e.event.kind for e in await store.read_events(sid)]
    assert kinds[-2:] == ["session_resumed", "rules_added"]
    assert again.state.max_turns == 9 and again.state.on_ask == "park" and again.state.rules[-1].tool == "bash"
    resumed = [r for r in await store.read_timeline(sid) if r.outcome == "resumed"]
    assert len(resumed) == 1 and resumed[0].kind == "lifecycle"
    await again.run("and more")
    assert seen.events == ["resumed", "ended"]


async def test_the_loop_decides_with_the_hooks_it_is_given(workspace: Path) -> None:
    """A Stop hook given to the loop asks for its repair although the executor was given no hooks."""
    store = InMemoryEventStore()
    seen = Seen(repairs=1)
    sid = IdFactory().session_id()
    loop = await AgenticLoop.start(parts(store, workspace, model([text("done")], [text("done, really")]),
                                         seen.hooks()),
                                   record(sid, workspace), rules=(), max_turns=5, on_ask="deny",
                                   project_hooks_digest=None, prompt="go")
    assert (await loop.run()).status == "completed"
    assert seen.stops == 2
    assert [e.event.kind for e in await store.read_events(sid)].count("repair_requested") == 1


def _runtime(store: InMemoryEventStore, *extra: ToolSpec) -> Runtime:
    clock = SystemClock()
    return Runtime(store=store, clock=clock, ids=IdFactory(clock), tools=[*builtin_tools(), *extra],
                   masker=Masker(b"k" * 32))


async def test_building_and_running_a_loop_leaves_logging_alone(workspace: Path) -> None:
    """Logging is the entry point's to configure: a session started and run in-process does not configure
    structlog or touch the root logger's handlers."""
    import logging

    structlog.reset_defaults()
    handlers = list(logging.getLogger().handlers)
    live = await start_session(_runtime(InMemoryEventStore()), model=model([text("done")]), workspace=workspace,
                               mode="headless", rules=[], prompt="go", max_turns=5)
    await live.run()
    assert not structlog.is_configured()
    assert logging.getLogger().handlers == handlers


async def test_sessions_driven_by_one_task_log_under_their_own_ids(strata_home: Path, workspace: Path) -> None:
    """Two sessions started one after the other in one task, then run: each one's log lines name that session,
    and nothing stays bound in the caller's context afterwards (a daemon drives many sessions in one process)."""
    async def handler(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        structlog.get_logger("tests.tool").info("tool ran", tag=args.get("tag"))
        return ToolOutput("ran")

    noisy = ToolSpec("noisy", "logs a line", {"type": "object", "properties": {"tag": {"type": "string"}}},
                     handler, safety="read", effect="read_only")
    configure_logging(verbose=False)
    path = attach_home(strata_home, Masker(b"k" * 32))
    assert path is not None
    rt = _runtime(InMemoryEventStore(), noisy)

    def script(tag: str) -> StrictScriptedModel:
        return model([{"type": "tool_use", "id": f"n-{tag}", "name": "noisy", "input": {"tag": tag}}], [text("done")])

    first = await start_session(rt, model=script("first"), workspace=workspace, mode="headless", rules=[],
                                prompt="go", max_turns=5)
    second = await start_session(rt, model=script("second"), workspace=workspace, mode="headless", rules=[],
                                 prompt="go", max_turns=5)
    await first.run()
    await second.run()
    assert "session_id" not in structlog.contextvars.get_contextvars()
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    ran = {line["tag"]: line["session_id"] for line in lines if line["event"] == "tool ran"}
    assert ran == {"first": first.id, "second": second.id}
    started = [line["session_id"] for line in lines if line["event"] == "session started"]
    assert started == [first.id, second.id]
