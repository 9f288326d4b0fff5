"""How `strata timeline` draws rows: a table as rich draws it, or the same characters without rich for a pipe or a
file (agent/cli/_plain_table.py). It takes any row with the shown fields: the store's TimelineRow (core/timeline.py)
or the quick way's (memory/quick_read.py), so both ways print exactly the same table."""

from __future__ import annotations

import functools
import os
import sys
import textwrap
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from agent.cli.output import echo, echo_document
from core.terminal_text import safe_text

if TYPE_CHECKING:  # rich draws the table only: `--json`, `--verify` and a pipe do not import it
    from rich.table import Table

    from agent.terminal.safe_text import SafeConsole


class Row(Protocol):
    """The fields of a timeline row the table shows."""

    @property
    def seq(self) -> int: ...
    @property
    def at(self) -> datetime: ...
    @property
    def turn(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def tool(self) -> str | None: ...
    @property
    def decision(self) -> str | None: ...
    @property
    def check(self) -> str | None: ...
    @property
    def outcome(self) -> str | None: ...
    @property
    def duration_ms(self) -> float | None: ...
    @property
    def summary(self) -> str: ...
    @property
    def data(self) -> Any: ...


PIPE_WIDTH = 200
"""The width of the table printed to a pipe or a file (a terminal's own width otherwise)."""
_DECISION_STYLE = {"allowed": "green", "approved": "green", "denied": "red", "rejected": "red", "parked": "yellow"}
# Fixed widths (all but the summary), so the tables `--follow` prints one row at a time line up.
COLUMNS: tuple[tuple[str, int, str], ...] = (
    ("seq", 6, "right"), ("time", 12, "left"), ("turn", 4, "right"), ("kind", 13, "left"), ("tool", 14, "left"),
    ("decision", 8, "left"), ("check", 12, "left"), ("outcome", 10, "left"), ("duration", 8, "right"),
)
TIMELINE_KINDS = ("phase", "model_attempt", "call", "hook", "approval", "receipt", "lifecycle")
"""The kinds of row Strata writes (core/timeline_rows.py); `--kind` takes these (or a kind the session holds)."""
_DECIDED = ("denied", "rejected", "parked")


def _duration(ms: float | None) -> str:
    if ms is None:
        return ""
    if ms < 10:
        return f"{ms:.1f}ms"
    return f"{ms:.0f}ms" if ms < 1000 else f"{ms / 1000:.2f}s"


def _deciding_reason(r: Row) -> str | None:
    """The reason the deciding check gave for a denied, rejected or parked call, in full (the row's summary cuts
    it): the last step of the decision that did not allow it."""
    steps = r.data.get("steps") if r.decision in _DECIDED and isinstance(r.data, dict) else None
    if not isinstance(steps, list):
        return None
    reasons = [str(s[2]) for s in steps if isinstance(s, list | tuple) and len(s) >= 3 and s[1] != "allow" and s[2]]
    return reasons[-1] if reasons else None


def _summary(r: Row) -> str:
    summary = r.summary
    reason = _deciding_reason(r)
    if reason is not None:
        summary = f"{summary.split(' -> ')[0]} -> {r.outcome or r.decision}: {reason}"
    return safe_text(summary.replace("\n", " | "))


def _cells(r: Row) -> list[str]:
    """A row's cells as shown: masked text made inert (a summary holds arbitrary text, such as "[MASKED:...]")."""
    at = r.at.astimezone(UTC)
    return [str(r.seq), at.time().isoformat("milliseconds"), str(r.turn),  # HH:MM:SS.mmm, the milliseconds cut
            safe_text(r.kind),
            safe_text(r.tool or ""), r.decision or "", safe_text(r.check or ""), safe_text(r.outcome or ""),
            _duration(r.duration_ms), _summary(r)]


def _lines(r: Row, summary_width: int) -> list[list[str]]:
    """A row as the table's lines: its cells, and the rest of a long summary wrapped on lines of its own."""
    cells = _cells(r)
    parts = fitted_lines(cells[-1], summary_width)
    cells[-1] = parts[0]
    if len(parts) == 1:
        return [cells]
    blank = [""] * (len(cells) - 1)
    return [cells, *([*blank, part] for part in parts[1:])]


@functools.lru_cache(maxsize=8)
def _wrapper(width: int) -> textwrap.TextWrapper:
    return textwrap.TextWrapper(width, break_on_hyphens=False)


def fitted_lines(text: str, width: int) -> list[str]:
    """`text` wrapped `width` characters wide as textwrap wraps it (a line that fits is not run through it, nor is
    printable ASCII that starts with a word: `_single_spaced`, `_greedy`)."""
    if text and len(text) <= width and text.isprintable() and not text[-1].isspace():
        return [text]  # what textwrap gives a printable line that fits and does not end in a space
    if text[:1] not in ("", " ") and text.isascii() and text.isprintable():
        lines = _single_spaced(text, width) if "  " not in text else _greedy(text.split(" "), width)
        if lines is not None:
            return lines
    return _wrapper(width).wrap(text) or [""]



def _single_spaced(text: str, width: int) -> list[str] | None:
    """`_greedy` for text whose words are one space apart (almost every summary): each line is the longest run of
    words that fits, so it ends at the last space within `width + 1` characters, found by `rfind` rather than word
    by word (None when a word is wider than `width`: textwrap breaks it). A space the text ends in is dropped, as
    textwrap drops it."""
    lines = []
    rest = text[:-1] if text[-1] == " " else text
    while len(rest) > width:
        cut = rest.rfind(" ", 0, width + 1)
        if cut <= 0:
            return None
        lines.append(rest[:cut])
        rest = rest[cut + 1:]
    lines.append(rest)
    return lines


def _greedy(pieces: list[str], width: int) -> list[str] | None:
    """What textwrap makes of a text of words and runs of spaces, given as `pieces` (`text.split(" ")`: a run of n
    spaces between two words leaves n - 1 empty pieces between them, and a text that ends in n spaces ends in n
    empty pieces), when no word or run is wider than `width` (None when one is: textwrap breaks it). textwrap takes
    chunks (a word, a run of spaces) while they fit, drops the spaces that end a line and those that would begin the
    next, and breaks no chunk that fits a line; so a word goes on the line when it fits there with the spaces
    before it, else it begins the next. (textwrap's loop over ~800 denied calls' reasons was a tenth of `strata
    timeline --decision denied` on a long session; splitting them with a regular expression was ~3%.)"""
    line = pieces[0]
    if len(line) > width:
        return None
    lines = []
    spaces = 0
    for index in range(1, len(pieces)):
        word = pieces[index]
        spaces += 1
        if not word:  # one more space of the run
            continue
        if len(line) + spaces + len(word) <= width:
            line = line + " " * spaces + word
        elif len(word) > width or spaces > width:
            return None
        else:
            lines.append(line)
            line = word
        spaces = 0
    if spaces > width:  # the spaces the text ends in are dropped, unless textwrap would break them
        return None
    lines.append(line)
    return lines


def _summary_width(width: int) -> int:
    """The summary takes what is left, so the fixed columns are never squeezed."""
    return max(20, width - sum(w for _, w, _ in COLUMNS) - 2 * len(COLUMNS) - 2)


def table(rows: Sequence[Row], *, header: bool, width: int = 200) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, show_header=header, header_style="bold", pad_edge=False)
    for name, col_width, justify in COLUMNS:
        table.add_column(name, width=col_width, justify=justify, no_wrap=True,  # type: ignore[arg-type]
                         overflow="ellipsis")
    table.add_column("summary", no_wrap=True, overflow="ellipsis", max_width=_summary_width(width))
    for r in rows:
        # Text, not markup: summaries hold arbitrary (masked) text such as "[MASKED:...]"; made inert before
        # rich measures it.
        for line in _lines(r, _summary_width(width)):
            cells = [Text(cell) for cell in line]
            cells[5] = Text(line[5], style=_DECISION_STYLE.get(line[5], ""))
            table.add_row(*cells)
    return table


