"""Running hooks: Python callables registered in code and command hooks from (trusted) config.

A command hook is run as `/bin/bash -c COMMAND` in the workspace, in its own process group (which dies with the
Strata process, even one killed with SIGKILL: `_WATCHED`), with the scrubbed environment of the `bash` tool
(tool_executor/child_env.py) plus the variables its config names, and the hook input as one JSON object on stdin;
it answers one JSON object on stdout:

    PreToolUse   {"decision": "allow" | "block" | "rewrite" | "ask", "reason": "...", "input": {...}, "tool": "..."}
    PostToolUse  {"decision": "allow" | "add_context" | "withhold", "text": "...", "reason": "..."}
    Stop         {"decision": "allow" | "repair", "instruction": "..."}

Empty stdout with exit status 0 is "allow" (no opinion). Everything else fails closed: a non-zero exit, a
timeout (the process group is killed), output that is not such an object, a precheck that refuses the run (a
trusted project's hook whose files changed since the trust), or a Python hook that raises or returns the wrong
type all become a block whose reason says what went wrong."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import os
import signal
import subprocess
from collections.abc import Mapping
from typing import Any

import anyio

from core.hooks import (
    Hook,
    HookAddContext,
    HookAllow,
    HookAsk,
    HookBlock,
    HookRepair,
    HookRewrite,
    HookWithhold,
    ObserveInput,
    PostToolUseInput,
    PostToolUseVerdict,
    PreToolUseInput,
    PreToolUseVerdict,
    StopInput,
    StopVerdict,
)
from core.masking import cut_tail
from core.proposal import input_problem
from core.utf8 import unpaired_surrogates, valid_text
from tool_executor.child_env import hook_env

MAX_HOOK_OUTPUT = 256 * 1024
_WATCHED = ["/bin/bash", "--posix", "-c",
            '{ read -r _ <&"$2"; kill -9 0; } </dev/null >/dev/null 2>&1 & eval "exec $2<&-"; '
            'exec /bin/bash -o pipefail -c "$1"', "strata-hook"]
"""Starts the hook (as `/bin/bash -o pipefail -c COMMAND`, the same pid: the group's leader) beside a watchdog in its
process group that reads a pipe only this Strata process holds the write end of: when Strata dies, even by SIGKILL,
the kernel closes it, the read ends, and the watchdog kills the whole group (`kill -9 0`, itself included); while
the watchdog lives the group's id cannot be reused. Bash, not sh: dash cannot name a descriptor above 9, and
opening /dev/fd/N of a pipe would wait forever if Strata were already gone. `--posix` reads no $BASH_ENV (the hook's
own bash does, as before); the hook does not get the pipe (it is closed before the exec)."""

_PRE = (HookAllow, HookBlock, HookRewrite, HookAsk)
_POST = (HookAllow, HookAddContext, HookWithhold)
_STOP = (HookAllow, HookRepair, HookBlock)


class HookFailed(Exception):
    """The hook crashed, timed out or answered something malformed; the caller fails closed."""


def _payload(event: str, data: object) -> bytes:
    body = {"hook": event, **dataclasses.asdict(data)}  # type: ignore[call-overload]
    return json.dumps(body, default=str).encode()


async def _run_command(hook: Hook, stdin: bytes, cwd: str) -> dict[str, Any] | None:
    assert hook.command is not None
    if hook.precheck is not None:
        problem = await anyio.to_thread.run_sync(hook.precheck)
        if problem is not None:
            raise HookFailed(f"not run: {problem}")
    env = hook_env(hook.env)  # what `bash` gets, plus the variables the config names
    alive_read, alive = os.pipe()  # `alive` stays here (not inherited): its end is Strata's end (_WATCHED)
    try:
        # pipefail: a checker killed inside `checker | filter` is a failure, not an empty (allowing) answer
        proc = await anyio.open_process([*_WATCHED, hook.command, str(alive_read)], cwd=cwd,
                                        stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                        env=env, pass_fds=(alive_read,))
    except OSError as exc:
        os.close(alive)
        raise HookFailed(f"could not start: {exc.strerror or exc}") from None
    finally:
        os.close(alive_read)
    out = bytearray()
    err = bytearray()
    overflow: list[bool] = []

    async def pump(stream: Any, buf: bytearray, capped: bool) -> None:
        async for chunk in stream:
            if len(buf) < MAX_HOOK_OUTPUT:
                buf.extend(chunk[: MAX_HOOK_OUTPUT - len(buf)])
            if capped and len(buf) >= MAX_HOOK_OUTPUT and chunk:
                overflow.append(True)

    async def feed() -> None:
        assert proc.stdin is not None
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await proc.stdin.send(stdin)
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await proc.stdin.aclose()

    try:
        with anyio.fail_after(hook.timeout_s):
            # The call goes in while the answer and the log come out: a hook that writes before it reads a big
            # call must not wait on a full pipe.
            async with anyio.create_task_group() as tg:
                tg.start_soon(feed)
                tg.start_soon(pump, proc.stdout, out, True)
                tg.start_soon(pump, proc.stderr, err, False)
            code = await proc.wait()
    except TimeoutError:
        raise HookFailed(f"timed out after {hook.timeout_s:g} s (its process group was killed)") from None
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # the watchdog too
        os.close(alive)
        with anyio.CancelScope(shield=True):
            await proc.wait()
            with contextlib.suppress(Exception):
                await proc.aclose()
    if code != 0:
        tail = cut_tail(err.decode("utf-8", "replace").strip(), 300)  # no half secret for the masking to miss
        raise HookFailed(f"exited with status {code}" + (f": {tail}" if tail else ""))
    if overflow:  # whatever was cut off may have been the answer
        raise HookFailed(f"answered more than {MAX_HOOK_OUTPUT // 1024} KiB")
    try:
        text = out.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        raise HookFailed(f"answered text that is not UTF-8 (byte {exc.start})") from None
    if not text:
        return None
    try:
        answer = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise HookFailed(f"answered malformed JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:  # a key given twice, a number or a nesting Python cannot hold
        raise HookFailed(f"answered JSON that cannot be read unambiguously ({exc})"[:300]) from None
    if not isinstance(answer, dict):
        raise HookFailed("answered JSON that is not an object")
    return answer


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object with a key given twice is ambiguous (which one did the hook mean?): refused."""
    answer: dict[str, Any] = {}
    for key, value in pairs:
        if key in answer:
            raise ValueError(f"key {key!r} is given twice")
        answer[key] = value
    return answer


def _text(answer: Mapping[str, Any], key: str, *, required: bool) -> str:
    value = answer.get(key, "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise HookFailed(f"answer needs a non-empty string {key!r}")
    return value


def _pre_from_json(answer: Mapping[str, Any] | None) -> PreToolUseVerdict:
    if answer is None:
        return HookAllow()
    decision = answer.get("decision")
    if decision == "allow":
        return HookAllow(_text(answer, "reason", required=False))
    if decision == "block":
        return HookBlock(_text(answer, "reason", required=True))
    if decision == "ask":
        return HookAsk(_text(answer, "reason", required=True))
    if decision == "rewrite":
        new_input = answer.get("input")
        if not isinstance(new_input, dict):
            raise HookFailed("a rewrite needs an 'input' object")
        tool = answer.get("tool")
        if tool is not None and not isinstance(tool, str):
            raise HookFailed("'tool' must be a string")
        return HookRewrite(new_input, tool, _text(answer, "reason", required=False))
    raise HookFailed(f"unknown decision {decision!r} (expected allow, block, rewrite or ask)")


def _post_from_json(answer: Mapping[str, Any] | None) -> PostToolUseVerdict:
    if answer is None:
        return HookAllow()
    decision = answer.get("decision")
    if decision == "allow":
        return HookAllow()
    if decision == "add_context":
        return HookAddContext(_text(answer, "text", required=True))
    if decision == "withhold":
        return HookWithhold(_text(answer, "reason", required=True))
    raise HookFailed(f"unknown decision {decision!r} (expected allow, add_context or withhold)")


def _stop_from_json(answer: Mapping[str, Any] | None) -> StopVerdict:
    if answer is None:
        return HookAllow()
    decision = answer.get("decision")
    if decision == "allow":
        return HookAllow()
    if decision == "repair":
        return HookRepair(_text(answer, "instruction", required=True))
    raise HookFailed(f"unknown decision {decision!r} (expected allow or repair)")


async def _call(hook: Hook, event: str, data: Any, cwd: str, kinds: tuple[type, ...],
                parse: Any) -> Any:
    return _valid_words(await _verdict(hook, event, data, cwd, kinds, parse))


def _valid_words(verdict: Any) -> Any:
    """The verdict with its words (a reason, an instruction, added context, a tool name) as valid UTF-8, as a
    model's text is made (core/utf8.py): a JSON escape of a lone surrogate would otherwise reach a committed event
    (the parked call's reason, the repair message) and refuse that commit on every resume."""
    changes = {f.name: valid_text(value) for f in dataclasses.fields(verdict)
               if isinstance(value := getattr(verdict, f.name), str) and unpaired_surrogates(value)}
    return dataclasses.replace(verdict, **changes) if changes else verdict


async def _verdict(hook: Hook, event: str, data: Any, cwd: str, kinds: tuple[type, ...],
                   parse: Any) -> Any:
    if hook.fn is not None:
        try:
            with anyio.fail_after(hook.timeout_s):
                # A copy: a hook changing its input in place would change the call behind the checks' back.
                verdict = await hook.fn(copy.deepcopy(data))
        except TimeoutError:
            raise HookFailed(f"timed out after {hook.timeout_s:g} s") from None
        except Exception as exc:
            raise HookFailed(f"crashed ({type(exc).__name__}: {exc})") from None
        if not isinstance(verdict, kinds):
            raise HookFailed(f"returned {type(verdict).__name__}, not a verdict")
        if isinstance(verdict, HookRewrite) and (not isinstance(verdict.input, Mapping)
                                                 or not (verdict.tool is None or isinstance(verdict.tool, str))):
            raise HookFailed("a rewrite needs an input mapping (and a tool name string, if any)")
        return verdict
    return parse(await _run_command(hook, _payload(event, data), cwd))


async def run_pre(hook: Hook, data: PreToolUseInput) -> PreToolUseVerdict:
    """The hook's verdict; a failed hook becomes HookBlock saying how it failed. A rewrite's input is judged as a
    model's would be (core/proposal.py): one that could not be stored (NaN, too deep, not UTF-8) fails the hook."""
    try:
        verdict: PreToolUseVerdict = await _call(hook, "PreToolUse", data, data.workspace, _PRE, _pre_from_json)
        if isinstance(verdict, HookRewrite) and (problem := input_problem(verdict.input)) is not None:
            raise HookFailed(f"answered a rewrite whose input {problem}")
    except HookFailed as exc:
        return HookBlock(f"{hook.describe()} failed, so the call is blocked (fail closed): {exc}")
    return verdict


async def run_post(hook: Hook, data: PostToolUseInput) -> PostToolUseVerdict:
    """A failed PostToolUse hook withholds the result (fail closed: the model does not see unchecked output)."""
    try:
        verdict: PostToolUseVerdict = await _call(hook, "PostToolUse", data, data.workspace, _POST,
                                                  _post_from_json)
    except HookFailed as exc:
        return HookWithhold(f"{hook.describe()} failed, so the result is withheld (fail closed): {exc}")
    return verdict


async def run_observe(hook: Hook, data: ObserveInput) -> str | None:
    """Give a lifecycle event to an observation hook. Its answer is ignored; a failure is returned as a note
    (for the log), never raised: an observer cannot change the run."""
    try:
        if hook.fn is not None:
            with anyio.fail_after(hook.timeout_s):
                await hook.fn(data)
        else:
            await _run_command(hook, _payload("Observe", data), data.workspace)
    except HookFailed as exc:
        return f"{hook.describe()} failed: {exc}"
    except TimeoutError:
        return f"{hook.describe()} timed out after {hook.timeout_s:g} s"
    except Exception as exc:
        return f"{hook.describe()} crashed ({type(exc).__name__}: {exc})"
    return None


async def run_stop(hook: Hook, data: StopInput) -> StopVerdict:
    try:
        verdict: StopVerdict = await _call(hook, "Stop", data, data.workspace, _STOP, _stop_from_json)
    except HookFailed as exc:
        return HookBlock(f"{hook.describe()} failed: {exc}")
    return verdict
