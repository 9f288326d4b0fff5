"""`strata attach [ID] [--new --workspace DIR --model M] [--watch] [--json]`: the thin client of `strata serve`.
Interactive by default (agent/cli/attach_term.py, `strata chat`'s look: the conversation so far as `chat --resume`
shows it, then what happens); `--json` is the scriptable client (agent/cli/attach_json.py), which prints every
committed event from `--since SEQ` (default 1: all of them). Either way the attach asks the daemon for the events
from the first seq the client has not shown, so nothing committed while it attaches is lost. One client drives a
session, any number watch (`--watch`); a second driver is refused."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import click

from agent import ipc
from agent.cli._common import Command, json_option
from agent.cli._daemon_client import connect, socket_option_help
from agent.cli.attach_json import JsonAttach
from agent.cli.options import WorkspacePath
from config import LoadedConfig
from core.errors import UsageError
from memory.restore import restore_or_report


def _absolute_model(spec: str | None) -> str | None:
    """A scripted model's file, as this shell names it: the daemon does not share the client's directory."""
    if spec and spec.startswith("script:"):
        return "script:" + os.path.abspath(spec.removeprefix("script:"))
    return spec


@click.command()
@click.argument("session_id", required=False)
@click.option("--new", "new", is_flag=True, help="Start a new session in the daemon and attach to it.")
@click.option("--workspace", type=WorkspacePath(), default=".", show_default=True,
              help="With --new: the directory the tools may touch.")
@click.option("--model", "model_spec", metavar="M", help="With --new: script:PATH (offline) or anthropic:NAME.")
@click.option("--watch", is_flag=True, help="Follow the session without driving it.")
@click.option("--since", "since_seq", type=click.IntRange(min=1), default=None, metavar="SEQ",
              help="With --json: print the committed events from this seq on, then the live ones (default 1: "
              "every event of the session).")
@click.option("--socket", "socket_path", type=click.Path(path_type=Path), default=None, help=socket_option_help)
@json_option
def attach(session_id: str | None, new: bool, workspace: Path, model_spec: str | None, watch: bool,
           since_seq: int | None, socket_path: Path | None, as_json: bool) -> None:
    """Attach to a session the daemon hosts (`strata serve`): drive it, or watch it with --watch."""
    if new == (session_id is not None):
        raise click.UsageError("name a session ID, or start one with --new")
    if watch and new:
        raise click.UsageError("--watch follows an existing session; a new one needs a driver")
    if since_seq is not None and not as_json:
        raise click.UsageError("--since is for --json (the terminal shows the conversation so far)")
    if not new:  # an existing session keeps its own workspace and model: saying otherwise would be ignored
        source = click.get_current_context().get_parameter_source
        for name, flag in (("workspace", "--workspace"), ("model_spec", "--model")):
            if source(name) is not click.core.ParameterSource.DEFAULT:
                raise click.UsageError(f"{flag} goes with --new (a session keeps the workspace and model it was "
                                       "started with)")
    cmd = Command()
    loaded = cmd.config(workspace if new else None, model=_absolute_model(model_spec))
    home = loaded.settings.home
    role = "watch" if watch else "drive"

    async def main() -> int:
        # Everything read from the store and the config files is read before connecting: a connection that said
        # hello and is attached to nothing may be closed to make room for newer ones (agent/ipc/_limits.py
        # `max_connections`), so nothing slow sits between the hello and the attach.
        if session_id is None and not loaded.settings.model:
            raise UsageError("no model chosen for the new session",
                             hint="pass --model script:PATH (offline) or anthropic:NAME")
        ws = Path(await anyio.Path(workspace).resolve()) if new else None
        if as_json:
            sid = await cmd.resolve(session_id) if session_id is not None else None
            async with connect(home, socket_path, "strata attach") as client:
                if sid is None:
                    sid = await _new_session(client, ws, loaded.settings.model)
                await client.request(ipc.Attach, session_id=sid, role=role, since_seq=since_seq or 1)
                return await JsonAttach(client, sid, role).run()
        return await _interactive(cmd, loaded, (home, socket_path), session_id, ws, role)

    sys.exit(cmd.run(main))


async def _new_session(client: ipc.IpcClient, workspace: Path | None, model: str | None) -> str:
    assert workspace is not None and model is not None
    reply = await client.request(ipc.NewSession, workspace=str(workspace), model=model)
    assert reply.session_id is not None
    return reply.session_id


async def _interactive(cmd: Command, loaded: LoadedConfig, where: tuple[Path, Path | None], session_ref: str | None,
                       workspace: Path | None, role: str) -> int:
    """The terminal client. An existing session's config, store and conversation so far are read before
    connecting; a new one (created by this client, its conversation empty) is attached at its first event."""
    from agent.cli.attach_term import TerminalAttach  # the terminal (prompt_toolkit) loads only here
    from agent.cli.chat_cmd import show_history, slash_commands
    from agent.terminal.chat import make_prompt
    from agent.terminal.safe_text import SafeConsole
    from agent.terminal.wakeup_fd import quiet_full_wakeup_fd

    quiet_full_wakeup_fd()  # a resize storm printed a traceback a SIGWINCH over the screen
    console = SafeConsole(highlight=False, color_system=None if os.environ.get("NO_COLOR") else "auto")
    if session_ref is not None:
        loaded = await cmd.session_config(session_id=session_ref)
    async with cmd.runtime(loaded, read_only=True) as rt:  # /timeline and /receipts read the store
        # The conversation so far from the store, then every event after it from the daemon: the attach replays
        # what was committed since this read, so nothing committed meanwhile is lost (nor shown twice).
        state = (await restore_or_report(rt.store, cmd.session_id)).state if session_ref is not None else None
        async with connect(*where, "strata attach") as client:
            if state is None:
                session_id = await _new_session(client, workspace, loaded.settings.model)
                await client.request(ipc.Attach, session_id=session_id, role=role, since_seq=1)
            else:
                session_id = cmd.session_id
                await client.request(ipc.Attach, session_id=session_id, role=role, since_seq=state.last_seq + 1)
                if state.messages:
                    show_history(console, session_id, state.messages)
            prompt = make_prompt(str(loaded.settings.home / "chat_history"))
            return await TerminalAttach(client, session_id, role, console, prompt,
                                        slash_commands(console, rt, session_id)).run()
