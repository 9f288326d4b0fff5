"""`run_agent` over MCP never offers `delegate` (issue 14, acceptance 4): mode `mcp`'s deny list names it, so a
scripted call of it is denied as not in the plan (even with a policy rule allowing it) and no child session exists;
the operator may add it back (`[mcp.serve] allow_tools`), and then the child runs in mode `mcp` too."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.mcp._servers import user_config
from tests.mcp.test_mcp_serve import strata_mcp, structured

ALLOW_DELEGATE = '[[policy.rules]]\ntool = "delegate"\naction = "allow"\n'


def _script(path: Path) -> Path:
    path.write_text(json.dumps({
        "turns": [[tool_use("d1", "delegate", task="write notes")], [text("parent done")]],
        "children": [[[tool_use("w1", "write_file", path="child.txt", content="x")], [text("child done")]]],
    }), encoding="utf-8")
    return path


async def test_run_agent_never_offers_delegate(cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    user_config(cli, ALLOW_DELEGATE)
    script = _script(tmp_path / "script.json")
    async with strata_mcp(cli, workspace, "--model", f"script:{script}") as session:
        out = structured(await session.call_tool("run_agent", {"prompt": "delegate it"}))
        rows = structured(await session.call_tool("get_timeline", {"session_id": out["session_id"]}))
        calls = {r["call_id"]: r for r in rows if r["kind"] == "call"}
        assert calls["d1"]["decision"] == "denied" and calls["d1"]["check"] == "resolve", calls
        sessions = structured(await session.call_tool("list_sessions", {}))
        assert [s["id"] for s in sessions] == [out["session_id"]]  # no child
    assert not (workspace / "child.txt").exists()


async def test_the_operator_can_add_delegate_back_to_mode_mcp(cli: StrataCLI, tmp_path: Path,
                                                             workspace: Path) -> None:
    user_config(cli, '[mcp.serve]\nallow_tools = ["delegate"]\n\n' + ALLOW_DELEGATE
                + '\n[[policy.rules]]\ntool = "write_file"\naction = "allow"\n')
    script = _script(tmp_path / "script.json")
    async with strata_mcp(cli, workspace, "--model", f"script:{script}") as session:
        out = structured(await session.call_tool("run_agent", {"prompt": "delegate it"}))
        assert out["status"] == "completed", out
        sessions = structured(await session.call_tool("list_sessions", {}))
        assert len(sessions) == 2 and {s["mode"] for s in sessions} == {"mcp"}, sessions
    assert (workspace / "child.txt").read_text() == "x"
