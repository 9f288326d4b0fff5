"""A small MCP server written with the SDK's high-level server (mcp 2.x `MCPServer`), run by the tests as a real
process: over stdio (`python tracker_server.py STATE_DIR`) or streamable HTTP (`... STATE_DIR --http PORT`).

It keeps what it did in STATE_DIR, so a test can check what happened in the world:
- `started` gets a line each time the server starts (an untrusted project's server must never write it);
- `closed.log` gets a line per `close_issue` call that took effect;
- a file `die-once` makes the next `close_issue` or `search` kill this process mid-call (the file is removed
  first, so the restarted server answers);
- `schema-v2` makes `close_issue` take an extra optional argument (a changed schema the old call still fits);
- `hang` makes initialisation never finish; `junk-stdout` makes it print a non-protocol line first;
- `spawn-child` makes it start a `sleep` child (in its process group) and write its pid to `child.pid`."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

STATE = Path(sys.argv[1])
STATE.mkdir(parents=True, exist_ok=True)
with (STATE / "started").open("a", encoding="utf-8") as f:
    f.write(f"{os.getpid()}\n")
if (STATE / "hang").exists():
    time.sleep(3600)
if (STATE / "junk-stdout").exists():  # a line on stdout that is not the protocol
    print("this is not JSON-RPC", flush=True)
if (STATE / "spawn-child").exists():  # a child left behind in the server's process group
    child = subprocess.Popen(["sleep", "300"])
    (STATE / "child.pid").write_text(str(child.pid), encoding="utf-8")

server = MCPServer("tracker")


def _maybe_die() -> None:
    flag = STATE / "die-once"
    if flag.exists():
        flag.unlink()
        os.kill(os.getpid(), 9)


def close_issue_v2(repo: str, number: int, reason: str = "") -> str:
    """Close an issue of a repository, saying why."""
    _maybe_die()
    with (STATE / "closed.log").open("a", encoding="utf-8") as f:
        f.write(f"{repo}#{number} {reason}\n")
    return f"closed {repo}#{number}"


def close_issue_v1(repo: str, number: int) -> str:
    """Close an issue of a repository."""
    _maybe_die()
    with (STATE / "closed.log").open("a", encoding="utf-8") as f:
        f.write(f"{repo}#{number}\n")
    return f"closed {repo}#{number}"


server.add_tool(close_issue_v2 if (STATE / "schema-v2").exists() else close_issue_v1, name="close_issue")


@server.tool()
def search(query: str) -> str:
    """Search issues; the answer names a contact (an email address, which Strata masks when it records it)."""
    _maybe_die()
    return f"1 issue matches {query!r}: owner alice@example.com"


@server.tool()
def fail(reason: str) -> str:
    """Always fails (the result has isError set)."""
    raise ToolError(f"cannot: {reason}")


@server.tool()
def delete_repo(repo: str) -> str:
    """A tool no config gives a policy to."""
    return f"deleted {repo}"


if __name__ == "__main__":
    if "--http" in sys.argv:
        port = int(sys.argv[sys.argv.index("--http") + 1])
        server.run("streamable-http", host="127.0.0.1", port=port)
    else:
        server.run()
