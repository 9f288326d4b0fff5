"""How the MCP tests declare the test server (tests/mcp/tracker_server.py) to a Strata home, and run it over HTTP."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import StrataCLI

SERVER = Path(__file__).with_name("tracker_server.py")

POLICIES = """
[mcp.servers.tracker.tools.close_issue]
safety = "write"
effect = "effectful"
pii = "internal"
resource_keys = ["issue:{repo}/{number}"]
timeout_s = 20

[mcp.servers.tracker.tools.search]
safety = "read"
effect = "read_only"

[mcp.servers.tracker.tools.fail]
safety = "read"
effect = "read_only"
"""


def stdio_table(state: Path, name: str = "tracker") -> str:
    return (f'[mcp.servers.{name}]\ncommand = "{sys.executable}"\nargs = ["{SERVER}", "{state}"]\n'
            f'startup_timeout_s = 20\n')


def http_table(url: str, name: str = "tracker") -> str:
    return f'[mcp.servers.{name}]\nurl = "{url}"\nstartup_timeout_s = 20\n'


def user_config(cli: StrataCLI, text: str) -> Path:
    path = cli.home / "xdg-config" / "strata" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def loopback_server(argv: list[str], port: int, what: str) -> Iterator[str]:
    """A test server process listening on loopback `port` (started by `argv`), once it accepts connections; yields
    its MCP URL and kills it after."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the {what} did not start (exit {proc.poll()})")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait(timeout=10)


@contextlib.contextmanager
def http_server(state: Path) -> Iterator[str]:
    """The test server over streamable HTTP on loopback, as a real process; yields its URL."""
    port = free_port()
    with loopback_server([sys.executable, str(SERVER), str(state), "--http", str(port)], port,
                         "HTTP test server") as url:
        yield url
