"""`strata run PROMPT` and `strata resume ID [PROMPT]`: drive a session headless to its end, print its events (or
one JSON object per committed event) and a final result, and exit with the outcome's code.

This module declares the two commands and nothing of what they run: their arguments are parsed (a usage error, or
`--help`, said) before the session machinery, the model SDKs' glue and structlog are imported. Each command's body
imports agent/cli/_session_run.py first (agent/cli/_lazy.py `import_body`: the collector paused meanwhile, the
start-up code kept), then sets up logging (agent/cli/logging_setup.py), then runs."""

from __future__ import annotations

from pathlib import Path

import click

from agent.cli._lazy import import_body
from agent.cli.logging_setup import full_way
from agent.cli.options import (
    WorkspacePath,
    allow_option,
    deny_option,
    json_option,
    on_ask_option,
    without_project_hooks_option,
)

_BODY = "agent.cli._session_run"


@click.command()
@click.option("--model", "model_spec", metavar="M",
              help="script:PATH (offline) or anthropic:NAME; default: the config's model, else `anthropic` (as chat).")
@click.option("--workspace", type=WorkspacePath(), default=".", show_default=True,
              help="Directory the tools may touch.")
@allow_option
@deny_option
@click.option("--max-turns", type=int, default=None, help="Stop as incomplete after this many model turns.")
@on_ask_option
@json_option
@click.argument("prompt")
def run(model_spec: str | None, workspace: Path, allow: tuple[str, ...], deny: tuple[str, ...],
        max_turns: int | None, on_ask: str | None, as_json: bool, prompt: str) -> None:
    """Run a headless session on PROMPT."""
    import_body(_BODY)
    full_way.enter()
    from agent.cli._session_run import run_session

    run_session(model_spec, workspace, allow, deny, max_turns, on_ask, as_json, prompt)


@click.command()
@click.argument("session_id")
@click.argument("prompt", required=False)
@click.option("--model", "model_spec", metavar="M", help="Override the session's recorded model.")
@allow_option
@deny_option
@click.option("--max-turns", type=click.IntRange(min=1), default=None,
              help="A new limit on the session's total model turns (to continue an incomplete session).")
@on_ask_option
@without_project_hooks_option
@click.option("--kill-orphans", is_flag=True,
              help="If a command of the open batch still runs although the process that started it was killed, "
                   "kill its process group (by default resume waits for it up to the lock timeout, then exits 6).")
@json_option
def resume(session_id: str, prompt: str | None, model_spec: str | None, allow: tuple[str, ...],
           deny: tuple[str, ...], max_turns: int | None, on_ask: str | None, without_project_hooks: bool,
           kill_orphans: bool, as_json: bool) -> None:
    """Resume session SESSION_ID by id, optionally with a new PROMPT."""
    import_body(_BODY)
    full_way.enter()
    from agent.cli._session_run import resume_session_cmd

    resume_session_cmd(session_id, prompt, model_spec, allow, deny, max_turns, on_ask, without_project_hooks,
                       kill_orphans, as_json)
