"""OTLP export: the session as one trace in the OTLP/JSON encoding (the protobuf JSON mapping of
`ExportTraceServiceRequest`), ready to POST to a collector's `/v1/traces` or load into a trace viewer.

Spans follow the OpenTelemetry GenAI semantic conventions: a session root span (`invoke_agent strata`), a span
per turn, and inside each turn a `chat {model}` span per model attempt and an `execute_tool {tool}` span per tool
call, with Strata's decision, deciding check and outcome as `strata.*` attributes. Ids are derived from the
session and call ids (sha256), so exporting twice gives the same trace, and a fork's root span links to its
parent's."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from importlib import metadata
from pathlib import PurePath
from typing import Any

from core.masking import Masker
from observability.export._masked_json import counts
from observability.export._snapshot import SessionSnapshot
from observability.export._view import CallView, ModelCallView, SessionTrace, TurnView, build_trace

SPAN_KIND_INTERNAL = 1
SPAN_KIND_CLIENT = 3
STATUS_UNSET = 0
STATUS_OK = 1
STATUS_ERROR = 2
RESULT_CHARS = 1000
"""A tool result is cut to this many characters (after masking) in `gen_ai.tool.call.result`."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def trace_id(session_id: str) -> str:
    return hashlib.sha256(f"strata/trace/{session_id}".encode()).hexdigest()[:32]


def span_id(session_id: str, what: str) -> str:
    return hashlib.sha256(f"strata/span/{session_id}/{what}".encode()).hexdigest()[:16]


def _nanos(t: datetime) -> str:
    delta = t.astimezone(UTC) - _EPOCH
    return str((delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000)


def _value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, list | tuple):
        return {"arrayValue": {"values": [_value(x) for x in v]}}
    return {"stringValue": str(v)}


def _attributes(pairs: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in pairs.items() if v is not None and v != ""]


def provider_and_model(model: str) -> tuple[str, str]:
    """`anthropic:NAME` -> (anthropic, NAME); the scripted model is Strata's own provider, named by its file."""
    kind, _, rest = model.partition(":")
    if kind == "anthropic":
        return "anthropic", rest or "anthropic"
    if kind == "script":
        return "strata.script", PurePath(rest).name or "script"
    return kind or "unknown", rest or model


def _span(sid: str, what: str, parent: str | None, name: str, kind: int, start: datetime, end: datetime,
          attributes: dict[str, Any], status: tuple[int, str], **extra: Any) -> dict[str, Any]:
    code, message = status
    span: dict[str, Any] = {"traceId": trace_id(sid), "spanId": span_id(sid, what)}
    if parent is not None:
        span["parentSpanId"] = parent
    span.update({"name": name, "kind": kind, "startTimeUnixNano": _nanos(start),
                 "endTimeUnixNano": _nanos(max(start, end)), "attributes": _attributes(attributes)})
    span.update(extra)
    span["status"] = {"code": code, "message": message} if message else {"code": code}
    return span


def _model_span(sid: str, parent: str, m: ModelCallView, provider: str, model: str) -> dict[str, Any]:
    ok = m.outcome == "ok"
    return _span(sid, f"model/{m.seq}", parent, f"chat {model}", SPAN_KIND_CLIENT, m.start, m.end, {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.system": provider,
        "gen_ai.request.model": model,
        "gen_ai.response.id": m.request_id,
        "gen_ai.usage.input_tokens": m.input_tokens,
        "gen_ai.usage.output_tokens": m.output_tokens,
        "error.type": None if ok else (m.error_kind or m.outcome),
        "http.response.status_code": m.status_code,
        "strata.turn": m.turn,
        "strata.attempt": m.number,
        "strata.outcome": m.outcome,
    }, (STATUS_OK, "") if ok else (STATUS_ERROR, m.summary))


def _call_status(c: CallView) -> tuple[int, str]:
    if c.outcome is None:
        return STATUS_UNSET, ""
    if c.outcome == "ok":
        return STATUS_OK, ""
    why = "; ".join(c.reasons) or (c.check or "") or c.outcome
    return STATUS_ERROR, f"{c.outcome}: {why}"


def _call_span(sid: str, parent: str, c: CallView) -> dict[str, Any]:
    result = None if c.result is None else c.result[:RESULT_CHARS]
    return _span(sid, f"call/{c.index}/{c.call_id}", parent, f"execute_tool {c.tool}", SPAN_KIND_INTERNAL, c.start,
                 c.end, {
                     "gen_ai.operation.name": "execute_tool",
                     "gen_ai.tool.name": c.tool,
                     "gen_ai.tool.call.id": c.call_id,
                     "gen_ai.tool.type": "function",
                     "gen_ai.tool.call.arguments": json.dumps(c.input, ensure_ascii=False, sort_keys=True),
                     "gen_ai.tool.call.result": result,
                     "error.type": None if c.outcome in (None, "ok") else c.outcome,
                     "strata.turn": c.turn,
                     "strata.batch.id": c.batch_id,
                     "strata.decision": c.decision or c.category,
                     "strata.check": c.check,
                     "strata.outcome": c.outcome,
                     "strata.duration_ms": c.duration_ms,
                     "strata.receipt.id": c.receipt_id,
                     "strata.receipt.status": c.receipt_status,
                     "strata.decision_path": [f"{check}: {outcome}" for check, outcome, _ in c.steps] or None,
                     "strata.inherited": c.inherited or None,
                 }, _call_status(c))


