"""Ctrl-C (SIGINT) reaching `strata serve --foreground` while it is still opening its event store, before it
listens: the daemon ends at once in one line (`strata: interrupted`, exit 130), with no traceback and no hang, and
leaves the home free for the next daemon. Its store's opening is held up for real: another process holds the
SQLite database's exclusive lock, so the daemon's open waits on its busy timeout while the signal comes.

Before, the interrupted open left the database connection's worker thread behind: the process either printed that
thread's traceback (`RuntimeError: Event loop is closed`) once the busy timeout ran out, or, when the signal came
while the thread was idle, hung for ever at exit waiting for it (a terminal that Ctrl-C could not give back, a
daemon holding its home's lock)."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli._helpers import exclusively_locked, holds_open
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, wait_until

pytestmark = pytest.mark.slow


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to see the daemon open its store")
def test_ctrl_c_while_the_daemon_opens_its_store_ends_it_in_one_line_without_a_traceback_or_a_hang(
        cli: StrataCLI) -> None:
    first = Daemon(cli)  # the home and its store, as a daemon that ran once left them
    first.stop()
    assert first.proc.returncode == 0, first.stderr
    db = cli.home / "strata.db"
    with exclusively_locked(db):  # the daemon's open now waits for it, up to its busy timeout (5 s)
        proc = subprocess.Popen(cli.argv(["serve", "--foreground"]), cwd=cli.cwd, env=cli.env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: holds_open(proc.pid, db), timeout=60, what="the daemon opening its store")
            time.sleep(0.3)  # into the open's wait on the lock
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)  # a hang is a failure here, not a test that never ends
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert "listening" not in out
    assert (proc.returncode, err) == (130, "strata: interrupted\n"), err
    assert not (cli.home / "run" / "daemon.sock").exists()
    second = Daemon(cli)  # the home is free: its lock went with the interrupted daemon
    second.stop()
    assert second.proc.returncode == 0, second.stderr
