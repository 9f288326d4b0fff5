"""`strata timeline ID`: what the runtime observed in a session, as a table or one JSON object per line;
`--follow` tails a live session, `--verify` re-checks both keyed hash chains and the recorded heads against the
database and the evidence ledger (observability/chain_verify.py).

The table or the JSON lines of a session in a SQLite home are printed the quick way (agent/cli/quick_timeline.py)
when they can be;
everything else, errors included, goes the full way (agent/cli/_timeline_full.py). This module imports neither
until it knows which."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import click

from agent.cli.logging_setup import full_way
from agent.cli.output import echo
from agent.cli.timeline_table import TIMELINE_KINDS
from core.vocabulary import TIMELINE_DECISIONS

_SQLITE_INT_MAX = (1 << 63) - 1
"""The largest number an SQLite INTEGER holds: a larger --turn is a usage error, not a failed query."""


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
    if not (follow or verify or children or full_way.asked()):
        from agent.cli.quick_timeline import quick_timeline

        try:
            if quick_timeline(session_ref, filters, as_json=as_json):
                return
        except KeyboardInterrupt:
            echo("strata: interrupted", err=True)
            raise SystemExit(130) from None
    full_way.enter()
    from agent.cli._timeline_full import run_full

    run_full(session_ref, filters, as_json=as_json, follow_rows=follow, verify=verify, children=children)
