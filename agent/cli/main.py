"""`strata`: the command line. Exit codes: 0 completed, 1 error, 2 usage, 3 incomplete, 4 awaiting approval,
5 unknown effects pending, 6 a command left by a stopped process still runs (resume), 128 + N stopped by signal N
(130 Ctrl-C, 143 SIGTERM, 129 SIGHUP). User errors are one line plus a hint, never a traceback."""

from __future__ import annotations

import os
import sys

from agent.cli.startup_code import startup_code

startup_code.install()  # before the modules below define their dataclasses (agent/cli/startup_code.py)

import click  # noqa: E402

from agent.cli import stdout  # noqa: E402
from agent.cli._lazy import Entry, LazyGroup  # noqa: E402
from agent.cli.leave import leave  # noqa: E402
from agent.cli.logging_setup import full_way  # noqa: E402
from agent.cli.logging_setup import setup as setup_logging  # noqa: E402
from agent.cli.output import echo, say_error  # noqa: E402
from agent.cli.startup_gc import startup_gc  # noqa: E402
from agent.cli.startup_pydantic import refuse_pydantic_plugins  # noqa: E402
from agent.outcome import EXIT_ERROR  # noqa: E402

COMMANDS = (
    Entry("run", "agent.cli.session_cmds:run", "Run a headless session on PROMPT.", settles=True),
    Entry("resume", "agent.cli.session_cmds:resume", "Resume session SESSION_ID by id, optionally with a new PROMPT.",
          settles=True),
    Entry("sessions", "agent.cli.sessions_cmd:sessions",
          "List sessions, oldest first, each delegated child indented under its parent.", quick=True),
    Entry("show", "agent.cli.inspect_cmds:show",
          "Show a session and its conversation as the next model request would carry it.", quick=True),
    Entry("receipts", "agent.cli.receipts_cmd:receipts", "List effect receipts (of one session, or all).",
          quick=True),
    Entry("reconcile", "agent.cli.reconcile_cmd:reconcile_cmd",
          "Decide the outcome of an unknown effect: `reconcile RECEIPT --applied|--not-applied`, or "
          "`reconcile --probe [SESSION]`."),
    Entry("doctor", "agent.cli.first_cmds:doctor",
          "Check that Strata can work here: Python, config, home, database, masking key, model, bash, terminal."),
    Entry("demo", "agent.cli.first_cmds:demo",
          "Run the offline demo: a scripted session that is killed mid-batch and resumed by id."),
    Entry("trust", "agent.cli.config_cmds:trust", "Trust a project's config after reviewing it."),
    Entry("config", "agent.cli.config_cmds:config_group", "Inspect the effective configuration."),
    Entry("approve", "agent.cli.decide_cmds:approve",
          "Approve a call parked in SESSION_ID (for exactly the arguments it was parked with)."),
    Entry("deny", "agent.cli.decide_cmds:deny", "Deny a call parked in SESSION_ID."),
    Entry("timeline", "agent.cli.timeline_cmd:timeline",
          "Show what the runtime observed in session SESSION_ID: phases, model attempts, every call with its "
          "decision and outcome, hooks, approvals, receipts.", quick=True),
    Entry("chat", "agent.cli.chat_cmd:chat",
          "Talk to an agent in this terminal; it asks before anything that writes, runs or reaches out."),
    Entry("export", "agent.cli.export_cmd:export", "Export session SESSION_ID, masked, as JSONL, HTML or OTLP JSON."),
    Entry("fork", "agent.cli.fork_cmd:fork",
          "Fork session SESSION_ID at a timeline position (or a turn, or an event) into a new session."),
    Entry("db", "agent.cli.db_cmd:db", "The event store: copy a home's sessions to another store."),
    Entry("knowledge", "agent.cli.knowledge_cmd:knowledge",
          "The local knowledge index: operating procedures found by exact id or by their discriminating words."),
    Entry("serve", "agent.cli.serve_cmd:serve",
          "Run the daemon that hosts sessions for `strata attach` (one per Strata home)."),
    Entry("ps", "agent.cli.serve_cmd:ps", "The running daemon's sessions (as `strata serve --status`)."),
    Entry("mcp", "agent.cli.mcp_cmd:mcp_group",
          "MCP: list the configured servers and their tools, or serve Strata to an MCP host."),
    Entry("channels", "agent.cli.channels_cmd:channels",
          "The serve daemon's channels: kind, where they listen, threads, last message, backlog."),
    Entry("tasks", "agent.cli.channels_cmd:tasks",
          "The tasks the action-required gate created from channel messages, oldest first."),
    Entry("attach", "agent.cli.attach_cmd:attach",
          "Attach to a session the daemon hosts (`strata serve`): drive it, or watch it with --watch."),
)
"""Every command: its name, where it lives, and its one-line help (agent/cli/_lazy.py)."""
COMMANDS_BY_NAME = {entry.name: entry for entry in COMMANDS}
MODEL_KEY_ENV = "ANTHROPIC_API_KEY"
AUTH_TOKEN_ENV = "ANTHROPIC_AUTH_TOKEN"
"""Taken out of the environment as the command starts, kept for the models it builds (agent/models.py): no `bash`
command can read it from the environment block of its parent (/proc/$PPID/environ), whatever model runs."""


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("strata")
    except PackageNotFoundError:  # run from a source tree that was never installed
        found = "unknown (not installed)"
    echo(f"strata {found}")
    ctx.exit(0)


