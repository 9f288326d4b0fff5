"""HTML export: one self-contained page (inline CSS and script, nothing fetched) with the session's summary, a
waterfall of its turns, model calls and tool calls over time, and every call's masked details (decision path,
arguments, result) in an expandable block.

The summary and the details are plain HTML, readable with scripts off. The waterfall is drawn by the inline
script from a JSON island, so that a test in a real browser proves the script ran. All text is masked first and
then escaped (`html.escape` for markup; `<`, `>` and `&` escaped inside the JSON island), its controls and
bidirectional formatting characters shown as escapes such as `\\u202e` (core/terminal_text.py), as every terminal
surface shows them: the page reads as the session stored it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from html import escape
from typing import Any

from core.events import UserMessage
from core.masking import Masker
from core.record import record
from core.terminal_text import visible_controls
from core.timeline import verify_chain
from observability.export._html_assets import CSS, JS
from observability.export._markdown import render_markdown
from observability.export._masked_json import counts
from observability.export._otlp import provider_and_model
from observability.export._scale import TimeScale, duration_label
from observability.export._snapshot import SessionSnapshot
from observability.export._view import CallView, ModelCallView, SessionTrace, TurnView, build_trace

RESULT_CHARS = 4000
"""Characters of a tool result shown in its details (cut after masking)."""
TEXT_CHARS = 2000

LEGEND: tuple[tuple[str, str], ...] = (
    ("allowed", "allowed"), ("approved", "approved"), ("denied", "denied"), ("rejected", "rejected"),
    ("parked", "parked"), ("unknown", "unknown outcome"), ("pending", "not run yet"), ("model", "model call"),
)
_STEP_CLASS = {"allow": "pass", "approved": "pass", "add_context": "pass", "rewrite": "ask", "ask": "ask",
               "parked": "ask", "deny": "stop", "block": "stop", "rejected": "stop", "withhold": "stop"}


def _e(value: object) -> str:
    return escape(visible_controls("" if value is None else str(value)), quote=True)


def _clip(text: str, limit: int) -> tuple[str, int]:
    return (text, 0) if len(text) <= limit else (text[:limit], len(text) - limit)


def _one_line(text: str, limit: int = 160) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "\u2026"


def _when(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def _ms(ms: float | None) -> str:
    if ms is None:
        return ""
    return duration_label(ms / 1000)


def _island(obj: Any) -> str:
    """JSON that cannot end its <script> element early, its strings with controls and bidirectional formatting
    characters shown as their escapes (the script sets them as text, where an override would apply)."""
    text = json.dumps(_visible(obj), ensure_ascii=False, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _visible(obj: Any) -> Any:
    if isinstance(obj, str):
        return visible_controls(obj)
    if isinstance(obj, dict):
        return {k: _visible(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_visible(v) for v in obj]
    return obj


# -- waterfall data -----------------------------------------------------------------------------------------------


def _waterfall(trace: SessionTrace, model: str, children: Sequence[Nested] = ()) -> dict[str, Any]:
    """`children`: delegated child sessions, each drawn right under the delegate call that started it, on the
    parent's time axis."""
    t0 = trace.start

    def sec(t: datetime) -> float:
        return (t - t0).total_seconds()

    # Only work decides the axis: a lifecycle mark in a long idle gap (a fork, a resume) is drawn inside its break.
    scale = TimeScale([(sec(t.start), sec(t.end)) for t in trace.turns], sec(trace.end))
    rows: list[dict[str, Any]] = []
    for turn in trace.turns:
        n_calls = len(turn.calls)
        dur = (turn.end - turn.start).total_seconds()
        rows.append({
            "kind": "turn", "cat": "turn", "label": f"Turn {turn.number}",
            "sub": f"{n_calls} call{'s' if n_calls != 1 else ''}" if n_calls else ("answer" if turn.finished else ""),
            "x0": scale.x(sec(turn.start)), "x1": scale.x(sec(turn.end)), "text": duration_label(dur),
            "inherited": turn.inherited, "target": f"turn-{turn.number}",
            "tip": [f"Turn {turn.number}" + (" (inherited from the parent session)" if turn.inherited else ""),
                    f"+{duration_label(sec(turn.start))} \u2192 +{duration_label(sec(turn.end))} "
                    f"({duration_label(dur)})",
                    f"{len(turn.model_calls)} model attempt(s), {n_calls} tool call(s)",
                    *([_one_line(turn.text, 220)] if turn.text else [])],
        })
        for m in turn.model_calls:
            rows.append(_model_row(m, model, scale, sec))
        for c in turn.calls:
            rows.append(_call_row(c, scale, sec))
            for nested in children:
                if nested.call_id == c.call_id:
                    rows += _child_rows(nested, scale, sec, depth=1)
    return {
        "start": _when(t0),
        "rows": rows,
        "ticks": [{"x": t.x, "label": t.label} for t in scale.ticks()],
        "breaks": [{"x0": p.x0, "x1": p.x1, "label": f"idle {duration_label(p.t1 - p.t0)}"} for p in scale.breaks],
        "markers": [{"x": scale.x(sec(m.at)), "what": m.what, "summary": m.summary, "seq": m.seq, "at": _when(m.at)}
                    for m in trace.markers],
    }


