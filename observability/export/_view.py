"""The session as a trace: turns, the model calls and tool calls inside them, placed in time, with their content
masked. The HTML waterfall and the OTLP spans are two drawings of this one view.

Times come from the timeline: a row's `at` is the time of the commit it rode with, which for a call's row is
just after the call ended, and `duration_ms` is what the runtime measured; so a call spans
`[at - duration, at]`. Model attempts of one turn share a commit, so they are laid back to back from it. A
fork's copied calls and turns are placed by its ancestors' rows, when they really ran.
Content (arguments, results, assistant text) comes from the state log and is masked here, before anything
else sees it."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import field
from datetime import datetime, timedelta
from typing import Any, Literal

from core.events import AssistantMessage, BatchProposed, CallResult, PlannedCall, StoredEvent, UserMessage
from core.masking import Masker
from core.messages import TextBlock
from core.record import record
from core.timeline import TimelineRow
from core.timeline_rows import CallRow, ModelAttemptRow, observation
from observability.export._masked_json import timeline_row_record
from observability.export._snapshot import SessionSnapshot

Category = Literal["allowed", "approved", "denied", "rejected", "parked", "unknown", "pending"]
"""How a call is drawn: its decision, except that an effect whose outcome is unknown is `unknown` whatever
allowed it, and a call that never got a decision (its batch is still open) is `pending`."""
CATEGORIES: tuple[Category, ...] = ("allowed", "approved", "denied", "rejected", "parked", "unknown", "pending")


@record
class ModelCallView:
    turn: int
    number: int
    """The attempt's number within its turn (1-based; retries count up)."""
    seq: int
    start: datetime
    end: datetime
    duration_ms: float | None
    outcome: str
    error_kind: str | None
    status_code: int | None
    request_id: str | None
    input_tokens: int | None
    output_tokens: int | None
    summary: str


@record
class CallView:
    index: int
    """Position in proposal order across the session: a stable, HTML-safe handle."""
    call_id: str
    tool: str
    turn: int
    batch_id: str
    category: Category
    decision: str | None
    check: str | None
    outcome: str | None
    is_error: bool
    start: datetime
    end: datetime
    duration_ms: float | None
    input: dict[str, Any]
    result: str | None
    reasons: tuple[str, ...]
    steps: tuple[tuple[str, str, str], ...]
    """The decision path: (check, outcome, detail), in the order the executor applied them."""
    receipt_id: str | None
    receipt_status: str | None
    summary: str
    inherited: bool
    """Copied from the parent session by a fork (its times are the fork's, its receipt stays with the parent)."""
    observations: tuple[dict[str, Any], ...] = ()
    """Every other timeline row about this call (hooks, approvals, receipts, earlier decisions)."""


@record
class TurnView:
    number: int
    start: datetime
    end: datetime
    model_calls: tuple[ModelCallView, ...]
    calls: tuple[CallView, ...]
    text: str
    """The assistant's text in this turn (masked)."""
    finished: bool
    """The model proposed to finish (no tool calls)."""
    inherited: bool
    prompts: tuple[str, ...] = ()
    """What the person said before this turn (masked): the prompt it answers."""


@record
class Marker:
    at: datetime
    what: str
    summary: str
    seq: int


@record
class SessionTrace:
    start: datetime
    end: datetime
    turns: tuple[TurnView, ...]
    markers: tuple[Marker, ...]
    calls: tuple[CallView, ...] = field(default=())


def _ms(ms: float | None) -> timedelta:
    return timedelta(milliseconds=ms or 0.0)


def _text_of(content: tuple[Any, ...]) -> str:
    return "\n\n".join(b.text for b in content if isinstance(b, TextBlock) and b.text.strip())


def _category(decision: str | None, outcome: str | None, has_result: bool) -> Category:
    if outcome == "unknown":
        return "unknown"
    if decision in ("allowed", "approved", "denied", "rejected", "parked"):
        return decision  # type: ignore[return-value]
    if outcome == "denied":
        return "denied"
    return "allowed" if has_result else "pending"


def _model_calls(rows: list[TimelineRow], masker: Masker) -> list[ModelCallView]:
    """Attempts of one turn, laid back to back, ending at the commit they rode with."""
    out: list[ModelCallView] = []
    ordered = sorted(rows, key=lambda r: r.seq)
    next_start: datetime | None = None
    for row in reversed(ordered):
        typed = observation(row)
        attempt = typed if isinstance(typed, ModelAttemptRow) else None  # a row that does not fit: times only
        end = row.at if next_start is None else min(row.at, next_start - timedelta(seconds=float(
            (attempt.delay_s or 0.0) if attempt is not None else 0.0)))
        start = end - _ms(row.duration_ms)
        next_start = start
        usage = attempt.usage if attempt is not None else None
        out.append(ModelCallView(
            turn=row.turn, number=attempt.number if attempt is not None else len(ordered) - len(out), seq=row.seq,
            start=start, end=end, duration_ms=row.duration_ms, outcome=masker.mask(row.outcome or ""),
            error_kind=row.check, status_code=attempt.status_code if attempt is not None else None,
            request_id=attempt.request_id if attempt is not None else None,
            input_tokens=usage.input_tokens if usage else None,
            output_tokens=usage.output_tokens if usage else None, summary=masker.mask(row.summary)))
    return list(reversed(out))


