"""A prompt to a hosted parent whose delegate call waits on a child another process holds waits up to
CHILD_LEASE_WAIT_S (3 s) for that child's lease before it is refused (`session_busy`). That wait is this request's
alone: in a real `strata serve`, another connection's requests (`status`, `new_session`) are answered at once
while it lasts, not after it: the wait is an async sleep between store reads (agent/delegation.py), never a
sleep on the event loop's thread, which would hold every request of the daemon for its length."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.ipc._wire import RawClient
from tests.serve._procs import Client, Daemon, allow_in_user_config, wait_until

pytestmark = pytest.mark.slow

ANSWERED_S = 1.0
"""Far under the 3 s wait, far over a request's own time on a loaded machine."""
BLOCKED_S = 0.04
"""A `status` request takes a few ms; one that waits on a blocked event loop (a poll sleeping 0.1 s on the
thread) waits for half a poll in the median."""


def test_a_prompt_waiting_for_a_busy_childs_lease_blocks_no_other_request(cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    allow_in_user_config(cli, "delegate")
    path = tmp_path / "s.json"
    path.write_text(json.dumps({
        "turns": [[tool_use("p1", "delegate", task="write it")], [text("parent done")]],
        "children": [[[tool_use("c1", "write_file", path="c.txt", content="c\n")], [text("child wrote it")]]],
    }), encoding="utf-8")
    daemon = Daemon(cli)
    holder: subprocess.Popen[str] | None = None
    waiting = other = None
    try:
        first = Client(cli, "--new", "--workspace", str(ws), "--model", f"script:{path}")
        parent = first.session_id
        first.send(type="prompt", text="delegate it")
        child = first.wait_for("approval_request", call_id="c1")["session_id"]
        first.kill()  # the child's call parks; so does the parent's delegate call, the parent still hosted
        wait_until(lambda: {r["id"]: r["status"] for r in json_lines_in_process(cli, "sessions", "--json")}.get(child)
                   == "awaiting_approval", what="the child to park")
        holder = subprocess.Popen([sys.executable, "-m", "tests.serve._hold_lease", child], cwd=cli.cwd,
                                  env=cli.env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        assert holder.stdout is not None and holder.stdout.readline() == "held\n", holder.communicate()

        sock = cli.home / "run" / "daemon.sock"
        waiting, other = RawClient(sock, timeout=30), RawClient(sock, timeout=30)
        waiting.hello()
        other.hello()
        assert waiting.ask({"type": "attach", "id": "a", "session_id": parent})["type"] == "ok"
        sent = time.monotonic()
        waiting.send(b'{"type": "prompt", "id": "p", "session_id": "%s", "text": "and then?"}\n' % parent.encode())
        made = other.ask({"type": "new_session", "id": "n", "workspace": str(ws), "model": f"script:{path}"})
        made_after = time.monotonic() - sent
        listed: list[dict[str, object]] = []
        took: list[float] = []
        while time.monotonic() - sent < 2.0:  # back to back, all through the wait
            asked = time.monotonic()
            listed.append(other.ask({"type": "status", "id": f"s{len(listed)}"}))
            took.append(time.monotonic() - asked)
            time.sleep(0.02)
        # The prompt's reply; pushes may come first: a driver attaching after the daemon let the parent's lease go
        # (2 s with nobody driving it, a slow machine's start of the holder) takes it back, a resume that commits
        # `session_resumed` (agent/ipc/PROTOCOL.md, "Sessions and leases").
        while (refused := waiting.line()) is not None and refused.get("id") != "p":
            pass
        refused_after = time.monotonic() - sent
    finally:
        for client in (waiting, other):
            if client is not None:
                client.close()
        if holder is not None:
            holder.communicate(input="", timeout=30)
        daemon.stop()
    assert made["type"] == "ok" and made["session_id"], made
    assert all(r["type"] == "ok" and parent in json.dumps(r) for r in listed), listed
    assert refused is not None and refused.get("code") == "session_busy", refused  # it did wait for the lease
    assert refused_after > 2.5, refused_after
    assert made_after < ANSWERED_S and max(took) < ANSWERED_S, (made_after, took)
    assert statistics.median(took) < BLOCKED_S, sorted(took)
