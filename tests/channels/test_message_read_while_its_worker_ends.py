"""A thread's message read while the thread's worker is ending is handled, not stranded. The worker, its queue
empty, lets the thread's claim go in the book (a write, which waits while another process writes to the book) and
only then marks the thread not running; a poll in between queued the new message behind a worker that was leaving,
and no worker was started for it (the thread was still `running`): the message sat in the inbox unanswered until
another message of the same thread came, or for ever.

In the test's own process (the poller's timing is not reachable from outside): the real channel runner, a real
spool, the home's SQLite store and book, a real session on a scripted model. The book's claim release is held until
the second message was polled, as a busy book holds it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from agent.channels import ChannelRunner
from agent.models import model_from_spec
from agent.session import Runtime
from config import load_config
from memory.channel_book import ChannelBook
from tests.channels._support import drop, pending, replies, spool_table
from tests.cli._helpers import text
from tests.serve._procs import script

pytestmark = pytest.mark.slow


async def _until(condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
    with anyio.move_on_after(timeout):
        while not condition():  # noqa: ASYNC110 - files, not an event
            await anyio.sleep(0.02)
        return
    raise AssertionError(f"{what} did not happen within {timeout:g} s")


@pytest.mark.anyio
async def test_a_message_polled_while_its_threads_worker_lets_the_claim_go_is_answered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, ws, spool = tmp_path / "home", tmp_path / "ws", tmp_path / "spool"
    ws.mkdir()
    config_file = home / "xdg-config" / "strata" / "config.toml"
    config_file.parent.mkdir(parents=True)
    model = script(tmp_path / "s.json", [text("first answer")], [text("second answer")])
    config_file.write_text(spool_table("ch", spool, ws, model))
    loaded = load_config(workspace=None, env={"STRATA_HOME": str(home), "XDG_CONFIG_HOME": str(home / "xdg-config")})
    releasing, go = threading.Event(), threading.Event()
    release = ChannelBook.release_claim

    def busy_release(book: ChannelBook, channel: str, thread_id: str, token: str) -> None:
        if not releasing.is_set():
            releasing.set()
            go.wait(10)  # the book busy with another writer
        release(book, channel, thread_id, token)

    monkeypatch.setattr(ChannelBook, "release_claim", busy_release)
    drop(spool / "in", "m1", thread="t", id="m1", text="First")
    rt = await Runtime.open(loaded)
    try:
        async with ChannelRunner.open(rt, loaded, model_factory=model_from_spec, interval=0.02) as runner:
            await _until(releasing.is_set, "the first message's worker letting its claim go")
            drop(spool / "in", "m2", thread="t", id="m2", text="Second")
            await anyio.sleep(0.5)  # polled 25 times meanwhile
            go.set()
            await _until(lambda: len(replies(spool / "out")) == 2 and not pending(spool / "in"),
                         "the second message answered", timeout=15)
            await runner.drain(1.0)
    finally:
        go.set()
        with anyio.CancelScope(shield=True):
            await rt.close()
    by_id = {r["in_reply_to"]: r for r in replies(spool / "out")}
    assert sorted(by_id) == ["m1", "m2"]
    assert by_id["m1"]["session_id"] == by_id["m2"]["session_id"]
