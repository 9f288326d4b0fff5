"""SessionHost with real parts: a SQLite file in a fresh home, the scripted model (strict), real tool handlers and
`bash` subprocesses, and the real `strata` CLI beside the host. Only the person answering is played by the test."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from agent.cli.views import event_view
from agent.daemon import ApprovalAsk, HostRefused, Notice, SessionEvent, TurnResult
from core.errors import SessionActive
from core.hashing import sha256_json
from core.policy import parse_rule
from memory.restore import restore
from tests.conftest import StrataCLI
from tests.daemon._support import host_on, is_result, read_until, script, text, tool_use, wait_for

BIG = "line of the file the model writes\n" * 600  # ~20 KB: the request carries every byte of it


async def test_a_driven_session_asks_its_driver_and_writes_once_while_a_watcher_sees_the_same_events(
        strata_home: Path, workspace: Path, tmp_path: Path) -> None:
    """Acceptance 1 without the socket: a read runs unasked, a write asks the driver with its full arguments, the
    driver approves, the file is written once; a watcher gets the very same events in commit order; a second
    driver is refused with a clear reason."""
    (workspace / "notes.txt").write_text("hello notes\n")
    model = script(tmp_path / "s.json",
                   [tool_use("r1", "read_file", path="notes.txt")],
                   [tool_use("w1", "write_file", path="out.txt", content=BIG)],
                   [text("written")])
    async with host_on(strata_home) as (rt, host):
        sid = await host.new_session(workspace=workspace, model=model)
        driver = await host.attach(sid, "drive")
        watcher = await host.attach(sid, "watch")
        with pytest.raises(HostRefused) as refused:
            await host.attach(sid, "drive")
        assert refused.value.code == "not_driver" and "already has a driving client" in refused.value.message
        await host.prompt(driver, "read the notes, then write out.txt")

        before = await read_until(driver, lambda m: isinstance(m, ApprovalAsk))
        ask = before[-1]
        assert isinstance(ask, ApprovalAsk)
        assert ask.tool == "write_file" and ask.call_id == "w1" and ask.session_id == sid
        assert ask.input["content"] == BIG and ask.input["path"].endswith("out.txt")
        assert ask.args_sha256 == sha256_json(ask.input) and ask.plan_digest and ask.asked_by and ask.reasons
        read = [m.item.event for m in before if isinstance(m, SessionEvent) and m.item.event.kind == "call_result"]
        assert [(r.call_id, r.status) for r in read] == [("r1", "ok")]  # auto-allowed, nobody asked
        assert not (workspace / "out.txt").exists()

        await host.approve(driver, "w1", args_sha256=ask.args_sha256, plan_digest=ask.plan_digest)
        after = await read_until(driver, is_result)
        result = after[-1]
        assert isinstance(result, TurnResult) and (result.status, result.exit_code) == ("completed", 0)
        assert (workspace / "out.txt").read_text() == BIG

        seen = await read_until(watcher, is_result)
        assert not any(isinstance(m, ApprovalAsk) for m in seen)  # asks go to the driver only
        driver_events = [m for m in before + after if isinstance(m, SessionEvent)]
        watcher_events = [m for m in seen if isinstance(m, SessionEvent)]
        assert [m.item for m in watcher_events] == [m.item for m in driver_events]
        assert all(w.item is d.item for w, d in zip(watcher_events, driver_events, strict=True))
        seqs = [m.item.seq for m in driver_events]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # commit order, nothing missing
        for m in driver_events:  # what `strata run --json` prints, plus the session
            view = m.view()
            assert view.pop("session_id") == sid and view == event_view(m.item)
            json.dumps(view)
        receipts = await rt.store.list_receipts(sid)
        assert [(r.call_id, r.tool, r.status) for r in receipts] == [("w1", "write_file", "done")]


async def test_a_hosted_session_cannot_be_resumed_by_another_process(
        strata_home: Path, workspace: Path, tmp_path: Path, cli: StrataCLI) -> None:
    """The host holds the session's lease between turns as `strata chat` does: `strata resume` from another
    process is told the session is active, and nothing of the session changes."""
    model = script(tmp_path / "s.json", [text("hi")])
    async with host_on(strata_home) as (rt, host):
        sid = await host.new_session(workspace=workspace, model=model)
        driver = await host.attach(sid, "drive")
        await host.prompt(driver, "say hi")
        await read_until(driver, is_result)
        before = (await restore(rt.store, sid)).state.last_seq
        proc = await anyio.to_thread.run_sync(lambda: cli.run("resume", sid, "again"))
        assert proc.returncode == 1, proc.stderr
        assert f"session {sid} is active" in proc.stderr and "Traceback" not in proc.stderr
        assert (await restore(rt.store, sid)).state.last_seq == before


async def test_a_session_another_process_drives_cannot_be_attached(
        strata_home: Path, workspace: Path, tmp_path: Path, cli: StrataCLI) -> None:
    """A `strata run` process drives the session: attaching to it is refused with SessionActive, as a second
    `strata resume` would be, and the run goes on untouched."""
    hold = "echo go > started; for i in $(seq 1200); do [ -e release ] && break; sleep 0.05; done"  # <= 60 s
    model = script(tmp_path / "s.json", [tool_use("b1", "bash", command=hold)], [text("ok")])
    proc = cli.popen("run", "--model", model, "--workspace", str(workspace), "--allow", "bash", "--json", "go")
    try:
        async with host_on(strata_home) as (rt, host):
            await wait_for(lambda: (workspace / "started").exists())
            (sid,) = [s.id for s in await rt.store.list_sessions()]
            with pytest.raises(SessionActive) as active:
                await host.attach(sid, "watch")
            assert f"session {sid} is active" in str(active.value)
            assert await host.status() == ()
        (workspace / "release").touch()  # the run held the session until now
        out, err = await anyio.to_thread.run_sync(lambda: proc.communicate(timeout=60))
    finally:
        (workspace / "release").touch()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert json.loads(out.splitlines()[-1])["status"] == "completed"


async def test_a_prompt_while_a_turn_runs_is_refused_and_an_interrupt_closes_the_turn_like_ctrl_c(
        strata_home: Path, workspace: Path, tmp_path: Path, cli: StrataCLI) -> None:
    """One turn at a time (`session_busy`); a watcher cannot prompt; `interrupt` stops a running `bash` as Ctrl-C
    does: its receipt is `unknown`, the batch is closed with a result for the call, the session is idle, the
    timeline verifies, and the next prompt goes on in the same session."""
    model = script(tmp_path / "s.json", [tool_use("b1", "bash", command="echo go > started; sleep 60")],
                   [text("after the interrupt")])
    async with host_on(strata_home) as (rt, host):
        sid = await host.new_session(workspace=workspace, model=model, rules=[parse_rule("allow", "bash")])
        driver = await host.attach(sid, "drive")
        watcher = await host.attach(sid, "watch")
        await host.prompt(driver, "run it")
        await wait_for(lambda: (workspace / "started").exists())
        with pytest.raises(HostRefused) as busy:
            await host.prompt(driver, "another")
        assert busy.value.code == "session_busy"
        with pytest.raises(HostRefused) as watching:
            await host.prompt(watcher, "me too")
        assert watching.value.code == "not_driver"
        (info,) = await host.status()
        assert (info.session_id, info.phase, info.turn_running, info.drivers, info.watchers) == (sid, "act", True, 1, 1)

        with anyio.fail_after(10):
            assert await host.interrupt(driver)
            messages = await read_until(driver, is_result)
        result = messages[-1]
        assert isinstance(result, TurnResult) and (result.status, result.exit_code) == ("interrupted", 130)
        events = [m.item.event for m in messages if isinstance(m, SessionEvent)]
        (call,) = [e for e in events if e.kind == "call_result"]
        assert call.call_id == "b1" and call.status == "unknown"
        assert [e.kind for e in events][-1] == "batch_completed"
        (receipt,) = await rt.store.list_receipts(sid)
        assert receipt.status == "unknown" and "the user interrupted the turn" in (receipt.note or "")
        assert (await rt.store.get_session(sid)).status == "idle"
        verify = await anyio.to_thread.run_sync(lambda: cli.run("timeline", sid, "--verify", "--json"))
        assert verify.returncode == 0 and json.loads(verify.stdout)["ok"] is True, verify.stdout + verify.stderr

        await host.prompt(driver, "go on")
        again = (await read_until(driver, is_result))[-1]
        assert isinstance(again, TurnResult) and again.status == "completed"
        assert again.exit_code == 5  # completed, with the interrupted effect still to reconcile
        assert (workspace / "started").read_text() == "go\n"  # never run again


async def test_an_attachment_that_does_not_keep_up_is_dropped_without_holding_the_session_back(
        strata_home: Path, workspace: Path, tmp_path: Path) -> None:
    """A watcher that reads nothing fills its bounded queue: it is detached with a notice as its last message,
    while the driver gets every event and the turn completes."""
    (workspace / "a.txt").write_text("a\n")
    model = script(tmp_path / "s.json", *[[tool_use(f"r{i}", "read_file", path="a.txt")] for i in range(4)],
                   [text("read four times")])
    async with host_on(strata_home, queue_size=5) as (_, host):
        sid = await host.new_session(workspace=workspace, model=model)
        driver = await host.attach(sid, "drive")
        slow = await host.attach(sid, "watch")

        async def keep_up() -> list[object]:
            return list(await read_until(driver, is_result))

        await host.prompt(driver, "read")
        messages = await keep_up()
        result = messages[-1]
        assert isinstance(result, TurnResult) and result.status == "completed"
        assert sum(1 for m in messages if isinstance(m, SessionEvent)) > 5
        assert not slow.attached
        got = [m async for m in slow]
        assert len(got) == 6 and isinstance(got[-1], Notice) and got[-1].kind == "dropped"
        (info,) = await host.status()
        assert (info.drivers, info.watchers) == (1, 0)
