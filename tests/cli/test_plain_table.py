"""`strata timeline ID` to a pipe draws its table without rich (agent/cli/_plain_table.py): character for character
what rich draws there, for every kind of text a row can hold (wide and combining characters, emoji, masked
secrets, text cut at a wide character's edge, empty cells, cells longer than their column), and rich still draws
what the plain table does not (a cell with a tab, a terminal)."""

from __future__ import annotations

import io
import random
from datetime import UTC, datetime, timedelta

import pytest

from agent.cli import timeline_table
from agent.terminal.safe_text import SafeConsole
from core.timeline import TIMELINE_DECISIONS, TimelineRow

T0 = datetime(2026, 12, 3, 19, 30, tzinfo=UTC)
TEXTS = ["", "ok", "a" * 14, "b" * 15, "界" * 7, "界" * 8, "a界" * 7, "x" + "界" * 7, "e\u0301t\u00e9", "👍🏽 done",
         "👨‍👩‍👧 family", "[MASKED:sk-ant-1a2b]", "[bold]not markup[/bold]", "  padded  ", "trailing   ",
         "\u200bzero width", "\x1b[31mred\x1b[0m", "bell\x07", "ﾊﾝｶｸ", "Ελληνικά", "a\u0300\u0301\u0302" * 5]


def _row(seq: int, rng: random.Random) -> TimelineRow:
    def text(longest: int) -> str:
        pick = rng.choice(TEXTS)
        return pick if rng.random() < 0.7 else (pick + " " + rng.choice(TEXTS)) * rng.randint(1, longest)

    return TimelineRow(session_id="s", seq=seq, at=T0 + timedelta(milliseconds=seq * 137), turn=rng.randint(0, 10**5),
                       kind=rng.choice(["phase", "model_attempt", "call", "hook", text(2)]), tool=text(2) or None,
                       decision=rng.choice([None, *TIMELINE_DECISIONS]), outcome=text(2) or None,
                       duration_ms=rng.choice([None, 0.25, 9.99, 12.0, 999.4, 1234.5, 10**7]),
                       summary=text(30).replace("\t", " "), prev_hash="0" * 64, hash="1" * 64)


def _rich(session_id: str, rows: list[TimelineRow]) -> str:
    """What `_print` drew before the plain table: rich's console, not a terminal, 200 columns."""
    out = io.StringIO()
    console = SafeConsole(highlight=False, width=200, file=out)
    console.print(f"timeline of session {session_id}: {len(rows)} rows, {rows[0].at.astimezone(UTC):%Y-%m-%d} "
                  "(times UTC)", markup=False)
    console.print(timeline_table.table(rows, header=True, width=console.width))
    return out.getvalue()


@pytest.fixture(autouse=True)
def _a_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in timeline_table.STYLED:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("sys.stdout", io.StringIO())  # not a terminal


@pytest.mark.parametrize("seed", range(12))
def test_the_plain_table_is_what_rich_draws_to_a_pipe(seed: int) -> None:
    rng = random.Random(seed)
    rows = [_row(seq, rng) for seq in range(1, rng.randint(1, 60))]
    plain = timeline_table.plain("01a23d5f-4b0f-7000-a69b-a9f16f811e41", rows)
    assert plain is not None
    assert plain == _rich("01a23d5f-4b0f-7000-a69b-a9f16f811e41", rows)


def test_cells_at_their_columns_edges_and_short_summaries_match_rich() -> None:
    rows = []
    for seq, text in enumerate(TEXTS, start=1):
        rows.append(TimelineRow(session_id="s", seq=seq, at=T0, turn=seq, kind=text or "call", tool=text or None,
                                decision="denied", outcome=text or None, duration_ms=None, summary=text,
                                prev_hash="0", hash="1"))
    for width in (1, 19, 20, 21, 108, 109, 110, 200):  # the summary: shorter, as wide as, wider than its maximum
        rows.append(rows[-1].model_copy(update={"seq": len(rows) + 1, "summary": "s" * width}))
        assert timeline_table.plain("s", rows) == _rich("s", rows), width
    assert timeline_table.plain("s", rows[:1]) == _rich("s", rows[:1])


@pytest.mark.parametrize("seed", range(6))
def test_printable_ascii_cells_too_long_for_their_columns_are_cut_as_rich_cuts_them(seed: int) -> None:
    """A table of printable ASCII only (drawn a line at a time, `_plain_table.py`'s cut of the cells too long for
    their column, as a denied call's check is on every such row): kind, tool, check, outcome, seq, turn, duration and
    summary at, one over and far over their widths, with spaces at either end, beside rows that fit."""
    rng = random.Random(seed)

    def text(width: int) -> str:
        pick = "".join(rng.choice("ab -_") for _ in range(rng.choice([0, width - 1, width, width + 1, 3 * width])))
        return rng.choice(["", " ", "  "]) + pick + rng.choice(["", " ", "  "])

    rows = [TimelineRow(session_id="s", seq=rng.choice([seq, 10**6 + seq, 10**8 + seq]), at=T0, turn=rng.choice(
        [0, 9999, 10**4, 10**9]), kind=text(13) or "call", tool=text(14) or None,
        decision=rng.choice([None, *TIMELINE_DECISIONS]), check=text(12) or None, outcome=text(10) or None,
        duration_ms=rng.choice([None, 0.25, 10**7, 10**12]), summary=text(93), prev_hash="0", hash="1")
        for seq in range(1, rng.randint(2, 40))]
    assert timeline_table.plain("s", rows) == _rich("s", rows)


def test_what_the_plain_table_does_not_draw_is_left_to_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    row = TimelineRow(session_id="s", seq=1, at=T0, turn=1, kind="call", tool="bash", decision="allowed",
                      outcome="ok", duration_ms=1.0, summary="fine", prev_hash="0", hash="1")
    assert timeline_table.plain("s", [row]) is not None
    assert timeline_table.plain("s", [row.model_copy(update={"tool": "ba\tsh"})]) is None  # rich expands tabs
    assert timeline_table.plain("s" * 200, [row]) is None  # rich wraps a title wider than the page
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich styles what it writes, even to a pipe
    assert timeline_table.plain("s", [row]) is None