def _plain_structlog() -> None:
    from agent.cli._plain_structlog import import_structlog_plain

    import_structlog_plain()


def global_flags_first(args: list[str]) -> list[str]:
    """`--verbose` given after the subcommand (`strata run --verbose PROMPT`) is moved before it, where the group
    reads it. Nothing after `--` is touched: that is a value (a prompt may be `--verbose`)."""
    end = args.index("--") if "--" in args else len(args)
    if "--verbose" not in args[:end]:
        return args
    return ["--verbose", *(a for i, a in enumerate(args) if not (i < end and a == "--verbose"))]


# Before a command's module imports structlog, which would import rich (agent/cli/_plain_structlog.py); the
# listing of `strata --help` imports neither, nor does a command with a quick way.
def _imported() -> None:
    """The command's module is imported: the collector runs as usual from here (agent/cli/startup_gc.py), and the
    code compiled for start-up dataclasses is kept for the next start (agent/cli/startup_code.py)."""
    startup_gc.settle()
    startup_code.save()
    startup_code.imported()


# The collector is paused from the start until the command's module is imported (agent/cli/startup_gc.py).
@click.group(cls=LazyGroup, entries=COMMANDS, before_import=_plain_structlog, after_import=_imported,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--verbose", is_flag=True,
              help="Log what the runtime does to stderr (before or after the command: `strata run --verbose ...`).")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Print Strata's version and exit.")
def cli(verbose: bool) -> None:
    """Strata: an event-sourced agent runtime. A model proposes tool calls; Strata decides, durably and
    auditably, what actually runs."""
    entry = COMMANDS_BY_NAME.get(click.get_current_context().invoked_subcommand or "")
    if entry is not None and entry.quick:  # it sets up logging itself (agent/cli/logging_setup.py)
        full_way.defer(verbose)  # a reading (sessions, timeline, show): no session, model or process of it runs,
        return  # so the credentials below are not worth the ~2 ms of taking them out of the environment
    for name in (MODEL_KEY_ENV, AUTH_TOKEN_ENV):  # before any session, of any model, runs a command
        if name in os.environ:  # (agent/models.py; the auth token is never sent: the key is always given)
            from core.env_block import take_secret

            take_secret(name)
    if entry is not None and entry.settles:  # it sets up logging once it imported what it runs (agent/cli/_lazy.py)
        full_way.defer(verbose)
        return
    setup_logging(verbose)


def command_status(args: list[str]) -> int:
    """The command line `strata ARGS` without the process around it (`main`): the exit status, a bug reported as
    one line and a hint rather than a traceback. The tests run reading commands through it in their own process."""
    code: int | str | None
    try:
        cli.main(args=global_flags_first(args), prog_name="strata", standalone_mode=True)
        code = 0
    except SystemExit as exc:
        code = exc.code
    except Exception as exc:  # a bug, not a user error: say so plainly, keep the detail for a report
        from core.masking import Masker

        say_error(f"{type(exc).__name__}: {Masker.throwaway().mask(str(exc))}",
                  "rerun with --verbose and report it with the command you ran", prefix="strata: internal error")
        code = EXIT_ERROR
    if code is None:
        return 0
    if not isinstance(code, int):  # sys.exit("message"): Python prints it and exits 1
        echo(code, err=True)
        return EXIT_ERROR
    return code


def main() -> None:
    stdout.install()  # a failed write to stdout is reported once, at the end (agent/cli/stdout.py)
    refuse_pydantic_plugins()  # before any model is built (agent/cli/startup_pydantic.py)
    startup_gc.pause()
    try:
        code = command_status(sys.argv[1:])
    finally:
        startup_gc.restore()
        startup_code.save()  # what the command's own work compiled too (usually nothing: saved at its import)
    leave(stdout.finish(code, lambda line: echo(line, err=True)))  # as sys.exit, without the teardown (leave.py)
