"""A client attaching to a session the daemon does not host yet, while another process holds the session's lease
for a moment (as `strata approve|deny`, `strata reconcile` or a probe hold it while they record something), against
a real `strata serve`, a real competing process and the real socket. A driver attaching to a hosted session waited
for such a lease (up to SHORT_LEASE_S), but one whose attach brought the session into the daemon was refused at
once ("session ... is active in another process"), and so was a watcher. Now both wait for the short-lived holder
the same way, then attach."""

from __future__ import annotations

import json
import select
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest

from agent.daemon._hosted import WAITING_FOR_LEASE as WAITING
from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import text
from tests.conftest import StrataCLI
from tests.ipc._wire import RawClient
from tests.serve._procs import Daemon, kill_if_running, script, wait_until

pytestmark = pytest.mark.slow


def _waited_or_answered(cli: StrataCLI, client: RawClient) -> bool:
    """The daemon logged that it waits for the lease, or the attach was answered already (as it used to be)."""
    log = cli.home / "logs" / "strata.log"
    if log.exists() and any(json.loads(line).get("event") == WAITING for line in log.read_text().splitlines()):
        return True
    return bool(select.select([client.sock], [], [], 0.05)[0])


@pytest.mark.parametrize("role", ["drive", "watch"])
def test_an_attach_that_hosts_a_session_waits_for_a_lease_another_process_holds_for_a_moment(
        cli: StrataCLI, tmp_path: Path, role: Literal["drive", "watch"]) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [text("one")], [text("two")])
    done = cli.run("run", "--model", model, "--workspace", str(ws), "first", timeout=120)
    assert done.returncode == 0, done.stderr
    (row,) = json_lines_in_process(cli, "sessions", "--json")
    sid = row["id"]
    daemon = Daemon(cli)
    holder: subprocess.Popen[str] | None = None
    try:
        holder = subprocess.Popen([sys.executable, "-m", "tests.serve._hold_lease", sid], cwd=cli.cwd, env=cli.env(),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert holder.stdout is not None and holder.stdout.readline() == "held\n", holder.communicate()
        client = RawClient(cli.home / "run" / "daemon.sock", timeout=30)
        client.hello()
        client.send(json.dumps({"type": "attach", "id": "a", "session_id": sid, "role": role}).encode() + b"\n")
        wait_until(lambda: _waited_or_answered(cli, client), what="the attach to meet the held lease")
        _, err = holder.communicate(input="", timeout=30)  # done: the lease is free again
        assert holder.returncode == 0, err
        reply = client.line()
        assert reply is not None and (reply["type"], reply.get("role")) == ("ok", role), reply
        if role == "drive":
            client.send(json.dumps({"type": "prompt", "id": "p", "session_id": sid, "text": "second"}).encode() + b"\n")
            seen = []
            while (line := client.line()) is not None and line["type"] != "result":
                seen.append(line)
            assert {"type": "ok", "id": "p", "session_id": sid} in [
                {k: o.get(k) for k in ("type", "id", "session_id")} for o in seen], seen  # the prompt was taken
            assert line is not None and line["status"] == "completed", line
        client.close()
    finally:
        kill_if_running(holder)
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
