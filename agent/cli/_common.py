"""What every `strata` subcommand shares: loading its config, building its runtime once from it, running its async
body, and the one way an error is shown (one line plus a hint, masked, with the documented exit code).

`Command` is one command's run. It keeps what masking an error needs: before the config is read, the patterns and
the environment's secrets (a throwaway key); once it is read, the home's key (if the home has one) and the
configured secrets; once the runtime is open, the runtime's masker itself. Nothing here is process-wide: each
command makes its own `Command`."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import anyio

from agent.cli.options import json_option as json_option
from agent.cli.output import echo, say_error
from agent.reading import Reader, configured_secrets, reader, recorded_session
from config import LoadedConfig, load_config
from config.masking_key import KEY_BYTES, KEY_FILE, load_masking_key
from config.seen_secrets import SeenSecrets
from core.errors import Stopped, StrataError
from core.masking import Masker
from core.policy import PermissionRule, parse_rule

if TYPE_CHECKING:  # a reading command opens a Reader: it never imports the session machinery
    from agent.session import Runtime
    from memory.rows import Receipt

T = TypeVar("T")


def fail(err: StrataError, masker: Masker | None = None) -> NoReturn:
    """Say `err` in one line (and its hint) on stderr and exit with its code. An error can quote what the user
    typed (a rule, a config value, an id): masked like any other observation, by `masker` when there is one."""
    mask = (masker or Masker.throwaway()).mask
    prefix = "strata" if isinstance(err, Stopped) else "strata: error"  # a stop that was asked for is no error
    say_error(mask(err.head), mask(err.hint) if err.hint else None, listing=[mask(line) for line in err.listing],
              prefix=prefix)
    sys.exit(err.exit_code)


def notices(loaded: LoadedConfig) -> None:
    for notice in loaded.notices:
        echo(f"strata: notice: {notice}", err=True)


def waiver(given: bool, command: str) -> str | None:
    """Who chose `--without-project-hooks`, as the session records it; None when the flag was not given."""
    if not given:
        return None
    from agent.reconcile import person  # only then: neither a reading command nor a plain resume needs the module

    return person(f"strata {command} --without-project-hooks")


def error_masker(loaded: LoadedConfig) -> Masker:
    """The masker an error line is shown with when no runtime is open: the home's key if it has one, the
    configured and remembered secrets. It creates nothing in the home and remembers nothing (an error line is not
    session text): a command that fails before its runtime opens leaves the home as it was."""
    home = loaded.settings.home
    key = os.urandom(KEY_BYTES)
    if (home / KEY_FILE).is_file():
        with contextlib.suppress(StrataError, OSError):  # unreadable: the patterns and known values still mask
            key = load_masking_key(home)
    return Masker.from_env(key, os.environ, extra_secrets=[*configured_secrets(loaded), *SeenSecrets(home).values])


class Command:
    """One command's run: its config, the runtime built from it, and the masker its error line is shown with."""

    def __init__(self) -> None:
        self._loaded: LoadedConfig | None = None
        self._masker: Masker | None = None
        self.session_id = ""
        """The session `session_config` resolved (a prefix or `last` made a full id)."""
        self.took_session = False
        """Whether this command took `session_id`'s lease (and so may have changed the session): what an interrupt
        says of the session depends on it (agent/cli/interrupted.py)."""
        self.receipt: Receipt | None = None
        """The receipt `session_config` resolved, when it was given one."""

    @property
    def loaded(self) -> LoadedConfig | None:
        """The config this command read last (None before it read one)."""
        return self._loaded

    @property
    def masker(self) -> Masker:
        if self._masker is None and self._loaded is not None:
            self._masker = error_masker(self._loaded)
        return self._masker or Masker.throwaway()

    def fail(self, err: StrataError) -> NoReturn:
        fail(err, self.masker)

    def run(self, fn: Callable[[], Awaitable[T]], *, on_interrupt: Callable[[], list[str]] | None = None) -> T:
        """Run the command's async body; a StrataError is its one error line, Ctrl-C exits 130 (after the lines
        `on_interrupt` gives: what became of the session and what to do next)."""
        try:
            return anyio.run(fn)
        except StrataError as err:
            self.fail(err)
        except KeyboardInterrupt:
            echo("strata: interrupted", err=True)
            if on_interrupt is not None:
                try:
                    lines = on_interrupt()
                except (StrataError, OSError, KeyboardInterrupt):  # the hint is a courtesy: exit 130 regardless
                    lines = []
                for line in lines:
                    echo(self.masker.mask(line), err=True)
            sys.exit(130)

    def config(self, workspace: Path | None, *, quiet: bool = False, **flags: Any) -> LoadedConfig:
        """Effective config for a session in `workspace` (None: no project layer); its notices (an untrusted
        project file) go to stderr, unless `quiet` (the caller says them with `notices` once it knows the session
        goes on)."""
        try:
            loaded = self._load(workspace, flags)
        except StrataError as err:
            self.fail(err)
        if not quiet:
            notices(loaded)
        return loaded

    async def session_config(self, *, session_id: str | None = None, receipt_id: str | None = None,
                             quiet: bool = True, **flags: Any) -> LoadedConfig:
        """The config of the session named (or the receipt's): the user's and the environment's, and the project
        file of the workspace it recorded (when that is still a directory). Files are read off the event loop.
        `session_id` may be a unique prefix or `last`, `receipt_id` a receipt's or a call's id or a unique prefix
        of one (agent/ids.py): the resolved ones are `self.session_id` and `self.receipt` from then on."""
        base = await anyio.to_thread.run_sync(self._load, None, flags)
        found = await recorded_session(base.settings, session_ref=session_id, receipt_ref=receipt_id)
        self.session_id, self.receipt = found.session_id, found.receipt
        try:
            # pathlib's is_dir off the loop, as anyio.Path does it, without importing anyio's file module (~1 ms)
            is_dir = await anyio.to_thread.run_sync(Path(found.workspace).is_dir, abandon_on_cancel=True)
        except OSError as exc:  # a path that cannot be looked at (EACCES, ENAMETOOLONG): whether it holds a project
            # file is unknown, so the session's config is too; one line, not an internal error
            raise StrataError(f"cannot look at the workspace {str(found.workspace)!r} of session {found.session_id}: "
                              f"{exc.strerror or exc}", hint="check that this user can reach that directory") from None
        project = found.workspace if is_dir else None
        loaded = await anyio.to_thread.run_sync(self._load, project, flags)
        if not quiet:
            notices(loaded)
        return loaded

    async def resolve(self, session_ref: str) -> str:
        """The full id of the session `session_ref` names (a unique prefix, `last`: agent/ids.py), for a command
        that needs no session config."""
        base = await anyio.to_thread.run_sync(self._load, None, {})
        self.session_id = (await recorded_session(base.settings, session_ref=session_ref)).session_id
        return self.session_id

    def _load(self, workspace: Path | None, flags: dict[str, Any]) -> LoadedConfig:
        self._loaded = load_config(workspace=workspace, flags=flags)
        return self._loaded

    @asynccontextmanager
    async def runtime(self, loaded: LoadedConfig, *, read_only: bool = False) -> AsyncIterator[Runtime]:
        """The runtime built once from `loaded` (agent/session.py `runtime`); its masker shows this command's
        errors from then on."""
        from agent.session import runtime  # not at import: a reading command opens a Reader instead

        self._loaded = loaded
        async with runtime(loaded, read_only=read_only) as rt:
            self._masker = rt.masker
            yield rt

    @asynccontextmanager
    async def session_runtime(self, loaded: LoadedConfig) -> AsyncIterator[Runtime]:
        """`runtime`, with the tools of the MCP servers `loaded` declares (agent/mcp), for a command that runs a
        session (run, resume, chat). The MCP machinery, and the notice its servers' trouble is said with, is
        imported only when the config declares a server: a session without one does without it."""
        async with self.runtime(loaded) as base:
            if not loaded.mcp.servers:
                yield base
                return
            from agent.mcp import with_mcp_tools

            masker = base.masker  # a server's trouble (it could not start, it stopped): one masked notice line
            async with with_mcp_tools(base, loaded, lambda line: echo(f"strata: notice: {masker.mask(line)}",
                                                                      err=True)) as rt:
                yield rt

    @asynccontextmanager
    async def reader(self, loaded: LoadedConfig) -> AsyncIterator[Reader]:
        """What a reading command opens (agent/reading.py `reader`: the store read-only, the home's masker), built
        once from `loaded`; its masker shows this command's errors from then on."""
        self._loaded = loaded
        async with reader(loaded) as rd:
            self._masker = rd.masker
            yield rd

    def rules(self, allow: tuple[str, ...], deny: tuple[str, ...]) -> list[PermissionRule]:
        try:
            return [parse_rule("allow", r) for r in allow] + [parse_rule("deny", r) for r in deny]
        except StrataError as err:
            self.fail(err)