@record
class Nested:
    """A delegated child session as the parent's waterfall draws it."""

    call_id: str
    session_id: str
    trace: SessionTrace
    model: str
    children: tuple[Nested, ...] = ()


def nested_children(snapshot: SessionSnapshot, masker: Masker) -> tuple[Nested, ...]:
    out = []
    for call_id, child in snapshot.children:
        _, model = provider_and_model(masker.mask(child.state.model or child.record.model))
        out.append(Nested(call_id, child.session_id, build_trace(child, masker), model,
                          nested_children(child, masker)))
    return tuple(out)


def _child_rows(nested: Nested, scale: TimeScale, sec: Any, depth: int) -> list[dict[str, Any]]:
    """A child's turns, model calls and tool calls, marked as the child's (no link to this page's details: they
    are in the child's own export), its own children under its delegate calls."""
    mark = "\u21b3 " * depth
    rows: list[dict[str, Any]] = []
    for turn in nested.trace.turns:
        dur = (turn.end - turn.start).total_seconds()
        rows.append({"kind": "turn", "cat": "turn", "label": f"{mark}child turn {turn.number}",
                     "sub": nested.session_id[:8], "x0": scale.x(sec(turn.start)), "x1": scale.x(sec(turn.end)),
                     "text": duration_label(dur), "child": depth, "session": nested.session_id,
                     "tip": [f"Turn {turn.number} of child session {nested.session_id}",
                             f"({duration_label(dur)})", *([_one_line(turn.text, 220)] if turn.text else [])]})
        for m in turn.model_calls:
            row = _model_row(m, nested.model, scale, sec)
            rows.append({**row, "label": f"{mark}{row['label']}", "child": depth, "session": nested.session_id})
        for c in turn.calls:
            row = _call_row(c, scale, sec)
            row.pop("target", None)
            rows.append({**row, "label": f"{mark}{row['label']}", "child": depth, "session": nested.session_id})
            for deeper in nested.children:
                if deeper.call_id == c.call_id:
                    rows += _child_rows(deeper, scale, sec, depth + 1)
    return rows


