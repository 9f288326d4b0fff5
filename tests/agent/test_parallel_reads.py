"""Act phase: consecutive read-only calls run side by side; effectful calls run alone, in proposal order;
results come back in proposal order."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from agent.session import Runtime, start_session
from agent.testing import StrictScriptedModel
from core.clock import SystemClock
from core.ids import IdFactory
from core.model.scripted import parse_script
from core.policy import parse_rule
from core.state import fold
from core.tools import ToolContext, ToolOutput, ToolSpec
from memory import SqliteEventStore
from tool_executor import builtin_tools

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"],
          "additionalProperties": False}


class Gauge:
    """Counts calls in flight and records the order in which they start and finish."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self.log: list[str] = []

    def tool(self, name: str, effect: str, seconds: float) -> ToolSpec:
        async def handler(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
            self.now += 1
            self.peak = max(self.peak, self.now)
            self.log.append(f"+{args['name']}")
            await anyio.sleep(seconds)
            self.log.append(f"-{args['name']}")
            self.now -= 1
            return ToolOutput(f"{name}:{args['name']}")

        safety = "read" if effect == "read_only" else "write"
        return ToolSpec(name, f"{name} (test)", SCHEMA, handler, safety=safety, effect=effect,  # type: ignore[arg-type]
                        timeout_s=10)


def use(call_id: str, tool: str, name: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": tool, "input": {"name": name}}


async def _run(tmp_path: Path, gauge: Gauge, batch: list[dict[str, Any]]) -> list[str]:
    store = await SqliteEventStore.open(tmp_path / "strata.db")
    tools = [*builtin_tools(), gauge.tool("slow_read", "read_only", 0.2), gauge.tool("slow_write", "effectful", 0.05)]
    rt = Runtime(store=store, clock=SystemClock(), ids=IdFactory(), tools=tools)
    model = StrictScriptedModel(parse_script([batch, [{"type": "text", "text": "done"}]], "t"), name="script:t")
    (tmp_path / "ws").mkdir()
    try:
        live = await start_session(rt, model=model, workspace=tmp_path / "ws", mode="headless",
                                   rules=[parse_rule("allow", "slow_write")], prompt="go", max_turns=5)
        outcome = await live.run()
        assert outcome.status == "completed"
        state = fold(await store.read_events(live.id))
        results = state.messages[2].content
        return [r.content for r in results]  # type: ignore[union-attr]
    finally:
        await store.close()


async def test_eight_slow_reads_run_side_by_side(tmp_path: Path) -> None:
    """Eight read-only calls that each sleep 0.2 s are all in flight at once (the gauge's peak) and the whole session,
    its start and commits included, takes less than the 8 x 0.2 s the calls would take one after another (a bound a
    loaded machine still meets: half of it failed once in CI at load 6)."""
    gauge = Gauge()
    batch = [use(f"toolu_{i}", "slow_read", f"r{i}") for i in range(8)]
    started = time.perf_counter()
    contents = await _run(tmp_path, gauge, batch)
    elapsed = time.perf_counter() - started
    assert gauge.peak == 8
    assert contents == [f"slow_read:r{i}" for i in range(8)]
    assert elapsed < 8 * 0.2, elapsed


async def test_effectful_calls_run_alone_and_in_order_between_reads(tmp_path: Path) -> None:
    """Reads before and after a write form separate groups: the write starts after the first reads finish and
    ends before the later reads start; results keep proposal order."""
    gauge = Gauge()
    batch = [use("toolu_a", "slow_read", "a"), use("toolu_b", "slow_read", "b"), use("toolu_w", "slow_write", "w"),
             use("toolu_x", "slow_write", "x"), use("toolu_c", "slow_read", "c"), use("toolu_d", "slow_read", "d")]
    contents = await _run(tmp_path, gauge, batch)
    assert contents == ["slow_read:a", "slow_read:b", "slow_write:w", "slow_write:x", "slow_read:c", "slow_read:d"]
    log = gauge.log
    assert set(log[:4]) == {"+a", "+b", "-a", "-b"} and log[:2] in (["+a", "+b"], ["+b", "+a"])
    assert log[4:8] == ["+w", "-w", "+x", "-x"]
    assert set(log[8:]) == {"+c", "+d", "-c", "-d"}
    assert gauge.peak == 2
