"""The command table, imported lazily: `strata --help` names every command without importing one, and a command
imports only its own module (so `strata sessions` never loads the executor, the model SDK or the terminal UI).
Each entry carries its one-line help for the listing; tests/cli/test_startup_imports.py keeps those lines equal to
the commands' own docstrings."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import click

from core.record import record


@record
class Entry:
    """One command of the table: its name, where it lives, and its one-line help."""

    name: str
    target: str
    """`module:attribute` of the click command."""
    short_help: str
    quick: bool = False
    """The command sets up logging itself (agent/cli/logging_setup.py): its module is imported without structlog
    first. A quick way needs no logging and the full way sets it up; `strata show` sets it up at its first record."""
    settles: bool = False
    """The command's module declares its arguments only: its body imports what it runs (`import_body`, with the
    group's hooks around that import instead of around the module's) and sets up logging itself, so that its
    arguments are parsed (a usage error said, `--help` shown) before any of it is imported."""


class LazyGroup(click.Group):
    """A click group whose subcommands are imported when one is invoked (or its own help is asked for)."""

    def __init__(self, *args: object, entries: tuple[Entry, ...], before_import: Callable[[], None] | None = None,
                 after_import: Callable[[], None] | None = None, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._entries = {entry.name: entry for entry in entries}
        self._before_import = before_import
        """Called before a command's module is imported (not for the listing)."""
        self._after_import = after_import
        """Called once a command's module is imported."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self._entries)

    def invoke(self, ctx: click.Context) -> Any:
        """The command, with Ctrl-C before its body takes the interrupt over (while its module is imported, its
        config read) ended as the body ends it: `strata: interrupted`, exit 130 (click's own way says "Aborted!"
        and exits 1)."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            from agent.cli.output import echo

            echo("strata: interrupted", err=True)
            raise SystemExit(130) from None

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = self._entries.get(cmd_name)
        if entry is None:
            return None
        module, attribute = entry.target.split(":")
        if self._before_import is not None and not (entry.quick or entry.settles):
            self._before_import()
        command = getattr(importlib.import_module(module), attribute)
        if self._after_import is not None and not entry.settles:
            self._after_import()
        assert isinstance(command, click.Command), entry.target
        return command

    def import_body(self, module: str) -> None:
        """`module` imported between the hooks a command's module is imported between (`Entry.settles`)."""
        if self._before_import is not None:
            self._before_import()
        importlib.import_module(module)
        if self._after_import is not None:
            self._after_import()

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The listing from the table, without importing the commands."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        # click shortens a help line for the listing; a bare command of that help shortens it the same way
        rows = [(name, click.Command(name, help=self._entries[name].short_help).get_short_help_str(limit))
                for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def import_body(module: str) -> None:
    """What the body of a command whose entry `settles` runs first: `module`, what the command runs, imported as the
    group imports a command's module (LazyGroup `import_body`); plainly imported under any other group."""
    group = click.get_current_context().find_root().command
    if isinstance(group, LazyGroup):
        group.import_body(module)
    else:
        importlib.import_module(module)
