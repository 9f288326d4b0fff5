"""`strata timeline ID`: what the runtime observed in a session, as a table or one JSON object per line;
`--follow` tails a live session, `--verify` re-checks both keyed hash chains and the recorded heads against the
database and the evidence ledger (observability/chain_verify.py)."""

from __future__ import annotations

import functools
import os
import sys
import textwrap
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import click

from agent.cli._common import Command
from agent.cli.output import echo, echo_document, echo_json
from agent.cli.stdout import output_lost
from agent.reading import Reader
from core.chain import ChainHead, VerifyResult
from core.errors import UsageError
from core.masking import Masker
from core.terminal_text import json_line, safe_text
from core.timeline import TIMELINE_DECISIONS, TimelineRow
from memory.leases import make_liveness
from observability.chain_verify import ChainReport, verify_chains
from observability.child_sessions import timeline_with_children
from observability.session_timeline import follow, load_timeline, timeline_record

if TYPE_CHECKING:  # rich draws the table only: `--json` and `--verify` do not import it
    from rich.table import Table

    from agent.terminal.safe_text import SafeConsole

_SQLITE_INT_MAX = (1 << 63) - 1
"""The largest number an SQLite INTEGER holds: a larger --turn is a usage error, not a failed query."""
_PIPE_WIDTH = 200
"""The width of the table printed to a pipe or a file (a terminal's own width otherwise)."""
_DECISION_STYLE = {"allowed": "green", "approved": "green", "denied": "red", "rejected": "red", "parked": "yellow"}
# Fixed widths (all but the summary), so the tables `--follow` prints one row at a time line up.
_COLUMNS: tuple[tuple[str, int, str], ...] = (
    ("seq", 6, "right"), ("time", 12, "left"), ("turn", 4, "right"), ("kind", 13, "left"), ("tool", 14, "left"),
    ("decision", 8, "left"), ("check", 12, "left"), ("outcome", 10, "left"), ("duration", 8, "right"),
)
TIMELINE_KINDS = ("phase", "model_attempt", "call", "hook", "approval", "receipt", "lifecycle")
"""The kinds of row Strata writes (core/timeline_rows.py); `--kind` takes these (or a kind the session holds)."""
_DECIDED = ("denied", "rejected", "parked")


def _since(value: str | None) -> tuple[int | None, datetime | None]:
    """`--since`: a seq number, or an ISO time (UTC when it has no offset)."""
    if value is None:
        return None, None
    if value.strip().isdigit():
        return int(value), None
    try:
        at = datetime.fromisoformat(value.strip())
    except ValueError:
        raise click.BadParameter(f"{value!r} is neither a seq number nor an ISO time "
                                 "(e.g. 2026-01-01T12:00:00)", param_hint="--since") from None
    if at.tzinfo is None:
        return None, at.replace(tzinfo=UTC)
    try:
        return None, at.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+05:00: its UTC form is before year 1 (or after 9999)
        offset = at.utcoffset()
        early = offset is not None and offset > timedelta(0)
        return None, (datetime.min if early else datetime.max).replace(tzinfo=UTC)


def _duration(ms: float | None) -> str:
    if ms is None:
        return ""
    if ms < 10:
        return f"{ms:.1f}ms"
    return f"{ms:.0f}ms" if ms < 1000 else f"{ms / 1000:.2f}s"


def _deciding_reason(r: TimelineRow) -> str | None:
    """The reason the deciding check gave for a denied, rejected or parked call, in full (the row's summary cuts
    it): the last step of the decision that did not allow it."""
    steps = r.data.get("steps") if r.decision in _DECIDED and isinstance(r.data, dict) else None
    if not isinstance(steps, list):
        return None
    reasons = [str(s[2]) for s in steps if isinstance(s, list | tuple) and len(s) >= 3 and s[1] != "allow" and s[2]]
    return reasons[-1] if reasons else None


def _summary(r: TimelineRow) -> str:
    summary = r.summary
    reason = _deciding_reason(r)
    if reason is not None:
        summary = f"{summary.split(' -> ')[0]} -> {r.outcome or r.decision}: {reason}"
    return safe_text(summary.replace("\n", " | "))


def _cells(r: TimelineRow) -> list[str]:
    """A row's cells as shown: masked text made inert (a summary holds arbitrary text, such as "[MASKED:...]")."""
    return [str(r.seq), r.at.astimezone(UTC).strftime("%H:%M:%S.%f")[:-3], str(r.turn), safe_text(r.kind),
            safe_text(r.tool or ""), r.decision or "", safe_text(r.check or ""), safe_text(r.outcome or ""),
            _duration(r.duration_ms), _summary(r)]


def _lines(r: TimelineRow, summary_width: int) -> list[list[str]]:
    """A row as the table's lines: its cells, and the rest of a long summary wrapped on lines of its own."""
    cells = _cells(r)
    parts = textwrap.wrap(cells[-1], summary_width, break_on_hyphens=False) or [""]
    blank = [""] * (len(cells) - 1)
    return [[*cells[:-1], parts[0]], *([*blank, part] for part in parts[1:])]


