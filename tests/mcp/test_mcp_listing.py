"""Which listed MCP tools are callable: a declared policy, a name a model can be offered, and an input schema the
executor can check calls with (a broken one would stop the whole plan, so the tool is left out with the reason)."""

from __future__ import annotations

import sys
from pathlib import Path

from config import McpServerDecl, McpToolPolicy
from tests.cli._helpers import strata
from tests.conftest import StrataCLI
from tests.mcp._servers import free_port, user_config
from tool_executor.mcp._server import ListedTool, ServerLink
from tool_executor.mcp._tools import tool_specs, tool_statuses

POLICY = McpToolPolicy(safety="read", effect="read_only")


def link(tmp_path: Path, *tools: ListedTool) -> ServerLink:
    decl = McpServerDecl(name="srv", command="unused", source="test",
                         tools=tuple((t.name, POLICY) for t in tools))
    server = ServerLink(decl, tmp_path, lambda line: None, lambda text: text)
    server.tools = tools
    return server


def test_only_tools_with_a_usable_name_and_schema_are_callable(tmp_path: Path) -> None:
    good = ListedTool("find", "Find things", {"type": "object", "properties": {"q": {"type": "string"}}})
    not_object = ListedTool("scalar", "", {"type": "string"})
    broken = ListedTool("broken", "", {"type": "object", "properties": {"q": {"type": 5}}})
    dotted = ListedTool("a.b", "", {"type": "object"})
    server = link(tmp_path, good, not_object, broken, dotted)
    reasons = {s.tool: s.reason for s in tool_statuses(server)}
    assert reasons["find"] is None
    assert "does not describe an object" in (reasons["scalar"] or "")
    assert "not a valid JSON Schema" in (reasons["broken"] or "")
    assert "cannot be offered to a model" in (reasons["a.b"] or "")
    (spec,) = tool_specs(server)
    assert spec.name == "mcp__srv__find" and spec.effect == "read_only" and spec.input_schema == good.input_schema


def test_a_result_is_cut_at_the_cap_and_is_error_makes_an_error_result() -> None:
    from mcp.types import CallToolResult, TextContent

    from tool_executor.mcp._tools import MAX_RESULT_CHARS, _output

    big = _output(CallToolResult(content=[TextContent(type="text", text="x" * (MAX_RESULT_CHARS + 10))]))
    assert len(big.text) < MAX_RESULT_CHARS + 100 and big.text.endswith("[MCP result truncated: 10 more characters]")
    assert not big.is_error
    failed = _output(CallToolResult(content=[TextContent(type="text", text="no")], is_error=True))
    assert failed.is_error and failed.text == "no"
    structured = _output(CallToolResult(content=[], structured_content={"b": 1, "a": 2}))
    assert structured.text == '{"a": 2, "b": 1}'


def test_mcp_list_and_doctor_never_print_a_configured_secret(cli: StrataCLI, tmp_path: Path) -> None:
    """`mcp list` printed what the servers said and where they are as it was: a server quoting its environment's
    token (in a tool's name, in its refusal to start), a URL's password and token, a `[secrets]` value in a server's
    arguments; `doctor` masked only what looks like a secret (its masker did not know the configured ones). Both
    mask every configured secret, in text and JSON."""
    from tests.mcp.test_mcp_answers import ANSWERS

    env_secret, url_secret, arg_secret = "quietvalue-zq81x", "urlpass-zq82y", "argvalue-zq83z"
    user_config(cli, f"""[secrets]
values = ["{arg_secret}"]

[mcp.servers.a]
command = "{sys.executable}"
args = ["{ANSWERS}", "{tmp_path / 'a'}", "--key", "{arg_secret}"]
env = {{ ANSWERS_TOKEN = "{env_secret}" }}
startup_timeout_s = 20

[mcp.servers.b]
command = "{sys.executable}"
args = ["{ANSWERS}", "{tmp_path / 'b'}"]
env = {{ ANSWERS_TOKEN = "{env_secret}", ANSWERS_REFUSE_START = "1" }}
startup_timeout_s = 20

[mcp.servers.web]
url = "http://me:{url_secret}@127.0.0.1:{free_port()}/mcp?token={url_secret}"
""")
    listed = strata(cli, "mcp", "list")
    as_json = strata(cli, "mcp", "list", "--json")
    doctor = cli.run("doctor", "--workspace", str(tmp_path))
    for out in (listed.stdout, as_json.stdout, doctor.stdout):
        assert "token_[MASKED:" in out and "bad credentials [MASKED:" in out, out  # what the servers said
        assert "me:[MASKED:" in out, out  # the URL's password
        for secret in (env_secret, url_secret, arg_secret):
            assert secret not in out, out
    for proc in (listed, as_json, doctor):
        assert not any(s in proc.stderr for s in (env_secret, url_secret, arg_secret)), proc.stderr


def test_config_show_masks_an_mcp_servers_url_password_and_a_configured_secret_in_its_arguments(
        cli: StrataCLI, tmp_path: Path) -> None:
    url_secret, arg_secret = "urlpass-zq85v", "argvalue-zq86u"
    user_config(cli, f'[secrets]\nvalues = ["{arg_secret}"]\n\n[mcp.servers.s]\ncommand = "server"\n'
                     f'args = ["--key", "{arg_secret}"]\n\n[mcp.servers.web]\n'
                     f'url = "http://me:{url_secret}@127.0.0.1:9/mcp?token={url_secret}"\n')
    for args in (("config", "show"), ("config", "show", "--json")):
        out = strata(cli, *args).stdout
        assert "me:[MASKED:" in out and "--key [MASKED:" in out, out
        assert url_secret not in out and arg_secret not in out, out
