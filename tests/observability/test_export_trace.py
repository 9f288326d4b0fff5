"""The trace both drawings share (observability/export/_view.py) and the waterfall's time axis (_scale.py):
each call's category and place in time, model attempts laid back to back, content masked, long idle gaps
drawn as breaks."""

from __future__ import annotations

from datetime import timedelta

import pytest

import observability.export
from observability.export import build_trace
from observability.export._scale import TimeScale, duration_label, nice_step
from tests.observability._export_session import (
    AWS_KEY,
    GH_TOKEN,
    SECRETS,
    URL_PASSWORD,
    build_session,
    masker,
    snapshot_of,
)


async def test_every_call_gets_its_category() -> None:
    """Decision colours: allowed, denied, approved, rejected, unknown outcome, parked, and not run yet."""
    trace = build_trace(await snapshot_of((await build_session()).store), masker())
    assert {c.call_id: c.category for c in trace.calls} == {
        "c1": "allowed", "c2": "denied", "c3": "allowed", "c4": "approved", "c5": "unknown", "c7": "rejected",
        "c6": "parked", "c8": "pending"}
    assert [c.call_id for c in trace.calls] == ["c1", "c2", "c3", "c4", "c5", "c7", "c6", "c8"]


async def test_a_call_spans_its_duration_up_to_its_commit() -> None:
    """A call ends when its row was committed and starts `duration_ms` before; a denial is an instant."""
    built = await build_session()
    snapshot = await snapshot_of(built.store)
    trace = build_trace(snapshot, masker())
    rows = {r.call_id: r for r in snapshot.timeline if r.kind == "call"}
    calls = {c.call_id: c for c in trace.calls}
    assert calls["c3"].end == rows["c3"].at
    assert calls["c3"].end - calls["c3"].start == timedelta(milliseconds=25)
    assert calls["c2"].start == calls["c2"].end == rows["c2"].at
    assert calls["c5"].end - calls["c5"].start == timedelta(seconds=1)


async def test_model_attempts_of_a_turn_are_laid_back_to_back() -> None:
    """A retry's attempt ends before the next starts (minus the backoff), though both rows share one commit."""
    trace = build_trace(await snapshot_of((await build_session()).store), masker())
    retry, ok = trace.turns[0].model_calls
    assert (retry.number, retry.outcome, ok.number, ok.outcome) == (1, "retry", 2, "ok")
    assert ok.end - ok.start == timedelta(milliseconds=400)
    assert ok.start - retry.end == timedelta(milliseconds=500)
    assert retry.end - retry.start == timedelta(milliseconds=300)
    assert (ok.input_tokens, ok.output_tokens) == (1200, 80)
    assert trace.turns[0].start == retry.start


async def test_turns_hold_their_calls_and_text() -> None:
    """Each turn holds its model attempts and calls, and spans them all."""
    trace = build_trace(await snapshot_of((await build_session()).store), masker())
    assert [t.number for t in trace.turns] == [1, 2, 3]
    assert [[c.call_id for c in t.calls] for t in trace.turns] == [["c1", "c2", "c3"], ["c4", "c5", "c7"], ["c6", "c8"]]
    for t in trace.turns:
        assert all(t.start <= c.start and c.end <= t.end for c in t.calls)
        assert all(t.start <= m.start and m.end <= t.end for m in t.model_calls)
    assert trace.turns[0].text == "Reading first."
    assert [m.what for m in trace.markers] == ["started", "resumed", "parked"]


async def test_trace_content_is_masked() -> None:
    """Arguments, results and texts reach the trace masked; the decision path survives."""
    trace = build_trace(await snapshot_of((await build_session()).store), masker())
    calls = {c.call_id: c for c in trace.calls}
    assert AWS_KEY not in calls["c3"].input["content"] and "[MASKED:aws_access_key:" in calls["c3"].input["content"]
    assert URL_PASSWORD not in calls["c2"].input["command"]
    assert calls["c1"].result is not None and GH_TOKEN not in calls["c1"].result
    assert calls["c4"].steps == (("policy", "ask", "rule ask bash"), ("approval", "approved", "alice (terminal)"))
    assert calls["c5"].receipt_id == "r5" and calls["c5"].receipt_status == "unknown"
    assert [o["kind"] for o in calls["c4"].observations] == ["approval"]
    text = repr(trace)
    assert not [s for s in SECRETS if s in text]


def test_a_long_idle_gap_is_drawn_as_a_break() -> None:
    """Three idle hours between two bursts of work become one narrow break; the work keeps the width."""
    hours = 3 * 3600.0
    scale = TimeScale([(0.0, 4.0), (4.0 + hours, 6.0 + hours)], 6.0 + hours)
    (gap,) = scale.breaks
    assert (gap.t0, gap.t1) == (4.0, 4.0 + hours)
    assert gap.x1 - gap.x0 < 0.1
    assert scale.x(0.0) == 0.0 and scale.x(6.0 + hours) == pytest.approx(1.0)
    assert scale.x(2.0) == pytest.approx(scale.x(4.0) / 2)
    ticks = scale.ticks()
    assert all(not gap.x0 < t.x < gap.x1 for t in ticks)
    assert len({t.label for t in ticks}) == len(ticks)


def test_a_busy_session_keeps_a_linear_axis() -> None:
    """Short gaps between work stay to scale; ticks fall on round offsets."""
    scale = TimeScale([(0.0, 0.010), (0.012, 0.030)], 0.030)
    assert scale.breaks == []
    assert scale.x(0.015) == pytest.approx(0.5)
    assert [t.label for t in scale.ticks()][:3] == ["0 ms", "5 ms", "10 ms"]


def test_a_session_with_no_duration_still_scales() -> None:
    """All-instant sessions draw at the left edge instead of dividing by zero."""
    scale = TimeScale([(0.0, 0.0)], 0.0)
    assert scale.x(0.0) == 0.0 and scale.ticks()[0].label == "0 ms"


@pytest.mark.parametrize(("seconds", "label"), [(0.0, "0 ms"), (0.0025, "2.5 ms"), (0.25, "250 ms"), (1.5, "1.50 s"),
                                                (2.0, "2 s"), (42.0, "42.0 s"), (125.0, "2m 05s"), (7260.0, "2h 01m"),
                                                (90000.0, "1d 01h")])
def test_duration_labels(seconds: float, label: str) -> None:
    """Durations read the way a person says them."""
    assert duration_label(seconds) == label


def test_nice_steps() -> None:
    """Ticks step in 1-2-5 multiples."""
    assert [nice_step(x) for x in (0.003, 0.0049, 0.07, 0.9, 3.0, 400.0)] == [0.005, 0.005, 0.1, 1.0, 5.0, 500.0]


def test_exported_members() -> None:
    """observability.export's public surface is what its __all__ names."""
    assert observability.export.__all__
    assert [n for n in observability.export.__all__ if not hasattr(observability.export, n)] == []
