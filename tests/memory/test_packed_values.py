"""How the SQLite store packs what it keeps (memory/_encoding.py, core/events.py `storable_json`), with a real
file: the stored text is smaller, every read gives back exactly what was written, both chains verify, and an edit
of a packed value is still named by verify."""

from __future__ import annotations

import json
from pathlib import Path

from core.events import (
    BatchProposed,
    CallResult,
    EventAdapter,
    KnowledgeChanged,
    PlannedCall,
    SessionStarted,
    storable_json,
)
from core.hashing import sha256_json
from core.messages import ToolUseBlock
from core.timeline import TimelineEntry
from memory import SqliteEventStore, Write
from memory._encoding import EVENT_KINDS
from observability.chain_verify import verify_chains
from tests.memory._sqlite import raw, record

CHECK = "default: read tools are allowed in headless mode"


def _started() -> SessionStarted:
    return SessionStarted(session_id="s1", mode="headless", workspace="/ws", model="script:test", max_turns=5,
                          plan_digest="p")


def _proposal() -> BatchProposed:
    calls = tuple(PlannedCall(call_id=f"c{i}", tool="read", input={"n": i, "none": None},
                              input_sha256=sha256_json({"n": i, "none": None})) for i in range(2))
    return BatchProposed(batch_id="b1", content=tuple(ToolUseBlock(id=c.call_id, name=c.tool, input=c.input)
                                                      for c in calls), calls=calls)


def test_the_stored_json_leaves_out_what_reading_gives_back() -> None:
    """Null fields, empty reasons, a false is_error and a planned call's input hash are left out; a null inside a
    tool's arguments, and a field that must be given even when None, are kept; each reads back the same."""
    result = CallResult(batch_id="b1", call_id="c1", tool="read", status="ok", content="ok", is_error=False)
    proposal = _proposal()
    changed = KnowledgeChanged(previous_digest=None, digest="d", notice="n")
    for event in (result, proposal, changed, _started()):
        assert EventAdapter.validate_json(storable_json(event)) == event
    assert json.loads(storable_json(result)) == {"kind": "call_result", "batch_id": "b1", "call_id": "c1",
                                                 "tool": "read", "status": "ok", "content": "ok"}
    assert "calls" not in json.loads(storable_json(proposal))  # they are its content's tool_use blocks
    refused = proposal.model_copy(update={"calls": (proposal.calls[0].model_copy(update={"refused": ("limit",)}),
                                                    proposal.calls[1])})
    assert EventAdapter.validate_json(storable_json(refused)) == refused
    assert all("input_sha256" not in c and c["input"]["none"] is None
               for c in json.loads(storable_json(refused))["calls"])
    assert json.loads(storable_json(changed))["previous_digest"] is None
    # A planned call whose hash is not its input's keeps it (it reads back the same only so).
    odd = BatchProposed(batch_id="b2", content=(), calls=(PlannedCall(call_id="c", tool="t", input={},
                                                                      input_sha256="not the input's"),))
    assert json.loads(storable_json(odd))["calls"][0]["input_sha256"] == "not the input's"


async def test_packed_rows_read_back_exactly_and_an_edit_is_still_named(store: SqliteEventStore,
                                                                      db_path: Path) -> None:
    call = TimelineEntry(kind="call", turn=1, call_id="c0", tool="read", decision="allowed", check=CHECK,
                         outcome="ok", summary="read -> ok",
                         data={"steps": [["policy", "allow", CHECK], ["hook", "allow", "h"]], "plan_digest": "p"})
    await store.create_session(record("s1"), Write(events=[(_started(), 0), (_proposal(), 1)], timeline=[call]))
    with raw(db_path) as conn:
        (payload, kind), (data,) = (conn.execute("SELECT payload, kind FROM events WHERE seq = 2").fetchone(),
                                    conn.execute("SELECT data FROM timeline").fetchone())
        view = conn.execute("SELECT payload FROM session_events WHERE seq = 2").fetchone()[0]
    assert EVENT_KINDS.unpack(kind) == "batch_proposed"
    assert not payload.startswith('{"kind"') and "input_sha256" not in payload
    assert json.loads(view)["kind"] == "batch_proposed"
    assert json.loads(data)["steps"] == [["policy", "allow", 0], ["hook", "allow", "h"]]
    (row,) = await store.read_timeline("s1")
    assert row.data == call.data and row.check == CHECK
    assert [e.event for e in await store.read_events("s1")] == [_started(), _proposal()]
    assert (await verify_chains(store, "s1", None)).ok
    with raw(db_path) as conn:
        conn.execute("DROP TRIGGER timeline_no_update")
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute("UPDATE timeline SET check_name = 'policy'")  # the packed detail now reads as 'policy'
        conn.execute("UPDATE events SET kind = 'session_ended' WHERE seq = 2")
    report = await verify_chains(store, "s1", None)
    assert not report.ok
    assert any("event 2 was changed" in p for p in report.problems), report.problems
    assert any("row 1 was changed" in p for p in report.problems), report.problems
