"""A validator for OTLP/JSON trace documents (the protobuf JSON mapping of `ExportTraceServiceRequest`, as
opentelemetry-proto documents it): the envelope, every span's required fields and their formats, attribute
values, and the span tree. Returns the spans so a test can look closer."""

from __future__ import annotations

import re
from typing import Any

HEX32 = re.compile(r"[0-9a-f]{32}")
HEX16 = re.compile(r"[0-9a-f]{16}")
DECIMAL = re.compile(r"0|[1-9][0-9]*")
SPAN_KINDS = {0, 1, 2, 3, 4, 5}
STATUS_CODES = {0, 1, 2}
VALUE_KINDS = {"stringValue", "boolValue", "intValue", "doubleValue", "arrayValue", "kvlistValue", "bytesValue"}


def check_value(value: Any, where: str) -> None:
    assert isinstance(value, dict) and len(value) == 1, f"{where}: an AnyValue holds exactly one field: {value!r}"
    ((kind, v),) = value.items()
    assert kind in VALUE_KINDS, f"{where}: unknown value kind {kind}"
    if kind == "stringValue":
        assert isinstance(v, str), where
    elif kind == "boolValue":
        assert isinstance(v, bool), where
    elif kind == "intValue":
        assert isinstance(v, str) and re.fullmatch(r"-?[0-9]+", v), f"{where}: intValue is a decimal string: {v!r}"
    elif kind == "doubleValue":
        assert isinstance(v, int | float) and not isinstance(v, bool), where
    elif kind == "arrayValue":
        assert isinstance(v, dict) and set(v) <= {"values"}, where
        for i, item in enumerate(v.get("values", [])):
            check_value(item, f"{where}[{i}]")


def check_attributes(attrs: Any, where: str) -> dict[str, Any]:
    assert isinstance(attrs, list), f"{where}: attributes is a list"
    out: dict[str, Any] = {}
    for a in attrs:
        assert isinstance(a, dict) and set(a) == {"key", "value"}, f"{where}: attribute {a!r}"
        assert isinstance(a["key"], str) and a["key"], where
        assert a["key"] not in out, f"{where}: attribute {a['key']} twice"
        check_value(a["value"], f"{where}.{a['key']}")
        ((_, v),) = a["value"].items()
        out[a["key"]] = v
    return out


def check_time(value: Any, where: str) -> int:
    assert isinstance(value, str) and DECIMAL.fullmatch(value), f"{where}: a time is a decimal string: {value!r}"
    return int(value)


def validate_otlp(doc: Any) -> list[dict[str, Any]]:
    """Raise AssertionError naming the first problem; return every span, each with its attributes as a dict
    under `_attrs`."""
    assert isinstance(doc, dict) and set(doc) == {"resourceSpans"}, "the document is {resourceSpans: [...]}"
    spans: list[dict[str, Any]] = []
    assert isinstance(doc["resourceSpans"], list) and doc["resourceSpans"], "resourceSpans is a non-empty list"
    for r, rs in enumerate(doc["resourceSpans"]):
        assert set(rs) <= {"resource", "scopeSpans", "schemaUrl"}, rs.keys()
        resource = check_attributes(rs["resource"]["attributes"], f"resourceSpans[{r}].resource")
        assert isinstance(resource.get("service.name"), str), "resource needs service.name"
        for ss in rs["scopeSpans"]:
            assert set(ss) <= {"scope", "spans", "schemaUrl"}, ss.keys()
            assert isinstance(ss["scope"].get("name"), str) and ss["scope"]["name"], "scope needs a name"
            for i, span in enumerate(ss["spans"]):
                where = f"span {i} ({span.get('name')})"
                allowed = {"traceId", "spanId", "parentSpanId", "traceState", "name", "kind", "startTimeUnixNano",
                           "endTimeUnixNano", "attributes", "droppedAttributesCount", "events",
                           "droppedEventsCount", "links", "droppedLinksCount", "status", "flags"}
                assert set(span) <= allowed, f"{where}: unknown fields {set(span) - allowed}"
                assert HEX32.fullmatch(span["traceId"]) and span["traceId"] != "0" * 32, where
                assert HEX16.fullmatch(span["spanId"]) and span["spanId"] != "0" * 16, where
                parent = span.get("parentSpanId", "")
                assert parent == "" or HEX16.fullmatch(parent), where
                assert isinstance(span["name"], str) and span["name"], where
                assert span["kind"] in SPAN_KINDS and isinstance(span["kind"], int), where
                start = check_time(span["startTimeUnixNano"], f"{where}.start")
                end = check_time(span["endTimeUnixNano"], f"{where}.end")
                assert end >= start, f"{where}: ends before it starts"
                attrs = check_attributes(span.get("attributes", []), where)
                for e, ev in enumerate(span.get("events", [])):
                    check_time(ev["timeUnixNano"], f"{where}.events[{e}]")
                    assert isinstance(ev["name"], str) and ev["name"], where
                    check_attributes(ev.get("attributes", []), f"{where}.events[{e}]")
                for k, link in enumerate(span.get("links", [])):
                    assert HEX32.fullmatch(link["traceId"]) and HEX16.fullmatch(link["spanId"]), f"{where}.links[{k}]"
                    check_attributes(link.get("attributes", []), f"{where}.links[{k}]")
                status = span.get("status", {})
                assert set(status) <= {"code", "message"} and status.get("code", 0) in STATUS_CODES, where
                spans.append({**span, "_attrs": attrs})

    # One trace; span ids unique; every parent exists; exactly one root; the parent links form a tree.
    assert len({sp["traceId"] for sp in spans}) == 1, "one session, one trace"
    ids = [sp["spanId"] for sp in spans]
    assert len(ids) == len(set(ids)), "span ids are unique"
    by_id = {sp["spanId"]: sp for sp in spans}
    roots = [sp for sp in spans if not sp.get("parentSpanId")]
    assert len(roots) == 1, f"one root span, got {[r['name'] for r in roots]}"
    for sp in spans:
        seen: set[str] = set()
        node = sp
        while node.get("parentSpanId"):
            assert node["spanId"] not in seen, f"cycle through {sp['name']}"
            seen.add(node["spanId"])
            assert node["parentSpanId"] in by_id, f"{node['name']}: parent {node['parentSpanId']} is not in the trace"
            node = by_id[node["parentSpanId"]]
        assert node is roots[0]
    return spans
