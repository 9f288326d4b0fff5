"""Test helpers that speak the wire by hand: raw Unix-socket clients (to send what no real client would), and a
fake daemon run as a real process."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
HELLO = b'{"v": 1, "type": "hello", "id": "h"}\n'


class RawClient:
    """A blocking socket client that reads replies line by line (with a deadline), for tests."""

    def __init__(self, path: Path, timeout: float = 10.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(os.fsencode(path))
        self._buffer = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def hello(self) -> dict[str, Any]:
        self.send(HELLO)
        reply = self.line()
        assert reply is not None and reply["type"] == "hello_ok", reply
        return reply

    def line(self) -> dict[str, Any] | None:
        """The next message, or None at end of stream."""
        while b"\n" not in self._buffer:
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        self.send(json.dumps(message).encode() + b"\n")
        reply = self.line()
        assert reply is not None, f"connection closed instead of answering {message.get('type')}"
        return reply

    def closed_after(self) -> bool:
        """Drains what is left; True when the daemon closed the connection."""
        while True:
            if self.line() is None:
                return True

    def close(self) -> None:
        self.sock.close()


@dataclass
class FakeDaemon:
    proc: subprocess.Popen[str]
    home: Path
    socket: Path
    child: int | None = None
    """The `--child-sleep` process, when asked for."""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def kill(self) -> None:
        """SIGKILL, as a crash; the pipes are closed unread (a child of the daemon may hold them open)."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()

    def stop(self) -> tuple[int, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return self.proc.returncode, err


def env(home: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
    return {**base, "STRATA_HOME": str(home), "PYTHONPATH": str(REPO), "XDG_CONFIG_HOME": str(home / "xdg")}


def fake_daemon_argv(home: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "tests.ipc._serve_fake", str(home), *extra]


def start_fake_daemon(home: Path, *extra: str, prefix: Sequence[str] = (), socket_path: Path | None = None,
                      timeout: float = 20) -> FakeDaemon:
    """Start the fake daemon as a real process and wait until it listens."""
    argv = [*prefix, *fake_daemon_argv(home, *extra)]
    if socket_path is not None:
        argv += ["--socket", str(socket_path)]
    proc = subprocess.Popen(argv, cwd=REPO, env=env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    child: int | None = None
    line = proc.stdout.readline()
    if line.startswith("CHILD"):
        child = int(line.split()[1])
        line = proc.stdout.readline()
    if not line.startswith("READY"):
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"fake daemon did not start (exit {proc.returncode}): {err[-2000:]}")
    assert time.monotonic() < deadline
    return FakeDaemon(proc, home, socket_path or home / "run" / "daemon.sock", child)


class InProcessDaemon:
    """The IPC server with the fake session side, on its own event loop in a thread of the test process (a real
    socket; blocking test code talks to it with RawClient)."""

    def __init__(self, home: Path, limits: Any = None, socket_path: Path | None = None) -> None:
        from anyio.from_thread import start_blocking_portal

        from agent.ipc import IpcServer, Limits
        from tests.ipc._fake_dispatcher import FakeDispatcher

        self._portal_cm = start_blocking_portal()
        self.portal = self._portal_cm.__enter__()
        self.dispatcher = FakeDispatcher(stop=lambda: self.server.stop())
        self._server_cm = self.portal.wrap_async_context_manager(
            IpcServer.open(home, self.dispatcher, socket_path=socket_path, limits=limits or Limits()))
        try:
            self.server = self._server_cm.__enter__()
            self._serving, _ = self.portal.start_task(self.server.serve)
        except BaseException:
            self._portal_cm.__exit__(None, None, None)
            raise
        self.socket = self.server.paths.socket
        self._closed = False

    def connections(self) -> int:
        return self.portal.call(lambda: self.server.connection_count)  # type: ignore[arg-type, return-value]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.portal.call(self.server.stop)  # type: ignore[arg-type]
            self._serving.result(timeout=30)
            self._server_cm.__exit__(None, None, None)
        finally:
            self._portal_cm.__exit__(None, None, None)
