"""What a server says about itself, from a hand-written hostile server (tests/mcp/flood_server.py, a real process)
against real `strata` processes: a server refusing to start is named as refusing (with its own error, masked),
not as a server that closed its connection; and a secret of its `env` that it writes to stderr is masked in its log
in the Strata home, as in every other log."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.cli._helpers import call_results, events_of, json_lines, strata, text, tool_use
from tests.conftest import StrataCLI, write_script
from tests.mcp._servers import user_config

FLOOD = Path(__file__).with_name("flood_server.py")
TOKEN = "flood-token-9f8e7d6c5b4a"


def declare(cli: StrataCLI, state: Path, *extra_args: str) -> None:
    args = ", ".join(f'"{a}"' for a in (FLOOD, state, *extra_args))
    user_config(cli, f'[mcp.servers.h]\ncommand = "{sys.executable}"\nargs = [{args}]\nstartup_timeout_s = 20\n'
                     f'env = {{ FLOOD_TOKEN = "{TOKEN}" }}\n'
                     '[mcp.servers.h.tools.echo]\nsafety = "read"\neffect = "read_only"\n')


def test_a_server_refusing_to_initialise_is_named_with_its_own_error_masked(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """Its error answer had code -32000, the code the SDK also gives a closed connection: the notice said the server
    'closed the connection before it finished initialising', and the server's own reason was lost."""
    declare(cli, tmp_path / "state", "--refuse-initialize")
    script = write_script(tmp_path / "script.json", [[text("nothing to do")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "look")
    assert run.returncode == 0, run.stderr
    (notice,) = [line for line in run.stderr.splitlines() if "MCP server 'h'" in line]
    assert "refused to start (error -32000: cannot log in with [MASKED:" in notice, notice
    assert "closed the connection" not in notice and TOKEN not in notice, notice
    (server,) = json_lines(strata(cli, "mcp", "list", "--json").stdout)
    assert not server["up"] and server["problem"].startswith("refused to start (error -32000: "), server
    assert TOKEN not in server["problem"], server


def test_a_secret_the_server_writes_to_stderr_is_masked_in_its_log(cli: StrataCLI, tmp_path: Path,
                                                                  workspace: Path) -> None:
    declare(cli, tmp_path / "state")
    script = write_script(tmp_path / "script.json", [[tool_use("c1", "mcp__h__echo", q="x")], [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "look")
    assert run.returncode == 0, run.stderr
    assert call_results(events_of(run.stdout))["c1"]["status"] == "ok"
    log = (cli.home / "mcp" / "h.log").read_text(encoding="utf-8")
    assert "logging in with token [MASKED:" in log, log
    assert TOKEN not in log, log
