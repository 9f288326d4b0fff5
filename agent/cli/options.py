"""Options several commands share, declared without what the commands run: a command with a quick way declares them
before it knows which way it takes, and `strata run` / `strata resume` (agent/cli/session_cmds.py) parse them
before they import the session machinery."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from config.locations import expand_user
from core.errors import ConfigError
from core.utf8 import unpaired_surrogates

json_option = click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
allow_option = click.option("--allow", multiple=True, metavar="RULE",
                            help="Allow a tool, optionally with a pattern: bash, 'bash(git status*)'. Repeatable.")
deny_option = click.option("--deny", multiple=True, metavar="RULE", help="Deny a tool (beats allow). Repeatable.")
without_project_hooks_option = click.option(
    "--without-project-hooks", is_flag=True,
    help="Continue a session without its project's hooks although it started with them trusted (recorded in the "
         "session as your choice); otherwise such a resume is refused until the project is trusted again.")
on_ask_option = click.option("--on-ask", type=click.Choice(["deny", "park"]), default=None,
                             help="What `ask` means with no person at the terminal: deny the call (default), or park "
                                  "the session (exit 4) until `strata approve` / `strata deny`.")


class WorkspacePath(click.Path):
    """A workspace directory as given: one that is a symlink loop is refused as the option's bad value (every later
    step resolves it, and Path.resolve raises RuntimeError on a loop)."""

    def __init__(self) -> None:
        super().__init__(path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = Path(os.fsdecode(super().convert(value, param, ctx)))  # path_type=Path: a Path already
        try:
            resolved = expand_user(str(path)).resolve()
        except ConfigError as exc:  # `~name` of a user the system does not have
            self.fail(f"workspace {exc.message}", param, ctx)
        except (RuntimeError, OSError) as exc:
            reason = getattr(exc, "strerror", None) or "a symlink loop"
            self.fail(f"workspace {path} cannot be resolved: {reason}", param, ctx)
        if unpaired_surrogates(str(resolved)):  # bytes argv or a directory name holds that are not UTF-8
            shown = os.fsencode(resolved).decode("utf-8", "backslashreplace")
            self.fail(f"workspace {shown} is not UTF-8: a session records its workspace as text; rename the "
                      "directory or give another", param, ctx)
        return path
