"""A child of a channel session (mode `daemon`, `delegate_in_daemon`) that parked in a real `strata serve`, decided
with `strata approve CHILD` and finished with `strata resume CHILD` outside the daemon: the resume takes the
recorded approval and runs the call once. An approval is bound to the call's arguments and the plan digest, so the
child's plan must be the same in the daemon and in the CLI. Before, the daemon gave the child the channel's
`reply` tool (the parent's plan, unnarrowed), which no other process has: the CLI's plan differed, the approval
was "given under a different tool plan", and the resumed child parked again on a call already approved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process, show_in_process
from tests.channels._support import drop, replies, session_events, spool_table, write_config
from tests.cli._helpers import EFFECTS_LOG, text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, wait_until

pytestmark = pytest.mark.slow


def test_a_channel_sessions_child_resumed_by_the_cli_takes_its_recorded_approval(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    path = tmp_path / "s.json"
    path.write_text(json.dumps({
        "turns": [[tool_use("p1", "delegate", task="log it")], [text("parent done")]],  # the parent's tools, all
        "children": [[[tool_use("c1", "bash", command=f"echo once >> {EFFECTS_LOG}")], [text("child logged it")]]],
    }), encoding="utf-8")
    write_config(cli, 'delegate_in_daemon = true\n\n[daemon]\nenable = ["bash"]\n\n'
                      '[[policy.rules]]\ntool = "delegate"\naction = "allow"\n\n'
                 + spool_table("ops", tmp_path / "spool", ws, f"script:{path}", on_ask='"park"'))
    daemon = Daemon(cli)
    try:
        drop(tmp_path / "spool" / "in", "m1", thread="t", id="m1", text="Log it through a child")
        wait_until(lambda: len(replies(tmp_path / "spool" / "out")) == 1, what="the message answered (parked)")
    finally:
        daemon.stop()
    (child,) = [r["id"] for r in json_lines_in_process(cli, "sessions", "--json") if r["parent_id"] is not None]
    assert cli.run("approve", child, "--all").returncode == 0
    resumed = cli.run("resume", child, "--json")
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr
    assert (ws / EFFECTS_LOG).read_text() == "once\n"
    kinds = [kind for _, kind, _ in session_events(cli.home, child)]
    assert kinds.count("calls_parked") == 1 and kinds.count("approval_granted") == 1, kinds  # asked once, in serve
    assert show_in_process(cli, child)["session"]["status"] == "completed"
    started = next(p for _, kind, p in session_events(cli.home, child) if kind == "session_started")
    assert "reply" not in started["tools_allowed"], started  # the channel's door is the parent's, not the child's
