"""`strata fork`'s warning and its JSON mask the workspace, the inherited --allow patterns and the later calls as
every other output masks them: a workspace path or a rule pattern that holds a secret is not printed raw."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli._helpers import result_line, strata, text, tool_use
from tests.conftest import StrataCLI, write_script

WS_SECRET = "hunter2sekritvalue"
RULE_SECRET = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"


def _session_with_secret_rule_and_workspace(cli: StrataCLI, tmp_path: Path) -> str:
    ws = tmp_path / f"ws-password={WS_SECRET}"
    ws.mkdir()
    script = write_script(tmp_path / "turns.json", [
        [tool_use("b1", "bash", command="echo one")], [tool_use("b2", "bash", command="echo two")], [text("done")]])
    run = strata(cli, "run", "--json", "--model", f"script:{script}", "--workspace", str(ws),
                 "--allow", f"bash(echo token={RULE_SECRET} *)", "--allow", "bash", "hi")
    assert run.returncode == 0, run.stderr
    return str((result_line(run.stdout) or {})["session_id"])


def test_show_masks_the_sessions_rules_and_workspace_in_text_and_json(cli: StrataCLI, tmp_path: Path) -> None:
    sid = _session_with_secret_rule_and_workspace(cli, tmp_path)
    shown = strata(cli, "show", sid)
    assert shown.returncode == 0, shown.stderr
    assert RULE_SECRET not in shown.stdout and WS_SECRET not in shown.stdout
    as_json = strata(cli, "show", sid, "--json")
    assert as_json.returncode == 0, as_json.stderr
    rules = json.loads(as_json.stdout)["session"]["rules"]
    assert any("token=[MASKED:" in r["rule"] for r in rules), rules
    assert RULE_SECRET not in as_json.stdout and WS_SECRET not in as_json.stdout


def test_fork_warnings_mask_the_workspace_and_the_inherited_rules(cli: StrataCLI, tmp_path: Path) -> None:
    sid = _session_with_secret_rule_and_workspace(cli, tmp_path)

    shown = strata(cli, "fork", sid, "--at-turn", "1")
    assert shown.returncode == 0, shown.stderr
    warning = next(line for line in shown.stdout.splitlines() if line.startswith("warning:"))
    assert "b2 (bash)" in warning and "ws-password=[MASKED:" in warning and WS_SECRET not in warning
    inherits = next(line for line in shown.stdout.splitlines() if line.startswith("the fork inherits"))
    assert "token=[MASKED:" in inherits and RULE_SECRET not in inherits

    as_json = strata(cli, "fork", sid, "--at-turn", "1", "--json")
    assert as_json.returncode == 0, as_json.stderr
    view = json.loads(as_json.stdout.splitlines()[-1])
    assert RULE_SECRET not in json.dumps(view) and WS_SECRET not in json.dumps(view)
    assert view["later_calls"] == ["b2 (bash)"]
