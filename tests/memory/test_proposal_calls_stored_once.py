"""A proposal's planned calls are stored once (core/events.py `BatchProposed`): when they are exactly its content's
tool_use blocks, the stored JSON leaves them out and reading gives them back from the content. With a real SQLite
file: a proposal stored the way Strata stored it before (calls written out) still reads and verifies, the new one
reads back equal and verifies, and an edit of the content the calls are read from is named by verify."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.clock import SteppingClock
from core.events import BatchProposed, EventAdapter, PlannedCall, SessionStarted, storable_json
from core.hashing import sha256_json
from core.messages import TextBlock, ToolUseBlock
from memory import SqliteEventStore, Write
from observability.chain_verify import verify_chains
from tests.memory._sqlite import T0, raw, record


def _call(call_id: str, tool: str, args: dict[str, object]) -> PlannedCall:
    return PlannedCall(call_id=call_id, tool=tool, input=args, input_sha256=sha256_json(args))


def _proposal(batch_id: str = "b1") -> BatchProposed:
    calls = (_call("toolu_1", "read", {"path": "ä.txt", "none": None}), _call("toolu_2", "grep", {"n": 1.5}))
    content = (TextBlock(text="looking"), *(ToolUseBlock(id=c.call_id, name=c.tool, input=c.input) for c in calls))
    return BatchProposed(batch_id=batch_id, content=content, calls=calls)


def test_calls_that_are_the_contents_tool_uses_are_stored_once() -> None:
    proposal = _proposal()
    stored = json.loads(storable_json(proposal))
    assert "calls" not in stored and [b["type"] for b in stored["content"]] == ["text", "tool_use", "tool_use"]
    back = EventAdapter.validate_json(storable_json(proposal))
    assert back == proposal and isinstance(back, BatchProposed) and back.calls == proposal.calls


@pytest.mark.parametrize("change", ["hooked input", "refused", "dropped", "reordered", "int for float"])
def test_calls_that_differ_from_the_content_are_written_out(change: str) -> None:
    """Whatever the plan made of the calls that the content does not say is kept: they are written out."""
    proposal = _proposal()
    first, second = proposal.calls
    calls = {"hooked input": (first.model_copy(update={"input": {"path": "b.txt"},
                                                       "input_sha256": sha256_json({"path": "b.txt"})}), second),
             "refused": (first.model_copy(update={"refused": ("over the limit",)}), second),
             "dropped": (first,),
             "reordered": (second, first),
             "int for float": (first, _call("toolu_2", "grep", {"n": 1}))}[change]
    if change == "int for float":  # equal in Python (1 == 1.0), not in JSON
        proposal = proposal.model_copy(update={"content": (*proposal.content[:2], ToolUseBlock(
            id="toolu_2", name="grep", input={"n": 1.0}))})
    changed = proposal.model_copy(update={"calls": calls})
    stored = json.loads(storable_json(changed))
    assert [c["call_id"] for c in stored["calls"]] == [c.call_id for c in calls]
    assert EventAdapter.validate_json(storable_json(changed)) == changed


def _started() -> SessionStarted:
    return SessionStarted(session_id="s1", mode="headless", workspace="/ws", model="script:test", max_turns=5,
                          plan_digest="p")


async def test_a_proposal_stored_before_and_one_stored_now_both_read_and_verify(
        db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = await SqliteEventStore.open(db_path, clock=SteppingClock(start=T0))
    try:
        # As Strata stored a proposal before: its calls written out.
        with monkeypatch.context() as m:
            m.setattr(BatchProposed, "calls_of_the_content", lambda self: False)
            await store.create_session(record("s1"), Write(events=[(_started(), 0), (_proposal("old"), 1)]))
        await store.commit("s1", Write(events=[(_proposal("new"), 2)]))
        assert [e.event for e in await store.read_events("s1")] == [_started(), _proposal("old"), _proposal("new")]
        report = await verify_chains(store, "s1", None)
        assert report.ok, report.problems
    finally:
        await store.close()
    with raw(db_path) as conn:
        stored = [json.loads(p) for (p,) in conn.execute("SELECT payload FROM events WHERE seq > 1 ORDER BY seq")]
        shown = [json.loads(p) for (p,) in conn.execute("SELECT payload FROM session_events WHERE seq > 1 "
                                                        "ORDER BY seq")]
    assert ["calls" in p for p in stored] == [True, False]
    assert shown[1]["kind"] == "batch_proposed" and shown[1]["batch_id"] == "new"
    # A new database reads them the same after a reopen (nothing cached).
    store = await SqliteEventStore.open(db_path, clock=SteppingClock(start=T0))
    try:
        assert [e.event for e in await store.read_events("s1")][1:] == [_proposal("old"), _proposal("new")]
    finally:
        await store.close()


async def test_an_edit_of_the_content_the_calls_are_read_from_is_named_by_verify(db_path: Path) -> None:
    store = await SqliteEventStore.open(db_path, clock=SteppingClock(start=T0))
    try:
        await store.create_session(record("s1"), Write(events=[(_started(), 0), (_proposal(), 1)]))
        with raw(db_path) as conn:
            conn.execute("DROP TRIGGER events_no_update")
            conn.execute("UPDATE events SET payload = replace(payload, 'ä.txt', '/etc/passwd') WHERE seq = 2")
        report = await verify_chains(store, "s1", None)
        assert not report.ok
        assert any("event 2 was changed" in p for p in report.problems), report.problems
    finally:
        await store.close()


def test_calls_given_are_kept_as_given_even_none() -> None:
    """An event that says it has no calls, although its content has tool_use blocks, reads back with none."""
    none = _proposal().model_copy(update={"calls": ()})
    stored = storable_json(none)
    assert json.loads(stored)["calls"] == []
    back = EventAdapter.validate_json(stored)
    assert back == none and isinstance(back, BatchProposed) and back.calls == ()


@pytest.mark.parametrize(("content_input", "call_input"), [
    ({"b": 1, "a": 2}, {"a": 2, "b": 1}),  # the same keys in another order: equal dicts, other JSON
    ({"n": {"b": [1, {"y": 0, "x": 1}]}, "m": None}, {"m": None, "n": {"b": [1, {"x": 1, "y": 0}]}}),
])
def test_a_call_whose_input_is_its_content_input_in_another_key_order_reads_back_in_its_own_order(
        content_input: dict[str, object], call_input: dict[str, object]) -> None:
    proposal = BatchProposed(batch_id="b1", content=(ToolUseBlock(id="t1", name="read", input=content_input),),
                             calls=(_call("t1", "read", call_input),))
    back = EventAdapter.validate_json(storable_json(proposal))
    assert isinstance(back, BatchProposed)
    assert json.dumps(back.calls[0].input) == json.dumps(call_input)  # the call as decided, not the content's


@pytest.mark.parametrize(("content_input", "call_input"), [
    ({"n": 1}, {"n": True}), ({"n": 1}, {"n": 1.0}), ({"n": 0.0}, {"n": -0.0}), ({"n": [0]}, {"n": [False]})])
def test_a_call_whose_input_only_compares_equal_to_its_content_input_keeps_its_own_values(
        content_input: dict[str, object], call_input: dict[str, object]) -> None:
    # Python's == takes True for 1 and 1.0 for 1: a call given with a digest of the content's input (as a caller
    # building the event by hand may) must still read back with the values that were decided, not the content's.
    call = PlannedCall(call_id="t1", tool="read", input=call_input, input_sha256=sha256_json(content_input))
    proposal = BatchProposed(batch_id="b1", content=(ToolUseBlock(id="t1", name="read", input=content_input),),
                             calls=(call,))
    back = EventAdapter.validate_json(storable_json(proposal))
    assert isinstance(back, BatchProposed)
    assert json.dumps(back.calls[0].input) == json.dumps(call_input)
    assert back.calls[0].input_sha256 == call.input_sha256
