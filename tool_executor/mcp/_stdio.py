"""The stdio transport to an MCP server: newline-delimited JSON-RPC over the child's stdin and stdout, as the
SDK's `stdio_client` speaks it, with these differences. A message line is read up to MAX_LINE_BYTES: the SDK's
reader keeps a line without a newline in memory whatever its length, so a server writing an endless line grew
Strata's memory until the call's deadline; here such a server is cut off (`on_cut` says why, its process group is
killed, and the session sees the connection close), and what Strata holds of it stays within the bound. A line is
decoded with the message, as bytes: a line that is not UTF-8 is one unreadable message (the SDK's decoder raised,
and its reader and the connection died with it). At most 64 requests from the server wait for their answers at once
(tool_executor/mcp/_asked.py): past that the server's output is read once an answer is written (or, at the close, read
to its end and dropped, as when the session is gone: a server flushing its output exits on its own). The server's stderr
is copied to its log up to MAX_STDERR_BYTES per start, the rest read and dropped (the SDK gave the child the log
file itself: a server logging without end filled the disk the Strata home is on), a line at a time, masked (a server
writing the token of its `env` to stderr left it in the Strata home as written).

Built on the SDK's public pieces: the session's streams carry `SessionMessage`s (or the Exception a line that is not
JSON-RPC gave), the server's environment is the SDK's default one plus the declared variables. The child runs in a
new session (its own process group, whose id is its pid); closing follows the MCP lifecycle: stdin closed, a grace
period, SIGTERM to the group, then SIGKILL."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, BinaryIO

import anyio
import structlog
from anyio.abc import ByteReceiveStream, Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from tool_executor.mcp._answers import UNREAD_STDIO_ANSWER
from tool_executor.mcp._asked import ServerRequests

log = structlog.get_logger("strata.mcp")

MAX_LINE_BYTES = 8 * 1024 * 1024
"""The longest message line read from a server (8 MiB). Above the largest message Strata keeps anything of: a tool
result is kept up to 256 Ki characters, which JSON-escaped (an astral character as two `\\uXXXX` escapes, 12 bytes)
is at most 3 MiB; the rest leaves room for an image (base64, shown only as its size) and a long tool listing. A
longer line is a broken or hostile server: it is cut off rather than held in memory."""

MAX_STDERR_BYTES = 8 * 1024 * 1024
"""How much of a server's stderr one start of it adds to its log (8 MiB); the log itself is rotated at that size
(tool_executor/mcp/_server.py)."""
MAX_LOG_LINE_BYTES = 64 * 1024
"""A stderr line is masked whole before it is kept; one longer than this is masked and kept in pieces of this size."""

EXIT_GRACE_S = 2.0
"""How long a server has to exit after its stdin closes, and again after SIGTERM, before its group is killed."""
FLUSH_S = 0.5
"""How long the messages already accepted have to reach the server when the connection closes."""

Streams = tuple[MemoryObjectReceiveStream[Any], MemoryObjectSendStream[Any]]


@asynccontextmanager
async def stdio_transport(argv: Sequence[str], env: Mapping[str, str] | None, errlog: BinaryIO, *,
                          mask: Callable[[str], str], on_cut: Callable[[str], None],
                          on_unreadable: Callable[[], None]) -> AsyncIterator[Streams]:
    """Start `argv` (its stderr to `errlog`, masked by `mask`, up to MAX_STDERR_BYTES) and yield the session's (read,
    write) streams.
    `on_cut(reason)` is called when the server is cut off for a message line over the bound (before the session
    sees the connection close); `on_unreadable()` for each line that is not a JSON-RPC message (the session gets
    the error, and drops it)."""
    from mcp.client.stdio import get_default_environment
    from mcp.shared.message import SessionMessage

    process = await anyio.open_process(list(argv), env=get_default_environment() | dict(env or {}),
                                       start_new_session=True)
    to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done, stderr_kept = anyio.Event(), anyio.Event()
    asked = ServerRequests()

    def cut(reason: str) -> None:
        on_cut(reason)
        _signal_group(process, signal.SIGKILL)  # a server cut off is not asked to stop: it is stopped

    async def write() -> None:
        assert process.stdin is not None
        try:
            async with from_session:
                async for message in from_session:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode("utf-8"))
                    asked.answered(message.message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await to_session.aclose()  # the server stopped reading: the session sees the connection end
        finally:
            writer_done.set()

    async with anyio.create_task_group() as tg:
        assert process.stdout is not None
        tg.start_soon(_read, process.stdout, to_session, cut, on_unreadable, asked)
        tg.start_soon(write)
        assert process.stderr is not None
        tg.start_soon(_keep_stderr, process.stderr, errlog, stderr_kept, mask)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):  # the child must not outlive the session, even when cancelled
                read_stream.close()
                write_stream.close()
                asked.close()  # a reader waiting for a free place reads on, dropping what it reads (_read)
                with anyio.move_on_after(FLUSH_S):
                    await writer_done.wait()
                await _stop(process, stderr_kept)
                for stream in (read_stream, write_stream, to_session, from_session):
                    await stream.aclose()
            tg.cancel_scope.cancel()


async def _read(stdout: ByteReceiveStream, to_session: MemoryObjectSendStream[Any], cut: Callable[[str], None],
                on_unreadable: Callable[[], None], asked: ServerRequests) -> None:
    """The server's stdout as messages, one line each, a line at most MAX_LINE_BYTES long; a request from the server
    is passed on once fewer than MAX_SERVER_REQUESTS wait for their answers."""
    line = bytearray()
    async with to_session:
        while True:
            try:
                chunk = await stdout.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                return
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                line += chunk[start:end]
                start = end + 1
                if len(line) > MAX_LINE_BYTES:
                    break
                message, line = _parse(bytes(line), on_unreadable), bytearray()
                if message is None:
                    continue
                try:
                    if not isinstance(message, Exception):
                        await asked.admit(message.message)  # ClosedResourceError once the connection closes
                    await to_session.send(message)  # no read-ahead while the session does not take it
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    # The connection closes (its session gone, or no place free for a request and none will be):
                    # what the server still writes is read and dropped, so that it can finish and exit on its own.
                    await _drain(stdout)
                    return
            else:
                line += chunk[start:]
            if len(line) > MAX_LINE_BYTES:
                log.info("mcp server cut off", reason="message line too long", bound=MAX_LINE_BYTES)
                cut(f"was cut off: it wrote a message line longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB "
                    "(the longest Strata reads)")
                return  # the session sees the connection close


async def _keep_stderr(stderr: ByteReceiveStream, errlog: BinaryIO, done: anyio.Event,
                       mask: Callable[[str], str]) -> None:
    """Copy the server's stderr to `errlog` up to MAX_STDERR_BYTES, a line at a time and masked (a line longer than
    MAX_LOG_LINE_BYTES in pieces), then say so there and read the rest unkept (a server whose stderr is not read
    would stop at its next write); `done` is set at its end."""
    kept = 0
    pending = b""
    with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        while True:
            try:
                chunk = await stderr.receive()
            except anyio.EndOfStream:
                if pending and kept < MAX_STDERR_BYTES:
                    await anyio.to_thread.run_sync(_write_log, errlog, [pending], mask, b"")
                raise
            if kept >= MAX_STDERR_BYTES:
                continue
            chunk = chunk[:MAX_STDERR_BYTES - kept]
            kept += len(chunk)
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            while len(pending) > MAX_LOG_LINE_BYTES:
                lines.append(pending[:MAX_LOG_LINE_BYTES])
                pending = pending[MAX_LOG_LINE_BYTES:]
            note = b""
            if kept >= MAX_STDERR_BYTES:
                lines.append(pending)
                pending = b""
                note = (f"\n[strata: this server wrote more than {MAX_STDERR_BYTES // (1024 * 1024)} MiB to "
                        "stderr since it started; the rest is not kept]\n").encode()
            if lines or note:  # a file write and masking: off the event loop
                await anyio.to_thread.run_sync(_write_log, errlog, lines, mask, note)
    done.set()


def _write_log(errlog: BinaryIO, lines: list[bytes], mask: Callable[[str], str], note: bytes) -> None:
    """`lines` (each without its newline) masked, each with a newline, then `note`."""
    errlog.write(b"".join(mask(line.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape") + b"\n"
                         for line in lines) + note)
    errlog.flush()


def _parse(line: bytes, on_unreadable: Callable[[], None]) -> Any:
    """A SessionMessage, the error a line that is not JSON-RPC gave (the SDK's stdio reader passes it on too), or
    None for a blank line. A line that is no JSON-RPC message but answers a request (an object with its id, a
    `result` or an `error` and no `method`) is that request's error (UNREAD_STDIO_ANSWER): the SDK would drop the
    line, and the request would wait for its deadline."""
    import mcp_types
    from mcp.shared.message import SessionMessage

    if not line.strip():
        return None
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:  # pydantic's ValidationError (not JSON, not JSON-RPC, not UTF-8, too deep)
        on_unreadable()
        log.info("mcp server wrote a line that is not JSON-RPC", error=str(exc)[:500])
        if (answer := _answer_to(line)) is not None:
            why = f"{UNREAD_STDIO_ANSWER}: it is not JSON-RPC ({answer[1]})"
            return SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=answer[0], error=mcp_types.ErrorData(
                code=mcp_types.PARSE_ERROR, message=why)))
        return exc


def _answer_to(line: bytes) -> tuple[str | int, str] | None:
    """The id of the request `line` (not a JSON-RPC message) was meant to answer, and what is wrong with it as an
    answer; None when it is no answer."""
    import mcp_types
    from pydantic import ValidationError

    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or "method" in message or not ("result" in message or "error" in message):
        return None
    request_id = message.get("id")
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        return None
    kind = mcp_types.JSONRPCError if "error" in message else mcp_types.JSONRPCResponse
    try:
        kind.model_validate(message, by_name=False)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return request_id, (f"{where}: {first['msg']}" if where else first["msg"])[:200]
    except RecursionError:
        return request_id, "nested too deep"
    return request_id, "too deep to read"  # it fits, so what failed was reading it: its depth


async def _drain(stdout: ByteReceiveStream) -> None:
    with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        while True:
            await stdout.receive()


async def _stop(process: Process, stderr_kept: anyio.Event) -> None:
    """Close the server's stdin, give it EXIT_GRACE_S to exit, then SIGTERM its group and, after the same grace,
    SIGKILL it; its stderr is read to its end (`stderr_kept`, waited for at most FLUSH_S), its pipes are closed and
    the process reaped."""
    assert process.stdin is not None and process.stdout is not None
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    if not await _exited(process, EXIT_GRACE_S):
        _signal_group(process, signal.SIGTERM)
        if not await _exited(process, EXIT_GRACE_S):
            _signal_group(process, signal.SIGKILL)
            await _exited(process, EXIT_GRACE_S)
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()
    with anyio.move_on_after(FLUSH_S):  # what it wrote to stderr before it exited reaches its log
        await stderr_kept.wait()
    with anyio.move_on_after(EXIT_GRACE_S), contextlib.suppress(OSError, ProcessLookupError):
        await process.aclose()  # reaps it (its pipes are closed: nothing else to wait for)


async def _exited(process: Process, within: float) -> bool:
    """Whether the process exited within `within` seconds (polled: asyncio's wait also waits for its pipes)."""
    with anyio.move_on_after(within):
        while process.returncode is None:  # noqa: ASYNC110 (no event tells it: wait() also waits for the pipes)
            await anyio.sleep(0.01)
    return process.returncode is not None


def _signal_group(process: Process, sig: signal.Signals) -> None:
    """Signal the server's process group (its id is the server's pid: it was started in a new session)."""
    if process.returncode is None or sig == signal.SIGKILL:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
