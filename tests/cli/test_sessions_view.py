"""`strata sessions` shows status, mode, turns, calls, denials and unknown receipts per session."""

from __future__ import annotations

from pathlib import Path

from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI, write_script


def test_sessions_counts_turns_calls_denials_and_unknown_receipts(cli: StrataCLI, workspace: Path,
                                                                   tmp_path: Path) -> None:
    """A session with one allowed read, one denied write and a killed bash call reads 3 calls, 1 denial and
    1 unknown receipt after its resume, in --json and in the table."""
    (workspace / "a.txt").write_text("alpha\n")
    script = write_script(tmp_path / "turns.json", [
        [tool_use("toolu_r", "read_file", path="a.txt"), tool_use("toolu_w", "write_file", path="b", content="x")],
        [tool_use("toolu_b", "bash", command="echo hi >> out.log")],
        [text("done")],
    ])
    killed = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "bash", "go",
                     env={"STRATA_FAULT": "after_dispatch:2"})  # the bash call (the read is the first)
    assert killed.returncode == -9
    (session,) = cli.json_lines("sessions", "--json")
    assert session["status"] == "interrupted"
    assert (session["turns"], session["tool_calls"], session["denials"]) == (2, 2, 1)
    resumed = cli.run("resume", session["id"])
    assert resumed.returncode == 5, resumed.stderr
    (session,) = cli.json_lines("sessions", "--json")
    assert (session["status"], session["mode"]) == ("completed", "headless")
    assert (session["turns"], session["tool_calls"], session["denials"], session["unknown_receipts"]) == (3, 3, 1, 1)
    table = cli.run("sessions").stdout.splitlines()
    assert table[0].split()[:7] == ["id", "status", "mode", "turns", "calls", "denied", "unknown"]
    assert table[1].split()[:7] == [session["id"], "completed", "headless", "3", "3", "1", "1"]
