"""Clients the daemon cannot tell apart by pid (SO_PEERCRED gives pid 0 for a peer outside the daemon's PID
namespace: a daemon in a container, its socket shared with the host) share one per-client attachment cap, against a
real `strata serve` run in its own PID namespace (`unshare`) and real client processes outside it. The cap used to
apply to "pid 0" as if it were one process, and its refusal said "this client process (pid 0) holds 16
connections" to a client holding none. The sharing is kept on purpose (counting each such connection alone would let
one of them hold every slot, which the cap is there to prevent; the other clients keep the rest of
`max_connections`), and now the refusal says what happens: the daemon cannot see which process they are, and they
share the cap."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli._helpers import text
from tests.conftest import StrataCLI
from tests.ipc._wire import RawClient
from tests.serve._procs import script, wait_until

pytestmark = pytest.mark.slow

CAP = 16
"""Limits.max_held_per_peer's default."""
UNSHARE = ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc", "--kill-child"]

_ATTACH_ONE = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(30)
s.connect(sys.argv[1])
f = s.makefile("rwb")
for message in ({"v": 1, "type": "hello", "id": "h"},
                {"type": "attach", "id": "a", "session_id": sys.argv[2], "role": "watch"}):
    f.write(json.dumps(message).encode() + b"\\n")
    f.flush()
    reply = json.loads(f.readline())
print(json.dumps(reply))
"""
"""Another client process: it attaches once, as a watcher, and prints the attach's reply."""


def _namespaces_available() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run([*UNSHARE, "true"], capture_output=True).returncode == 0


def _attach_from_another_process(cli: StrataCLI, sock: Path, sid: str) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-c", _ATTACH_ONE, str(sock), sid], capture_output=True, text=True,
                          timeout=60, env=cli.env())
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


@pytest.mark.skipif(not _namespaces_available(), reason="this machine lets no user create PID namespaces")
def test_clients_in_another_pid_namespace_share_one_attachment_cap_and_are_told_so(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [text("hello")])
    sock = cli.home / "run" / "daemon.sock"
    daemon = subprocess.Popen([*UNSHARE, *cli.argv(["serve", "--foreground"])], cwd=cli.cwd, env=cli.env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    held: list[RawClient] = []
    try:
        assert daemon.stdout is not None
        assert "(pid 1)" in daemon.stdout.readline()  # it runs in a PID namespace of its own
        first = RawClient(sock, timeout=30)
        assert first.hello()["pid"] == 1
        sid = first.ask({"type": "new_session", "id": "n", "workspace": str(ws), "model": model})["session_id"]
        held.append(first)
        for k in range(CAP):
            client = first if k == 0 else RawClient(sock, timeout=30)
            if k:
                client.hello()
                held.append(client)
            assert client.ask({"type": "attach", "id": f"a{k}", "session_id": sid, "role": "watch"})["type"] == "ok"
        # Another process, holding nothing, is refused: the daemon sees pid 0 for both, and says so.
        refused = _attach_from_another_process(cli, sock, sid)
        assert (refused["type"], refused["code"]) == ("error", "too_many_attachments"), refused
        message = str(refused["message"])
        assert "another PID namespace" in message and "share" in message, message
        assert "this client process (pid 0)" not in message, message
        held.pop().close()  # one of the first process's connections ends: the other process gets in
        wait_until(lambda: _attach_from_another_process(cli, sock, sid)["type"] == "ok", timeout=30,
                   what="the other process's attach to be taken")
        first.send(b'{"type": "shutdown", "id": "s"}\n')
        daemon.wait(60)
        assert daemon.returncode == 0
    finally:
        for client in held:
            client.close()
        if daemon.poll() is None:
            daemon.kill()
        _, err = daemon.communicate()
    assert "Traceback" not in err, err
