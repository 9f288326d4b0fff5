"""A session the daemon hosts obeys its workspace's project config (`.strata/config.toml`) exactly as `strata run`
in that workspace does: the daemon's own config has no project layer, so each hosted session's rules, hooks,
secrets and tool deadlines come from its own workspace. Real processes, a real socket."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Client, Daemon, allow_in_user_config, script

pytestmark = pytest.mark.slow


def _project(ws: Path, body: str) -> None:
    (ws / ".strata").mkdir()
    (ws / ".strata" / "config.toml").write_text(body)


def test_a_hosted_session_applies_its_projects_deny_rule_as_strata_run_does(cli: StrataCLI, tmp_path: Path) -> None:
    allow_in_user_config(cli, "bash")  # the user allows bash; the project denies it, and deny wins
    ws = tmp_path / "ws"
    ws.mkdir()
    _project(ws, '[[policy.rules]]\ntool = "bash"\naction = "deny"\n')
    trusted = cli.run("trust", str(ws))
    assert trusted.returncode == 0, trusted.stderr
    model = script(tmp_path / "s.json", [tool_use("b1", "bash", command="echo ran > ran.txt")], [text("done")])

    daemon = Daemon(cli)
    try:
        driver = Client(cli, "--new", "--workspace", str(ws), "--model", model)
        driver.send(type="prompt", text="run it")
        result = driver.wait_for("result")
        assert result["status"] == "completed", result
        (call,) = [e for e in driver.events() if e["kind"] == "call_result"]
        assert call["status"] == "denied", call
        assert driver.finish().returncode == 0
    finally:
        daemon.stop()
    assert not (ws / "ran.txt").exists()
    assert daemon.proc.returncode == 0, daemon.stderr
