"""`[mcp.servers.NAME]` across config files: the user's always, a project's only once it is trusted (never
started otherwise, and the notice says so), a later file replacing a server's table whole; the values given to a
server's environment are secrets."""

from __future__ import annotations

from pathlib import Path

from config import trust_project
from tests.config._layout import Layout

SERVER = '[mcp.servers.tracker]\ncommand = "tracker"\nargs = ["--fast"]\nenv = {{ TOKEN = "{token}" }}\n'
POLICY = '[mcp.servers.tracker.tools.close]\nsafety = "write"\neffect = "effectful"\nresource_keys = ["i:{n}"]\n'


def test_a_user_server_applies_with_its_policies(tmp_path: Path) -> None:
    layout = Layout.make(tmp_path)
    layout.write_user(SERVER.format(token="user-token-1") + POLICY)
    (server,) = layout.load().mcp.servers
    assert (server.name, server.command, server.args, server.transport) == ("tracker", "tracker", ("--fast",), "stdio")
    policy = server.policy("close")
    assert policy is not None and policy.effect == "effectful" and policy.resource_keys == ("i:{n}",)
    assert policy.timeout_s == 30 and server.policy("open") is None
    assert layout.load().mcp.secret_values() == ["user-token-1"]


def test_an_untrusted_project_server_is_set_aside_with_a_notice_until_trusted(tmp_path: Path) -> None:
    layout = Layout.make(tmp_path)
    layout.write_user(SERVER.format(token="user-token-1"))
    layout.write_project((SERVER.format(token="project-token") + POLICY).replace("tracker", "proj"))
    loaded = layout.load()
    assert [s.name for s in loaded.mcp.servers] == ["tracker"] and loaded.mcp.ignored == ("proj",)
    assert any("its MCP servers (proj) are not started" in n for n in loaded.notices), loaded.notices

    trust_project(layout.home, layout.workspace)
    trusted = layout.load()
    assert [s.name for s in trusted.mcp.servers] == ["proj", "tracker"] and trusted.mcp.ignored == ()


def test_a_trusted_project_replaces_a_user_server_table_whole(tmp_path: Path) -> None:
    layout = Layout.make(tmp_path)
    layout.write_user(SERVER.format(token="user-token-1") + POLICY)
    layout.write_project('[mcp.servers.tracker]\nurl = "http://127.0.0.1:9/mcp"\n')
    trust_project(layout.home, layout.workspace)
    (server,) = layout.load().mcp.servers
    assert server.transport == "http" and server.tools == () and server.source == str(layout.project_file)
