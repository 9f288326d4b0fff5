"""`strata timeline` the full way: the store opened by the reading parts (agent/reading.py) with the session's
config, for what the quick way (agent/cli/quick_timeline.py) does not answer: `--follow`, `--verify`, `--children`,
a home on PostgreSQL, a config file not yet known valid, `--json` where its masking needs the full way, and every
error."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from agent.cli._common import Command
from agent.cli.output import echo, echo_document, echo_json, say_error
from agent.cli.stdout import output_lost
from agent.cli.timeline_table import TIMELINE_KINDS, console, print_rows, table
from agent.reading import Reader
from core.chain import ChainHead, VerifyResult
from core.errors import UsageError
from core.masking import Masker
from core.terminal_text import json_line
from core.timeline import TimelineRow
from memory.leases import make_liveness
from observability.chain_verify import ChainReport, verify_chains
from observability.child_sessions import timeline_with_children
from observability.session_timeline import follow, load_timeline, shown_record


def run_full(session_ref: str, filters: dict[str, Any], *, as_json: bool, follow_rows: bool, verify: bool,
             children: bool) -> None:
    cmd = Command()
    kinds: tuple[str, ...] = filters["kinds"] or ()

    async def main() -> ChainReport | None:
        async with cmd.reader(await cmd.session_config(session_id=session_ref)) as rt:
            session_id = cmd.session_id
            await _check_kinds(rt, session_id, kinds)
            if verify:
                return await verify_chains(rt.store, session_id, rt.ledger_head(session_id))
            filtered = any(value is not None for value in filters.values())
            if children:
                merged = await timeline_with_children(rt.store, session_id, **filters)
                _print(session_id, [_nested(row, depth) if not as_json else row for row, depth in merged], as_json,
                       filtered, rt.masker)
            elif follow_rows:
                await _follow(rt, session_id, filters, as_json)
            else:
                _print(session_id, await load_timeline(rt.store, session_id, **filters), as_json, filtered,
                       rt.masker)
        return None

    result = cmd.run(main)
    if result is not None:
        _report_verify(result, as_json)


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
    if report.verdict == "cannot_verify":
        hint = "restore the home's chain.key the database was made with; this database's rows were not checked"
    else:
        hint = ("the database was changed after these rows were written; rows from there on cannot be trusted "
                "(`strata timeline ID --verify --json` lists every finding)")
    say_error(first, hint, listing=[f"also: {problem}" for problem in rest])
    sys.exit(1)


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


def _id_masker(masker: Masker) -> Callable[[TimelineRow], dict[str, Any]]:
    """A row as `--json` shows it (`shown_record`), the masking cached per value, since a call has several rows."""
    mask = functools.lru_cache(maxsize=4096)(masker.mask)
    return lambda row: shown_record(row, mask)


def _print(session_id: str, rows: list[TimelineRow], as_json: bool, filtered: bool, masker: Masker) -> None:
    if not as_json:
        print_rows(session_id, rows, filtered)
    elif rows:
        masked = _id_masker(masker)
        echo_document("".join(json_line(masked(r)) + "\n" for r in rows))


async def _follow(rt: Reader, session_id: str, filters: dict[str, Any], as_json: bool) -> None:
    out = None if as_json else console()
    masked = _id_masker(rt.masker)
    first = True
    async for row in follow(rt.store, session_id, alive=make_liveness(rt.clock), **filters):
        if out is None:
            echo_json(masked(row))
        else:
            out.print(table([row], header=first, width=out.width))
        first = False
        if output_lost():  # nobody reads any more (`| head`), or nothing can take the output: stop following
            return
