"""Choosing the model adapter from `--model` (`script:PATH`, `anthropic[:NAME]`), and closing it once its session is
done with it."""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

import anyio

from core.env_block import take_secret
from core.errors import UsageError
from core.model import ModelAdapter
from core.model.scripted import CHILD_MARK, ScriptedModel

M = TypeVar("M", bound=ModelAdapter | None)

_CHILD = re.compile(r"\d+(\.\d+)*")

API_KEY_ENV = "ANTHROPIC_API_KEY"
NO_API_KEY = ("no Anthropic API key: set the ANTHROPIC_API_KEY environment variable to your key, "
              "or use --model script:PATH for the offline scripted model")


def model_from_spec(spec: str | None, env: Mapping[str, str] | None = None) -> ModelAdapter:
    """Build the adapter `spec` names. `env` (default: the process environment) supplies ANTHROPIC_API_KEY and
    ANTHROPIC_BASE_URL; the model path itself never reads the environment. From the process environment the key
    is taken (`held_api_key`), so every later model of this process (a delegated child, a daemon's next session, a
    resumed one) gets it from where it was kept."""
    if not spec:
        raise UsageError("no model chosen",
                         hint="pass --model anthropic:NAME (the API; needs ANTHROPIC_API_KEY) or --model "
                              "script:PATH (the offline scripted model, see examples/), or set STRATA_MODEL")
    kind, _, rest = spec.partition(":")
    if kind == "script" and rest:
        path, child = _script_child(rest)
        return ScriptedModel.from_file(Path(path).expanduser().resolve(), child)
    if kind == "anthropic":
        api_key = (env.get(API_KEY_ENV, "") if env is not None else held_api_key()).strip()
        env = os.environ if env is None else env
        if not api_key:
            raise UsageError(NO_API_KEY)  # one line, no hint: it already says both ways forward
        # Imported here, once there is a key to use it with, so that commands which never call the API (or cannot,
        # without a key) do not pay for loading the SDK (~0.7 s of CPU).
        from core.model.anthropic import DEFAULT_MODEL, AnthropicModel

        base_url = env.get("ANTHROPIC_BASE_URL", "").strip() or None
        return AnthropicModel(rest.strip() or DEFAULT_MODEL, api_key=api_key, base_url=base_url)
    raise UsageError(f"unknown model {spec!r}", hint="use script:PATH or anthropic:NAME")


async def close_model(model: ModelAdapter | None) -> None:
    """Close what `model` holds open: the Anthropic adapter's HTTP client, with its pooled connections (left open,
    the interpreter closes them after the event loop is gone: an unclosed-socket warning, a connection the server
    keeps waiting on). An adapter without `aclose()` (the scripted model) holds nothing. Closing one again does
    nothing. Shielded: it closes on an interrupt too, which is when it matters most.

    Who closes: a session closes the model it runs with when it is released (agent/session.py `LiveSession`), and
    `resume_session` one its `model_factory` made when the resume fails; whoever made a model closes it when the
    session it was made for was never returned (a failed start, a refused resume): `closed_on_failure`."""
    aclose = getattr(model, "aclose", None)
    if aclose is None:
        return
    with anyio.CancelScope(shield=True):
        await aclose()


@asynccontextmanager
async def closed_on_failure(model: M) -> AsyncIterator[M]:
    """`model` for a block that starts or resumes a session with it: closed if the block fails (no session took
    it); once a session is returned it is the session's, closed by its release."""
    try:
        yield model
    except BaseException:
        await close_model(model)
        raise


def held_api_key() -> str:
    """The model's API key, taken out of the process environment on first use (core/env_block.py): removed from
    os.environ, so no command or server Strata starts inherits it, and blanked in the environment block the kernel
    shows any process of the same user (/proc/PID/environ), where a `bash` command could read its parent's; kept
    for this process. "" when none was set."""
    return take_secret(API_KEY_ENV) or ""


def script_path(spec: str) -> str | None:
    """The file a `script:PATH` model (or `script:PATH#child=N`) reads, as the spec gives it; None for another model."""
    kind, _, rest = spec.partition(":")
    return _script_child(rest)[0] if kind == "script" and rest else None


def _script_child(rest: str) -> tuple[str, tuple[int, ...]]:
    """`PATH#child=0.1` -> (PATH, (0, 1)); a path without such a suffix is the top level."""
    path, mark, child = rest.rpartition(CHILD_MARK)
    if mark and path and _CHILD.fullmatch(child):
        return path, tuple(int(i) for i in child.split("."))
    return rest, ()


def child_model_name(parent: str, index: int) -> str:
    """The model a parent's `index`-th child session (0 first) runs with: a scripted parent's child reads its own
    turns from the same script (`script:PATH#child=N`, nested `#child=N.M`); any other model is the parent's."""
    kind, _, rest = parent.partition(":")
    if kind != "script" or not rest:
        return parent
    path, child = _script_child(rest)
    return f"script:{path}{CHILD_MARK}{'.'.join(map(str, (*child, index)))}"
