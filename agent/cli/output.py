"""Everything the `strata` command line prints goes through here, so that nothing it did not produce reaches a
terminal as a control sequence (core/terminal_text.py): text lines are sanitised, JSON lines are inert
JSON. A test keeps the other CLI modules from calling `click.echo` directly."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from core.terminal_text import json_line, json_text, one_line, safe_text


def echo(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    # `color=True`: click would otherwise ask, for every line, whether the stream is a terminal, and strip ANSI
    # styles from what is not; `safe_text` has left none (no ESC survives it), so stripping changes nothing.
    click.echo(safe_text(text), err=err, nl=nl, color=True)


def say_error(message: str, hint: str | None = None, *, listing: Sequence[str] = (),
              prefix: str = "strata: error") -> None:
    """The one way an error is shown on stderr: `PREFIX: MESSAGE` on one line, the lines it lists (indented), and
    `hint: HINT`. Each stays one line whatever it quotes: a line break in a path, a model name or an id the user
    gave is shown escaped (`\\n`), so it cannot add a line that reads as another error of Strata's."""
    echo(f"{prefix}: {one_line(message)}", err=True)
    for line in listing:
        echo(f"  {one_line(line)}", err=True)
    if hint:
        echo(f"hint: {one_line(hint)}", err=True)


def echo_json(obj: Any) -> None:
    click.echo(json_line(obj))


def echo_document(text: str) -> None:
    """A document printed whole (JSON lines, an export to stdout): every control but newline and tab escaped as
    `\\u00XX`, which a JSON reader reads back as the same text (JSON holds no raw controls outside strings) and
    which shows as inert text anywhere else."""
    click.echo(json_text(text), nl=False)
