"""Approvals over IPC (mode `ipc`) through SessionHost: an ask goes to the driving attachment; with no driver, or
when the driver goes away while the call waits, the call parks durably, and `strata approve|deny` from another
process or a driver attaching later decides it. Real parts: SQLite, real `bash`, the real `strata` CLI."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from agent.daemon import ApprovalAsk, HostRefused, SessionEvent, TurnResult
from core.events import ApprovalGranted
from tests.conftest import StrataCLI
from tests.daemon._support import host_on, is_result, read_until, script, text, tool_use

RUN_ONCE = "echo ran >> runs.log"


def _bash_then_done(tmp_path: Path) -> str:
    return script(tmp_path / "s.json", [tool_use("b1", "bash", command=RUN_ONCE)], [text("done")])


async def _cli(cli: StrataCLI, *args: str) -> tuple[int, str, str]:
    proc = await anyio.to_thread.run_sync(lambda: cli.run(*args))
    return proc.returncode, proc.stdout, proc.stderr


async def test_a_call_parks_when_its_driver_goes_away_and_strata_approve_plus_a_new_attach_run_it_once(
        strata_home: Path, workspace: Path, tmp_path: Path, cli: StrataCLI) -> None:
    """Acceptance 2 without the socket: the driver leaves while `bash` waits for it; the session parks
    (`awaiting_approval`, lease released, the call listed as waiting); `strata approve` from another process
    records the decision; a new driver's attach finishes the batch, and the command runs exactly once."""
    async with host_on(strata_home) as (rt, host):
        sid = await host.new_session(workspace=workspace, model=_bash_then_done(tmp_path))
        driver = await host.attach(sid, "drive")
        watcher = await host.attach(sid, "watch")
        await host.prompt(driver, "run it")
        ask = (await read_until(driver, lambda m: isinstance(m, ApprovalAsk)))[-1]
        assert isinstance(ask, ApprovalAsk) and ask.input == {"command": RUN_ONCE}

        await host.detach(driver)  # what the transport does when the client dies
        result = (await read_until(watcher, is_result))[-1]
        assert isinstance(result, TurnResult)
        assert (result.status, result.exit_code) == ("awaiting_approval", 4)
        assert [(p.call_id, p.tool, p.input) for p in result.parked] == [("b1", "bash", {"command": RUN_ONCE})]
        record = await rt.store.get_session(sid)
        assert record.status == "awaiting_approval" and record.lease is None
        (info,) = await host.status()
        assert info.phase == "parked" and [(w.call_id, w.how) for w in info.waiting] == [("b1", "parked")]
        assert not (workspace / "runs.log").exists()

        code, out, err = await _cli(cli, "approve", sid, "b1")
        assert code == 0, err
        assert not (workspace / "runs.log").exists()  # a decision runs nothing by itself

        again = await host.attach(sid, "drive")
        messages = await read_until(again, is_result)
        assert isinstance(messages[-1], TurnResult) and messages[-1].status == "completed"
        assert not any(isinstance(m, ApprovalAsk) for m in messages)  # decided already: nobody is asked again
        assert (workspace / "runs.log").read_text() == "ran\n"
        (receipt,) = await rt.store.list_receipts(sid)
        assert (receipt.call_id, receipt.status) == ("b1", "done")
    code, out, err = await _cli(cli, "timeline", sid, "--verify", "--json")
    assert code == 0 and json.loads(out)["ok"] is True, out + err
    code, out, _ = await _cli(cli, "timeline", sid, "--json", "--kind", "approval")
    approvals = [json.loads(line) for line in out.splitlines()]
    assert [(a["call_id"], a["decision"], a["outcome"]) for a in approvals] == [
        ("b1", "parked", "parked"), ("b1", "approved", "recorded"), ("b1", "approved", "approved")]
    assert all("via strata approve" in a["check"] for a in approvals[1:])


