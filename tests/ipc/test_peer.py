"""Another user is refused: by the socket's permissions, and, where those let them through (root, or a socket
in a shared directory), by the kernel's peer credentials (SO_PEERCRED). Real processes under real uids."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ipc._wire import REPO, RawClient, env, start_fake_daemon

NOBODY = 65534


def _as_nobody() -> list[str]:
    """The command prefix that runs a program as uid/gid 65534, or a skip saying why this machine cannot."""
    if os.geteuid() != 0:
        pytest.skip("switching users needs root (run as root, or in CI) to test another uid")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed, so this test cannot run a process as another uid")
    prefix = [setpriv, "--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups"]
    probe = subprocess.run([*prefix, sys.executable, "-c", "import os, pydantic; print(os.getuid())"],
                           capture_output=True, text=True, cwd=REPO, timeout=30)
    if probe.stdout.strip() != str(NOBODY):
        pytest.skip(f"cannot run Python as uid {NOBODY} here: {probe.stderr.strip()[-200:]}")
    return prefix


def _probe(prefix: list[str], socket_path: Path, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, sys.executable, "-m", "tests.ipc._client_probe", str(socket_path)],
                          capture_output=True, text=True, cwd=REPO, env=env(home), timeout=30)


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A directory outside pytest's root-only tree, so uid 65534 can reach what is inside it."""
    path = Path(tempfile.mkdtemp(prefix="strata-ipc-peer-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_another_user_cannot_reach_the_daemons_socket(shared_tmp: Path) -> None:
    """A client running as another uid gets one line (permission denied), not a connection and not a
    traceback; the daemon's own user is served before and after."""
    prefix = _as_nobody()
    daemon = start_fake_daemon(shared_tmp / "home")
    try:
        refused = _probe(prefix, daemon.socket, shared_tmp / "home")
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert refused.stdout.startswith("PeerRefused: ") and "permission denied" in refused.stdout
        assert "Traceback" not in refused.stderr
        mine = _probe([], daemon.socket, shared_tmp / "home")
        assert mine.stdout.strip() == f"OK {daemon.pid}", mine.stdout + mine.stderr
    finally:
        daemon.stop()


def test_a_peer_of_another_uid_is_refused_by_its_credentials(shared_tmp: Path) -> None:
    """Where the file system lets another uid through (here: root, against a daemon running as 65534), the
    daemon reads the peer's uid from the kernel, answers `peer_refused` and closes, and keeps serving its user."""
    prefix = _as_nobody()
    home = shared_tmp / "nobody-home"
    home.mkdir(mode=0o700)
    os.chown(home, NOBODY, NOBODY)
    daemon = start_fake_daemon(home, prefix=prefix)
    try:
        raw = RawClient(daemon.socket)  # root: the 0600 socket does not stop it
        reply = raw.line()
        assert reply is not None and (reply["code"], reply["fatal"]) == ("peer_refused", True)
        assert raw.closed_after()
        raw.close()
        refused = _probe([], daemon.socket, home)
        assert refused.returncode == 1 and refused.stdout.startswith("ForeignListener: "), refused.stdout
        assert "runs as another user (uid 65534)" in refused.stdout  # the client's own check comes first
        served = _probe(prefix, daemon.socket, home)
        assert served.stdout.strip() == f"OK {daemon.pid}", served.stdout + served.stderr
    finally:
        code, err = daemon.stop()
    assert code == 0, err


_RECORDER = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1]); s.listen(1)
print("listening", flush=True)
conn, _ = s.accept()
conn.settimeout(5)
data = b""
try:
    while chunk := conn.recv(65536):
        data += chunk
except OSError:
    pass
print(repr(data), flush=True)
"""


def test_a_client_does_not_talk_to_a_listener_of_another_uid(shared_tmp: Path) -> None:
    """A socket path in a shared directory (`--socket /tmp/...`) may be taken by another user's process posing
    as the daemon. The client reads the listener's uid from the kernel before it sends a byte, and stops in one
    line: nothing (no hello, no prompt) reaches the impostor."""
    prefix = _as_nobody()
    theirs = shared_tmp / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, NOBODY, NOBODY)
    path = theirs / "impostor.sock"
    impostor = subprocess.Popen([*prefix, sys.executable, "-c", _RECORDER, str(path)], stdout=subprocess.PIPE,
                                text=True, cwd=REPO)
    try:
        assert impostor.stdout is not None and impostor.stdout.readline().strip() == "listening"
        os.chmod(path, 0o777)  # its owner opens it to everyone
        home = shared_tmp / "home"
        home.mkdir()
        proc = subprocess.run([sys.executable, "-m", "agent", "ps", "--socket", str(path)], capture_output=True,
                              text=True, cwd=REPO, env=env(home), timeout=30)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr
        (line,) = [x for x in proc.stderr.splitlines() if x.startswith("strata: error")]
        assert "another user" in line and str(NOBODY) in line, line
        received = impostor.communicate(timeout=15)[0].strip()
        assert received == "b''", received
    finally:
        if impostor.poll() is None:
            impostor.kill()
            impostor.wait()


def test_a_dead_socket_another_user_left_in_a_shared_directory_is_one_line_and_left_alone(shared_tmp: Path) -> None:
    """`serve --socket` in a sticky directory (/tmp-like) where another user's dead socket sits: the daemon may
    not remove it, and says so in one line (exit 2) instead of failing with an internal error."""
    import socket

    prefix = _as_nobody()
    sticky = shared_tmp / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    dead = sticky / "daemon.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(dead))
    listener.close()  # root's socket, nothing accepts on it
    os.chmod(dead, 0o777)
    home = shared_tmp / "nobody-home"
    home.mkdir(mode=0o700)
    os.chown(home, NOBODY, NOBODY)
    proc = subprocess.run([*prefix, sys.executable, "-m", "agent", "serve", "--foreground", "--socket", str(dead)],
                          capture_output=True, text=True, cwd=REPO, env=env(home), timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("strata: error")]
    assert str(dead) in line and "cannot be removed" in line, line
    assert dead.is_socket() and dead.stat().st_uid == 0
