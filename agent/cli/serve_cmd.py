"""`strata serve [--socket PATH] [--foreground]` runs the daemon of this Strata home; `strata serve --status
[--json]` (or `strata ps`) lists the sessions it hosts. Without `--foreground` the daemon detaches (agent/serve/
_detach.py) and the command returns once it listens, printing its pid and socket; with it, it runs in this terminal
until SIGTERM, SIGHUP or Ctrl-C drains it. Either way a drained daemon exits 0."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from pathlib import Path
from typing import NoReturn

import anyio
import click

from agent import ipc
from agent.cli._common import Command, json_option
from agent.cli._daemon_client import connect, socket_option_help
from agent.cli.output import echo, echo_json, say_error
from core.errors import StrataError


@click.command()
@click.option("--socket", "socket_path", type=click.Path(path_type=Path), default=None, help=socket_option_help)
@click.option("--foreground", is_flag=True, help="Run in this terminal instead of detaching.")
@click.option("--status", is_flag=True, help="List the running daemon's sessions instead.")
@json_option
def serve(socket_path: Path | None, foreground: bool, status: bool, as_json: bool) -> None:
    """Run the daemon that hosts sessions for `strata attach` (one per Strata home)."""
    if status:
        _status(socket_path, as_json)
        return
    if as_json:
        raise click.UsageError("--json goes with --status")
    from agent.serve import Readiness, daemonize  # the daemon's parts load only here
    from agent.serve import serve as run_daemon

    _absolute_locations()
    cmd = Command()
    loaded = cmd.config(None)
    home = loaded.settings.home
    socket_path = socket_path.absolute() if socket_path is not None else None
    paths = ipc.daemon_paths(home, socket_path)
    try:
        running = ipc.running_daemon(paths)
    except StrataError as err:  # the home's lock cannot be read (a home that is not a directory)
        cmd.fail(err)
    if running is not None:  # said at once, before anything forks
        cmd.fail(ipc.DaemonRunning(running.pid, running.socket, str(paths.lock)))
    if foreground:
        def ready(at: ipc.DaemonPaths) -> None:
            echo(f"strata: daemon listening on {at.socket} (pid {os.getpid()}); stop it with kill -TERM "
                 f"{os.getpid()} or Ctrl-C")
            sys.stdout.flush()

        cmd.run(lambda: run_daemon(loaded, socket_path=socket_path, ready=ready))
        _exit_drained()
    try:
        started = daemonize(home)
    except OSError as exc:
        cmd.fail(StrataError(f"cannot start the daemon: {exc.strerror or exc}"))
    if not isinstance(started, Readiness):  # the command, in the terminal
        if started.pid is None:
            say_error(started.message or "the daemon did not start", started.hint)
            sys.exit(started.exit_code)
        echo(f"strata: daemon started (pid {started.pid}), listening on {started.socket}; its log: "
             f"{home / 'logs' / 'strata.log'}")
        sys.exit(0)
    readiness = started
    try:
        anyio.run(lambda: run_daemon(loaded, socket_path=socket_path, ready=lambda at: readiness.ready(at.socket)))
    except StrataError as err:  # told to the command in the terminal (a no-op once the daemon said it listens)
        readiness.failed(err, cmd.masker.mask(err.message), cmd.masker.mask(err.hint) if err.hint else None)
        sys.exit(err.exit_code)
    finally:
        readiness.failed(StrataError("the daemon failed"), "the daemon failed as it started",
                         f"see {home / 'logs'}")  # only if it said nothing yet: an unexpected error
    _exit_drained()


LOCATION_VARIABLES = ("STRATA_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "HOME")
"""What names Strata's home and config files (config/locations.py), read again by the daemon for each session's
workspace config."""


def _absolute_locations() -> None:
    """A detached daemon works in `/`: a relative location given to this command (`STRATA_HOME=h strata serve`)
    would name another place there (`/h`), where no client looks. Each is made absolute here, against the
    directory the command was run in, as every other command reads it."""
    for name in LOCATION_VARIABLES:
        value = os.environ.get(name)
        if value and not os.path.isabs(expanded := os.path.expanduser(value)):
            os.environ[name] = os.path.abspath(expanded)


def _exit_drained() -> NoReturn:
    """The daemon drained: every session released, the store closed, the lock freed. What is left is the
    interpreter's teardown of a large heap (a second or more on a busy machine), which nothing needs: flush what
    was written and leave, so that the drain's bound is the process's."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    logging.shutdown()
    os._exit(0)


ELSEWHERE_LEGEND = ("  elsewhere: another process holds the session's lease (`strata resume ID` in another "
                    "terminal, say); the daemon hosts it without driving it, and a driver attaching is refused "
                    "until that process is done")


def _status(socket_path: Path | None, as_json: bool) -> None:
    cmd = Command()
    loaded = cmd.config(None)

    async def main() -> tuple[ipc.HelloOk, ipc.OkReply]:
        async with connect(loaded.settings.home, socket_path, "strata serve --status") as client:
            return client.hello, await client.request(ipc.Status)

    hello, reply = cmd.run(main)
    sessions = reply.sessions or ()
    if as_json:
        for info in sessions:
            echo_json(json.loads(info.model_dump_json()))
        return
    echo(f"daemon pid {hello.pid} ({hello.server}): {len(sessions)} session(s)")
    store = reply.store
    if store is not None and store.fsyncs is not None:
        ratio = f" ({store.commits / store.fsyncs:.2f} commits per fsync)" if store.fsyncs else ""
        echo(f"  store: {store.commits} commits in {store.fsyncs} fsyncs since the daemon started{ratio}")
    for info in sessions:
        waiting = ", ".join(_waiting_call(w) for w in info.waiting) or "-"
        echo(f"  {info.session_id}  {info.status:<18} {info.phase or '-':<9} drivers {info.drivers} watchers "
             f"{info.watchers}  waiting: {waiting}")
        echo(f"      {info.model}  {info.workspace}")
    if any(info.phase == "elsewhere" for info in sessions):
        echo(ELSEWHERE_LEGEND)


def _waiting_call(call: ipc.WaitingCall) -> str:
    """`c1 write_file (parked)`; a child's call names the session to decide it in."""
    where = f" in child session {call.session_id}" if call.session_id is not None else ""
    return f"{call.call_id} {call.tool} ({call.how}){where}"


@click.command()
@click.option("--socket", "socket_path", type=click.Path(path_type=Path), default=None, help=socket_option_help)
@json_option
def ps(socket_path: Path | None, as_json: bool) -> None:
    """The running daemon's sessions (as `strata serve --status`)."""
    _status(socket_path, as_json)
