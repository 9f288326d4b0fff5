"""The command table is lazy (agent/cli/_lazy.py): `strata --help` lists every command from the table without
importing one, and the table's one-line helps and names stay those of the commands themselves."""

from __future__ import annotations

import json
import subprocess
import sys

import click

from agent.cli._lazy import LazyGroup
from agent.cli.main import COMMANDS, cli
from tests.conftest import REPO


def test_the_command_table_names_each_command_with_its_own_one_line_help() -> None:
    ctx = click.Context(cli)
    assert isinstance(cli, LazyGroup)
    assert len({entry.name for entry in COMMANDS}) == len(COMMANDS)
    for entry in COMMANDS:
        command = cli.get_command(ctx, entry.name)
        assert command is not None and command.name == entry.name, entry
        assert command.get_short_help_str(limit=10_000) == entry.short_help, entry.name


def test_help_lists_every_command_without_importing_any_or_the_heavy_libraries() -> None:
    probe = (
        "import io, json, sys, contextlib\n"
        "sys.argv = ['strata', '--help']\n"
        "from agent.cli.main import cli\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        "    cli.main(prog_name='strata')\n"
        "print(json.dumps({'help': out.getvalue(), 'modules': sorted(sys.modules)}))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    listed = {line.split()[0] for line in report["help"].split("Commands:")[1].splitlines() if line.strip()}
    assert listed == {entry.name for entry in COMMANDS}
    loaded = set(report["modules"])
    commands = {entry.target.split(":")[0] for entry in COMMANDS}
    heavy = {"pydantic", "structlog", "rich", "jsonschema", "anthropic", "aiosqlite", "prompt_toolkit", "core.events",
             "tool_executor", "agent.session"}
    assert not loaded & (commands | heavy), sorted(loaded & (commands | heavy))
