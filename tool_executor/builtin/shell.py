"""The bash tool: `bash -c COMMAND` in the workspace, in its own process group, killed (the whole group) when
the deadline passes, when the call is cancelled (Ctrl-C, SIGTERM, SIGHUP) and when the command ends.

The group runs in its own session, so it survives a Strata process killed with SIGKILL. For a later process to
find such an orphan, the group is reported to the executor (`ToolContext.on_spawn`) before the command starts:
the shell is started behind a gate (it waits for a line on its stdin before it execs bash with the command), the group
is reported, and only then is the gate opened. If Strata dies before that, the gate's stdin closes and the shell
exits without running anything; if the report fails, the command is not run either."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping
from typing import Any

import anyio
from anyio.abc import Process

from core.processes import ProcessGroup
from core.tools import ToolContext, ToolError, ToolOutput, ToolSpec, ToolTimeout
from tool_executor.child_env import scrubbed_env
from tool_executor.paths import workspace_root

MAX_OUTPUT = 256 * 1024
DEFAULT_TIMEOUT_S = 120.0
MAX_TIMEOUT_S = 600.0
_GATE = ["/bin/sh", "-c", 'IFS= read -r go; [ "$go" = 1 ] || exit 125; exec </dev/null; exec /bin/bash -c "$1"',
         "strata-bash"]
"""Waits for the go line, then becomes `/bin/bash -c COMMAND` (same pid, so the same group leader and start
time) with stdin from /dev/null, as the command always had. `sh` reads no startup file (bash would read
$BASH_ENV before the gate opens)."""


class _Seen:
    """What became of a command so far, for its interrupt verdict: whether the gate opened (the command itself
    started) and how many bytes it printed."""

    started = False
    printed = 0


async def _open_gate(proc: Process, ctx: ToolContext, seen: _Seen) -> None:
    """Report the group (its leader is our unreaped child, so its pid and start time are reliable), then let the
    command start. A report that fails leaves the gate closed: the shell exits and the command never runs."""
    assert proc.stdin is not None
    if ctx.on_spawn is not None:
        try:
            await ctx.on_spawn(ProcessGroup.of_leader(proc.pid))
        except Exception as exc:
            raise ToolError(f"the command was not started: its process could not be recorded ({exc})") from None
    seen.started = True  # from here on it may have started: a verdict never says it did not when it might have
    await proc.stdin.send(b"1\n")
    await proc.stdin.aclose()


def _kill_group(proc: Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def _read_capped(proc: Process, seen: _Seen) -> bytes:
    assert proc.stdout is not None
    chunks: list[bytes] = []
    async for chunk in proc.stdout:
        if seen.printed < MAX_OUTPUT:
            chunks.append(chunk[: MAX_OUTPUT - seen.printed])
        seen.printed += len(chunk)
    data = b"".join(chunks)
    if seen.printed > MAX_OUTPUT:
        data += f"\n[output truncated: {seen.printed - MAX_OUTPUT} more bytes]".encode()
    return data


async def _group_gone(pgid: int) -> bool:
    """Is every process of the group gone? Members just sent SIGKILL may take a moment to be reaped."""
    for _ in range(20):
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        await anyio.sleep(0.025)
    return False


async def _interrupt_verdict(proc: Process, seen: _Seen) -> str:
    """What a cancelled command did, as far as can be known for certain (its outcome stays unknown)."""
    if not seen.started:
        return "the command had not been started (it was stopped before its shell ran it)"
    gone = await _group_gone(proc.pid)
    drained = False
    if proc.stdout is not None:  # what it printed that was not read yet is in the pipe: counted, not kept
        with anyio.move_on_after(0.5), contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            async for chunk in proc.stdout:
                seen.printed += len(chunk)
            drained = True
    printed = "nothing" if drained and seen.printed == 0 else f"{seen.printed} bytes{'' if drained else ' or more'}"
    group = "its whole process group is gone" if gone else f"some of its process group {proc.pid} may still run"
    return f"the command was killed after it had printed {printed}; {group}"


async def bash(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
    command: str = args["command"]
    timeout = min(float(args.get("timeout_s", DEFAULT_TIMEOUT_S)), MAX_TIMEOUT_S)
    env = scrubbed_env()  # Strata's own model credentials never reach a command the model wrote
    try:
        proc = await anyio.open_process([*_GATE, command], cwd=str(ctx.workspace),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, start_new_session=True, env=env)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte, which the policy check denies before this
        raise ToolError(f"cannot start bash: {getattr(exc, 'strerror', None) or exc}") from None
    seen = _Seen()
    try:
        await _open_gate(proc, ctx, seen)
        with anyio.fail_after(timeout):
            output = await _read_capped(proc, seen)
            code = await proc.wait()
    except TimeoutError:
        _kill_group(proc)
        with anyio.CancelScope(shield=True):
            await proc.wait()
        raise ToolTimeout(f"command timed out after {timeout:g} s; its process group was killed") from None
    except BaseException as exc:
        _kill_group(proc)
        with anyio.CancelScope(shield=True):
            await proc.wait()
            if ctx.on_interrupt is not None and isinstance(exc, anyio.get_cancelled_exc_class()):
                ctx.on_interrupt(await _interrupt_verdict(proc, seen))
        raise
    finally:
        # The command is done, but it may have left children running in its group: they go too.
        _kill_group(proc)
        with contextlib.suppress(Exception):
            await proc.aclose()
    text = output.decode("utf-8", errors="replace")
    return ToolOutput(f"exit code {code}\n{text}", is_error=code != 0)


def _shell_key(args: Mapping[str, Any], ctx: ToolContext) -> list[str]:
    return [f"shell:{workspace_root(ctx.workspace)}"]


def shell_tools() -> list[ToolSpec]:
    return [
        ToolSpec("bash", "Run a bash command in the workspace. Output is stdout and stderr together.",
                 {"type": "object",
                  "properties": {"command": {"type": "string", "minLength": 1},
                                 "timeout_s": {"type": "number", "exclusiveMinimum": 0,
                                               "maximum": MAX_TIMEOUT_S}},
                  "required": ["command"], "additionalProperties": False},
                 bash, safety="execute", effect="effectful", primary_arg="command", primary_kind="command",
                 resource_keys=_shell_key,
                 timeout_s=MAX_TIMEOUT_S + 5),
    ]
