"""Everything the `strata` command line prints goes through here, so that nothing it did not produce reaches a
terminal as a control sequence (agent/terminal/safe_text.py): text lines are sanitised, JSON lines are inert
JSON. A test keeps the other CLI modules from calling `click.echo` directly."""

from __future__ import annotations

from typing import Any

import click

from agent.terminal.safe_text import json_line, json_text, safe_text


def echo(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    click.echo(safe_text(text), err=err, nl=nl)


def echo_json(obj: Any) -> None:
    click.echo(json_line(obj))


def echo_json_text(text: str) -> None:
    """Text that is JSON already (JSON lines of an export, printed as they are): made inert without changing what
    a JSON reader gets."""
    click.echo(json_text(text), nl=False)