def build_trace(snapshot: SessionSnapshot, masker: Masker) -> SessionTrace:
    """The masked trace of a session. Pure: reads the snapshot, touches nothing."""
    fork_seq = snapshot.record.fork_seq or 0
    rows_by_call: dict[str, list[TimelineRow]] = defaultdict(list)
    attempts: dict[int, list[TimelineRow]] = defaultdict(list)
    markers: list[Marker] = []
    for row in (*snapshot.ancestry, *snapshot.timeline):
        if row.kind == "model_attempt":
            attempts[row.turn].append(row)
        elif row.call_id is not None:
            rows_by_call[row.call_id].append(row)
        elif row.kind == "lifecycle" and row.session_id == snapshot.session_id:
            markers.append(Marker(row.at, masker.mask(row.outcome or "lifecycle"), masker.mask(row.summary), row.seq))

    planned: list[tuple[PlannedCall, str, StoredEvent]] = []
    results: dict[str, tuple[CallResult, StoredEvent]] = {}
    texts: dict[int, list[str]] = defaultdict(list)
    finished: set[int] = set()
    inherited_turns: set[int] = set()
    said: list[tuple[int, str]] = []
    for stored in snapshot.events:
        ev = stored.event
        if isinstance(ev, UserMessage) and ev.source == "user" and ev.text.strip():
            said.append((stored.turn, masker.mask(ev.text)))
        if isinstance(ev, BatchProposed):
            planned.extend((c, ev.batch_id, stored) for c in ev.calls)
        elif isinstance(ev, CallResult):
            results[ev.call_id] = (ev, stored)
        if isinstance(ev, BatchProposed | AssistantMessage):
            if text := _text_of(ev.content):
                texts[stored.turn].append(masker.mask(text))
            if isinstance(ev, AssistantMessage):
                finished.add(stored.turn)
            if stored.seq <= fork_seq:
                inherited_turns.add(stored.turn)
    receipts = {r.call_id: r for r in snapshot.receipts}

    calls: list[CallView] = []
    for index, (call, batch_id, proposed) in enumerate(planned):
        rows = rows_by_call.get(call.call_id, [])
        decisive = [r for r in rows if r.kind == "call"]
        decided = decisive[-1] if decisive else None
        result, result_at = results.get(call.call_id, (None, None))
        duration = decided.duration_ms if decided is not None and decided.duration_ms is not None else (
            result.duration_ms if result is not None else None)
        if decided is not None:
            end = decided.at
        elif result_at is not None:
            end = result_at.at
        else:
            end = proposed.at
        start = end - _ms(duration)
        decision = decided.decision if decided is not None else None
        outcome = result.status if result is not None else (decided.outcome if decided is not None else None)
        typed = observation(decided) if decided is not None else None
        call_row = typed if isinstance(typed, CallRow) else None  # a row that does not fit: no path shown
        steps = (call_row.steps or ()) if call_row is not None else ()
        receipt_id = result.receipt_id if result is not None and result.receipt_id else (
            call_row.receipt_id if call_row is not None else None)
        receipt = receipts.get(call.call_id)
        calls.append(CallView(
            index=index, call_id=masker.mask(call.call_id),
            tool=masker.mask(decided.tool if decided is not None and decided.tool else call.tool),
            turn=proposed.turn, batch_id=masker.mask(batch_id), category=_category(
                decision, outcome, result is not None),
            decision=decision, check=masker.mask(decided.check) if decided is not None and decided.check else (
                masker.mask(result.check) if result is not None and result.check else None),
            outcome=outcome, is_error=bool(result.is_error) if result is not None else False, start=start, end=end,
            duration_ms=duration, input=masker.mask_value(dict(call.input)),
            result=masker.mask(result.content) if result is not None else None,
            reasons=tuple(masker.mask(r) for r in result.reasons) if result is not None else (),
            steps=tuple((masker.mask(a), masker.mask(b), masker.mask(c)) for a, b, c in steps),
            receipt_id=masker.mask(receipt_id) if receipt_id else None,
            receipt_status=receipt.status if receipt is not None else None,
            summary=masker.mask(decided.summary) if decided is not None else "",
            inherited=proposed.seq <= fork_seq,
            observations=tuple(timeline_row_record(r, masker) for r in rows if r is not decided)))

    calls_by_turn: dict[int, list[CallView]] = defaultdict(list)
    for c in calls:
        calls_by_turn[c.turn].append(c)
    numbers = sorted({t for t in attempts} | set(calls_by_turn) | set(texts) | finished)
    shown = [n for n in numbers if n > 0 or calls_by_turn.get(n) or attempts.get(n)]
    prompts: dict[int, list[str]] = defaultdict(list)
    for after, words in said:  # a prompt given after turn k is what the next turn answers
        answered = next((n for n in shown if n > after), None)
        if answered is not None:
            prompts[answered].append(words)
    turns: list[TurnView] = []
    for n in numbers:
        if n not in shown:
            continue
        models = _model_calls(attempts.get(n, []), masker)
        spans = [(m.start, m.end) for m in models] + [(c.start, c.end) for c in calls_by_turn.get(n, [])]
        if not spans:
            at = next((s.at for s in snapshot.events if s.turn == n), snapshot.record.created_at)
            spans = [(at, at)]
        turns.append(TurnView(number=n, start=min(s for s, _ in spans), end=max(e for _, e in spans),
                              model_calls=tuple(models), calls=tuple(calls_by_turn.get(n, [])),
                              text="\n\n".join(texts.get(n, [])), finished=n in finished,
                              inherited=n in inherited_turns, prompts=tuple(prompts.get(n, []))))

    instants = [snapshot.record.created_at] + [s.at for s in snapshot.events] + [r.at for r in snapshot.timeline]
    instants += [t.start for t in turns]
    return SessionTrace(start=min(instants), end=max([*instants, *(t.end for t in turns)]), turns=tuple(turns),
                        markers=tuple(markers), calls=tuple(calls))
