"""File tools: read_file, write_file (atomic), edit_file (exact unique match), list_dir, glob, grep.

Every handler re-resolves its paths inside the workspace, so a handler is safe even if called without the scope
check. Blocking file work runs in a worker thread the call can stop waiting for (core/tools/blocking.py), and each
step of it is bounded: reads are capped and refuse FIFOs and devices (tool_executor/builtin/_read.py), walks check
the stop flag at every entry and skip what the policy's path filter keeps from the call
(tool_executor/builtin/_walk.py), and grep's matching runs in a child process that is killed at the deadline
(tool_executor/builtin/_grep.py)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from core.tools import (
    ProbeResult,
    Stop,
    ToolContext,
    ToolError,
    ToolOutput,
    ToolSpec,
    run_stoppable,
    skipped_note,
)
from tool_executor.builtin._read import READ_CAP, os_error, read_capped, read_note, read_whole, shows_whole
from tool_executor.builtin._walk import Walker
from tool_executor.paths import (
    OutsideWorkspace,
    relative_pattern_problem,
    relative_text,
    resolve_in_workspace,
    resolved_text,
    workspace_root,
)

MAX_LIST = 1000


def _path(ctx: ToolContext, raw: str) -> Path:
    return Path(_path_text(ctx, raw))


def _path_text(ctx: ToolContext, raw: str) -> str:
    try:
        return resolved_text(ctx.workspace, raw)
    except OutsideWorkspace as exc:
        raise ToolError(str(exc)) from None


def _rel(ctx: ToolContext, path: Path | str) -> str:
    """The workspace-relative form of a path `_path` (or `_path_text`) resolved."""
    return relative_text(os.fspath(workspace_root(ctx.workspace)), os.fspath(path))


def _umask() -> int:
    """The process umask, read without changing it (os.umask would race with other threads)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def atomic_write(path: Path, data: bytes) -> None:
    """Write via a temp file in the same directory, fsync, rename over the target, fsync the directory."""
    import tempfile  # with shutil, bz2 and lzma: only when a file is written, not at every session's start

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".strata-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        else:
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


