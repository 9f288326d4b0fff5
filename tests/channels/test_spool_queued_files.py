"""A spool file already queued for its thread's worker is not read again by the next polls of a real `strata serve`:
it is neither queued twice nor judged again (set aside as rejected while its turn runs) whatever its bytes became."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.channels._support import drop, pending, replies, spool_table, write_config
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until

pytestmark = pytest.mark.slow

ALLOW_BASH = '[[policy.rules]]\ntool = "bash"\naction = "allow"\n\n[daemon]\nenable = ["bash"]\n\n'


def test_a_queued_spool_file_is_not_read_again_while_its_turn_runs(cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    model = script(tmp_path / "s.json", [tool_use("b1", "bash", command="touch started; sleep 1.5")], [text("done")])
    write_config(cli, ALLOW_BASH + spool_table("ops", spool, ws, model))
    daemon = Daemon(cli)
    try:
        drop(spool / "in", "m", thread="t", id="m1", text="Run the tests on the release branch")
        wait_until(lambda: (ws / "started").exists(), what="the message's turn running")
        garbled = spool / "in" / ".m.tmp"
        garbled.write_text("{not json")
        os.replace(garbled, spool / "in" / "m.json")  # a queued file's bytes change under the worker
        wait_until(lambda: len(replies(spool / "out")) == 1 and not pending(spool / "in"), what="the reply")
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    [reply] = replies(spool / "out")
    assert (reply["in_reply_to"], reply["text"]) == ("m1", "done")
    assert sorted(p.name for p in (spool / "in" / "rejected").iterdir()) == []
