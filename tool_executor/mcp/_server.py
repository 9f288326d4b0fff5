"""One MCP server's connection, kept by its own task: started (a stdio child in its own process group, or a
streamable HTTP endpoint), initialised and its tools listed within the startup timeout, restarted once when asked,
and closed (the child killed with its process group) when the session ends.

The SDK's transports and `ClientSession` are entered and left in one task (anyio's rule for task groups), so a
tool call never enters them: it uses the live session, and asks the supervising task for a restart."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import shutil
import signal
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Any, BinaryIO

import anyio
import structlog

from config.mcp import McpServerDecl
from core.record import record

log = structlog.get_logger("strata.mcp")

Notify = Callable[[str], None]


SPEAKING: ContextVar[ServerLink | None] = ContextVar("strata_mcp_server", default=None)
"""The server whose connection the current task serves: the transport's reader tasks inherit it from the task that
keeps the connection, so a complaint the SDK logs about what the server wrote is counted for that server."""


class ServerGone(Exception):
    """The server's connection ended (its process died, its endpoint went away)."""


@record
class ListedTool:
    name: str
    description: str
    input_schema: dict[str, Any]


class ServerLink:
    """The supervised connection to one server."""

    def __init__(self, decl: McpServerDecl, log_dir: Path, notify: Notify, mask: Callable[[str], str]) -> None:
        self.decl = decl
        self._log_dir = log_dir
        self._notify = notify
        self._mask = mask
        """What masks the server's stderr on its way to its log."""
        self.tools: tuple[ListedTool, ...] = ()
        self.problem: str | None = None
        """Why the server is not usable (None: it is up)."""
        self._session: Any = None
        self._ready = anyio.Event()
        self._restart = anyio.Event()
        self._restarts_left = 1
        self._stopping = False
        self.stopped = anyio.Event()
        """Set when `supervise` has returned (its connection closed)."""
        self._told = False
        self.unreadable = 0
        """Messages the server wrote that the SDK could not read as JSON-RPC (it drops them, and a request they
        answered waits on): said with the reason it failed to start."""
        self.cut: str | None = None
        """Why the transport cut the server off (None: it did not)."""

    @property
    def name(self) -> str:
        return self.decl.name

    @property
    def up(self) -> bool:
        return self._session is not None

    async def supervise(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Keep the connection until `stop` (or cancelled: the stack closes it, a stdio child is killed with its
        process group). Reports started once the first attempt is up or has failed."""
        started = False
        SPEAKING.set(self)

        def ready() -> None:
            nonlocal started
            self._ready.set()
            if not started:
                started = True
                task_status.started()

        try:
            await self._keep(ready)
        finally:
            self._ready.set()  # a call waiting for a restart sees no session, and does not wait on
            self.stopped.set()

    async def _keep(self, ready: Callable[[], None]) -> None:
        while not self._stopping:
            self._restart = anyio.Event()
            try:
                async with contextlib.AsyncExitStack() as stack:
                    self._session = await self._connect(stack)
                    self.problem = None
                    ready()
                    await self._restart.wait()
                    self._session = None
                continue  # a restart, or the end, was asked for
            except Exception as exc:  # the SDK's errors, OSError, a timeout: the server is left out, once said
                self._session = None
                if self._stopping:  # it failed to close: the session ends anyway, nothing to tell
                    log.info("mcp server close failed", server=self.name, error=str(exc)[:200])
                    return
                self._fail(self.cut or _reason(exc, self.decl, self._log_dir) + _unreadable(self.unreadable))
            ready()
            await self._restart.wait()
        ready()

    def stop(self) -> None:
        """Close the connection the orderly way (an HTTP server's MCP session ended by its DELETE, a stdio server's
        stdin closed first): `supervise` returns once it is closed."""
        self._stopping = True
        self._session = None
        self._restart.set()

    async def _connect(self, stack: contextlib.AsyncExitStack) -> Any:
        # The transport and the session are entered outside the deadline's scope: their task groups outlive it.
        read, write = await stack.enter_async_context(self._transport(stack))
        session = await stack.enter_async_context(_client_session()(read, write))
        with anyio.fail_after(self.decl.startup_timeout_s):
            await session.initialize()
            listed = await _list_tools(session)
        self.tools = tuple(ListedTool(t.name, t.description or "", dict(t.input_schema)) for t in listed)
        log.info("mcp server up", server=self.name, tools=len(self.tools))
        return session

    def _transport(self, stack: contextlib.AsyncExitStack) -> contextlib.AbstractAsyncContextManager[Any]:
        decl = self.decl
        if decl.url is not None:
            from tool_executor.mcp._http import http_transport

            return http_transport(decl.url)
        from mcp.client.stdio import get_default_environment

        from tool_executor.mcp._stdio import MAX_STDERR_BYTES, stdio_transport

        assert decl.command is not None
        _startable(decl.command, (get_default_environment() | dict(decl.env)).get("PATH"))
        self._log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # in the Strata home: private like it
        log_path = self._log_dir / f"{decl.name}.log"
        with contextlib.suppress(OSError):  # a log past the bound is kept as NAME.log.1, once
            if log_path.stat().st_size >= MAX_STDERR_BYTES:
                log_path.replace(log_path.with_name(log_path.name + ".1"))
        errlog: BinaryIO = stack.enter_context(open(log_path, "ab", opener=_private))  # noqa: SIM115 (the stack)
        # The transport starts the server in a new session (its own process group) and kills the group only when
        # the server does not exit on its own; what the server started and left behind in its group is killed here,
        # after the transport closed (callbacks run last-in first-out). The shell records the group's id (its own
        # pid, kept by `exec`) before it becomes the server.
        pidfile = self._log_dir / f"{decl.name}.{os.getpid()}.{id(self):x}.pid"
        stack.callback(_kill_group, pidfile)
        return stdio_transport(["/bin/sh", "-c", _RECORD_PID_AND_EXEC, str(pidfile), decl.command, *decl.args],
                               dict(decl.env), errlog, mask=self._mask, on_cut=self._cut_off,
                               on_unreadable=self._unreadable_line)

    def _cut_off(self, reason: str) -> None:
        """The transport cut the server off (what it wrote is over a bound): it is not started again, a call in
        flight fails with the reason (never retried), and the notice says it once."""
        self.cut = reason
        self._restarts_left = 0
        self._session = None
        self._fail(reason)

    def _unreadable_line(self) -> None:
        self.unreadable += 1

    def _fail(self, reason: str) -> None:
        self.problem = reason
        if not self._told:  # one notice per server
            self._told = True
            self._notify(f"MCP server {self.name!r} {reason}; the session continues without its tools")
        log.info("mcp server unavailable", server=self.name, reason=reason)

    def gone(self) -> None:
        """The connection ended under a call and the server is not started again: say so once, stop using it."""
        self._session = None
        self._fail("stopped (its connection ended)")

    async def session(self) -> Any:
        """The live client session; ServerGone when there is none."""
        await self._ready.wait()
        if self._session is None:
            raise ServerGone(self.problem or "not running")
        return self._session

    async def restart(self) -> Any:
        """Start the server again (once per session) and return its session; ServerGone when it cannot."""
        if self._restarts_left <= 0:
            raise ServerGone(self.problem or "not running")
        self._restarts_left -= 1
        self._session = None
        self._ready = anyio.Event()
        self._restart.set()
        await self._ready.wait()
        if self._session is None:
            raise ServerGone(self.problem or "did not start again")
        return self._session


@functools.cache
def _client_session() -> type[Any]:
    """The SDK's `ClientSession`, its check of a result's structured content against the tool's output schema left
    out: output schemas of remote tools are not enforced. The SDK raised for a result that did not fit (or had no
    structured content), so a server's mismatching answer became a crashed call (and, unlisted, one more
    `tools/list` per call); the result is what its content says, like any other (tool_executor/mcp/_tools.py)."""
    from mcp import ClientSession

    class OutputUnchecked(ClientSession):
        async def validate_tool_result(self, name: str, result: Any) -> None:
            return None

    return OutputUnchecked


MAX_TOOL_PAGES = 100
"""A server that lists its tools in more pages than this (or repeats a cursor) is read up to there."""
MAX_TOOLS = 10_000
"""Pages are read until they hold this many tools: each page is bounded (a message line), their sum must be too."""


async def _list_tools(session: Any) -> list[Any]:
    """Every page of the server's tool listing (a server may page it: the first page alone would leave tools out)."""
    from mcp_types import PaginatedRequestParams

    tools: list[Any] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_TOOL_PAGES):
        page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor or cursor in seen or len(tools) >= MAX_TOOLS:
            break
        seen.add(cursor)
    return tools