def _summary_width(width: int) -> int:
    """The summary takes what is left, so the fixed columns are never squeezed."""
    return max(20, width - sum(w for _, w, _ in _COLUMNS) - 2 * len(_COLUMNS) - 2)


def _table(rows: Sequence[TimelineRow], *, header: bool, width: int = 200) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, show_header=header, header_style="bold", pad_edge=False)
    for name, col_width, justify in _COLUMNS:
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


_STYLED = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")
"""Environment variables with which rich styles (or sizes) what it writes to a pipe: then rich draws the table."""


def _plain(session_id: str, rows: Sequence[TimelineRow]) -> str | None:
    """The table as rich draws it to a pipe (agent/cli/_plain_table.py), without rich; None on a terminal, or
    when rich would draw it otherwise."""
    if sys.stdout.isatty() or any(name in os.environ for name in _STYLED):
        return None
    from rich.cells import cell_len  # rich's measure of terminal cells, without its console

    from agent.cli._plain_table import Column, plain_table

    title = f"timeline of session {session_id}: {len(rows)} rows, {rows[0].at.astimezone(UTC):%Y-%m-%d} (times UTC)"
    if safe_text(title) != title or "\t" in title or cell_len(title) > _PIPE_WIDTH:
        return None
    columns = [*(Column(name, width, justify) for name, width, justify in _COLUMNS),  # type: ignore[arg-type]
               Column("summary", None, max_width=_summary_width(_PIPE_WIDTH))]
    shown = [line for r in rows for line in _lines(r, _summary_width(_PIPE_WIDTH))]
    lines = plain_table(columns, shown, header=True, page_width=_PIPE_WIDTH)
    return None if lines is None else "".join(f"{line}\n" for line in [title, *lines])


def _console() -> SafeConsole:
    from agent.terminal.safe_text import SafeConsole

    # Piped output is not cut at 80 columns; a terminal uses its own width.
    return SafeConsole(highlight=False, width=None if sys.stdout.isatty() else _PIPE_WIDTH)


def _chain(result: VerifyResult | None) -> dict[str, Any] | None:
    if result is None:
        return None
    return {"ok": result.ok, "rows": result.rows, "first_bad_seq": result.first_bad_seq, "reason": result.reason,
            "head": result.head, "last_seq": result.last_seq}


def _head(head: ChainHead | None) -> dict[str, Any] | None:
    return None if head is None else head.model_dump(mode="json")


def _report_verify(report: ChainReport, as_json: bool) -> None:
    sid, timeline = report.session_id, report.timeline
    if as_json:
        # The first fields are the timeline's (as before the state log had a chain); `ok` is the whole verdict.
        echo_json({"session_id": sid, "ok": report.ok, "rows": timeline.rows if timeline else 0,
                   "first_bad_seq": timeline.first_bad_seq if timeline else None,
                   "reason": (timeline.reason if timeline and not timeline.ok
                              else report.problems[0] if report.problems else None),
                   "head": timeline.head if timeline else None, "verdict": report.verdict,
                   "events": _chain(report.events), "session_head": _head(report.session_head),
                   "ledger_head": _head(report.ledger_head), "problems": list(report.problems),
                   "notes": list(report.notes), "key_id": report.key_id})
    elif report.ok and timeline is not None and report.events is not None:
        echo(f"chain verified: {timeline.rows} rows (session {sid}, head {timeline.head})")
        echo(f"state log verified: {report.events.rows} events (head {report.events.head})")
        ledger = report.ledger_head
        tail = ("; the evidence ledger has none" if ledger is None else "; so does the evidence ledger's"
                if ledger == report.session_head else "; the evidence ledger's lags (see the note)")
        echo(f"heads: the session row's matches the ends (timeline row {timeline.last_seq}, event "
             f"{report.events.last_seq}){tail}")
    if not as_json:
        for note in report.notes:
            echo(f"note: {note}")
    if report.ok:
        return
    first, *rest = report.problems
    echo(f"strata: error: {first}", err=True)
    for problem in rest:
        echo(f"  also: {problem}", err=True)
    if report.verdict == "cannot_verify":
        echo("hint: restore the home's chain.key the database was made with; this database's rows were not "
             "checked", err=True)
    else:
        echo("hint: the database was changed after these rows were written; rows from there on cannot be "
             "trusted (`strata timeline ID --verify --json` lists every finding)", err=True)
    sys.exit(1)


@click.command(name="timeline")
@click.argument("session_ref", metavar="SESSION_ID")
@click.option("--kind", "kinds", multiple=True, metavar="KIND",
              help=f"Only rows of this kind ({', '.join(TIMELINE_KINDS)}). Repeatable.")
@click.option("--tool", "tools", multiple=True, metavar="TOOL", help="Only rows about this tool. Repeatable.")
@click.option("--decision", "decisions", multiple=True, type=click.Choice(TIMELINE_DECISIONS),
              help="Only rows with this decision. Repeatable.")
