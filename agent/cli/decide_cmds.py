"""`strata approve SESSION CALL` and `strata deny SESSION CALL [--reason]`: decide a parked call from any
terminal; `strata resume SESSION` then continues the session."""

from __future__ import annotations

import click

from agent.cli._common import Command
from agent.cli.output import echo
from agent.parked_decisions import Recorded, record_decision
from agent.reconcile import person


def _report(rec: Recorded, session_id: str) -> None:
    verb = "approved" if rec.approved else "denied"
    echo(f"{verb} call {rec.call.call_id} ({rec.call.tool}) of session {session_id}")
    if rec.still_waiting:
        echo(f"still waiting for a decision: {', '.join(rec.still_waiting)}")
    else:
        echo(f"continue it: strata resume {session_id}")


def _decide(session_id: str, call_id: str, approve: bool, reason: str) -> None:
    cmd = Command()
    who = person("strata approve" if approve else "strata deny")

    async def main() -> Recorded:
        async with cmd.runtime(await cmd.session_config(session_id=session_id)) as rt:
            return await record_decision(rt, session_id, call_id, approve=approve, approver=who, reason=reason)

    _report(cmd.run(main), session_id)


@click.command()
@click.argument("session_id")
@click.argument("call_id")
def approve(session_id: str, call_id: str) -> None:
    """Approve a call parked in SESSION_ID (for exactly the arguments it was parked with)."""
    _decide(session_id, call_id, True, "")


@click.command()
@click.argument("session_id")
@click.argument("call_id")
@click.option("--reason", default="", help="Told to the model with the denial.")
def deny(session_id: str, call_id: str, reason: str) -> None:
    """Deny a call parked in SESSION_ID."""
    _decide(session_id, call_id, False, reason)
