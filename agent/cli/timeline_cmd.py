"""`strata timeline ID`: what the runtime observed in a session, as a table or one JSON object per line;
`--follow` tails a live session, `--verify` re-checks the hash chain against the database."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from agent.cli.stdout import output_lost
from agent.session import Runtime, runtime
from core.timeline import TIMELINE_DECISIONS, TimelineRow, VerifyResult
from memory.leases import make_liveness
from observability.session_timeline import follow, load_timeline, timeline_record, verify_session

_SQLITE_INT_MAX = (1 << 63) - 1
"""The largest number an SQLite INTEGER holds: a larger --turn is a usage error, not a failed query."""
_DECISION_STYLE = {"allowed": "green", "approved": "green", "denied": "red", "rejected": "red", "parked": "yellow"}
# Fixed widths (all but the summary), so the tables `--follow` prints one row at a time line up.
_COLUMNS: tuple[tuple[str, int, str], ...] = (
    ("seq", 6, "right"), ("time", 12, "left"), ("turn", 4, "right"), ("kind", 13, "left"), ("tool", 14, "left"),
    ("decision", 8, "left"), ("outcome", 10, "left"), ("duration", 8, "right"),
)


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


def _table(rows: Sequence[TimelineRow], *, header: bool, width: int = 200) -> Table:
    table = Table(box=None, show_header=header, header_style="bold", pad_edge=False)
    for name, col_width, justify in _COLUMNS:
        table.add_column(name, width=col_width, justify=justify, no_wrap=True,  # type: ignore[arg-type]
                         overflow="ellipsis")
    # The summary takes what is left, so the fixed columns are never squeezed.
    rest = max(20, width - sum(w for _, w, _ in _COLUMNS) - 2 * len(_COLUMNS) - 2)
    table.add_column("summary", no_wrap=True, overflow="ellipsis", max_width=rest)
    for r in rows:
        # Text, not markup: summaries hold arbitrary (masked) text such as "[MASKED:...]".
        table.add_row(
            Text(str(r.seq)), Text(r.at.astimezone(UTC).strftime("%H:%M:%S.%f")[:-3]), Text(str(r.turn)),
            Text(r.kind), Text(r.tool or ""), Text(r.decision or "", style=_DECISION_STYLE.get(r.decision or "", "")),
            Text(r.outcome or ""), Text(_duration(r.duration_ms)), Text(r.summary.replace("\n", " | ")),
        )
    return table


def _console() -> Console:
    # Piped output is not cut at 80 columns; a terminal uses its own width.
    return Console(highlight=False, width=None if sys.stdout.isatty() else 200)


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False)


def _report_verify(session_id: str, result: VerifyResult, as_json: bool) -> None:
    if as_json:
        click.echo(_line({"session_id": session_id, "ok": result.ok, "rows": result.rows,
                          "first_bad_seq": result.first_bad_seq, "reason": result.reason, "head": result.head}))
    elif result.ok:
        click.echo(f"chain verified: {result.rows} rows (session {session_id}, head {result.head})")
    if not result.ok:
        click.echo(f"strata: error: timeline of session {session_id}: {result.reason}", err=True)
        click.echo("hint: the database was changed after these rows were written; rows from there on cannot be "
                   "trusted", err=True)
        sys.exit(1)


@click.command(name="timeline")
@click.argument("session_id")
@click.option("--kind", "kinds", multiple=True, metavar="KIND",
              help="Only rows of this kind (phase, model_attempt, call, hook, approval, receipt, ...). Repeatable.")
@click.option("--tool", "tools", multiple=True, metavar="TOOL", help="Only rows about this tool. Repeatable.")
@click.option("--decision", "decisions", multiple=True, type=click.Choice(TIMELINE_DECISIONS),
              help="Only rows with this decision. Repeatable.")
@click.option("--turn", type=click.IntRange(min=0, max=_SQLITE_INT_MAX), default=None, help="Only rows of this turn.")
@click.option("--since", metavar="SEQ|TIME", default=None,
              help="Rows from this seq number, or from this ISO time on (UTC if no offset is given).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option("--follow", is_flag=True, help="Keep printing new rows while the session runs.")
@click.option("--verify", is_flag=True, help="Recompute the hash chain; exit 1 naming the first bad row.")
def timeline(session_id: str, kinds: tuple[str, ...], tools: tuple[str, ...], decisions: tuple[str, ...],
             turn: int | None, since: str | None, as_json: bool, follow: bool, verify: bool) -> None:
    """Show what the runtime observed in session SESSION_ID: phases, model attempts, every call with its
    decision and outcome, hooks, approvals, receipts. Times are UTC."""
    # Imported here: main.py registers this command at its end, so main is complete by the time this runs.
    from agent.cli.main import _run, _settings

    if verify and (kinds or tools or decisions or turn is not None or since is not None or follow):
        raise click.UsageError("--verify checks the whole chain; it takes no filters and no --follow")
    since_seq, since_at = _since(since)
    filters: dict[str, Any] = {"kinds": kinds or None, "tools": tools or None, "decisions": decisions or None,
                               "turn": turn, "since_seq": since_seq, "since_at": since_at}
    settings = _settings()

    async def main() -> VerifyResult | None:
        async with runtime(settings, read_only=True) as rt:
            if verify:
                return await verify_session(rt.store, session_id)
            if follow:
                await _follow(rt, session_id, filters, as_json)
            else:
                filtered = any(value is not None for value in filters.values())
                _print(session_id, await load_timeline(rt.store, session_id, **filters), as_json, filtered)
        return None

    result = _run(main)
    if result is not None:
        _report_verify(session_id, result, as_json)


def _print(session_id: str, rows: list[TimelineRow], as_json: bool, filtered: bool) -> None:
    if as_json:
        if rows:
            click.echo("\n".join(_line(timeline_record(r)) for r in rows))
        return
    if not rows:
        click.echo("no timeline rows match" if filtered else f"session {session_id} has no timeline rows yet")
        return
    console = _console()
    console.print(f"timeline of session {session_id}: {len(rows)} rows, {rows[0].at.astimezone(UTC):%Y-%m-%d} "
                  "(times UTC)", markup=False)
    console.print(_table(rows, header=True, width=console.width))


async def _follow(rt: Runtime, session_id: str, filters: dict[str, Any], as_json: bool) -> None:
    console = None if as_json else _console()
    first = True
    async for row in follow(rt.store, session_id, alive=make_liveness(rt.clock), **filters):
        if console is None:
            click.echo(_line(timeline_record(row)))
        else:
            console.print(_table([row], header=first, width=console.width))
        first = False
        if output_lost():  # nobody reads any more (`| head`), or nothing can take the output: stop following
            return
