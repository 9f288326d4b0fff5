"""grep: the walk in a worker thread that stops at the call's deadline (tool_executor/builtin/_walk.py), the
matching in a child process that is killed at the deadline or on Ctrl-C (tool_executor/builtin/_grep_child.py).
A regular expression cannot be bounded in `re`, so the process boundary is what makes the deadline hold."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from core.masking import cut_head
from core.tools import Stop, ToolContext, ToolError, ToolOutput, run_stoppable, skipped_note
from tool_executor.builtin._read import open_regular
from tool_executor.builtin._walk import Walker

MAX_MATCHES = 500
MAX_FILE = 2 * 1024 * 1024
"""Files larger than this are not searched (and counted)."""
MAX_FILES = 100_000
"""A walk stops after this many files (and says so)."""
MAX_LINE = 2000
"""A matching line is shown up to this many characters."""
_MAX_OUTPUT = (MAX_MATCHES + 1) * (12 * (MAX_LINE + 1) + 6 * 4096 + 64)
"""What the child can print at most: MAX_MATCHES lines of MAX_LINE + 1 characters (a JSON escape of a character
outside the BMP takes 12) and a name of at most 4096 bytes (a control byte's escape takes 6), and the last line."""
CHILD = Path(__file__).with_name("_grep_child.py")


def _search_process_argv() -> list[str]:
    # Isolated (-I: no environment variables, no user site), no site-packages (-S), UTF-8 paths and text (-X utf8).
    return [sys.executable, "-I", "-S", "-X", "utf8", str(CHILD)]


async def _drain(stream: anyio.abc.ByteReceiveStream | None, cap: int, into: bytearray) -> None:
    if stream is None:
        return
    async for chunk in stream:
        if len(into) < cap:
            into += chunk[: cap - len(into)]


def _feed(pattern: str, files: list[tuple[Path, str]], deadline_s: float) -> bytes:
    """The child's input: the header line, then one line per file."""
    # One character more than is shown: enough for cut_head to find the last whole word before the cap.
    header = {"pattern": pattern, "max_matches": MAX_MATCHES, "max_file": MAX_FILE, "max_line": MAX_LINE + 1,
              "deadline_s": deadline_s + 1, "parent": os.getpid()}
    lines = [json.dumps(header), *(json.dumps([str(path), name]) for path, name in files)]
    return ("\n".join(lines) + "\n").encode("utf-8", errors="surrogateescape")


async def _match(data: bytes) -> tuple[list[Any], dict[str, Any]]:
    """Run the child on its input; it is killed when this is cancelled (the call's deadline, Ctrl-C)."""
    try:
        proc = await anyio.open_process(_search_process_argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, start_new_session=True, env={})
    except OSError as exc:
        raise ToolError(f"cannot start the search process: {exc.strerror or exc}") from None
    out, err = bytearray(), bytearray()

    async def send() -> None:
        assert proc.stdin is not None
        # The child stops reading after MAX_MATCHES matches and exits: the rest of the list has no reader.
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await proc.stdin.send(data)
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await proc.stdin.aclose()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(send)
            tg.start_soon(_drain, proc.stderr, 8192, err)
            await _drain(proc.stdout, _MAX_OUTPUT, out)
        code = await proc.wait()
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with anyio.CancelScope(shield=True):
            await proc.wait()
            await proc.aclose()
    lines = out.decode("utf-8", errors="replace").splitlines()
    if code != 0 or not lines:
        detail = err.decode("utf-8", errors="replace").strip().splitlines()
        raise ToolError(f"the search process failed (exit {code}){': ' + detail[-1] if detail else ''}")
    try:
        done = json.loads(lines[-1])["done"]
        return [json.loads(line) for line in lines[:-1]], done
    except (ValueError, KeyError, TypeError):
        raise ToolError("the search process gave an answer that could not be read") from None


async def grep(args: Mapping[str, Any], ctx: ToolContext, start: Path) -> ToolOutput:
    pattern: str = args["pattern"]
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise ToolError(f"invalid regular expression: {exc}") from None

    def walk(stop: Stop) -> tuple[bytes | None, int, bool]:
        if not start.is_dir():  # one file: a FIFO or a device is refused as read_file refuses it
            os.close(open_regular(start, args.get("path", "."), "grep searches"))
        walker = Walker(ctx.workspace, ctx.path_filter, stop)
        files: list[tuple[Path, str]] = []
        too_many = False
        for path in walker.files(start):
            if len(files) == MAX_FILES:
                too_many = True
                break
            files.append((path, walker.rel(path)))
        return (_feed(pattern, files, ctx.deadline_s) if files else None), walker.skipped, too_many

    feed, skipped, too_many = await run_stoppable(walk)
    matches, done = await _match(feed) if feed is not None else ([], {})
    lines = []
    for name, number, text in matches:
        shown = cut_head(text, MAX_LINE) if len(text) > MAX_LINE else text
        lines.append(f"{name}:{number}:{shown}" + (" [line cut]" if shown != text else ""))
    if done.get("stopped"):
        lines.append(f"... stopped after {MAX_MATCHES} matches")
    if not lines:
        lines.append("(no matches)")
    if too_many:
        lines.append(f"[searched the first {MAX_FILES} files only; give a narrower path]")
    if done.get("large"):
        lines.append(f"[{done['large']} file(s) over {MAX_FILE // (1024 * 1024)} MiB not searched]")
    if skipped:
        lines.append(skipped_note(skipped, ctx.path_filter))
    return ToolOutput("\n".join(lines))
