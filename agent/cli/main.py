"""`strata`: the command line. Exit codes: 0 completed, 1 error, 2 usage, 3 incomplete, 4 awaiting approval,
5 unknown effects pending, 6 a command left by a stopped process still runs (resume), 128 + N stopped by signal N
(130 Ctrl-C, 143 SIGTERM, 129 SIGHUP). User errors are one line plus a hint, never a traceback."""

from __future__ import annotations

import sys

import click

from agent.cli import stdout
from agent.cli.approval_cmds import approve, deny
from agent.cli.attach_cmd import attach
from agent.cli.chat_cmd import chat
from agent.cli.config_cmds import config_group, trust
from agent.cli.export_cmd import export
from agent.cli.first_cmds import demo, doctor
from agent.cli.fork_cmd import fork
from agent.cli.inspect_cmds import receipts, sessions, show
from agent.cli.knowledge_cmd import knowledge
from agent.cli.output import echo
from agent.cli.reconcile_cmd import reconcile_cmd
from agent.cli.serve_cmd import ps, serve
from agent.cli.session_cmds import resume, run
from agent.cli.timeline_cmd import timeline
from agent.outcome import EXIT_ERROR
from core.masking import Masker
from observability import configure_logging


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--verbose", is_flag=True, help="Log what the runtime does to stderr.")
def cli(verbose: bool) -> None:
    """Strata: an event-sourced agent runtime. A model proposes tool calls; Strata decides, durably and
    auditably, what actually runs."""
    configure_logging(verbose)  # the entry point configures logging, once; the runtime never does


for command in (run, resume, sessions, show, receipts, reconcile_cmd, doctor, demo, trust, config_group, approve,
                deny, timeline, chat, export, fork, knowledge, serve, ps, attach):
    cli.add_command(command)


def main() -> None:
    stdout.install()  # a failed write to stdout is reported once, at the end (agent/cli/stdout.py)
    code: int | str | None
    try:
        cli.main(prog_name="strata", standalone_mode=True)
        code = 0
    except SystemExit as exc:
        code = exc.code
    except Exception as exc:  # a bug, not a user error: say so plainly, keep the detail for a report
        echo(f"strata: internal error: {type(exc).__name__}: {Masker.throwaway().mask(str(exc))}", err=True)
        echo("hint: rerun with --verbose and report it with the command you ran", err=True)
        code = EXIT_ERROR
    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message"): Python prints it and exits 1
        echo(code, err=True)
        code = EXIT_ERROR
    sys.exit(stdout.finish(code, lambda line: echo(line, err=True)))