STYLED = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")
"""Environment variables with which rich styles (or sizes) what it writes to a pipe: then rich draws the table."""


def plain(session_id: str, rows: Sequence[Row]) -> str | None:
    """The table as rich draws it to a pipe (agent/cli/_plain_table.py), without rich; None on a terminal, or
    when rich would draw it otherwise."""
    if sys.stdout.isatty() or any(name in os.environ for name in STYLED):
        return None
    from agent.cli._plain_table import Column, cell_width, plain_table

    title = f"timeline of session {session_id}: {len(rows)} rows, {rows[0].at.astimezone(UTC):%Y-%m-%d} (times UTC)"
    if safe_text(title) != title or "\t" in title or cell_width(title) > PIPE_WIDTH:
        return None
    columns = [*(Column(name, width, justify) for name, width, justify in COLUMNS),  # type: ignore[arg-type]
               Column("summary", None, max_width=_summary_width(PIPE_WIDTH))]
    summary_width = _summary_width(PIPE_WIDTH)
    shown = [line for r in rows for line in _lines(r, summary_width)]
    lines = plain_table(columns, shown, header=True, page_width=PIPE_WIDTH)
    return None if lines is None else "".join(f"{line}\n" for line in [title, *lines])


def console() -> SafeConsole:
    from agent.terminal.safe_text import SafeConsole

    # Piped output is not cut at 80 columns; a terminal uses its own width.
    return SafeConsole(highlight=False, width=None if sys.stdout.isatty() else PIPE_WIDTH)


def print_rows(session_id: str, rows: Sequence[Row], filtered: bool) -> None:
    """The rows as a table under a title line (to a pipe without rich when it draws the same), or the line saying
    there are none."""
    if not rows:
        echo("no timeline rows match" if filtered else f"session {session_id} has no timeline rows yet")
        return
    text = plain(session_id, rows)
    if text is not None:
        echo_document(text)  # inert already: every cell and the title went through safe_text
        return
    out = console()
    out.print(f"timeline of session {session_id}: {len(rows)} rows, {rows[0].at.astimezone(UTC):%Y-%m-%d} "
              "(times UTC)", markup=False)
    out.print(table(rows, header=True, width=out.width))
