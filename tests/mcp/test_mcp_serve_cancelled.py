"""An MCP host that cancels a `run_agent` call of `strata mcp serve` (the official SDK client's courtesy
`notifications/cancelled` when the caller stops waiting) while the session's effect call hangs (a real HTTP MCP
server on loopback that never answers it, tests/mcp/hanging_http_server.py): the session's interrupt note, the
call's result and its receipt say the MCP client cancelled the run_agent call, not that "the user interrupted the
turn" (no person is there); the call's receipt is `unknown` and the session rests `idle` (real `strata` processes,
the scripted model)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI, write_script
from tests.mcp._servers import free_port, loopback_server, user_config
from tests.mcp.test_mcp_serve import strata_mcp

pytestmark = pytest.mark.slow

HANGING = Path(__file__).with_name("hanging_http_server.py")
CAUSE = "the MCP client cancelled the run_agent call"


async def _wait(what: str, ready: Callable[[], bool]) -> None:
    with anyio.move_on_after(60):
        while not ready():  # noqa: ASYNC110 (a file another process writes, another process's view of the store)
            await anyio.sleep(0.1)
        return
    raise AssertionError(f"timed out waiting for {what}")


async def test_a_run_agent_call_the_mcp_client_cancelled_is_noted_as_cancelled_by_it(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    state = tmp_path / "state"
    port = free_port()
    script = write_script(tmp_path / "script.json", [[tool_use("c1", "mcp__h__search", q="x")], [text("never")]])
    with loopback_server([sys.executable, str(HANGING), str(port), str(state), "call"], port,
                         "hanging test server") as url:
        user_config(cli, f'[mcp.servers.h]\nurl = "{url}"\nstartup_timeout_s = 5\n'
                         '[mcp.servers.h.tools.search]\nsafety = "write"\neffect = "effectful"\ntimeout_s = 120\n\n'
                         '[[policy.rules]]\ntool = "mcp__h__search"\naction = "allow"\n')
        log = state / "requests.log"
        async with strata_mcp(cli, workspace, "--model", f"script:{script}") as session:
            with anyio.CancelScope() as caller:
                async def stop_waiting() -> None:
                    await _wait("the call sent", lambda: log.exists() and "tools/call" in log.read_text())
                    caller.cancel()

                async with anyio.create_task_group() as tg:
                    tg.start_soon(stop_waiting)
                    await session.call_tool("run_agent", {"prompt": "search it"})
            assert caller.cancelled_caught

            def settled() -> bool:
                listed = json_lines_in_process(cli, "sessions", "--json")
                return len(listed) == 1 and listed[0]["status"] == "idle"

            await _wait("the session settled", settled)
    [listed] = json_lines_in_process(cli, "sessions", "--json")
    session_id = listed["id"]
    [receipt] = json_lines_in_process(cli, "receipts", session_id, "--json")
    rows = json_lines_in_process(cli, "timeline", session_id, "--json")
    assert receipt["call_id"] == "c1" and receipt["status"] == "unknown", receipt
    assert receipt["note"] == f"{CAUSE} while the call ran; not re-run", receipt
    [result] = [r for r in rows if r["kind"] == "call" and r["call_id"] == "c1"]
    assert result["outcome"] == "unknown" and f"Outcome unknown: {CAUSE} while this call ran" in result["summary"]
    [interrupted] = [r for r in rows if r["kind"] == "lifecycle" and r["outcome"] == "interrupted"]
    assert interrupted["summary"] == CAUSE, interrupted
    assert not any("interrupted the turn" in (r["summary"] or "") for r in rows), rows
