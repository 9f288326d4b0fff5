"""Everything the `strata` command line prints goes through here, so that nothing it did not produce reaches a
terminal as a control sequence (core/terminal_text.py): text lines are sanitised, JSON lines are inert
JSON. A test keeps the other CLI modules from calling `click.echo` directly."""

from __future__ import annotations

from typing import Any

import click

from core.terminal_text import json_line, json_text, safe_text


def echo(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    click.echo(safe_text(text), err=err, nl=nl)


def echo_json(obj: Any) -> None:
    click.echo(json_line(obj))


def echo_document(text: str) -> None:
    """A document printed whole (JSON lines, an export to stdout): every control but newline and tab escaped as
    `\\u00XX`, which a JSON reader reads back as the same text (JSON holds no raw controls outside strings) and
    which shows as inert text anywhere else."""
    click.echo(json_text(text), nl=False)
