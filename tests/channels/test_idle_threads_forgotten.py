"""The channel pollers keep in memory only the threads with work: a thread with nothing queued, running, put off
or waiting for its retry is forgotten (it used to stay, one entry for every thread the daemon ever saw). Its
session stays bound to it in the channel book, so a later message of the thread still goes to the same session.

In the test's own process (the poller's memory is not visible from outside): the real channel runner, a real spool,
the home's SQLite store and book, real sessions on a scripted model."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from agent.channels import ChannelRunner
from agent.models import model_from_spec
from agent.session import Runtime
from config import load_config
from tests.channels._support import drop, pending, replies, spool_table
from tests.cli._helpers import text
from tests.serve._procs import script

pytestmark = pytest.mark.slow

THREADS = 120


async def _until(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    with anyio.move_on_after(timeout):
        while not condition():  # noqa: ASYNC110 - files and the poller's memory, not an event
            await anyio.sleep(0.02)
        return
    raise AssertionError(f"{what} did not happen within {timeout:g} s")


@pytest.mark.anyio
async def test_idle_threads_are_forgotten_and_a_later_message_still_reaches_the_threads_session(
        tmp_path: Path) -> None:
    home, ws, spool = tmp_path / "home", tmp_path / "ws", tmp_path / "spool"
    ws.mkdir()
    config_file = home / "xdg-config" / "strata" / "config.toml"
    config_file.parent.mkdir(parents=True)
    model = script(tmp_path / "s.json", [text("done")])
    config_file.write_text("[daemon]\nmax_workers = 8\n\n" + spool_table("many", spool, ws, model))
    loaded = load_config(workspace=None, env={"STRATA_HOME": str(home), "XDG_CONFIG_HOME": str(home / "xdg-config")})
    for i in range(THREADS):
        drop(spool / "in", f"a{i:04d}", thread=f"t{i}", id=f"a{i}", text=f"Message {i}")
    rt = await Runtime.open(loaded)
    try:
        async with ChannelRunner.open(rt, loaded, model_factory=model_from_spec, interval=0.02) as runner:
            await _until(lambda: len(replies(spool / "out")) == THREADS and not pending(spool / "in"),
                         f"{THREADS} replies")
            await _until(lambda: runner.threads_in_memory == 0, "every idle thread forgotten", timeout=5)
            drop(spool / "in", "b0007", thread="t7", id="b7", text="A second message")
            await _until(lambda: len(replies(spool / "out")) == THREADS + 1 and not pending(spool / "in"),
                         "t7's second message answered")
            await _until(lambda: runner.threads_in_memory == 0, "t7 forgotten again", timeout=5)
            await runner.drain(1.0)
    finally:
        with anyio.CancelScope(shield=True):
            await rt.close()
    by_id = {r["in_reply_to"]: r for r in replies(spool / "out")}
    assert sorted(by_id) == sorted([f"a{i}" for i in range(THREADS)] + ["b7"])
    assert by_id["b7"]["session_id"] == by_id["a7"]["session_id"]
    assert len({r["session_id"] for r in by_id.values()}) == THREADS
    assert {r["status"] for r in by_id.values()} == {"completed"}, json.dumps(by_id["b7"])