async def test_a_call_with_no_driver_parks_and_a_driver_attaching_later_to_a_new_host_is_asked_again(
        strata_home: Path, workspace: Path, tmp_path: Path) -> None:
    """The driver leaves before the ask: the call parks (nothing is approved by default). The host stops; a new
    host on the same home, with a driver attaching, asks that driver; its approval runs the command once."""
    async with host_on(strata_home) as (_, host):
        sid = await host.new_session(workspace=workspace, model=_bash_then_done(tmp_path))
        driver = await host.attach(sid, "drive")
        watcher = await host.attach(sid, "watch")
        await host.prompt(driver, "run it")
        await host.detach(driver)  # before the session's task even started the turn
        result = (await read_until(watcher, is_result))[-1]
        assert isinstance(result, TurnResult) and result.status == "awaiting_approval"
    async with host_on(strata_home) as (rt, host):
        watching = await host.attach(sid, "watch")  # a watcher does not take a parked session's lease
        assert (await rt.store.get_session(sid)).lease is None
        driver = await host.attach(sid, "drive")
        ask = (await read_until(driver, lambda m: isinstance(m, ApprovalAsk)))[-1]
        assert isinstance(ask, ApprovalAsk) and ask.call_id == "b1" and ask.input == {"command": RUN_ONCE}
        assert not (workspace / "runs.log").exists()
        await host.approve(driver, "b1", args_sha256=ask.args_sha256, plan_digest=ask.plan_digest)
        messages = await read_until(driver, is_result)
        assert isinstance(messages[-1], TurnResult) and messages[-1].status == "completed"
        granted = [m.item.event for m in messages if isinstance(m, SessionEvent)
                   and isinstance(m.item.event, ApprovalGranted)]
        assert [(g.call_id, g.approver) for g in granted] == [("b1", driver.who)]
        seen = await read_until(watching, is_result)
        assert isinstance(seen[-1], TurnResult) and seen[-1].status == "completed"
    assert (workspace / "runs.log").read_text() == "ran\n"


async def test_an_approval_for_other_arguments_is_refused_and_a_denial_runs_nothing(
        strata_home: Path, workspace: Path, tmp_path: Path) -> None:
    """An approval is bound to the arguments' sha256 and the plan digest the driver was shown: another one is
    refused and the call still waits; a watcher cannot answer; the driver's denial reaches the model and
    nothing runs."""
    async with host_on(strata_home) as (rt, host):
        sid = await host.new_session(workspace=workspace, model=_bash_then_done(tmp_path))
        driver = await host.attach(sid, "drive")
        watcher = await host.attach(sid, "watch")
        await host.prompt(driver, "run it")
        ask = (await read_until(driver, lambda m: isinstance(m, ApprovalAsk)))[-1]
        assert isinstance(ask, ApprovalAsk)
        with pytest.raises(HostRefused) as stale:
            await host.approve(driver, "b1", args_sha256="0" * 64, plan_digest=ask.plan_digest)
        assert stale.value.code == "stale_approval"
        with pytest.raises(HostRefused) as watching:
            await host.approve(watcher, "b1", args_sha256=ask.args_sha256, plan_digest=ask.plan_digest)
        assert watching.value.code == "not_driver"
        with pytest.raises(HostRefused) as unknown:
            await host.deny(driver, "nope")
        assert unknown.value.code == "no_such_call"
        (info,) = await host.status()
        assert info.phase == "approval" and [(w.call_id, w.how) for w in info.waiting] == [("b1", "asking")]

        await host.deny(driver, "b1", reason="not today")
        messages = await read_until(driver, is_result)
        assert isinstance(messages[-1], TurnResult) and messages[-1].status == "completed"
        (denied,) = [m.item.event for m in messages if isinstance(m, SessionEvent)
                     and m.item.event.kind == "call_result"]
        assert denied.status == "denied" and any("not today" in r for r in denied.reasons)
        assert await rt.store.list_receipts(sid) == []
    assert not (workspace / "runs.log").exists()