def _model_row(m: ModelCallView, model: str, scale: TimeScale, sec: Any) -> dict[str, Any]:
    tokens = (f"{m.input_tokens} in / {m.output_tokens} out tokens"
              if m.input_tokens or m.output_tokens else "")
    return {
        "kind": "model", "cat": "model" if m.outcome == "ok" else "model-error", "label": f"chat {model}",
        "sub": f"attempt {m.number}", "x0": scale.x(sec(m.start)), "x1": scale.x(sec(m.end)),
        "text": " \u00b7 ".join(p for p in (_ms(m.duration_ms), m.outcome if m.outcome != "ok" else "", tokens) if p),
        "err": m.outcome != "ok",
        "tip": [f"chat {model} \u2014 attempt {m.number}", f"outcome: {m.outcome}"
                + (f" ({m.error_kind})" if m.error_kind else ""), f"duration: {_ms(m.duration_ms) or 'n/a'}",
                *([tokens] if tokens else []), _one_line(m.summary, 220)],
    }


def _call_row(c: CallView, scale: TimeScale, sec: Any) -> dict[str, Any]:
    decision = c.decision or c.category
    args = _one_line(json.dumps(c.input, ensure_ascii=False, sort_keys=True), 160)
    return {
        "kind": "call", "cat": c.category, "label": c.tool, "sub": c.call_id, "call": c.call_id,
        "x0": scale.x(sec(c.start)), "x1": scale.x(sec(c.end)), "err": c.outcome in ("error", "timeout"),
        "inherited": c.inherited, "target": f"call-{c.index}",
        "text": " \u00b7 ".join(p for p in (_ms(c.duration_ms), decision, c.outcome if c.outcome not in (
            None, "ok", "denied") else "") if p),
        "tip": [f"{c.tool}  {c.call_id}", f"decision: {decision}" + (f" by {c.check}" if c.check else ""),
                f"outcome: {c.outcome or 'none yet'}" + (f"  \u00b7  {_ms(c.duration_ms)}" if c.duration_ms else ""),
                f"args: {args}", "click for the decision path, arguments and result"],
    }


# -- page parts ---------------------------------------------------------------------------------------------------


def _header(snapshot: SessionSnapshot, trace: SessionTrace, masker: Masker, model: str) -> str:
    rec, state = snapshot.record, snapshot.state
    n = counts(snapshot)
    key = snapshot.chain_key
    chain = verify_chain(snapshot.timeline, key) if key is not None else None
    title = _title(snapshot, masker)
    facts = [
        ("Mode", _e(rec.mode), ""),
        ("Model", _e(masker.mask(state.model or rec.model)), ""),
        ("Workspace", f"<code>{_e(masker.mask(rec.workspace))}</code>", ""),
        ("Started", _e(_when(rec.created_at)), ""),
        ("Last activity", _e(_when(trace.end)), ""),
        ("Wall time", _e(duration_label(max(0.0, (trace.end - rec.created_at).total_seconds()))), ""),
        ("Timeline chain", _e("not checked (this home lacks the chain key)" if chain is None else
                              f"{chain.rows} rows verified" if chain.ok else f"broken: {chain.reason}"),
         "ok" if chain is not None and chain.ok else "bad"),
    ]
    if state.ended:
        facts.append(("Ended", _e(state.ended + (f": {masker.mask(state.end_reason)}" if state.end_reason else "")),
                      ""))
    fork = ""
    if rec.parent_id and rec.fork_seq is not None:
        fork = (f'<span class="badge fork">fork of <code>{_e(rec.parent_id)}</code> at seq '
                f"{_e(rec.fork_seq)}</span>")
        facts.append(("Forked from", f"<code>{_e(rec.parent_id)}</code> at event seq {_e(rec.fork_seq)}", ""))
    elif rec.parent_id:
        fork = f'<span class="badge fork">child of <code>{_e(rec.parent_id)}</code></span>'
        facts.append(("Delegated by", f"<code>{_e(rec.parent_id)}</code>, call "
                      f"<code>{_e(masker.mask(state.parent_call_id or ''))}</code>", ""))
    for call_id, child in snapshot.children:
        facts.append(("Child session", f"<code>{_e(child.session_id)}</code> (delegate call "
                      f"<code>{_e(masker.mask(call_id))}</code>, {_e(child.record.status)})", ""))
    cards: list[tuple[int | str, str, str]] = [
        (n["turns"], "turns", ""), (n["tool_calls"], "tool calls", ""),
        (n["denials"], "denials", "warn" if n["denials"] else ""),
        (n["unknown_receipts"], "unknown receipts", "violet" if n["unknown_receipts"] else ""),
        (n["model_attempts"], "model attempts", ""),
    ]
    if n["input_tokens"] or n["output_tokens"]:
        cards.append((f"{n['input_tokens']}/{n['output_tokens']}", "tokens in/out", ""))
    return "".join([
        '<header class="top">',
        '<div class="brand"><b>Strata</b> &middot; session export</div>',
        f"<h1>{_e(title)}</h1>",
        f'<div class="ids"><code>{_e(rec.id)}</code><span class="badge st-{_e(rec.status)}">'
        f"{_e(rec.status.replace('_', ' '))}</span>{fork}</div>",
        '<dl class="facts">',
        *(f'<div><dt>{k}</dt><dd class="{cls}">{v}</dd></div>' for k, v, cls in facts),
        "</dl>",
        '<div class="cards">',
        *(f'<div class="card {cls}"><div class="n">{_e(v)}</div><div class="k">{_e(k)}</div></div>'
          for v, k, cls in cards),
        "</div></header>",
    ])


