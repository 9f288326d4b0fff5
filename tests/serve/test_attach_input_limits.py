"""What `strata attach --json` cannot send the daemon (a field over the protocol's bounds, a request line over its
1 MiB cap) is one error line, and the client, its connection and its session go on. Real processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Client, Daemon, script

pytestmark = pytest.mark.slow

MiB = 1024 * 1024


def test_an_oversized_prompt_or_deny_reason_is_one_error_line_and_the_attachment_goes_on(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [tool_use("w1", "write_file", path="a.txt", content="A")], [text("done")])
    # Under the client's input cap, but the request it becomes (its envelope added) is over the daemon's line cap.
    near_cap = "é" * ((MiB - len(json.dumps({"type": "prompt", "text": ""})) - 40) // 2)
    assert len(json.dumps({"type": "prompt", "text": near_cap}, ensure_ascii=False).encode()) < MiB
    daemon = Daemon(cli)
    try:
        driver = Client(cli, "--new", "--workspace", str(ws), "--model", model)
        assert driver.proc.stdin is not None
        driver.proc.stdin.write(json.dumps({"type": "prompt", "text": near_cap}, ensure_ascii=False) + "\n")
        driver.proc.stdin.flush()
        too_large = driver.wait_for("error", request="prompt")
        assert too_large["code"] == "too_large", too_large
        driver.send(type="prompt", text="a" * 1_000_001)  # over the protocol's bound on a text field
        invalid = driver.wait_for("error", request="prompt")
        assert invalid["code"] == "invalid" and "\n" not in invalid["message"], invalid

        driver.send(type="prompt", text="write a")
        driver.wait_for("approval_request", call_id="w1")
        driver.send(type="deny", call_id="w1", reason="r" * 5000)
        refused = driver.wait_for("error", request="deny")
        assert refused["code"] == "invalid", refused
        driver.send(type="deny", call_id="w1", reason="not now")
        result = driver.wait_for("result")
        assert result["status"] == "completed", result
        assert driver.finish().returncode == 0
    finally:
        daemon.stop()
    assert not (ws / "a.txt").exists()
    assert daemon.proc.returncode == 0, daemon.stderr
