"""Reflect: a Stop hook that always asks for a repair gets at most the budgeted repairs, and the count of repairs
used survives a crash and resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process, set_up_in_process, show_in_process
from tests.cli._helpers import text
from tests.conftest import StrataCLI, write_script

STOP_HOOK = """\
[[hooks.stop]]
command = "echo '{\\"decision\\": \\"repair\\", \\"instruction\\": \\"REPAIR-PLEASE: add a summary line\\"}'"
"""


def _setup(cli: StrataCLI, workspace: Path, tmp_path: Path, budget: int | None = None) -> Path:
    (workspace / ".strata").mkdir()
    extra = f"repair_budget = {budget}\n" if budget is not None else ""
    (workspace / ".strata" / "config.toml").write_text(extra + STOP_HOOK)
    assert set_up_in_process(cli, "trust", str(workspace)).returncode == 0
    return write_script(tmp_path / "turns.json", [[text(f"answer {i}")] for i in range(8)])


def _repairs(cli: StrataCLI, session_id: str) -> int:
    view = show_in_process(cli, session_id)
    return sum(b["text"].count("REPAIR-PLEASE") for m in view["messages"] if m["role"] == "user"
               for b in m["content"] if b["type"] == "text")


@pytest.mark.parametrize("budget", [None, 1])
def test_stop_hook_repairs_stop_at_the_budget(cli: StrataCLI, workspace: Path, tmp_path: Path,
                                              budget: int | None) -> None:
    """With the default budget (2) or a configured one, the hook's repairs are injected that many times, then
    the session ends incomplete (exit 3) naming the budget."""
    script = _setup(cli, workspace, tmp_path, budget)
    proc = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "go")
    assert proc.returncode == 3, proc.stderr
    expected = 2 if budget is None else budget
    assert f"repair budget ({expected}) is used up" in proc.stdout
    (session,) = json_lines_in_process(cli, "sessions", "--json")
    assert _repairs(cli, session["id"]) == expected
    assert session["status"] == "incomplete"


def test_repair_count_survives_a_crash(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """Killed right after the first repair was committed; the resumed session gets only the one repair left."""
    script = _setup(cli, workspace, tmp_path)
    killed = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "go",
                     env={"STRATA_FAULT": "after_repair"})
    assert killed.returncode == -9
    (session,) = json_lines_in_process(cli, "sessions", "--json")
    assert _repairs(cli, session["id"]) == 1
    resumed = cli.run("resume", session["id"])
    assert resumed.returncode == 3, resumed.stderr
    assert "repair budget (2) is used up" in resumed.stdout
    assert _repairs(cli, session["id"]) == 2


def test_a_new_request_gets_a_fresh_budget(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """The budget is per request of the person: a new prompt on resume may be repaired again."""
    script = _setup(cli, workspace, tmp_path, 1)
    assert cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "go").returncode == 3
    (session,) = json_lines_in_process(cli, "sessions", "--json")
    again = cli.run("resume", session["id"], "and another thing")
    assert again.returncode == 3, again.stderr
    assert _repairs(cli, session["id"]) == 2
