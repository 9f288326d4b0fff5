"""`strata fork ID --at POSITION | --at-turn T | --at-event SEQ`: a new session that starts from another's log up to
a point where no batch is open; `strata fork ID --points` lists those points (agent/fork_points.py)."""

from __future__ import annotations

import dataclasses

import click

from agent.cli._common import Command
from agent.cli.output import echo, echo_json
from agent.fork import ForkResult, fork_session
from agent.fork_points import ForkPoint, event_at_position, fork_points, point_at_turn
from core.masking import Masker
from core.timeline import shown_rows
from memory.store import EventStore


async def _target(store: EventStore, session_id: str, at: int | None, at_turn: int | None,
                  at_event: int | None) -> tuple[int, int | None]:
    """The event seq to fork at, and the timeline position given (None when the point was named otherwise)."""
    if at_event is not None:
        return at_event, None
    events = await store.read_events(session_id)
    if at_turn is not None:
        return point_at_turn(session_id, events, at_turn), None
    assert at is not None
    return event_at_position(session_id, events, shown_rows(await store.read_timeline(session_id)), at), at


def _points(cmd: Command, session_ref: str, as_json: bool) -> None:
    async def main() -> list[ForkPoint]:
        async with cmd.reader(await cmd.session_config(session_id=session_ref)) as rt:
            sid = cmd.session_id
            return fork_points(sid, await rt.store.read_events(sid), shown_rows(await rt.store.read_timeline(sid)))

    points = cmd.run(main)
    sid = cmd.session_id
    if as_json:
        for p in points:
            echo_json({"type": "fork_point", "session_id": sid, "position": p.position, "event_seq": p.event_seq,
                       "turn": p.turn, "last_call": p.last_call})
        return
    if not points:
        echo(f"session {sid} has no point a fork can be taken at yet")
        return
    echo(f"fork points of session {sid} (fork with `strata fork {sid} --at POSITION`):")
    echo(f"  {'position':>8}  {'turn':>4}  {'event':>5}  last call before it")
    for p in points:
        echo(f"  {p.position:>8}  {p.turn:>4}  {p.event_seq:>5}  {p.last_call or '-'}")


@click.command(name="fork")
@click.argument("session_id")
@click.option("--at", "at", type=int, default=None, metavar="POSITION",
              help="The timeline position (the seq column of `strata timeline`) to fork after.")
@click.option("--at-turn", type=click.IntRange(min=0), default=None, metavar="TURN",
              help="Fork at the end of this model turn (0: before the model's first answer).")
@click.option("--at-event", type=int, default=None, metavar="SEQ",
              help="The last state event to keep (its seq in `strata export --format jsonl`).")
@click.option("--points", is_flag=True, help="List the points a fork can be taken at, and fork nothing.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (per point, with --points).")
def fork(session_id: str, at: int | None, at_turn: int | None, at_event: int | None, points: bool,
         as_json: bool) -> None:
    """Fork session SESSION_ID at a timeline position (or a turn, or an event) into a new session. Effects up to
    the fork point are never re-run; resume the new session to continue from there."""
    named = sum(x is not None for x in (at, at_turn, at_event))
    if points:
        if named:
            raise click.UsageError("--points lists the fork points; leave out --at, --at-turn and --at-event")
        _points(Command(), session_id, as_json)
        return
    if named != 1:
        raise click.UsageError("say where to fork: --at POSITION, --at-turn TURN or --at-event SEQ (one of them); "
                               "--points lists the positions")
    cmd = Command()

    async def main() -> tuple[ForkResult, int | None]:
        async with cmd.runtime(await cmd.session_config(session_id=session_id)) as rt:
            seq, position = await _target(rt.store, cmd.session_id, at, at_turn, at_event)
            return masked(await fork_session(rt, cmd.session_id, seq), rt.masker), position

    result, position = cmd.run(main)
    resume = f"strata resume {result.session_id} PROMPT"
    if as_json:
        echo_json({"type": "fork", "session_id": result.session_id, "parent_id": result.parent_id,
                   "fork_seq": result.fork_seq, "position": position, "events": result.events,
                   "turns": result.turns, "status": result.status, "resume": resume,
                   "inherited_rules": list(result.rules), "inherited_grants": list(result.grants),
                   "later_calls": list(result.later_calls)})
        return
    where = f"timeline position {position} (event {result.fork_seq})" if position is not None \
        else f"event {result.fork_seq}"
    echo(f"forked session {result.parent_id} at {where} into {result.session_id} "
         f"({result.events} events, {result.turns} turn{'' if result.turns == 1 else 's'}; effects before the fork "
         "point are not re-run)")
    echo(f"resume it: {resume}")
    for line in fork_warnings(result):
        echo(line)


def masked(result: ForkResult, masker: Masker) -> ForkResult:
    """The result as it is shown: its workspace, inherited rules (an --allow pattern can hold a secret) and later
    calls (their ids and tools were the model's) masked, as every other output masks them."""
    return dataclasses.replace(result, workspace=masker.mask(result.workspace),
                               rules=tuple(masker.mask(r) for r in result.rules),
                               grants=tuple(masker.mask(g) for g in result.grants),
                               later_calls=tuple(masker.mask(c) for c in result.later_calls))


def fork_warnings(result: ForkResult) -> list[str]:
    """What resuming the fork can do again, and the session rules and "always" approvals it carries over."""
    lines = []
    if result.later_calls:
        shown = ", ".join(result.later_calls[:8]) + (" ..." if len(result.later_calls) > 8 else "")
        lines.append(f"warning: the parent has {len(result.later_calls)} call(s) after the fork point ({shown}); "
                     f"resuming the fork may propose them again and run them again in the same workspace "
                     f"({result.workspace})")
    if result.rules:
        lines.append(f"the fork inherits the session rules: {'; '.join(result.rules)}")
    else:
        lines.append("the fork inherits no session rules (pass --allow/--deny to `strata resume` as needed)")
    if result.grants:
        lines.append(f"the fork inherits the \"always\" approvals of the log it copied: "
                     f"{'; '.join(result.grants)}; calls they cover run without asking (a --deny rule on "
                     "`strata resume` still refuses them)")
    return lines
