"""A workspace or model path that holds a secret is masked in `sessions --json`, `show` (text and JSON),
`timeline --json` and MCP serve's `list_sessions`, as every export masks it (`masker.mask`, see
observability/export): the JSON listings are observation surfaces too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli._helpers import result_line, strata, text
from tests.conftest import StrataCLI, write_script

WS_SECRET = "hunter2sekritvalue"
MODEL_SECRET = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[StrataCLI, str]:
    base = tmp_path_factory.mktemp("paths")
    cli = StrataCLI(base / "home", base)
    ws = base / f"ws-password={WS_SECRET}"
    ws.mkdir()
    script = write_script(base / f"turns-token={MODEL_SECRET}.json", [[text("done")]])
    run = strata(cli, "run", "--json", "--model", f"script:{script}", "--workspace", str(ws), "hello")
    assert run.returncode == 0, run.stderr
    return cli, str((result_line(run.stdout) or {})["session_id"])


def assert_masked(out: str) -> None:
    assert WS_SECRET not in out and MODEL_SECRET not in out
    assert "ws-password=[MASKED:" in out


@pytest.mark.parametrize("args", [("sessions", "--json"), ("show", "{sid}", "--json"), ("show", "{sid}"),
                                  ("timeline", "{sid}", "--json")])
def test_workspace_and_model_paths_are_masked(made: tuple[StrataCLI, str], args: tuple[str, ...]) -> None:
    cli, sid = made
    proc = strata(cli, *(a.format(sid=sid) for a in args))
    assert proc.returncode == 0, proc.stderr
    assert_masked(proc.stdout)
    if args[0] != "timeline":
        assert "turns-token=[MASKED:" in proc.stdout


async def test_mcp_list_sessions_masks_the_workspace_and_model(made: tuple[StrataCLI, str], tmp_path: Path) -> None:
    from tests.mcp.test_mcp_serve import strata_mcp, structured

    cli, sid = made
    async with strata_mcp(cli, tmp_path) as session:
        sessions = structured(await session.call_tool("list_sessions", {}))
    assert [s["id"] for s in sessions] == [sid]
    assert_masked(json.dumps(sessions))


async def test_mcp_get_timeline_masks_the_workspace(made: tuple[StrataCLI, str], tmp_path: Path) -> None:
    from tests.mcp.test_mcp_serve import strata_mcp, structured

    cli, sid = made
    async with strata_mcp(cli, tmp_path) as session:
        rows = structured(await session.call_tool("get_timeline", {"session_id": sid}))
    assert rows and "ws-password=[MASKED:" in rows[0]["data"]["workspace"]
    assert_masked(json.dumps(rows))
