"""A prompt given to a session whose open batch parks again is never dropped in silence.

The surfaces refuse such a prompt before the run (agent/session.py for `strata resume ID PROMPT`, the daemon's
prompt request, `strata chat`), but the state can change between their check and the run (a delegated child taken
by another process in that moment). The loop itself then says, in the run's reason, that the prompt was not heard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.session import Asking, Runtime, start_session
from agent.testing import StrictScriptedModel
from core.clock import SystemClock
from core.events import UserMessage
from core.ids import IdFactory
from core.masking import Masker
from core.model.scripted import parse_script
from memory import InMemoryEventStore
from tool_executor import builtin_tools


def _use(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "name": name, "id": call_id, "input": args}


async def test_a_prompt_given_while_the_open_batch_parks_again_is_said_to_be_unheard(workspace: Path) -> None:
    clock = SystemClock()
    store = InMemoryEventStore()
    rt = Runtime(store=store, clock=clock, ids=IdFactory(clock), tools=builtin_tools(), masker=Masker(b"k" * 32))
    scripted = StrictScriptedModel(parse_script([[_use("write_file", "w1", path="out.txt", content="hi")],
                                                 [{"type": "text", "text": "done"}]], "test-script"),
                                   name="script:test")
    live = await start_session(rt, model=scripted, workspace=workspace, mode="headless", rules=[],
                               prompt="write the file", max_turns=10, asking=Asking(on_ask="park"))
    first = await live.run()
    assert first.status == "awaiting_approval"
    assert "not heard" not in first.reason

    again = await live.run("and then something else")  # the surfaces' checks bypassed: the loop's own guard
    await rt.close()

    assert again.status == "awaiting_approval", again
    assert "waiting for approval of w1 (write_file)" in again.reason
    assert "the prompt given with this run was not heard" in again.reason, again.reason
    said = [e.event.text for e in await store.read_events(live.id) if isinstance(e.event, UserMessage)]
    assert said == ["write the file"]  # not recorded either: nothing says the model was told
    assert not (workspace / "out.txt").exists()
