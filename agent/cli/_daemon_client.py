"""How a command finds and reaches this home's daemon: the socket given with `--socket`, else the one the running
daemon recorded in its lock file (it may listen elsewhere), else the home's default."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from agent import ipc

socket_option_help = "The daemon's socket (default: where this home's daemon listens, <home>/run/daemon.sock)."


def daemon_socket(home: Path, socket_path: Path | None) -> Path:
    if socket_path is not None:
        return socket_path.absolute()
    paths = ipc.daemon_paths(home)
    info = ipc.running_daemon(paths)
    return Path(info.socket) if info is not None and info.socket else paths.socket


@asynccontextmanager
async def connect(home: Path, socket_path: Path | None, client_name: str) -> AsyncIterator[ipc.IpcClient]:
    """Connected and greeted; NoDaemon, PeerRefused or VersionRefused (one line each) otherwise."""
    ipc.log_loop_errors()  # a connection ending while a read waits is no traceback on the user's terminal
    path = await anyio.to_thread.run_sync(daemon_socket, home, socket_path)
    async with ipc.IpcClient.connect(path, client_name=client_name) as client:
        yield client
