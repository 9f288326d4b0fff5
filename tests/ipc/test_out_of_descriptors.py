"""A daemon that runs out of file descriptors (EMFILE: more clients than its limit allows) keeps accepting once
they are free again, and makes room for a new client by closing an idle one. A real daemon process (the IPC server
with the fake session side) whose descriptor limit is 48, and raw clients on its socket."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from tests.ipc._wire import HELLO, RawClient, start_fake_daemon

SILENT = 80


def _silent_clients(path: Path) -> list[socket.socket]:
    made = []
    for _ in range(SILENT):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(5)
        sock.connect(str(path))  # the kernel's backlog takes it even when the daemon cannot accept
        sock.sendall(HELLO)
        made.append(sock)
    return made


def test_a_daemon_out_of_descriptors_lets_a_new_client_in_and_accepts_again_once_they_are_free(
        tmp_path: Path) -> None:
    daemon = start_fake_daemon(tmp_path / "home", "--max-files", "48")
    silent = _silent_clients(daemon.socket)
    try:
        time.sleep(1.0)  # the daemon takes what it can, and meets EMFILE
        started = time.monotonic()
        fresh = RawClient(daemon.socket, timeout=15)
        assert fresh.hello()["type"] == "hello_ok"
        assert fresh.ask({"type": "status", "id": "s"})["type"] == "ok"
        assert time.monotonic() - started < 10
        fresh.close()
        for sock in silent:
            sock.close()
        silent.clear()
        later = RawClient(daemon.socket, timeout=15)
        assert later.hello()["type"] == "hello_ok"  # still accepting, once the flood is gone
        later.close()
        assert daemon.proc.poll() is None
    finally:
        for sock in silent:
            sock.close()
        code, err = daemon.stop()
    assert code == 0, err
    log = (tmp_path / "home" / "logs" / "strata.log").read_text()
    assert "ipc accept failed" in log
