"""Two workers on one PostgreSQL database, one of them stopped (SIGSTOP: a long GC pause, a frozen VM) for longer
than its lease: the other takes the session over, as it should once the lease expired unrenewed. When the stopped
one continues (SIGCONT) it must not write to the session any more, nor run the call it was about to run: the
session is someone else's now.

Real processes: `strata serve` as worker A (run as if on another machine: its host name is `worker-a`, and its lease
lasts 3 s instead of 60 so the test is short), a `strata attach --json` client driving a session there, and `strata
resume` from a second home (worker B, the machine's own host name) taking the session over."""

from __future__ import annotations

import os
import shutil
import signal
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests._other_machine import OtherMachine
from tests._postgres import Cluster, rows
from tests.channels._support import drop, pending, replies, spool_table, write_config
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Client, Daemon, script, wait_until

pytestmark = pytest.mark.slow

TTL_S = 3.0

_LAUNCH = r'''
import datetime, socket, sys
host, ttl = sys.argv[1], float(sys.argv[2])
socket.gethostname = lambda: host  # another machine: its pid cannot be checked from here, only its lease's expiry
import agent.channels._runner, agent.daemon._hosted, agent.session, memory.leases
for module in (memory.leases, agent.session, agent.daemon._hosted, agent.channels._runner):
    module.LEASE_TTL = datetime.timedelta(seconds=ttl)
sys.argv = ["strata", *sys.argv[3:]]
from agent.cli.main import main
main()
'''


