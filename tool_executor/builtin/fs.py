"""File tools: read_file, write_file (atomic), edit_file (exact unique match), list_dir, glob, grep.
Blocking file work runs in a worker thread. Every handler re-resolves its paths inside the workspace, so a
handler is safe even if called without the scope check."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from core.tools import ProbeResult, ToolContext, ToolError, ToolOutput, ToolSpec
from tool_executor.paths import OutsideWorkspace, relative_pattern_problem, resolve_in_workspace

MAX_LIST = 1000
MAX_MATCHES = 500
MAX_GREP_FILE = 2 * 1024 * 1024


def _path(ctx: ToolContext, raw: str) -> Path:
    try:
        return resolve_in_workspace(ctx.workspace, raw)
    except OutsideWorkspace as exc:
        raise ToolError(str(exc)) from None


def _rel(ctx: ToolContext, path: Path) -> str:
    root = Path(os.path.realpath(ctx.workspace))
    return str(path.relative_to(root)) if path != root else "."


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


def _os_error(exc: OSError, what: str) -> ToolError:
    return ToolError(f"cannot {what}: {exc.strerror or exc}")


async def read_file(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
    path = _path(ctx, args["path"])

    def run() -> str:
        try:
            return path.read_bytes().decode("utf-8", errors="replace")
        except IsADirectoryError:
            raise ToolError(f"{args['path']} is a directory; use list_dir") from None
        except OSError as exc:
            raise _os_error(exc, f"read {args['path']}") from None

    return ToolOutput(await anyio.to_thread.run_sync(run))


async def write_file(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
    path = _path(ctx, args["path"])
    data = args["content"].encode("utf-8")

    def run() -> None:
        if path.is_dir():
            raise ToolError(f"{args['path']} is a directory")
        try:
            atomic_write(path, data)
        except OSError as exc:
            raise _os_error(exc, f"write {args['path']}") from None

    await anyio.to_thread.run_sync(run)
    return ToolOutput(f"wrote {len(data)} bytes to {_rel(ctx, path)}")


async def edit_file(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
    path = _path(ctx, args["path"])
    old, new = args["old"], args["new"]

    def run() -> None:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise _os_error(exc, f"read {args['path']}") from None
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
            raise _os_error(exc, f"write {args['path']}") from None

    await anyio.to_thread.run_sync(run)
    return ToolOutput(f"edited {_rel(ctx, path)}: replaced 1 occurrence")


async def list_dir(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
    path = _path(ctx, args["path"])

    def run() -> str:
        try:
            entries = sorted(path.iterdir(), key=lambda p: p.name)
        except NotADirectoryError:
            raise ToolError(f"{args['path']} is not a directory") from None
        except OSError as exc:
            raise _os_error(exc, f"list {args['path']}") from None
        names = [e.name + ("/" if e.is_dir() else "") for e in entries[:MAX_LIST]]
        if len(entries) > MAX_LIST:
            names.append(f"... and {len(entries) - MAX_LIST} more")
        return "\n".join(names) if names else "(empty directory)"

    return ToolOutput(await anyio.to_thread.run_sync(run))


async def glob_files(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
    pattern = args["pattern"]
    problem = relative_pattern_problem(pattern)
    if problem:
        raise ToolError(problem)
    if not Path(pattern).parts or pattern.strip() in (".", ""):
        raise ToolError(f"pattern {pattern!r} matches nothing; use a pattern such as *.py or **/*.md")
    def run() -> str:
        root = Path(os.path.realpath(ctx.workspace))
        found: list[str] = []
        try:
            for match in root.glob(pattern):
                try:
                    resolve_in_workspace(root, str(match))
                except OutsideWorkspace:
                    continue  # a symlink pointing out of the workspace is not reported
                found.append(str(match.relative_to(root)))
                if len(found) > MAX_LIST:
                    break
        except (ValueError, IndexError, NotImplementedError) as exc:
            raise ToolError(f"invalid glob pattern {pattern!r}: {exc}") from None
        found.sort()
        if len(found) > MAX_LIST:
            return "\n".join(found[:MAX_LIST]) + f"\n... more than {MAX_LIST} matches"
        return "\n".join(found) if found else "(no matches)"

    return ToolOutput(await anyio.to_thread.run_sync(run))


async def grep(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
    try:
        regex = re.compile(args["pattern"])
    except re.error as exc:
        raise ToolError(f"invalid regular expression: {exc}") from None
    start = _path(ctx, args.get("path", "."))

    def run() -> str:
        files = [start] if start.is_file() else sorted(p for p in start.rglob("*") if p.is_file())
        lines: list[str] = []
        for f in files:
            try:
                resolved = resolve_in_workspace(ctx.workspace, str(f))
                if resolved.stat().st_size > MAX_GREP_FILE:
                    continue
                data = resolved.read_bytes()
            except (OutsideWorkspace, OSError):
                continue
            if b"\x00" in data[:4096]:
                continue  # binary
            for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
                if regex.search(line):
                    lines.append(f"{_rel(ctx, resolved)}:{number}:{line}")
                    if len(lines) >= MAX_MATCHES:
                        lines.append(f"... stopped after {MAX_MATCHES} matches")
                        return "\n".join(lines)
        return "\n".join(lines) if lines else "(no matches)"

    return ToolOutput(await anyio.to_thread.run_sync(run))


async def probe_write(args: Mapping[str, Any], ctx: ToolContext) -> ProbeResult:
    """Does the file now hold exactly the bytes the call meant to write?"""
    path = _path(ctx, args["path"])
    want = args["content"].encode("utf-8")

    def run() -> ProbeResult:
        try:
            got = path.read_bytes()
        except FileNotFoundError:
            return ProbeResult("not_applied", f"{_rel(ctx, path)} does not exist")
        except OSError as exc:
            return ProbeResult("undecided", f"cannot read {_rel(ctx, path)}: {exc.strerror or exc}")
        if got == want:
            return ProbeResult("applied", f"{_rel(ctx, path)} holds the intended {len(want)} bytes")
        return ProbeResult("not_applied", f"{_rel(ctx, path)} does not hold the intended bytes "
                                          f"({len(got)} bytes, expected {len(want)})")

    return await anyio.to_thread.run_sync(run)


async def probe_edit(args: Mapping[str, Any], ctx: ToolContext) -> ProbeResult:
    """Is the replacement in the file and the original text gone? Undecided when the texts overlap."""
    path = _path(ctx, args["path"])
    old, new = args["old"], args["new"]

    def run() -> ProbeResult:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return ProbeResult("undecided", f"cannot read {_rel(ctx, path)}: {exc}")
        if old in new or (new and new in old):
            return ProbeResult("undecided", "the old and new text contain each other; decide by hand")
        has_old, has_new = text.count(old), (new in text) if new else False
        if has_old == 0 and (has_new or not new):
            return ProbeResult("applied", f"{_rel(ctx, path)} holds the new text and not the old one")
        if has_old == 1 and not has_new:
            return ProbeResult("not_applied", f"{_rel(ctx, path)} still holds the old text once and not the new one")
        return ProbeResult("undecided", f"{_rel(ctx, path)} holds the old text {has_old} time(s); decide by hand")

    return await anyio.to_thread.run_sync(run)


def _fs_key(args: Mapping[str, Any], ctx: ToolContext, name: str = "path", default: str | None = None) -> list[str]:
    raw = args.get(name, default)
    if not isinstance(raw, str):
        return []
    try:
        return [f"fs:{resolve_in_workspace(ctx.workspace, raw)}"]
    except OutsideWorkspace:
        return []


def _ws_key(args: Mapping[str, Any], ctx: ToolContext) -> list[str]:
    return [f"fs:{os.path.realpath(ctx.workspace)}"]


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


_PATH = {"type": "string", "minLength": 1, "description": "a path relative to the workspace"}


def fs_tools() -> list[ToolSpec]:
    return [
        ToolSpec("read_file", "Read a UTF-8 text file in the workspace.", _schema({"path": _PATH}, ["path"]),
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