async def read_file(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
    path = _path_text(ctx, args["path"])
    offset, limit = int(args.get("offset", 0)), int(args.get("limit", READ_CAP))

    def run(stop: Stop) -> str:
        data, size = read_capped(path, args["path"], stop, offset=offset, limit=limit)
        text = data.decode("utf-8", errors="replace")
        if shows_whole(offset, len(data), size):  # no note, so no workspace-relative name to show in it
            return text
        note = read_note(_rel(ctx, path), offset, len(data), size)
        return text if note is None else f"{note}\n{text}"

    return ToolOutput(await run_stoppable(run))


async def write_file(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
    path = _path(ctx, args["path"])
    data = args["content"].encode("utf-8")

    def run() -> None:
        if path.is_dir():
            raise ToolError(f"{args['path']} is a directory")
        try:
            atomic_write(path, data)
        except OSError as exc:
            raise os_error(exc, f"write {args['path']}") from None

    await anyio.to_thread.run_sync(run)
    return ToolOutput(f"wrote {len(data)} bytes to {_rel(ctx, path)}")


async def edit_file(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
    path = _path(ctx, args["path"])
    old, new = args["old"], args["new"]

    def run(stop: Stop) -> None:
        try:
            text = read_whole(path, args["path"], stop, verb="edit_file edits").decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{args['path']} is not UTF-8 text") from None
        count = text.count(old)
        if count == 0:
            raise ToolError(f"the text to replace was not found in {args['path']}; nothing changed")
        if count > 1:
            raise ToolError(f"the text to replace occurs {count} times in {args['path']}; give a longer, "
                            "unique excerpt; nothing changed")
        try:
            atomic_write(path, text.replace(old, new, 1).encode("utf-8"))
        except OSError as exc:
            raise os_error(exc, f"write {args['path']}") from None

    # Once the write has started it finishes: a rename abandoned half way is not a state to leave behind.
    await anyio.to_thread.run_sync(run, Stop())
    return ToolOutput(f"edited {_rel(ctx, path)}: replaced 1 occurrence")


async def list_dir(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
    path = _path(ctx, args["path"])

    def run(stop: Stop) -> str:
        walker = Walker(ctx.workspace, ctx.path_filter, stop)
        try:
            entries = walker.entries(path, strict=True)
        except NotADirectoryError:
            raise ToolError(f"{args['path']} is not a directory") from None
        except OSError as exc:
            raise os_error(exc, f"list {args['path']}") from None
        shown = [e for e in entries if not walker.blocked(Path(e.path))]
        names = [e.name + ("/" if _is_dir(e) else "") for e in shown[:MAX_LIST]]
        if len(shown) > MAX_LIST:
            names.append(f"... and {len(shown) - MAX_LIST} more")
        lines = names or ["(empty directory)" if not walker.skipped else "(nothing to show)"]
        if walker.skipped:
            lines.append(skipped_note(walker.skipped, ctx.path_filter))
        return "\n".join(lines)

    return ToolOutput(await run_stoppable(run))


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


async def glob_files(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
    pattern = args["pattern"]
    problem = relative_pattern_problem(pattern)
    if problem:
        raise ToolError(problem)
    if not Path(pattern).parts or pattern.strip() in (".", ""):
        raise ToolError(f"pattern {pattern!r} matches nothing; use a pattern such as *.py or **/*.md")

    def run(stop: Stop) -> str:
        walker = Walker(ctx.workspace, ctx.path_filter, stop)
        found: list[str] = []
        for match in walker.glob(pattern):
            found.append(walker.rel(match))
            if len(found) > MAX_LIST:
                break
        found.sort()
        lines = found[:MAX_LIST] or ["(no matches)"]
        if len(found) > MAX_LIST:
            lines.append(f"... more than {MAX_LIST} matches")
        if walker.skipped:
            lines.append(skipped_note(walker.skipped, ctx.path_filter))
        return "\n".join(lines)

    return ToolOutput(await run_stoppable(run))


async def grep(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
    import tool_executor.builtin._grep as _grep  # at the first grep call: a session that greps nothing needs none

    return await _grep.grep(args, ctx, _path(ctx, args.get("path", ".")))


async def probe_write(args: Mapping[str, Any], ctx: ToolContext) -> ProbeResult:
    """Does the file now hold exactly the bytes the call meant to write?"""
    path = _path(ctx, args["path"])
    want = args["content"].encode("utf-8")

    def run(stop: Stop) -> ProbeResult:
        if not os.path.lexists(path):
            return ProbeResult("not_applied", f"{_rel(ctx, path)} does not exist")
        try:  # one byte more than intended tells a longer file apart
            got, _ = read_capped(path, _rel(ctx, path), stop, limit=len(want) + 1, verb="the probe reads")
        except ToolError as exc:
            return ProbeResult("undecided", str(exc))
        if got == want:
            return ProbeResult("applied", f"{_rel(ctx, path)} holds the intended {len(want)} bytes")
        return ProbeResult("not_applied", f"{_rel(ctx, path)} does not hold the intended bytes "
                                          f"({len(got)} bytes, expected {len(want)})")

    return await run_stoppable(run)


async def probe_edit(args: Mapping[str, Any], ctx: ToolContext) -> ProbeResult:
    """Is the replacement in the file and the original text gone? Undecided when the texts overlap."""
    path = _path(ctx, args["path"])
    old, new = args["old"], args["new"]

    def run(stop: Stop) -> ProbeResult:
        try:
            text = read_whole(path, _rel(ctx, path), stop, verb="the probe reads").decode("utf-8")
        except ToolError as exc:
            return ProbeResult("undecided", str(exc))
        except UnicodeDecodeError as exc:
            return ProbeResult("undecided", f"cannot read {_rel(ctx, path)}: {exc}")
        if old in new or (new and new in old):
            return ProbeResult("undecided", "the old and new text contain each other; decide by hand")
        has_old, has_new = text.count(old), (new in text) if new else False
        if has_old == 0 and (has_new or not new):
            return ProbeResult("applied", f"{_rel(ctx, path)} holds the new text and not the old one")
        if has_old == 1 and not has_new:
            return ProbeResult("not_applied", f"{_rel(ctx, path)} still holds the old text once and not the new one")
        return ProbeResult("undecided", f"{_rel(ctx, path)} holds the old text {has_old} time(s); decide by hand")

    return await run_stoppable(run)


def _fs_key(args: Mapping[str, Any], ctx: ToolContext, name: str = "path", default: str | None = None) -> list[str]:
    raw = args.get(name, default)
    if not isinstance(raw, str):
        return []
    try:
        return [f"fs:{resolve_in_workspace(ctx.workspace, raw)}"]
    except OutsideWorkspace:
        return []


def _ws_key(args: Mapping[str, Any], ctx: ToolContext) -> list[str]:
    return [f"fs:{workspace_root(ctx.workspace)}"]


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


_PATH = {"type": "string", "minLength": 1, "description": "a path relative to the workspace"}


def fs_tools() -> list[ToolSpec]:
    return [
        ToolSpec("read_file", f"Read a UTF-8 text file in the workspace: at most {READ_CAP} bytes per call; "
                 "`offset` and `limit` (bytes) read a part.",
                 _schema({"path": _PATH, "offset": {"type": "integer", "minimum": 0},
                          "limit": {"type": "integer", "minimum": 1, "maximum": READ_CAP}}, ["path"]),
                 read_file, safety="read", effect="read_only", path_args=("path",),
                 primary_arg="path", primary_kind="path",
                 resource_keys=_fs_key, timeout_s=30),
        ToolSpec("write_file", "Write a file in the workspace (atomically), creating parent directories.",
                 _schema({"path": _PATH, "content": {"type": "string"}}, ["path", "content"]),
                 write_file, safety="write", effect="effectful", path_args=("path",),
                 primary_arg="path", primary_kind="path",
                 resource_keys=_fs_key, timeout_s=30, probe=probe_write),
        ToolSpec("edit_file", "Replace one exact, unique occurrence of `old` with `new` in a workspace file.",
                 _schema({"path": _PATH, "old": {"type": "string", "minLength": 1}, "new": {"type": "string"}},
                         ["path", "old", "new"]),
                 edit_file, safety="write", effect="effectful", path_args=("path",),
                 primary_arg="path", primary_kind="path",
                 resource_keys=_fs_key, timeout_s=30, probe=probe_edit),
        ToolSpec("list_dir", "List a directory in the workspace.", _schema({"path": _PATH}, ["path"]),
                 list_dir, safety="read", effect="read_only", path_args=("path",),
                 primary_arg="path", primary_kind="path",
                 resource_keys=_fs_key, timeout_s=30),
        ToolSpec("glob", "Find workspace files matching a glob pattern such as **/*.py.",
                 _schema({"pattern": {"type": "string", "minLength": 1}}, ["pattern"]),
                 glob_files, safety="read", effect="read_only", primary_arg="pattern", resource_keys=_ws_key,
                 timeout_s=30),
        ToolSpec("grep", "Search workspace files for a regular expression; optional path narrows the search.",
                 _schema({"pattern": {"type": "string", "minLength": 1}, "path": _PATH}, ["pattern"]),
                 grep, safety="read", effect="read_only", path_args=("path",), primary_arg="pattern",
                 resource_keys=lambda a, c: _fs_key(a, c, default="."), timeout_s=60),
    ]
