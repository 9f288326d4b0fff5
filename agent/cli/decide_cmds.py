"""`strata approve SESSION CALL|--all` and `strata deny SESSION CALL|--all [--reason]`: decide parked calls from
any terminal; `strata resume SESSION` then continues the session. SESSION may be a unique prefix or `last`, CALL
a unique prefix (agent/ids.py)."""

from __future__ import annotations

import click

from agent.cli._common import Command
from agent.cli.output import echo
from agent.parked_decisions import Recorded, record_decisions
from agent.reconcile import person
from agent.session import is_channel_session

CHANNEL_GOES_ON = "the thread's next message continues it in the serve daemon running its channel"


def waiting_hints(session_id: str, waiting: tuple[str, ...], *, channel: bool = False) -> list[str]:
    """What to do about a session's calls that still wait for a decision, or how to continue it when none does
    (a channel's thread session is continued by its daemon, never by `strata resume`: agent/session.py)."""
    goes_on = CHANNEL_GOES_ON if channel else f"strata resume {session_id}"
    if not waiting:
        return [f"continue it: {goes_on}"]
    return [f"still waiting for a decision: {', '.join(waiting)}",
            f"  approve: strata approve {session_id} CALL_ID (or --all)    "
            f"deny: strata deny {session_id} CALL_ID --reason TEXT (or --all)",
            f"once every call is decided: {goes_on}"]


def _report(recs: list[Recorded], session_id: str, channel: bool) -> None:
    for rec in recs:
        verb = "approved" if rec.approved else "denied"
        echo(f"{verb} call {rec.call.call_id} ({rec.call.tool}) of session {session_id}")
    for line in waiting_hints(session_id, recs[-1].still_waiting, channel=channel):
        echo(line)


def _decide(session_ref: str, call_id: str | None, every: bool, approve: bool, reason: str) -> None:
    verb = "approve" if approve else "deny"
    if every == (call_id is not None):
        raise click.UsageError(f"name the call to {verb}, or give --all for every call waiting in the session")
    cmd = Command()
    who = person(f"strata {verb}")

    async def main() -> tuple[list[Recorded], bool]:
        async with cmd.runtime(await cmd.session_config(session_id=session_ref)) as rt:
            recs = await record_decisions(rt, cmd.session_id, None if every else [call_id or ""], approve=approve,
                                          approver=who, reason=reason)
            return recs, is_channel_session(await rt.store.get_session(cmd.session_id))

    recs, channel = cmd.run(main)
    _report(recs, cmd.session_id, channel)


all_option = click.option("--all", "every", is_flag=True, help="Every call waiting in the session, at once.")


@click.command()
@click.argument("session_id")
@click.argument("call_id", required=False)
@all_option
def approve(session_id: str, call_id: str | None, every: bool) -> None:
    """Approve a call parked in SESSION_ID (for exactly the arguments it was parked with)."""
    _decide(session_id, call_id, every, True, "")


@click.command()
@click.argument("session_id")
@click.argument("call_id", required=False)
@all_option
@click.option("--reason", default="", help="Told to the model with the denial.")
def deny(session_id: str, call_id: str | None, every: bool, reason: str) -> None:
    """Deny a call parked in SESSION_ID."""
    _decide(session_id, call_id, every, False, reason)
