"""A driver whose lease is taken while it runs stops (issue 19, item 6): the lease's owner token is renewed by a
heartbeat, and a renewal that finds another token there stops the run before anything else of the session runs
or is written. Real parts: a SQLite file, a second connection to it taking the lease as another process would
after the lease expired unrenewed, and a real `bash` command, whose process group is killed with the run."""

from __future__ import annotations

import json
import os
import socket
from datetime import timedelta
from pathlib import Path

import anyio
import pytest

import agent.session
from agent.models import model_from_spec
from agent.session import runtime, start_session
from config import load_config
from core.clock import SystemClock
from core.errors import LeaseLost
from core.policy import parse_rule
from core.processes import ProcessGroup
from memory import LeaseHolder, SqliteEventStore

TICKER = "echo $$ > cmd.pid; while true; do echo tick >> ticks; sleep 0.05; done"


async def test_a_run_whose_lease_was_taken_stops_before_its_next_effect(
        tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process takes the lease mid-command: the run raises LeaseLost naming it, its command's group is
    gone, and the batch's next call never starts."""
    monkeypatch.setattr(agent.session, "LEASE_TTL", timedelta(seconds=0.6))  # a heartbeat every 0.2 s
    script = tmp_path / "s.json"
    script.write_text(json.dumps([[
        {"type": "tool_use", "id": "tick", "name": "bash", "input": {"command": TICKER}},
        {"type": "tool_use", "id": "next", "name": "bash", "input": {"command": "echo next > next.txt"}},
    ], [{"type": "text", "text": "done"}]]))
    config = load_config(workspace=None, env={"STRATA_HOME": str(tmp_path / "home")})
    settings = config.settings
    async with runtime(config) as rt:
        live = await start_session(rt, model=model_from_spec(f"script:{script}"), workspace=workspace,
                                   mode="headless", rules=[parse_rule("allow", "bash")], prompt="go", max_turns=5)
        other = LeaseHolder(token="the-other-process", pid=os.getpid(), host=socket.gethostname(),
                            expires_at=SystemClock().now() + timedelta(minutes=5))

        async def take_over() -> None:
            while True:  # until the command runs
                if await anyio.Path(workspace / "ticks").exists():
                    break
                await anyio.sleep(0.02)
            second = await SqliteEventStore.open(settings.db_path)
            try:
                await second.acquire_lease(live.id, other, lambda _: False, SystemClock().now())
            finally:
                await second.close()

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(take_over)
                with pytest.raises(LeaseLost) as caught:
                    await live.run()
    assert live.id in str(caught.value) and "taken over" in str(caught.value)
    pgid = int((workspace / "cmd.pid").read_text())
    group = ProcessGroup(pid=pgid, pgid=pgid, start="", boot_id="", pid_ns="", host=socket.gethostname())
    assert group.state() == "gone"
    assert not (workspace / "next.txt").exists()
