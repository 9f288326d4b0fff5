"""Ctrl-C (SIGINT) reaching a command that only reads (`strata sessions`, which opens the store read-only) while its
open waits on the database's lock ends it in one line (`strata: interrupted`, exit 130), with no traceback and no
hang. The wait is real: another process holds the SQLite database's exclusive lock, so the read-only open waits on
its busy timeout while the signal comes.

Before, the interrupted read-only open left its connection's worker thread behind (the writer's open had been
fixed for the daemon, tests/serve/test_ctrl_c_while_the_daemon_starts.py, not this one): once the busy timeout
ran out, the thread printed its traceback (`RuntimeError: Event loop is closed`) under the one line."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli._helpers import exclusively_locked, holds_open
from tests.conftest import StrataCLI
from tests.serve._procs import wait_until

pytestmark = pytest.mark.slow


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to see the command open the store")
def test_ctrl_c_while_a_reading_command_waits_on_the_locked_store_ends_it_in_one_line_without_a_traceback(
        cli: StrataCLI) -> None:
    made = cli.run("sessions")  # the home and its store
    assert made.returncode == 0, made.stderr
    db = cli.home / "strata.db"
    with exclusively_locked(db):  # the read-only open now waits for it, up to its busy timeout (5 s)
        proc = subprocess.Popen(cli.argv(["sessions"]), cwd=cli.cwd, env=cli.env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: holds_open(proc.pid, db), timeout=60, what="the command opening the store")
            time.sleep(1.0)  # into the open's wait on the lock
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)  # a hang is a failure here, not a test that never ends
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert (proc.returncode, err) == (130, "strata: interrupted\n"), err
    assert out == ""
    again = cli.run("sessions")  # nothing was left half-open: the store reads as before
    assert again.returncode == 0, again.stderr
