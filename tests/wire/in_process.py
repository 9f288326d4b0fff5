"""`strata run` and `strata resume` in the test's process, for wire tests whose checks are about what the adapter,
the loop and the store did rather than about the CLI's output: the real `anthropic` SDK client (imported once per
worker, where each `strata` process pays ~3 s of CPU for it) against the loopback server, the real AnthropicModel
with its default retry policy, the real loop and tools, and a real SQLite file (the `runtime` fixture,
tests/wire/conftest.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.outcome import RunOutcome
from agent.session import Runtime, resume_session, start_session
from core.model.anthropic import AnthropicModel
from core.state import fold
from observability.session_timeline import load_timeline, timeline_record
from tests.wire.conftest import TEST_KEY

MODEL_NAME = "claude-test"


async def run_headless(rt: Runtime, base_url: str, workspace: Path, prompt: str) -> RunOutcome:
    """What `strata run --model anthropic:claude-test PROMPT` does: start, run, release the lease."""
    model = AnthropicModel(MODEL_NAME, api_key=TEST_KEY, base_url=base_url)
    try:
        live = await start_session(rt, model=model, workspace=workspace, mode="headless", rules=[], prompt=prompt,
                                   max_turns=10)
        outcome = await live.run()
        await live.release(None)
    finally:
        await model.aclose()
    return outcome


async def resume_headless(rt: Runtime, base_url: str, session_id: str, prompt: str) -> RunOutcome:
    """What `strata resume SESSION PROMPT --model anthropic:claude-test` does."""
    model = AnthropicModel(MODEL_NAME, api_key=TEST_KEY, base_url=base_url)
    try:
        live = await resume_session(rt, session_id, rules=[], model=model, prompt=prompt)
        outcome = await live.run(prompt)
        await live.release(None)
    finally:
        await model.aclose()
    return outcome


async def logged_messages(rt: Runtime, session_id: str) -> list[dict[str, Any]]:
    """The conversation as the log holds it, in the shape `strata show --json` prints."""
    return [m.to_api() for m in fold(await rt.store.read_events(session_id)).messages]


async def timeline_in_process(rt: Runtime, session_id: str, *kinds: str) -> list[dict[str, Any]]:
    """The session's timeline rows as the objects `strata timeline ID --json [--kind K]...` prints."""
    return [timeline_record(row) for row in await load_timeline(rt.store, session_id, kinds=kinds or None)]
