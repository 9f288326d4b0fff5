"""OTLP export: a valid OTLP/JSON trace whose spans follow the GenAI semantic conventions (session root, a span
per turn, chat and execute_tool spans), with deterministic ids, Strata's decisions as attributes, and nothing
secret in it."""

from __future__ import annotations

import json

from observability.export import otlp_document, render_otlp
from observability.export._otlp import span_id, trace_id
from tests._otlp_check import validate_otlp
from tests.observability._export_session import SECRETS, SID, build_session, finished_session, masker, snapshot_of


async def spans() -> list[dict]:
    return validate_otlp(otlp_document(await snapshot_of((await build_session()).store), masker()))


def by_name(all_spans: list[dict], prefix: str) -> list[dict]:
    return [s for s in all_spans if s["name"].startswith(prefix)]


async def test_the_trace_is_valid_otlp_json() -> None:
    """The document passes the OTLP/JSON validator: ids, times, kinds, attributes, one tree."""
    all_spans = await spans()
    assert len(all_spans) == 1 + 3 + 4 + 8  # session, turns, model attempts, calls


async def test_span_tree_is_session_turns_then_calls() -> None:
    """The session span is the root, turns hang from it, model and tool spans from their turn."""
    all_spans = await spans()
    (root,) = [s for s in all_spans if not s.get("parentSpanId")]
    assert root["name"] == "invoke_agent strata" and root["spanId"] == span_id(SID, "session")
    assert root["traceId"] == trace_id(SID)
    turns = by_name(all_spans, "turn ")
    assert [t["name"] for t in turns] == ["turn 1", "turn 2", "turn 3"]
    assert all(t["parentSpanId"] == root["spanId"] for t in turns)
    turn_ids = {t["spanId"] for t in turns}
    assert all(s["parentSpanId"] in turn_ids for s in by_name(all_spans, "chat ") + by_name(all_spans, "execute_tool "))
    assert [e["name"] for e in root["events"]] == ["strata.started", "strata.resumed", "strata.parked"]


async def test_chat_spans_follow_the_genai_conventions() -> None:
    """Model attempts are CLIENT `chat {model}` spans with provider, model, usage, and the error of a retry."""
    chats = by_name(await spans(), "chat ")
    assert {c["name"] for c in chats} == {"chat claude-test-1"}
    retry, ok = chats[:2]
    assert ok["kind"] == 3
    a = ok["_attrs"]
    assert (a["gen_ai.operation.name"], a["gen_ai.provider.name"], a["gen_ai.system"], a["gen_ai.request.model"]) == (
        "chat", "anthropic", "anthropic", "claude-test-1")
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == ("1200", "80")
    assert ok["status"] == {"code": 1}
    assert retry["status"]["code"] == 2 and retry["_attrs"]["error.type"] == "overloaded"
    assert retry["_attrs"]["http.response.status_code"] == "529"
    assert int(retry["endTimeUnixNano"]) <= int(ok["startTimeUnixNano"])


async def test_tool_spans_carry_the_decision() -> None:
    """Tool calls are `execute_tool {tool}` spans with the tool, call id, decision and deciding check."""
    tools = {s["_attrs"]["gen_ai.tool.call.id"]: s for s in by_name(await spans(), "execute_tool ")}
    assert set(tools) == {f"c{i}" for i in range(1, 9)}
    c4 = tools["c4"]
    assert c4["name"] == "execute_tool bash"
    a = c4["_attrs"]
    assert (a["gen_ai.operation.name"], a["gen_ai.tool.name"], a["strata.decision"], a["strata.check"]) == (
        "execute_tool", "bash", "approved", "alice")
    assert c4["status"] == {"code": 1}
    assert tools["c2"]["_attrs"]["strata.decision"] == "denied" and tools["c2"]["status"]["code"] == 2
    assert tools["c5"]["_attrs"]["strata.outcome"] == "unknown" and tools["c5"]["_attrs"]["strata.receipt.status"] == (
        "unknown")
    assert tools["c6"]["_attrs"]["strata.decision"] == "parked" and tools["c6"]["status"] == {"code": 0}
    assert tools["c8"]["_attrs"]["strata.decision"] == "pending"
    assert int(tools["c5"]["endTimeUnixNano"]) - int(tools["c5"]["startTimeUnixNano"]) == 1_000_000_000


async def test_ids_are_deterministic() -> None:
    """Exporting twice gives the same trace, byte for byte."""
    store = (await build_session()).store
    assert render_otlp(await snapshot_of(store), masker()) == render_otlp(await snapshot_of(store), masker())


async def test_a_completed_session_ends_ok() -> None:
    """A completed session's root span is OK; the scripted model is Strata's own provider, named by its file."""
    all_spans = validate_otlp(otlp_document(await snapshot_of(await finished_session(), "s-done"), masker()))
    (root,) = [s for s in all_spans if not s.get("parentSpanId")]
    assert root["status"] == {"code": 1}
    assert {s["name"] for s in by_name(all_spans, "chat ")} == {"chat turns.json"}
    assert by_name(all_spans, "chat ")[0]["_attrs"]["gen_ai.provider.name"] == "strata.script"


async def test_nothing_secret_is_written() -> None:
    """Arguments and results are exported masked."""
    text = json.dumps(otlp_document(await snapshot_of((await build_session()).store), masker()))
    assert [s for s in SECRETS if s in text] == []
    assert "[MASKED:" in text