def _legend() -> str:
    items = []
    for cat, label in LEGEND:
        shape = " model" if cat == "model" else ""
        items.append(f'<li data-cat="{cat}" title="click to dim or show"><span class="sw cat-{cat}{shape}"></span>'
                     f"{_e(label)}</li>")
    items.append('<li title="the call ran and failed"><span class="sw hatch"></span>ran with an error</li>')
    return f'<ul class="legend">{"".join(items)}</ul>'


def _steps(c: CallView) -> str:
    if not c.steps:
        return '<p class="muted">No decision path was recorded for this call.</p>'
    items = [f'<li><span class="step-check">{_e(check)}</span>'
             f'<span class="step-out {_STEP_CLASS.get(outcome, "")}">{_e(outcome)}</span>'
             f'<span class="step-detail">{_e(detail)}</span></li>' for check, outcome, detail in c.steps]
    return f'<ol class="steps">{"".join(items)}</ol>'


def _call_details(c: CallView) -> str:
    decision = c.decision or c.category
    args = json.dumps(c.input, ensure_ascii=False, indent=2, sort_keys=True)
    kv = [f"<span>decision <b>{_e(decision)}</b>" + (f" by <b>{_e(c.check)}</b>" if c.check else "") + "</span>",
          f"<span>outcome <b>{_e(c.outcome or 'none yet')}</b></span>",
          f"<span>turn <b>{c.turn}</b></span>"]
    if c.duration_ms is not None:
        kv.append(f"<span>ran <b>{_e(_ms(c.duration_ms))}</b></span>")
    if c.receipt_id:
        kv.append(f"<span>receipt <code>{_e(c.receipt_id)}</code>"
                  + (f" <b>{_e(c.receipt_status)}</b>" if c.receipt_status else " (held by the parent session)"
                     if c.inherited else "") + "</span>")
    kv.append(f"<span>batch <code>{_e(c.batch_id)}</code></span>")
    parts = [f'<div class="kv">{"".join(kv)}</div>', "<h4>Decision path</h4>", _steps(c)]
    if c.reasons:
        parts.append("<h4>Reasons</h4><ul>" + "".join(f"<li>{_e(r)}</li>" for r in c.reasons) + "</ul>")
    parts.append(f'<h4>Arguments</h4><pre class="code">{_e(args)}</pre>')
    if c.result is not None:
        shown, rest = _clip(c.result, RESULT_CHARS)
        parts.append(f'<h4>Result{" (error)" if c.is_error else ""}</h4>'
                     f'<pre class="code{" err" if c.is_error else ""}">{_e(shown)}</pre>')
        if rest:
            parts.append(f'<div class="more">{rest} more characters not shown (the full result is in the JSONL '
                         "export)</div>")
    else:
        parts.append('<h4>Result</h4><p class="muted">No result: the call has not run.</p>')
    if c.observations:
        rows = "".join(f'<tr><td class="num">{_e(o["seq"])}</td><td>{_e(o["kind"])}</td>'
                       f'<td>{_e(o.get("outcome") or o.get("decision") or "")}</td><td>{_e(o["summary"])}</td></tr>'
                       for o in c.observations)
        parts.append('<h4>Other observations</h4><table class="rows"><tr><th>row</th><th>kind</th><th>outcome</th>'
                     f"<th>summary</th></tr>{rows}</table>")
    summary = _one_line(json.dumps(c.input, ensure_ascii=False, sort_keys=True), 200)
    inherited = '<span class="inh">inherited</span>' if c.inherited else ""
    outcome = f'<span class="outcome o-{_e(c.outcome)}">{_e(c.outcome)}</span>' if c.outcome else ""
    return (f'<details class="call cat-{c.category}" id="call-{c.index}" data-call-id="{_e(c.call_id)}">'
            f'<summary><span class="chip">{_e(decision)}</span><span class="tool">{_e(c.tool)}</span>'
            f'<code class="cid">{_e(c.call_id)}</code>{outcome}<span class="dur">{_e(_ms(c.duration_ms))}</span>'
            f'{inherited}<span class="sum">{_e(summary)}</span></summary>'
            f'<div class="call-body">{"".join(parts)}</div></details>')


