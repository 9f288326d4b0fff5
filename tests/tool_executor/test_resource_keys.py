"""Resource keys serve an effect's receipt and its locks (steps 8-9): an effectful call's are computed and
recorded on its receipt; a read-only call has neither, so its tool's `resource_keys` is never asked (read_file's
resolved the path once more for nothing)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent.session import Runtime, start_session
from core.clock import SystemClock
from core.ids import IdFactory
from core.messages import TextBlock, ToolUseBlock
from core.model.scripted import ScriptedModel
from core.policy import PermissionRule
from core.tools import ToolContext, ToolOutput, ToolSpec
from memory import InMemoryEventStore

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
          "additionalProperties": False}


async def test_only_effectful_calls_compute_resource_keys_and_their_receipts_hold_them(tmp_path: Path) -> None:
    asked: list[str] = []

    async def handler(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput("ok")

    def keys(tool: str) -> Any:
        def resource_keys(args: Mapping[str, Any], ctx: ToolContext) -> list[str]:
            asked.append(tool)
            return [f"{tool}:{args['n']}"]
        return resource_keys

    tools = [ToolSpec("look", "read", SCHEMA, handler, safety="read", effect="read_only", resource_keys=keys("look")),
             ToolSpec("poke", "write", SCHEMA, handler, safety="write", effect="effectful",
                      resource_keys=keys("poke"))]
    clock = SystemClock()
    store = InMemoryEventStore()
    rt = Runtime(store=store, clock=clock, ids=IdFactory(clock), tools=tools)
    model = ScriptedModel([(ToolUseBlock(id="toolu_a", name="look", input={"n": 1}),),
                           (ToolUseBlock(id="toolu_b", name="poke", input={"n": 2}),),
                           (TextBlock(text="done"),)], name="t")
    live = await start_session(rt, model=model, workspace=tmp_path, mode="headless",
                               rules=[PermissionRule(action="allow", tool="poke")], prompt="go", max_turns=5)
    outcome = await live.run()
    await live.release(None)
    assert outcome.status == "completed"
    assert asked == ["poke"]
    (receipt,) = await store.list_receipts(live.id)
    assert receipt.tool == "poke" and tuple(receipt.resource_keys) == ("poke:2",)
