"""`strata doctor` and `strata demo`: the commands a newcomer runs first, to see that Strata can work here and what
it is for. Neither builds a runtime of its own (the demo drives real `strata` processes)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from agent.cli._common import fail
from agent.cli.options import WorkspacePath
from agent.cli.output import echo
from core.errors import StrataError


@click.command()
@click.option("--workspace", type=WorkspacePath(), default=".", show_default=True,
              help="Whose project config to check.")
def doctor(workspace: Path) -> None:
    """Check that Strata can work here: Python, config, home, database, masking key, model, bash, terminal."""
    from agent.doctor import report, run_checks

    sys.exit(report(run_checks(workspace), echo))


@click.command()
def demo() -> None:
    """Run the offline demo: a scripted session that is killed mid-batch and resumed by id."""
    from agent.demo import run_demo

    try:
        code = run_demo(echo)
    except StrataError as err:
        fail(err)
    sys.exit(code)
