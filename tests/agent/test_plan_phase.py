"""The plan phase in the loop, in-process with a real SQLite store: a refusal is part of the committed proposal (so
a crash between the commit and the denial cannot let the call through on resume), and the timeline's `plan` row
says what the review repaired, without the model's raw ids."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agent.phases.plan import propose
from agent.session import Runtime, resume_session, start_session
from core.clock import SystemClock
from core.events import AssistantMessage, BatchProposed, CallResult, SessionStarted, TokenUsage, UserMessage
from core.ids import IdFactory
from core.masking import Masker
from core.messages import TextBlock
from core.model import ModelResponse, Usage
from core.model.scripted import ScriptedModel, parse_script
from core.policy import parse_rule
from memory import SessionRecord, SqliteEventStore, Write
from tool_executor import builtin_tools

SECRET_ID = "sk-ant-api03-Wm3Kp8Tz1Qx6Rb4Nc9Vd2Lh"


def use(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "name": name, "id": call_id, "input": args}


def real(path: Path) -> str:
    return os.path.realpath(path)


async def open_runtime(tmp_path: Path) -> Runtime:
    store = await SqliteEventStore.open(tmp_path / "strata.db")
    return Runtime(store=store, clock=SystemClock(), ids=IdFactory(), tools=builtin_tools(),
                   masker=Masker.throwaway({}))


async def test_a_refused_call_is_denied_again_after_a_crash(tmp_path: Path, workspace: Path) -> None:
    """The process died right after committing a batch holding an allowed write whose input carries NaN (refused
    by the plan phase): on resume the write is denied by the `plan` check, as it would have been, and nothing is
    written; the call beside it runs."""
    rt = await open_runtime(tmp_path)
    ws = real(workspace)
    sid = rt.ids.session_id()
    now = rt.clock.now()
    rules = (parse_rule("allow", "write_file"),)
    await rt.store.create_session(
        SessionRecord(id=sid, created_at=now, updated_at=now, mode="headless", workspace=ws, model="script:test",
                      status="active"),
        Write(events=[(SessionStarted(session_id=sid, mode="headless", workspace=ws, model="script:test",
                                      rules=rules, max_turns=10, plan_digest=rt.plan("headless").digest), 0),
                      (UserMessage(text="go"), 0)]))
    (blocks,) = parse_script([[use("write_file", "w1", path="out.txt", content="x", n=float("nan")),
                               use("list_dir", "l1", path=".")]], "test-script")
    batch = propose(ModelResponse(content=blocks, stop_reason="tool_use"), batch_id=rt.ids.uuid7()).proposal
    assert isinstance(batch, BatchProposed) and batch.calls[0].refused and not batch.calls[1].refused
    await rt.store.commit(sid, Write(events=[(batch, 1)]))  # ... and the process died here

    live = await resume_session(rt, sid, model=ScriptedModel(parse_script([], "empty")), rules=[])
    await live.run()
    await live.release(None)
    results = {e.event.call_id: e.event for e in await rt.store.read_events(sid) if isinstance(e.event, CallResult)}
    await rt.close()
    assert (results["w1"].status, results["w1"].check) == ("denied", "plan")
    assert "NaN" in results["w1"].content and "no effect started" in results["w1"].content
    assert results["l1"].status == "ok"
    assert not (workspace / "out.txt").exists()


async def test_the_plan_row_says_what_was_repaired_without_raw_ids(tmp_path: Path, workspace: Path) -> None:
    """One `plan` phase row for the turn whose answer was repaired (a secret-shaped id and an id outside the
    alphabet renamed, a surrogate replaced); no timeline row holds either raw id; turns with nothing to repair
    have no plan row."""
    (workspace / "a.txt").write_text("alpha\n")
    rt = await open_runtime(tmp_path)
    model = ScriptedModel(parse_script([
        [{"type": "text", "text": "odd \ud800"}, use("read_file", SECRET_ID, path="a.txt"),
         use("list_dir", "call 1/2", path=".")],
        [use("read_file", "toolu_fine", path="a.txt")],
    ], "test-script"))
    live = await start_session(rt, model=model, workspace=workspace, mode="headless", rules=[], prompt="go",
                               max_turns=10)
    outcome = await live.run()
    await live.release(None)
    rows = await rt.store.read_timeline(live.id)
    await rt.close()
    assert outcome.status == "completed"
    (plan,) = [r for r in rows if r.kind == "phase" and r.outcome == "plan"]
    assert plan.turn == 1
    assert plan.summary.count("id renamed") == 2 and "U+FFFD" in plan.summary
    assert "secret" in plan.summary and "alphabet" in plan.summary
    assert len(plan.data["notes"]) == 3
    dumped = " ".join(f"{r.summary} {r.call_id} {r.data}" for r in rows)
    assert "Wm3Kp8Tz" not in dumped and "call 1/2" not in dumped


def test_a_response_that_reports_no_usage_records_none_and_one_that_does_records_it() -> None:
    """The usage a model reported is kept on the proposal as it was; nothing reported (all zero, as the scripted
    model) is recorded as no usage at all, so those events stay as they were."""
    silent = propose(ModelResponse(content=(TextBlock(text="done"),), stop_reason="end_turn"), batch_id="b1")
    assert isinstance(silent.proposal, AssistantMessage) and silent.proposal.usage is None
    reported = propose(ModelResponse(content=(TextBlock(text="done"),), stop_reason="end_turn",
                                     usage=Usage(output_tokens=7, cache_read_tokens=2)), batch_id="b2")
    assert isinstance(reported.proposal, AssistantMessage)
    assert reported.proposal.usage == TokenUsage(output_tokens=7, cache_read_tokens=2)