def _model_line(turn: TurnView, model: str) -> str:
    if not turn.model_calls:
        return ""
    parts = []
    for m in turn.model_calls:
        tokens = f", {m.input_tokens}/{m.output_tokens} tokens" if m.input_tokens or m.output_tokens else ""
        parts.append(f"attempt {m.number} {m.outcome} ({_ms(m.duration_ms) or 'n/a'}{tokens})")
    return f'<p class="model-line">chat {_e(model)}: {_e("; ".join(parts))}</p>'


def _prompt(text: str) -> str:
    """The person's prompt in a turn card, as typed (masked), cut like an assistant text."""
    shown, rest = _clip(text, TEXT_CHARS)
    return (f'<div class="prompt"><span class="who">you</span><div class="words">{_e(shown)}'
            f'{"&hellip;" if rest else ""}</div></div>')


def _title(snapshot: SessionSnapshot, masker: Masker) -> str:
    """The session's title; one cut from a longer first prompt ends with an ellipsis."""
    title = masker.mask(snapshot.record.title).strip()
    if not title:
        return "untitled session"
    first = next((masker.mask(s.event.text).strip() for s in snapshot.events
                  if isinstance(s.event, UserMessage) and s.event.source == "user" and s.event.text.strip()), "")
    cut = len(" ".join(first.split())) > len(" ".join(title.split())) and not title.endswith(("\u2026", "..."))
    return _one_line(title + ("\u2026" if cut else ""), 200)


def _turns(trace: SessionTrace, model: str) -> str:
    if not trace.turns:
        return '<p class="empty">No turns were recorded.</p>'
    blocks = []
    for t in trace.turns:
        head = (f'<h3>Turn {t.number} <span class="muted">&middot; {len(t.calls)} tool call(s)'
                f'{" &middot; answer" if t.finished else ""}</span>'
                f'{" <span class=inh>inherited</span>" if t.inherited else ""}</h3>')
        asked = "".join(_prompt(p) for p in t.prompts)
        text, rest = _clip(t.text, TEXT_CHARS)
        say = (f'<div class="say md">{render_markdown(text)}{"<p>&hellip;</p>" if rest else ""}</div>'
               if text else "")
        calls = "".join(_call_details(c) for c in t.calls)
        blocks.append(f'<div class="turn-block" id="turn-{t.number}">{head}{asked}{say}{_model_line(t, model)}'
                      f"{calls}</div>")
    return "".join(blocks)