@click.option("--turn", type=click.IntRange(min=0, max=_SQLITE_INT_MAX), default=None, help="Only rows of this turn.")
@click.option("--since", metavar="SEQ|TIME", default=None,
              help="Rows from this seq number, or from this ISO time on (UTC if no offset is given).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option("--follow", is_flag=True, help="Keep printing new rows while the session runs.")
@click.option("--verify", is_flag=True, help="Recompute the hash chain; exit 1 naming the first bad row.")
@click.option("--children", is_flag=True,
              help="Merge the rows of the sessions it delegated to in place, after each delegate call's dispatch.")
def timeline(session_ref: str, kinds: tuple[str, ...], tools: tuple[str, ...], decisions: tuple[str, ...],
             turn: int | None, since: str | None, as_json: bool, follow: bool, verify: bool, children: bool) -> None:
    """Show what the runtime observed in session SESSION_ID: phases, model attempts, every call with its
    decision and outcome, hooks, approvals, receipts. Times are UTC."""
    if verify and (kinds or tools or decisions or turn is not None or since is not None or follow):
        raise click.UsageError("--verify checks the whole chain; it takes no filters and no --follow")
    if children and (verify or follow):
        raise click.UsageError("--children merges finished rows; it takes no --verify and no --follow")
    since_seq, since_at = _since(since)
    filters: dict[str, Any] = {"kinds": kinds or None, "tools": tools or None, "decisions": decisions or None,
                               "turn": turn, "since_seq": since_seq, "since_at": since_at}
    cmd = Command()

    async def main() -> ChainReport | None:
        async with cmd.reader(await cmd.session_config(session_id=session_ref)) as rt:
            session_id = cmd.session_id
            await _check_kinds(rt, session_id, kinds)
            if verify:
                return await verify_chains(rt.store, session_id, rt.ledger_head(session_id))
            if children:
                merged = await timeline_with_children(rt.store, session_id, **filters)
                filtered = any(value is not None for value in filters.values())
                _print(session_id, [_nested(row, depth) if not as_json else row for row, depth in merged], as_json,
                       filtered, rt.masker)
            elif follow:
                await _follow(rt, session_id, filters, as_json)
            else:
                filtered = any(value is not None for value in filters.values())
                _print(session_id, await load_timeline(rt.store, session_id, **filters), as_json, filtered,
                       rt.masker)
        return None

    result = cmd.run(main)
    if result is not None:
        _report_verify(result, as_json)


async def _check_kinds(rt: Reader, session_id: str, kinds: tuple[str, ...]) -> None:
    """`--kind` takes a kind Strata writes, or one the session's rows hold (an older Strata's); another is a
    usage error listing the valid kinds, as click does for `--decision`."""
    unknown = [k for k in kinds if k not in TIMELINE_KINDS]
    if not unknown:
        return
    held = {r.kind for r in await rt.store.read_timeline(session_id, kinds=unknown)}
    wrong = [k for k in unknown if k not in held]
    if wrong:
        raise UsageError(f"invalid value for --kind: {wrong[0]!r} is not one of {', '.join(TIMELINE_KINDS)}",
                         hint="repeat --kind for several kinds")


def _nested(row: TimelineRow, depth: int) -> TimelineRow:
    """A child's row as the merged table shows it: its summary indented and naming the child (its JSON record
    keeps its own session id and every hashed field as stored)."""
    if depth == 0:
        return row
    return row.model_copy(update={"summary": f"{'  ' * depth}[child {row.session_id[:8]}] {row.summary}"})


def _id_masker(masker: Masker) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Masks a row record's call id (the model chose it): rows are masked when written, ids again on the way out,
    so a row stored with a secret id never shows it. Cached per id, since a call has several rows."""
    mask = functools.lru_cache(maxsize=4096)(masker.mask)

    def masked(record: dict[str, Any]) -> dict[str, Any]:
        if record.get("call_id"):
            record["call_id"] = mask(record["call_id"])
        return record

    return masked


def _print(session_id: str, rows: list[TimelineRow], as_json: bool, filtered: bool, masker: Masker) -> None:
    if as_json:
        if rows:
            masked = _id_masker(masker)
            echo_document("".join(json_line(masked(timeline_record(r))) + "\n" for r in rows))
        return
    if not rows:
        echo("no timeline rows match" if filtered else f"session {session_id} has no timeline rows yet")
        return
    plain = _plain(session_id, rows)
    if plain is not None:
        echo_document(plain)  # inert already: every cell and the title went through safe_text
        return
    console = _console()
    console.print(f"timeline of session {session_id}: {len(rows)} rows, {rows[0].at.astimezone(UTC):%Y-%m-%d} "
                  "(times UTC)", markup=False)
    console.print(_table(rows, header=True, width=console.width))


async def _follow(rt: Reader, session_id: str, filters: dict[str, Any], as_json: bool) -> None:
    console = None if as_json else _console()
    masked = _id_masker(rt.masker)
    first = True
    async for row in follow(rt.store, session_id, alive=make_liveness(rt.clock), **filters):
        if console is None:
            echo_json(masked(timeline_record(row)))
        else:
            console.print(_table([row], header=first, width=console.width))
        first = False
        if output_lost():  # nobody reads any more (`| head`), or nothing can take the output: stop following
            return