async def test_strata_deny_from_another_process_settles_a_parked_call_without_running_it(
        strata_home: Path, workspace: Path, tmp_path: Path, cli: StrataCLI) -> None:
    """A parked call denied with `strata deny` is reported to the model as denied when a driver attaches; the
    command never runs."""
    async with host_on(strata_home) as (rt, host):
        sid = await host.new_session(workspace=workspace, model=_bash_then_done(tmp_path))
        driver = await host.attach(sid, "drive")
        watcher = await host.attach(sid, "watch")
        await host.prompt(driver, "run it")
        await read_until(driver, lambda m: isinstance(m, ApprovalAsk))
        await host.detach(driver)
        parked = (await read_until(watcher, is_result))[-1]
        assert isinstance(parked, TurnResult) and parked.status == "awaiting_approval"
        code, _, err = await _cli(cli, "deny", sid, "b1", "--reason", "no")
        assert code == 0, err
        again = await host.attach(sid, "drive")
        messages = await read_until(again, is_result)
        assert isinstance(messages[-1], TurnResult) and messages[-1].status == "completed"
        assert not any(isinstance(m, ApprovalAsk) for m in messages)
        (result,) = [m.item.event for m in messages if isinstance(m, SessionEvent)
                     and m.item.event.kind == "call_result"]
        assert result.status == "denied"
        assert await rt.store.list_receipts(sid) == []
    assert not (workspace / "runs.log").exists()


async def test_a_drain_parks_a_call_that_waits_for_its_driver(
        strata_home: Path, workspace: Path, tmp_path: Path, cli: StrataCLI) -> None:
    """The host drains while the driver is being asked: the call parks (it is not lost, and nothing is approved),
    the lease is released, the driver is told, and the session waits for a decision from any terminal."""
    async with host_on(strata_home) as (rt, host):
        sid = await host.new_session(workspace=workspace, model=_bash_then_done(tmp_path))
        driver = await host.attach(sid, "drive")
        await host.prompt(driver, "run it")
        await read_until(driver, lambda m: isinstance(m, ApprovalAsk))
        with anyio.fail_after(10):
            await host.drain(5)
        rest = [m async for m in driver]
        results = [m for m in rest if isinstance(m, TurnResult)]
        assert [(r.status, [p.call_id for p in r.parked]) for r in results] == [("awaiting_approval", ["b1"])]
        with pytest.raises(HostRefused) as closed:
            await host.attach(sid, "drive")
        assert closed.value.code == "shutting_down"
        record = await rt.store.get_session(sid)
        assert record.status == "awaiting_approval" and record.lease is None
    assert not (workspace / "runs.log").exists()
    code, _, err = await _cli(cli, "approve", sid, "b1")
    assert code == 0, err
    code, _, err = await _cli(cli, "resume", sid, "--json")
    assert code == 0, err
    assert (workspace / "runs.log").read_text() == "ran\n"


async def test_a_driver_that_attaches_while_a_left_drivers_call_is_parking_is_asked_about_it(
        strata_home: Path, workspace: Path, tmp_path: Path) -> None:
    """The driver leaves while a call waits and a new driver attaches before the run has finished parking (no
    await between the two: the session task has not run yet). The new driver is asked about the call once the
    run parked, as a driver attaching to a parked session is; it is not left driving a session nobody asks it
    about (where a prompt is refused until it detaches and attaches again)."""
    async with host_on(strata_home) as (_rt, host):
        sid = await host.new_session(workspace=workspace, model=_bash_then_done(tmp_path))
        first = await host.attach(sid, "drive")
        await host.prompt(first, "run it")
        await read_until(first, lambda m: isinstance(m, ApprovalAsk))
        await host.detach(first)
        second = await host.attach(sid, "drive")  # before the parking run ends

        messages = await read_until(second, lambda m: isinstance(m, ApprovalAsk), timeout=15)
        ask = messages[-1]
        assert isinstance(ask, ApprovalAsk) and ask.call_id == "b1"
        await host.approve(second, "b1", args_sha256=ask.args_sha256, plan_digest=ask.plan_digest)
        result = (await read_until(second, is_result))[-1]
        assert isinstance(result, TurnResult) and result.status == "completed", result
    assert (workspace / "runs.log").read_text() == "ran\n"