def _conversation(snapshot: SessionSnapshot, masker: Masker) -> str:
    items = []
    for m in snapshot.state.messages:
        blocks = []
        for b in masker.mask_value(m.to_api())["content"]:
            if b["type"] == "text":
                text, rest = _clip(b["text"], TEXT_CHARS)
                blocks.append(f'<div class="blk">{_e(text)}{"&hellip;" if rest else ""}</div>')
            elif b["type"] == "tool_use":
                args = _one_line(json.dumps(b["input"], ensure_ascii=False, sort_keys=True), 200)
                blocks.append(f'<div class="blk use">&rarr; {_e(b["name"])} [{_e(b["id"])}] {_e(args)}</div>')
            else:
                mark = "error" if b.get("is_error") else "ok"
                blocks.append(f'<div class="blk res">&larr; [{_e(b["tool_use_id"])}] {mark}: '
                              f'{_e(_one_line(b["content"], 200))}</div>')
        items.append(f'<div class="msg"><div class="role {_e(m.role)}">{_e(m.role)}</div><div>{"".join(blocks)}</div>'
                     "</div>")
    body = "".join(items) or '<p class="empty">No messages.</p>'
    return (f'<details class="fold"><summary>Conversation ({len(snapshot.state.messages)} messages, as the next '
            f"model request would carry it)</summary>{body}</details>")


def _lifecycle(trace: SessionTrace) -> str:
    if not trace.markers:
        return ""
    rows = "".join(f'<tr><td class="num">{m.seq}</td><td class="num">{_e(_when(m.at))}</td><td>{_e(m.what)}</td>'
                   f"<td>{_e(m.summary)}</td></tr>" for m in trace.markers)
    return ('<section class="panel"><div class="panel-head"><h2>Lifecycle</h2></div><table class="rows"><tr>'
            f"<th>row</th><th>time</th><th>what</th><th>summary</th></tr>{rows}</table></section>")


def render_html(snapshot: SessionSnapshot, masker: Masker) -> str:
    """The whole page as one string."""
    trace = build_trace(snapshot, masker)
    _, model = provider_and_model(masker.mask(snapshot.state.model or snapshot.record.model))
    n_calls = len(trace.calls)
    return "".join([
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'; img-src data:\">",
        '<meta name="generator" content="strata export">',
        f"<title>Strata session {_e(snapshot.session_id)}</title>",
        f"<style>{CSS}</style></head><body>",
        _header(snapshot, trace, masker, model),
        "<main>",
        '<section class="panel" id="waterfall-panel"><div class="panel-head"><h2>Waterfall '
        f'<span class="muted">&middot; turns, model calls and {n_calls} tool call(s) over time</span></h2>'
        f"{_legend()}</div>",
        f'<div id="waterfall" class="waterfall" data-calls="{n_calls}">'
        '<noscript><p class="empty">The waterfall is drawn by the page\'s inline script; the details below need '
        "none.</p></noscript></div></section>",
        f'<section class="panel" id="calls"><div class="panel-head"><h2>Turns and tool calls '
        f'<span class="muted">({n_calls})</span></h2><span class="muted">click a call for its decision path, '
        "arguments and result</span></div>",
        _turns(trace, model),
        "</section>",
        _lifecycle(trace),
        f'<section class="panel" id="conversation">{_conversation(snapshot, masker)}</section>',
        "</main>",
        '<footer>Exported by Strata. Secrets and personal data are masked as <code>[MASKED:kind:fingerprint]</code>; '
        "equal fingerprints stand for equal values. Times are UTC; a call's bar ends when its result was "
        "committed.</footer>",
        f'<script id="strata-data" type="application/json">'
        f"{_island(_waterfall(trace, model, nested_children(snapshot, masker)))}</script>",
        f"<script>{JS}</script>",
        "</body></html>\n",
    ])
