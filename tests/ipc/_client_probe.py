"""A client process for the tests (a stand-in for `strata attach`): hello, then `status`.

    python -m tests.ipc._client_probe SOCKET

Prints `OK <daemon pid>` and exits 0, or the error's one line and exits 1."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from agent.ipc import IpcClient, Status
from core.errors import StrataError


async def main(path: Path) -> int:
    try:
        async with IpcClient.connect(path, client_name="probe") as client:
            await client.request(Status)
            print(f"OK {client.hello.pid}")
    except StrataError as exc:
        print(f"{type(exc).__name__}: {exc.message}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, Path(sys.argv[1])))