def test_a_stopped_worker_whose_session_was_taken_over_writes_and_runs_nothing_when_it_continues(
        postgres_cluster: Cluster, tmp_path: Path) -> None:
    url = postgres_cluster.new_database()
    ws = tmp_path / "ws"
    ws.mkdir()
    launcher = tmp_path / "launch.py"
    launcher.write_text(_LAUNCH, encoding="utf-8")
    hooked = tmp_path / "hooked"
    config = ('[[policy.rules]]\ntool = "bash"\naction = "allow"\n\n[daemon]\nenable = ["bash"]\n\n'
              f'[[hooks.pre_tool_use]]\nmatcher = "bash"\ncommand = "touch {hooked}; sleep 1"\ntimeout_s = 30\n')
    a = OtherMachine(tmp_path / "home-a", tmp_path, store_url=url, launcher=launcher, host="worker-a", ttl_s=TTL_S)
    b = StrataCLI(tmp_path / "home-b", tmp_path, store_url=url)
    for cli in (a, b):
        cli.home.mkdir()
        write_config(cli, config)
    made = a.run("sessions")  # migrates the database and binds it to home-a's chain key
    assert made.returncode == 0, made.stderr
    shutil.copy2(a.home / "chain.key", b.home / "chain.key")
    turns = tmp_path / "s.json"
    model = script(turns, [tool_use("c0", "bash", command="echo c0 >> effects.log")], [text("done")])

    daemon = Daemon(a)
    client = None
    try:
        client = Client(a, "--new", "--workspace", str(ws), "--model", model)
        client.send(type="prompt", text="go")
        wait_until(hooked.exists, 30, "the pre-call hook of c0 running in worker A")
        daemon.signal(signal.SIGSTOP)  # between the model's answer and the commit of its batch
        sid = client.session_id
        (expires,) = rows(url, "SELECT lease_expires FROM sessions WHERE id = %s", sid)[0]
        left = (datetime.fromisoformat(str(expires)) - datetime.now(UTC)).total_seconds()
        time.sleep(max(0.0, left) + 0.5)  # worker A's lease has expired unrenewed

        # Worker B takes the session over; the model, asked again, answers anew (another call id, as a real one).
        script(turns, [tool_use("c0b", "bash", command="echo c0b >> effects.log")], [text("done")])
        resumed = b.run("resume", sid)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        ended = rows(url, "SELECT max(seq) FROM events WHERE session_id = %s", sid)[0][0]

        daemon.signal(signal.SIGCONT)
        client.wait_for("result", 30)  # worker A's turn ends: it noticed it lost the session
    finally:
        if daemon.proc.poll() is None:
            os.kill(daemon.pid, signal.SIGCONT)
        if client is not None:
            client.kill()
        daemon.stop()

    later = rows(url, "SELECT seq, kind FROM events WHERE session_id = %s AND seq > %s ORDER BY seq", sid, ended)
    assert later == [], f"worker A wrote to the session after worker B took it over: {later}"
    assert (ws / "effects.log").read_text().split() == ["c0b"]
    assert rows(url, "SELECT call_id FROM receipts WHERE session_id = %s", sid) == [("c0b",)]
    verified = b.run("timeline", sid, "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert rows(url, "SELECT status, lease_token FROM sessions WHERE id = %s", sid) == [("completed", None)]


def test_a_stopped_worker_whose_thread_was_taken_over_sends_no_reply_for_the_message(
        postgres_cluster: Cluster, tmp_path: Path) -> None:
    """Two daemons on one spool channel. Worker A is stopped in the middle of a message's turn; worker B takes the
    thread and the session over (after A's lease expired) and runs the turn. A continues while B's turn still runs:
    its turn stops (the session is not its own), and it must not answer the message with "the turn failed": the
    reply (one per message, the first one sent wins) is B's, with the model's answer."""
    url = postgres_cluster.new_database()
    ws, spool = tmp_path / "ws", tmp_path / "spool"
    ws.mkdir()
    launcher = tmp_path / "launch.py"
    launcher.write_text(_LAUNCH, encoding="utf-8")
    marks = tmp_path / "marks"
    marks.mkdir()
    turns = tmp_path / "s.json"
    model = script(turns, [tool_use("c0", "bash", command="echo c0 >> effects.log")], [text("the answer")])
    config = ('[[policy.rules]]\ntool = "bash"\naction = "allow"\n\n[daemon]\nenable = ["bash"]\n\n'
              f'[[hooks.pre_tool_use]]\nmatcher = "bash"\ncommand = "touch {marks}/$PPID; sleep 1.5"\n'
              'timeout_s = 30\n\n' + spool_table("team", spool, ws, model))
    a = OtherMachine(tmp_path / "home-a", tmp_path, store_url=url, launcher=launcher, host="worker-a", ttl_s=TTL_S)
    b = StrataCLI(tmp_path / "home-b", tmp_path, store_url=url)
    for cli in (a, b):
        cli.home.mkdir()
        write_config(cli, config)
    made = a.run("sessions")
    assert made.returncode == 0, made.stderr
    shutil.copy2(a.home / "chain.key", b.home / "chain.key")

    first = Daemon(a)
    second = None
    try:
        drop(spool / "in", "m1", thread="t1", id="m1", text="Update the report")
        wait_until(lambda: (marks / str(first.pid)).exists(), 30, "worker A's pre-call hook running")
        first.signal(signal.SIGSTOP)
        expiries = [r[0] for r in rows(url, "SELECT expires_at FROM channel_claims UNION ALL "
                                             "SELECT lease_expires FROM sessions WHERE lease_token IS NOT NULL")]
        left = max((datetime.fromisoformat(str(e)) - datetime.now(UTC)).total_seconds() for e in expiries)
        time.sleep(max(0.0, left) + 0.5)  # worker A's claim and session lease have expired unrenewed
        script(turns, [tool_use("c0b", "bash", command="echo c0b >> effects.log")], [text("the answer")])
        second = Daemon(b)
        wait_until(lambda: (marks / str(second.pid)).exists(), 30, "worker B's pre-call hook running")
        first.signal(signal.SIGCONT)  # while worker B's turn still runs
        wait_until(lambda: not pending(spool / "in") and len(replies(spool / "out")) == 1, 60,
                   "the message answered and acknowledged")
        wait_until(lambda: "message processed" in (b.home / "logs" / "strata.log").read_text(), 30,
                   "worker B finishing the message")
    finally:
        if first.proc.poll() is None:
            os.kill(first.pid, signal.SIGCONT)
        first.stop()
        if second is not None:
            second.stop()
    (reply,) = replies(spool / "out")
    assert reply["text"] == "the answer", reply
    assert (ws / "effects.log").read_text().split() == ["c0b"]