def _startable(command: str, path: str | None) -> None:
    """Raise FileNotFoundError (PermissionError) when `command` names no executable file, as the server's shell
    would look it up (on `path` unless it holds a '/'): the shell's `exec` failing was only its exit 127, which the
    session saw as a server closing its connection before it finished initialising."""
    if shutil.which(command, path=path) is not None:
        return
    if "/" in command and os.path.exists(command):
        raise PermissionError(errno.EACCES, "not an executable file", command)
    raise FileNotFoundError(errno.ENOENT, "no such file" if "/" in command else "no such command on its PATH", command)


_RECORD_PID_AND_EXEC = 'echo $$ > "$0" && exec "$@"'
"""`sh -c` script: $0 is the pid file, the rest the server's command line."""


def _kill_group(pidfile: Path) -> None:
    """Kill what is left of the server's process group (nothing, usually), and forget its id."""
    try:
        pgid = int(pidfile.read_text(encoding="ascii").strip() or 0)
    except (OSError, ValueError):
        return
    finally:
        with contextlib.suppress(OSError):
            pidfile.unlink()
    if pgid > 1:
        # The group's id is not given to another process while the group has members, so this reaches only them.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def _unreadable(count: int) -> str:
    if not count:
        return ""
    return (f" (it wrote {count} message{'s' if count > 1 else ''} to stdout that is not valid JSON-RPC, or too "
            "deep to read; Strata's log has the SDK's complaint)")


def _private(path: str, flags: int) -> int:
    return os.open(path, flags, 0o600)


def _reason(exc: BaseException, decl: McpServerDecl, log_dir: Path) -> str:
    from mcp import MCPError

    from tool_executor.mcp._answers import error_kind

    if isinstance(exc, TimeoutError):
        return f"did not finish initialising within {decl.startup_timeout_s:g} s"
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _reason(exc.exceptions[0], decl, log_dir)
    if isinstance(exc, MCPError):
        kind = error_kind(exc.code, exc.message)
        if kind == "closed":
            where = f"its stderr is in {log_dir / (decl.name + '.log')}" if decl.url is None else decl.url
            return f"closed the connection before it finished initialising ({where})"
        if kind == "refused":  # the server's own error answer (-32000 too, the code the SDK gives a closed connection)
            return f"refused to start (error {exc.code}: {' '.join(exc.message.split())[:200]})"
    if isinstance(exc, FileNotFoundError | PermissionError):
        return f"could not be started ({decl.command}: {exc.strerror})"
    detail = " ".join(str(exc).split()) or type(exc).__name__  # one line: a notice is one
    return f"failed to start ({detail[:200]})"
