"""The client library against a real socket: requests matched to replies, pushes in order, and one clear line
(never a traceback) for no daemon, a refused version and a daemon that goes away."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import anyio
import pytest

from agent.ipc import (
    ApprovalRequest,
    Attach,
    DaemonGone,
    EventPush,
    IpcClient,
    IpcServer,
    NewSession,
    NoDaemon,
    Prompt,
    RequestFailed,
    Status,
    VersionRefused,
)
from tests.ipc._fake_dispatcher import FakeDispatcher
from tests.ipc._wire import start_fake_daemon

pytestmark = pytest.mark.anyio


async def test_requests_get_their_replies_and_pushes_arrive_in_order(tmp_path: Path) -> None:
    """A driving client's prompt is answered `ok`, and the session's event and approval request follow as pushes."""
    async with IpcServer.open(tmp_path / "home", FakeDispatcher()) as server, anyio.create_task_group() as tg:
        await tg.start(server.serve)
        async with IpcClient.connect(server.paths.socket, client_name="test") as client:
            assert client.hello.pid == os.getpid()
            session = (await client.request(NewSession, workspace="/w", model="m")).session_id
            assert session is not None
            assert (await client.request(Attach, session_id=session)).role == "drive"
            await client.request(Prompt, session_id=session, text="ask")
            pushes = []
            async for push in client.pushes():
                pushes.append(push)
                if len(pushes) == 2:
                    break
            assert isinstance(pushes[0], EventPush) and isinstance(pushes[1], ApprovalRequest)
            with pytest.raises(RequestFailed) as refused:
                await client.request(Attach, session_id="missing")
            assert refused.value.code == "unknown_session"
            assert len((await client.request(Status)).sessions or ()) == 1
        server.stop()


async def test_no_daemon_is_one_clear_line(tmp_path: Path) -> None:
    """No socket, or a socket no one listens on (a dead daemon's), is NoDaemon with a hint to start one."""
    with pytest.raises(NoDaemon) as missing:
        async with IpcClient.connect(tmp_path / "daemon.sock"):
            pass
    assert "no socket there" in str(missing.value) and "strata serve" in (missing.value.hint or "")
    stale = tmp_path / "stale.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(os.fsencode(stale))
    dead.close()
    with pytest.raises(NoDaemon) as refused:
        async with IpcClient.connect(stale):
            pass
    assert "nothing is listening there" in str(refused.value)


async def test_a_refused_version_names_what_the_daemon_speaks(tmp_path: Path) -> None:
    """A client speaking version 2 is told, in one line, that the daemon speaks 1."""
    daemon = await anyio.to_thread.run_sync(start_fake_daemon, tmp_path / "home")
    try:
        with pytest.raises(VersionRefused) as refused:
            async with IpcClient.connect(daemon.socket, version=2):
                pass
        assert refused.value.versions == (1,)
        assert "speaks protocol version 1, this client 2" in str(refused.value)
    finally:
        await anyio.to_thread.run_sync(daemon.stop)


async def test_a_daemon_that_stops_ends_waiting_requests_with_daemon_gone(tmp_path: Path) -> None:
    """When the daemon process goes away the client's next request fails with DaemonGone, not a hang."""
    daemon = await anyio.to_thread.run_sync(start_fake_daemon, tmp_path / "home")
    async with IpcClient.connect(daemon.socket) as client:
        await client.request(Status)
        await anyio.to_thread.run_sync(daemon.kill)
        with anyio.fail_after(10), pytest.raises(DaemonGone):
            await client.request(Status)
