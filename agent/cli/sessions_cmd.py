"""`strata sessions`: the quick way when it can (agent/cli/quick_sessions.py), the full way otherwise
(agent/cli/inspect_cmds.py `list_sessions`), which also reports every error. This module imports neither until it
knows which."""

from __future__ import annotations

import click

from agent.cli.logging_setup import full_way
from agent.cli.options import json_option
from agent.cli.output import echo


@click.command()
@json_option
def sessions(as_json: bool) -> None:
    """List sessions, oldest first, each delegated child indented under its parent."""
    if not full_way.asked():
        from agent.cli.quick_sessions import quick_sessions

        try:
            if quick_sessions(as_json):
                return
        except KeyboardInterrupt:
            echo("strata: interrupted", err=True)
            raise SystemExit(130) from None
    full_way.enter()
    from agent.cli.inspect_cmds import list_sessions

    list_sessions(as_json)