def _turn_span(sid: str, root: str, t: TurnView) -> dict[str, Any]:
    failed = [m for m in t.model_calls if m.outcome == "error"]
    return _span(sid, f"turn/{t.number}", root, f"turn {t.number}", SPAN_KIND_INTERNAL, t.start, t.end, {
        "gen_ai.conversation.id": sid,
        "strata.turn": t.number,
        "strata.turn.finished": t.finished,
        "strata.tool_calls": len(t.calls),
        "strata.inherited": t.inherited or None,
    }, (STATUS_ERROR, failed[-1].summary) if failed else (STATUS_UNSET, ""))


def _root_status(snapshot: SessionSnapshot) -> tuple[int, str]:
    ended = snapshot.state.ended
    if ended == "completed":
        return STATUS_OK, ""
    if ended in ("failed", "incomplete"):
        return STATUS_ERROR, f"{ended}: {snapshot.state.end_reason}".rstrip(": ")
    return STATUS_UNSET, ""


def _version() -> str:
    try:
        return metadata.version("strata")
    except metadata.PackageNotFoundError:
        return "0"


def otlp_document(snapshot: SessionSnapshot, masker: Masker) -> dict[str, Any]:
    """The session's trace as one OTLP/JSON `ExportTraceServiceRequest`, masked."""
    sid = snapshot.session_id
    trace: SessionTrace = build_trace(snapshot, masker)
    state, rec = snapshot.state, snapshot.record
    provider, model = provider_and_model(masker.mask(state.model or rec.model))
    n = counts(snapshot)
    root_id = span_id(sid, "session")
    links = []
    if rec.parent_id and rec.fork_seq is not None:
        links.append({"traceId": trace_id(rec.parent_id), "spanId": span_id(rec.parent_id, "session"),
                      "attributes": _attributes({"strata.link": "forked_from", "strata.fork_seq": rec.fork_seq})})
    elif rec.parent_id:  # a delegated child: its parent's delegate call started it
        links.append({"traceId": trace_id(rec.parent_id), "spanId": span_id(rec.parent_id, "session"),
                      "attributes": _attributes({"strata.link": "delegated_by",
                                                 "strata.parent_call_id": masker.mask(state.parent_call_id or "")})})
    events = [{"timeUnixNano": _nanos(m.at), "name": f"strata.{m.what}",
               "attributes": _attributes({"strata.summary": m.summary, "strata.timeline_seq": m.seq})}
              for m in trace.markers]
    root = _span(sid, "session", None, "invoke_agent strata", SPAN_KIND_INTERNAL, trace.start, trace.end, {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "strata",
        "gen_ai.conversation.id": sid,
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
        "gen_ai.usage.input_tokens": n["input_tokens"],
        "gen_ai.usage.output_tokens": n["output_tokens"],
        "strata.session.title": masker.mask(rec.title),
        "strata.session.mode": rec.mode,
        "strata.session.status": rec.status,
        "strata.session.workspace": masker.mask(rec.workspace),
        "strata.session.parent_id": rec.parent_id,
        "strata.session.fork_seq": rec.fork_seq,
        "strata.turns": n["turns"],
        "strata.tool_calls": n["tool_calls"],
        "strata.denials": n["denials"],
        "strata.unknown_receipts": n["unknown_receipts"],
    }, _root_status(snapshot), events=events, links=links)
    spans = [root]
    for t in trace.turns:
        turn = _turn_span(sid, root_id, t)
        spans.append(turn)
        spans.extend(_model_span(sid, turn["spanId"], m, provider, model) for m in t.model_calls)
        spans.extend(_call_span(sid, turn["spanId"], c) for c in t.calls)
    return {"resourceSpans": [{
        "resource": {"attributes": _attributes({"service.name": "strata", "service.version": _version(),
                                                "strata.session.id": sid})},
        "scopeSpans": [{"scope": {"name": "strata", "version": _version()}, "spans": spans}],
    }]}


def render_otlp(snapshot: SessionSnapshot, masker: Masker) -> str:
    return json.dumps(otlp_document(snapshot, masker), ensure_ascii=False, separators=(",", ":")) + "\n"
