"""`strata fork ID --at SEQ`: a new session that starts from another's log up to a batch boundary."""

from __future__ import annotations

import click

from agent.cli._common import Command
from agent.cli.output import echo, echo_json
from agent.fork import ForkResult, fork_session


@click.command(name="fork")
@click.argument("session_id")
@click.option("--at", "at_seq", type=int, required=True, metavar="SEQ",
              help="The last event to keep: a batch boundary (after a batch_completed, or where no batch is open).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
def fork(session_id: str, at_seq: int, as_json: bool) -> None:
    """Fork session SESSION_ID at event SEQ into a new session. Effects up to SEQ are never re-run; resume the
    new session to continue from there."""
    cmd = Command()

    async def main() -> ForkResult:
        async with cmd.runtime(await cmd.session_config(session_id=session_id)) as rt:
            return await fork_session(rt, cmd.session_id, at_seq)

    result = cmd.run(main)
    resume = f"strata resume {result.session_id} PROMPT"
    if as_json:
        echo_json({"type": "fork", "session_id": result.session_id, "parent_id": result.parent_id,
                   "fork_seq": result.fork_seq, "events": result.events, "turns": result.turns,
                   "status": result.status, "resume": resume})
        return
    echo(f"forked session {result.parent_id} at seq {result.fork_seq} into {result.session_id} "
         f"({result.events} events, {result.turns} turns; effects before the fork point are not re-run)")
    echo(f"resume it: {resume}")
