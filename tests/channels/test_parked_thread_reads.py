"""A thread whose session waits for approval keeps its next messages queued; the daemon reads those files once per
retry (every `DEFERRED_RETRY_S`), not on every poll (5 a second). Counted in a real `strata serve` by the kernel:
inotify reports each open of the queued file."""

from __future__ import annotations

import ctypes
import os
import struct
import time
from pathlib import Path

import pytest

from agent.channels._runner import DEFERRED_RETRY_S
from tests.channels._support import deferrals, drop, pending, replies, spool_table, write_config
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until

pytestmark = pytest.mark.slow

IN_OPEN = 0x20


class _Opens:
    """Opens of the files in one folder, as inotify reports them."""

    def __init__(self, folder: Path) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self._fd < 0 or self._libc.inotify_add_watch(self._fd, str(folder).encode(), IN_OPEN) < 0:
            pytest.skip(f"inotify is not available here (errno {ctypes.get_errno()})")
        self.counts: dict[str, int] = {}

    def read(self) -> dict[str, int]:
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return self.counts
            offset = 0
            while offset < len(data):
                _, _, _, length = struct.unpack_from("iIII", data, offset)
                name = data[offset + 16:offset + 16 + length].rstrip(b"\0").decode()
                self.counts[name] = self.counts.get(name, 0) + 1
                offset += 16 + length

    def close(self) -> None:
        os.close(self._fd)


def test_a_parked_threads_queued_message_is_read_once_per_retry_not_on_every_poll(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    model = script(tmp_path / "s.json", [tool_use("b1", "bash", command="true")], [text("parked, then denied")],
                   [text("second answered")])
    write_config(cli, '[daemon]\nenable = ["bash"]\n\n' + spool_table("park", spool, ws, model, on_ask='"park"'))
    daemon = Daemon(cli)
    opens = _Opens(spool / "in")
    try:
        drop(spool / "in", "m1", thread="t", id="m1", text="Run the tests on the release branch")
        wait_until(lambda: len(replies(spool / "out")) == 1 and not pending(spool / "in"), what="m1 parked")
        [parked] = replies(spool / "out")
        assert parked["status"] == "parked"
        dropped = time.monotonic()
        drop(spool / "in", "m2", thread="t", id="m2", text="And the changelog?")
        # watched while it is put off at its offer and again at two retries (polled 5 times a second meanwhile)
        wait_until(lambda: deferrals(cli.home, "m2") >= 3, what="m2 put off at its offer and at two retries")
        reads = opens.read().get("m2.json", 0)
        watched = time.monotonic() - dropped
        assert pending(spool / "in") == ["m2.json"]
        decided = cli.run("deny", parked["session_id"], "b1", "--reason", "not unattended")
        assert decided.returncode == 0, decided.stderr
        wait_until(lambda: len(replies(spool / "out")) == 2, what="m2 answered once the call was decided")
    finally:
        opens.close()
        daemon.stop()
    # the first read, then one a retry: at most 3 in the ~4 s to the second retry (every poll, 5 a second, made it
    # about 20; over 30 in the 6.5 s this watched before)
    assert 1 <= reads <= 1 + int(watched / DEFERRED_RETRY_S), f"m2.json was opened {reads} times in {watched:.1f} s"
