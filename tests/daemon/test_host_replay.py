"""An attachment's replay and the model's streamed text, with real parts (a SQLite home, the scripted model, real
tool handlers): an attachment that asks for the events from a seq gets each committed event exactly once, in
order, across the boundary between the store's pages and the live stream, even while the session commits; text
deltas reach attachments before their message is committed, and one that is behind loses deltas, never events."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from agent.daemon import Attachment, Notice, SessionEvent, TextDelta, TurnResult
from agent.daemon import _attachment as attachment_module
from tests.daemon._support import host_on, is_result, read_until, script, text, tool_use, wait_for

MAX_WATCHERS = 300


class _Collector:
    """Every seq an attachment delivers, read as it comes."""

    def __init__(self, attachment: Attachment, since: int) -> None:
        self.attachment = attachment
        self.since = since
        self.seqs: list[int] = []

    async def run(self) -> None:
        async for message in self.attachment:
            if isinstance(message, SessionEvent):
                self.seqs.append(message.item.seq)


async def test_attachments_replaying_while_the_session_commits_get_every_event_once_in_order(
        strata_home: Path, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Watchers attach at many points of a running turn (between any two commits the event loop lets them in),
    each asking for the events from seq 1 or from the middle; pages of 3 events make the store/live boundary fall
    everywhere. Each one ends with exactly the session's seqs from where it asked, no gap, no repeat."""
    monkeypatch.setattr(attachment_module, "REPLAY_PAGE", 3)
    (workspace / "a.txt").write_text("a\n")
    turns = [[tool_use(f"r{k}", "read_file", path="a.txt"), tool_use(f"q{k}", "read_file", path="a.txt")]
             for k in range(25)]
    model = script(tmp_path / "s.json", *turns, [text("read them all")])
    async with host_on(strata_home) as (rt, host), anyio.create_task_group() as tg:
        sid = await host.new_session(workspace=workspace, model=model)
        driver = await host.attach(sid, "drive", since_seq=1)
        first = await read_until(driver, lambda m: isinstance(m, SessionEvent))
        assert isinstance(first[0], SessionEvent) and first[0].item.seq == 1
        assert first[0].item.event.kind == "session_started"  # committed before anyone attached
        await host.prompt(driver, "read")
        done = anyio.Event()

        async def drive() -> None:
            await read_until(driver, is_result, timeout=60)
            done.set()

        tg.start_soon(drive)
        collectors: list[_Collector] = []
        k = 0
        # At most MAX_WATCHERS, spread over the turn (the session commits between rounds): unbounded, a fast
        # loop attached thousands, whose replays could not catch up in any fixed time.
        while not done.is_set() and len(collectors) < MAX_WATCHERS:
            since = 1 if k % 2 == 0 else 1 + (k * 7) % 60  # the turn commits more than 60
            collector = _Collector(await host.attach(sid, "watch", since_seq=since), since)
            collectors.append(collector)
            tg.start_soon(collector.run)
            for _ in range(k % 5):
                await anyio.lowlevel.checkpoint()
            if k % 10 == 9:
                await anyio.sleep(0.002)
            k += 1
        with anyio.fail_after(60):
            await done.wait()
        final = (await rt.store.read_events(sid))[-1].seq
        try:
            await wait_for(lambda: all(c.seqs[-1:] == [final] for c in collectors), timeout=30)
        except TimeoutError:
            bad = [(c.since, c.seqs[-3:], c.attachment.closed_by, c.attachment.replaying) for c in collectors
                   if c.seqs[-1:] != [final]]
            raise AssertionError(f"{len(collectors)} {final} {bad[:5]}") from None
        assert len(collectors) > 10
        for c in collectors:
            assert c.seqs == list(range(c.since, final + 1)), (c.since, c.seqs)
        tg.cancel_scope.cancel()


async def test_an_attachment_without_since_seq_gets_only_what_is_committed_after_it(
        strata_home: Path, workspace: Path, tmp_path: Path) -> None:
    model = script(tmp_path / "s.json", [text("hello")])
    async with host_on(strata_home) as (_rt, host):
        sid = await host.new_session(workspace=workspace, model=model)
        driver = await host.attach(sid, "drive")
        await host.prompt(driver, "hi")
        seen = await read_until(driver, is_result)
        seqs = [m.item.seq for m in seen if isinstance(m, SessionEvent)]
        assert seqs and seqs[0] > 1 and seqs == list(range(seqs[0], seqs[-1] + 1))


async def test_text_deltas_reach_every_attachment_before_the_message_that_commits_them(
        strata_home: Path, workspace: Path, tmp_path: Path) -> None:
    model = script(tmp_path / "s.json", [text("hello "), text("there")])
    async with host_on(strata_home) as (rt, host):
        sid = await host.new_session(workspace=workspace, model=model)
        driver = await host.attach(sid, "drive")
        watcher = await host.attach(sid, "watch")
        await host.prompt(driver, "greet")
        for attachment in (driver, watcher):
            seen = await read_until(attachment, is_result)
            deltas = [m for m in seen if isinstance(m, TextDelta)]
            assert [(d.text, d.attempt, d.offset) for d in deltas] == [("hello ", 1, 0), ("there", 1, 6)]
            message = next(i for i, m in enumerate(seen) if isinstance(m, SessionEvent)
                           and m.item.event.kind == "assistant_message")
            assert max(seen.index(d) for d in deltas) < message
        assert not [e for e in await rt.store.read_events(sid) if "delta" in e.event.kind]  # never persisted


async def test_an_attachment_that_is_behind_loses_text_deltas_but_no_event_and_stays_attached(
        strata_home: Path, workspace: Path, tmp_path: Path) -> None:
    """A queue of 8 messages nobody reads during a turn of 20 streamed blocks: deltas are kept only while the
    queue is under half full, so the turn's events and its result still fit, and the attachment is not dropped."""
    model = script(tmp_path / "s.json", [text(f"block {i} ") for i in range(20)])
    async with host_on(strata_home, queue_size=8) as (_rt, host):
        sid = await host.new_session(workspace=workspace, model=model)
        driver = await host.attach(sid, "drive")
        await host.prompt(driver, "talk")
        with anyio.fail_after(30):
            while (await host.status())[0].turn_running:  # noqa: ASYNC110 - nothing signals it
                await anyio.sleep(0.02)  # the turn runs with nobody reading
        seen = await read_until(driver, is_result)
        assert not any(isinstance(m, Notice) for m in seen)  # not dropped
        deltas = [m for m in seen if isinstance(m, TextDelta)]
        assert 0 < len(deltas) < 20
        assert [d.offset for d in deltas] == [sum(len(f"block {i} ") for i in range(j)) for j in range(len(deltas))]
        events = [m.item.event.kind for m in seen if isinstance(m, SessionEvent)]
        assert "assistant_message" in events
        result = seen[-1]
        assert isinstance(result, TurnResult) and result.status == "completed"
        assert driver.attached
