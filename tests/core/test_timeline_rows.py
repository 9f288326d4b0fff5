"""Typed timeline rows (core/timeline_rows.py) are a view of the stored row, never a new stored form: each kind
projects onto exactly the generic row the emitters wrote before the rows were typed (same fields, same `data`
keys, so the same canonical JSON and the same chain hash), and a stored row reads back as its kind. Rows written
before the change, sealed under a key, still verify and still read back."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from core.chain import GENESIS_HASH, ChainKey
from core.timeline import TimelineEntry, TimelineRow, canonical_time, seal, verify_chain
from core.timeline_rows import (
    ApprovalRow,
    Asker,
    CallRow,
    HookRow,
    LifecycleRow,
    ModelAttemptRow,
    OtherRow,
    PhaseRow,
    ReceiptRow,
    Usage,
    call_entry,
    observation,
    phase_entry,
    receipt_entry,
)

KEY = ChainKey(b"k" * 32)

# (a typed row, the generic row the emitter wrote for it before rows were typed)
PAIRS: list[tuple[Any, TimelineEntry]] = [
    (PhaseRow(turn=1, name="commit", summary="commit: batch b1 with 1 call(s)", batch_id="b1", calls=("c1",)),
     TimelineEntry(kind="phase", turn=1, outcome="commit", summary="commit: batch b1 with 1 call(s)",
                   data={"batch_id": "b1", "calls": ["c1"]})),
    (PhaseRow(turn=2, name="perceive", summary="perceive: 3 messages, 7 tools"),
     TimelineEntry(kind="phase", turn=2, outcome="perceive", summary="perceive: 3 messages, 7 tools")),
    (ModelAttemptRow(turn=1, number=2, outcome="retry", duration_ms=12.5, error_kind="overloaded", status_code=529,
                     delay_s=0.5, summary="overloaded",
                     usage=Usage(input_tokens=3, output_tokens=4)),
     TimelineEntry(kind="model_attempt", turn=1, outcome="retry", check="overloaded", duration_ms=12.5,
                   summary="overloaded", data={"number": 2, "error_kind": "overloaded", "status_code": 529,
                                               "delay_s": 0.5, "usage": {"input_tokens": 3, "output_tokens": 4,
                                                                         "cache_read_tokens": 0,
                                                                         "cache_write_tokens": 0}})),
    (CallRow(turn=1, call_id="c1", tool="bash", decision="allowed", by="bash", outcome="ok", duration_ms=3.0,
             summary="bash {} -> ok: hi", steps=(("policy", "allow", "bash"),), input_sha256="a" * 64,
             plan_digest="plan_x", receipt_id="rcpt_1"),
     TimelineEntry(kind="call", turn=1, call_id="c1", tool="bash", decision="allowed", check="bash", outcome="ok",
                   duration_ms=3.0, summary="bash {} -> ok: hi",
                   data={"steps": [["policy", "allow", "bash"]], "input_sha256": "a" * 64, "plan_digest": "plan_x",
                         "receipt_id": "rcpt_1"})),
    (CallRow(turn=3, call_id="c2", tool="bash", decision="allowed", by="receipt", outcome="unknown",
             summary="bash settled from receipt r on resume, not re-run -> unknown", receipt_id="r",
             settled_on_resume=True),
     TimelineEntry(kind="call", turn=3, call_id="c2", tool="bash", decision="allowed", check="receipt",
                   outcome="unknown", summary="bash settled from receipt r on resume, not re-run -> unknown",
                   data={"receipt_id": "r", "settled_on_resume": True})),
    (HookRow(turn=1, call_id="c1", tool="bash", hook="guard", verdict="block", summary="guard: no"),
     TimelineEntry(kind="hook", turn=1, call_id="c1", tool="bash", check="guard", outcome="block",
                   summary="guard: no")),
    (ApprovalRow(turn=1, call_id="c1", tool="bash", decision="parked", by="rule bash", outcome="parked",
                 summary="asked by rule bash: ask", args_sha256="s", plan_digest="p",
                 asker=Asker(approver=None, asked_by="rule bash")),
     TimelineEntry(kind="approval", turn=1, call_id="c1", tool="bash", decision="parked", check="rule bash",
                   outcome="parked", summary="asked by rule bash: ask",
                   data={"args_sha256": "s", "plan_digest": "p", "approver": None, "asked_by": "rule bash"})),
    (ApprovalRow(turn=2, call_id="c1", tool="bash", decision="approved", by="person:a", outcome="recorded",
                 summary="approved by person:a", args_sha256="s", plan_digest="p"),
     TimelineEntry(kind="approval", turn=2, call_id="c1", tool="bash", decision="approved", check="person:a",
                   outcome="recorded", summary="approved by person:a", data={"args_sha256": "s", "plan_digest": "p"})),
    (ReceiptRow(turn=1, call_id="c1", tool="bash", receipt_id="rcpt_1", transition="dispatched",
                summary="receipt rcpt_1 committed before dispatch"),
     TimelineEntry(kind="receipt", turn=1, call_id="c1", tool="bash", check="rcpt_1", outcome="dispatched",
                   summary="receipt rcpt_1 committed before dispatch")),
    (LifecycleRow(turn=0, what="started", summary="session started", details={"plan_digest": "p", "x": None}),
     TimelineEntry(kind="lifecycle", turn=0, outcome="started", summary="session started",
                   data={"plan_digest": "p", "x": None})),
]


def test_the_loops_phase_rows_built_without_the_typed_row_are_the_typed_rows_entries() -> None:
    """The loop stages `phase_entry(...)` directly (one validation, not two): the same stored row as its PhaseRow."""
    for typed, legacy in PAIRS:
        if isinstance(typed, PhaseRow):
            assert phase_entry(typed.turn, typed.name, typed.summary, batch_id=typed.batch_id, calls=typed.calls,
                               notes=typed.notes) == legacy
    assert phase_entry(3, "plan", "plan: x", notes=("a", "b")) == PhaseRow(turn=3, name="plan", summary="plan: x",
                                                                         notes=("a", "b")).entry()


def test_the_executors_call_rows_built_without_the_typed_row_are_the_typed_rows_entries() -> None:
    """The executor stages `call_entry(**fields)` directly (one validation, not two): the row its CallRow stored."""
    calls = [(typed, legacy) for typed, legacy in PAIRS if isinstance(typed, CallRow)]
    assert len(calls) == 2
    for typed, legacy in calls:
        assert call_entry(**typed.model_dump(exclude={"kind"})) == legacy


def test_the_executors_receipt_rows_built_without_the_typed_row_are_the_typed_rows_entries() -> None:
    """The executor stages `receipt_entry(**fields)` directly: the row its ReceiptRow stored; a transition the
    typed row refuses is refused too."""
    typed = ReceiptRow(turn=2, call_id="c1", tool="bash", receipt_id="r1", transition="reconciled", status="done",
                       by="person:a", summary="receipt r1 reconciled as applied by person:a")
    fields = typed.model_dump(exclude={"kind"})
    assert receipt_entry(**fields) == typed.entry()
    assert receipt_entry(**fields).data == {"status": "done", "by": "person:a"}
    for typed, legacy in PAIRS:
        if isinstance(typed, ReceiptRow):
            assert receipt_entry(**typed.model_dump(exclude={"kind"})) == legacy
    with pytest.raises(ValueError, match="not a receipt transition"):
        receipt_entry(**{**fields, "transition": "vanished"})


def _stored(entries: list[TimelineEntry]) -> list[TimelineRow]:
    at = canonical_time(datetime(2026, 1, 1, tzinfo=UTC))
    rows, prev = [], GENESIS_HASH
    for seq, entry in enumerate(entries, 1):
        stored, _, digest = seal(KEY, "s1", seq, at, prev, entry)
        rows.append(TimelineRow(**stored.model_dump(), session_id="s1", seq=seq, at=datetime.fromisoformat(at),
                                prev_hash=prev, hash=digest))
        prev = digest
    return rows


@pytest.mark.parametrize(("typed", "legacy"), PAIRS, ids=[f"{t.kind}-{i}" for i, (t, _) in enumerate(PAIRS)])
def test_a_typed_row_is_stored_exactly_as_its_kind_was_before(typed: Any, legacy: TimelineEntry) -> None:
    """Same generic row, so the same canonical JSON and hash as the row the untyped emitter wrote."""
    assert typed.entry() == legacy
    at = canonical_time(datetime(2026, 1, 1, tzinfo=UTC))
    assert seal(KEY, "s1", 1, at, GENESIS_HASH, typed.entry())[2] == seal(KEY, "s1", 1, at, GENESIS_HASH, legacy)[2]


@pytest.mark.parametrize(("typed", "legacy"), PAIRS, ids=[f"{t.kind}-{i}" for i, (t, _) in enumerate(PAIRS)])
def test_a_stored_row_reads_back_as_its_kind(typed: Any, legacy: TimelineEntry) -> None:
    """The exporters read typed fields: a stored row of each kind reads back as the typed row it came from."""
    (row,) = _stored([legacy])
    assert observation(row) == typed


def test_rows_written_before_the_change_still_verify_and_read() -> None:
    """A chain of untyped rows (as written before) verifies under its key, and each row reads back typed."""
    rows = _stored([legacy for _, legacy in PAIRS])
    assert verify_chain(rows, KEY).ok
    assert [observation(r) for r in rows] == [typed for typed, _ in PAIRS]


def test_a_row_that_fits_no_kind_reads_as_it_is() -> None:
    """An older or edited row whose data does not fit its kind is kept whole, not refused."""
    odd = TimelineEntry(kind="phase", turn=1, outcome="commit", data={"something": "else"})
    (row,) = _stored([odd])
    read = observation(row)
    assert isinstance(read, OtherRow) and read.entry() == odd
