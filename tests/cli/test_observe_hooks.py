"""Observation hooks get the session's lifecycle events and cannot change the run."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI, write_script


def _user_config(cli: StrataCLI, body: str) -> None:
    path = cli.home / "xdg-config" / "strata" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)


def test_observers_see_lifecycle_events_and_cannot_change_the_run(cli: StrataCLI, workspace: Path,
                                                                  tmp_path: Path) -> None:
    """A hook that logs every event sees started, parked, resumed and ended; a second one that fails (exit 1)
    and one that answers 'block' change nothing: the session parks and completes as it would without them."""
    log = tmp_path / "observed.jsonl"
    _user_config(cli, f"""
[[hooks.observe]]
command = "cat >> {log}; echo >> {log}"

[[hooks.observe]]
command = "exit 1"

[[hooks.observe]]
command = "echo '{{\\"decision\\": \\"block\\", \\"reason\\": \\"no\\"}}'"
""")
    script = write_script(tmp_path / "turns.json", [
        [tool_use("toolu_w", "write_file", path="out.txt", content="x\\n")], [text("done")]])
    parked = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--on-ask", "park",
                     "--json", "go")
    assert parked.returncode == 4, parked.stderr
    session_id = json.loads(parked.stdout.splitlines()[-1])["session_id"]
    assert cli.run("approve", session_id, "toolu_w").returncode == 0
    done = cli.run("resume", session_id)
    assert done.returncode == 0, done.stderr
    assert (workspace / "out.txt").exists()
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    assert [e["event"] for e in events] == ["started", "parked", "resumed", "ended"]
    assert all(e["hook"] == "Observe" and e["session_id"] == session_id for e in events)
    assert events[-1]["data"]["status"] == "completed"
