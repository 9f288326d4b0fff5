"""Helpers for the host's tests: a real runtime on a fresh home with a SessionHost on it, scripted turns, and
reading an attachment until a message arrives."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from agent.daemon import Attachment, Outbound, SessionHost, TurnResult
from agent.models import model_from_spec
from agent.session import Runtime, runtime
from config import load_config


def home_env(home: Path) -> dict[str, str]:
    return {"STRATA_HOME": str(home), "XDG_CONFIG_HOME": str(home / "xdg-config")}


@asynccontextmanager
async def host_on(home: Path, **options: Any) -> AsyncIterator[tuple[Runtime, SessionHost]]:
    """A runtime as `strata run` builds it, on `home`, and a host on it."""
    config = load_config(workspace=None, env=home_env(home))
    options.setdefault("model_factory", model_from_spec)
    async with runtime(config) as rt, SessionHost.open(rt, **options) as host:
        yield rt, host


def script(path: Path, *turns: list[dict[str, Any]]) -> str:
    """A scripted model file; the model spec that names it."""
    path.write_text(json.dumps(list(turns)), encoding="utf-8")
    return f"script:{path}"


def tool_use(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": args}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


async def read_until(attachment: Attachment, done: Callable[[Outbound], bool],
                     timeout: float = 30) -> list[Outbound]:
    """Every message up to and including the first that `done` accepts."""
    seen: list[Outbound] = []
    with anyio.fail_after(timeout):
        async for message in attachment:
            seen.append(message)
            if done(message):
                return seen
    raise AssertionError(f"the attachment closed before the awaited message; it got {seen!r}")


def is_result(message: Outbound) -> bool:
    return isinstance(message, TurnResult)


async def wait_for(condition: Callable[[], bool], timeout: float = 30) -> None:
    """Poll something outside the event loop (a file a `bash` command writes): nothing can signal it."""
    with anyio.fail_after(timeout):
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(0.02)
