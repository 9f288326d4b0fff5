"""`strata resume` of a channel's thread session outside the daemon is refused with one line: the daemon owns the
thread, its claim and its `reply`, and its plan (the channel's `reply`, `daemon.enable`) is the one the session's
approvals are bound to. Before, the CLI built another plan (no `reply`, its own MCP tools, `bash` by the CLI's
policy): an approved call was "given under a different tool plan" and parked again, and a model continuing there
could call `bash` the operator never enabled for the channel. After the refusal nothing of the session changed, and
the daemon, given the thread's next message, runs the approved call once and answers on the thread."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._in_process_cli import show_in_process
from tests.channels._support import drop, pending, replies, session_events, spool_table, write_config
from tests.cli._helpers import EFFECTS_LOG, text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until

pytestmark = pytest.mark.slow


def test_a_channel_session_is_not_resumed_by_the_cli_and_the_daemon_runs_its_approved_call_once(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    model = script(tmp_path / "s.json", [tool_use("b1", "bash", command=f"echo once >> {EFFECTS_LOG}")],
                   [text("logged it")], [text("second answered")])
    write_config(cli, '[daemon]\nenable = ["bash"]\n\n' + spool_table("ops", spool, ws, model, on_ask='"park"'))
    daemon = Daemon(cli)
    try:
        drop(spool / "in", "m1", thread="t", id="m1", text="Log it")
        wait_until(lambda: len(replies(spool / "out")) == 1 and not pending(spool / "in"), what="m1 answered")
    finally:
        daemon.stop()
    (first,) = replies(spool / "out")
    assert first["status"] == "parked", first
    sid = first["session_id"]
    approved = cli.run("approve", sid, "--all")
    assert approved.returncode == 0, approved.stderr
    assert "continue it: the thread's next message continues it in the serve daemon" in approved.stdout, \
        approved.stdout
    assert "strata resume" not in approved.stdout  # what the refusal below would answer
    before, status = session_events(cli.home, sid), show_in_process(cli, sid)["session"]["status"]

    for argv in (("resume", sid), ("resume", sid, "and then?"), ("resume", sid, "--json")):
        resumed = cli.run(*argv)
        assert resumed.returncode == 2, resumed.stdout[-2000:] + resumed.stderr
        lines = resumed.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in resumed.stderr, resumed.stderr
        assert "channel ops" in lines[0] and "thread t" in lines[0] and "strata serve" in lines[0], lines[0]
    assert session_events(cli.home, sid) == before  # nothing recorded, nothing run
    assert not (ws / EFFECTS_LOG).exists()
    assert show_in_process(cli, sid)["session"]["status"] == status

    daemon = Daemon(cli)
    try:
        drop(spool / "in", "m2", thread="t", id="m2", text="Anything else?")
        wait_until(lambda: len(replies(spool / "out")) == 2 and not pending(spool / "in"), what="m2 answered")
    finally:
        daemon.stop()
    assert (ws / EFFECTS_LOG).read_text() == "once\n"
    second = next(r for r in replies(spool / "out") if r["in_reply_to"] == "m2")
    assert second["status"] == "completed" and second["text"] == "second answered", second
    kinds = [kind for _, kind, _ in session_events(cli.home, sid)]
    assert kinds.count("calls_parked") == 1 and kinds.count("approval_granted") == 1, kinds
