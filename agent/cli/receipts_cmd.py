"""`strata receipts [ID]`: the quick way when it can (agent/cli/quick_receipts.py), the full way otherwise
(agent/cli/inspect_cmds.py `list_receipts`), which also reports every error. This module imports neither until it
knows which."""

from __future__ import annotations

import click

from agent.cli.logging_setup import full_way
from agent.cli.options import json_option
from agent.cli.output import echo
from core.vocabulary import RECEIPT_STATUSES


@click.command()
@click.argument("session_id", required=False)
@click.option("--status", type=click.Choice(RECEIPT_STATUSES), default=None)
@json_option
def receipts(session_id: str | None, status: str | None, as_json: bool) -> None:
    """List effect receipts (of one session, or all)."""
    if not full_way.asked():
        from agent.cli.quick_receipts import quick_receipts

        try:
            if quick_receipts(session_id, status, as_json):
                return
        except KeyboardInterrupt:
            echo("strata: interrupted", err=True)
            raise SystemExit(130) from None
    full_way.enter()
    from agent.cli.inspect_cmds import list_receipts

    list_receipts(session_id, status, as_json)
