"""JSONL export: a session header, the state log in seq order, the timeline with its hash chain intact, the
receipts; every line one JSON object with a `type`; everything masked."""

from __future__ import annotations

import json

from core.events import EventAdapter
from core.timeline import TimelineRow, verify_chain
from observability.export import render_jsonl
from tests.observability._export_session import EMAIL, HOSTILE, SECRETS, SID, build_session, masker, snapshot_of


async def lines() -> list[dict]:
    text = render_jsonl(await snapshot_of((await build_session()).store), masker())
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


async def test_every_line_is_an_object_with_a_type_in_order() -> None:
    """A header, then events, then timeline rows, then receipts; each in seq order."""
    objs = await lines()
    types = [o["type"] for o in objs]
    assert types[0] == "session" and types.count("session") == 1
    assert types == sorted(types, key=["session", "event", "timeline", "receipt"].index)
    events = [o for o in objs if o["type"] == "event"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    rows = [o for o in objs if o["type"] == "timeline"]
    assert [r["seq"] for r in rows] == list(range(1, len(rows) + 1))
    assert {(r["id"], r["status"]) for r in objs if r["type"] == "receipt"} == {("r3", "done"), ("r5", "unknown")}


async def test_header_summarises_the_session() -> None:
    """The header carries the session row, its fold's end state and the counts."""
    (header, *_) = await lines()
    session = header["session"]
    assert (header["format"], header["version"], session["id"], session["status"]) == (
        "strata.export.jsonl", 1, SID, "awaiting_approval")
    assert session["open_batch"] == "b3"
    assert EMAIL not in session["title"] and "[MASKED:email:" in session["title"]
    counts = session["counts"]
    assert (counts["turns"], counts["tool_calls"], counts["denials"], counts["unknown_receipts"]) == (3, 6, 2, 1)
    assert (counts["model_attempts"], counts["input_tokens"], counts["output_tokens"]) == (4, 4500, 260)


async def test_events_read_back_as_events() -> None:
    """An event line without its envelope is the event itself (masked), so tools can re-read the log."""
    for obj in await lines():
        if obj["type"] == "event":
            body = {k: v for k, v in obj.items() if k not in ("type", "seq", "at", "turn")}
            assert EventAdapter.validate_python(body).kind == obj["kind"]


async def test_timeline_rows_keep_their_chain() -> None:
    """Masking the rows again changes nothing, so the exported chain still verifies (under the store's key)."""
    store = (await build_session()).store
    text = render_jsonl(await snapshot_of(store), masker())
    rows = [TimelineRow.model_validate({k: v for k, v in o.items() if k != "type"})
            for o in map(json.loads, text.splitlines()) if o["type"] == "timeline"]
    assert store.chain_key is not None
    result = verify_chain(rows, store.chain_key)
    assert result.ok, result.reason
    assert result.rows == len(rows)


async def test_nothing_secret_is_written() -> None:
    """Planted secrets in arguments, results, the prompt and the title never appear; the hostile text stays
    plain data."""
    text = render_jsonl(await snapshot_of((await build_session()).store), masker())
    assert [s for s in SECRETS if s in text] == []
    assert "[MASKED:" in text
    assert HOSTILE in text  # JSON is not markup: the text itself is kept, quoted
