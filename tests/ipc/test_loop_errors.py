"""A callback error no task owns (anyio's Unix socket stream setting a reader's future that a cancelled read already
finished, when a connection ends while a read waits) is a log record on both sides of the socket, never a traceback
on the user's stderr: seen as `Exception in callback Future.set_result(None) ... InvalidStateError` at the end of a
`strata attach --json` whose daemon drained. Real processes: the same callback error with and without the handler."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

_PROGRAM = r'''
import asyncio, sys
import anyio
from agent import ipc

async def main() -> None:
    if sys.argv[1] == "handled":
        ipc.log_loop_errors()
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    done.cancel()  # a read cancelled meanwhile
    loop.call_soon(done.set_result, None)  # what the stream's reader callback then does
    await anyio.sleep(0.05)
    print("still running")

anyio.run(main)
'''


def _run(mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _PROGRAM, mode], cwd=REPO, capture_output=True, text=True,
                          timeout=60)


def test_a_callback_error_no_task_owns_is_a_log_record_not_a_traceback_on_stderr() -> None:
    unhandled = _run("unhandled")
    assert "InvalidStateError" in unhandled.stderr and "Traceback" in unhandled.stderr  # asyncio's default
    handled = _run("handled")
    assert handled.returncode == 0 and "still running" in handled.stdout, handled.stderr
    assert "Traceback" not in handled.stderr and "Traceback" not in handled.stdout, handled.stderr
    assert "event loop callback failed" in handled.stdout + handled.stderr
