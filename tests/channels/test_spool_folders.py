"""A real `strata serve` with a spool channel keeps what it sets aside: a rejected file never replaces an earlier
rejected file of the same name (it gets a .1, .2 suffix), and the folders it writes to are made again when someone
removes them while it runs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.channels._support import drop, pending, replies, spool_table, write_config
from tests.cli._helpers import text
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until

pytestmark = pytest.mark.slow


def _put(inbox: Path, name: str, data: str) -> None:
    tmp = inbox / f".{name}.tmp"
    tmp.write_text(data)
    os.replace(tmp, inbox / name)


def _serve(cli: StrataCLI, tmp_path: Path) -> tuple[Daemon, Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    write_config(cli, spool_table("ops", spool, ws, script(tmp_path / "s.json", [text("answered")])))
    return Daemon(cli), spool


def test_a_rejected_file_never_replaces_an_earlier_rejected_file_of_the_same_name(
        cli: StrataCLI, tmp_path: Path) -> None:
    daemon, spool = _serve(cli, tmp_path)
    inbox, rejected = spool / "in", spool / "in" / "rejected"
    try:
        for n, data in enumerate(["{first", "[2]", '{"third": 3}']):
            _put(inbox, "bad.json", data)
            wait_until(lambda n=n: not pending(inbox) and len(list(rejected.glob("*.error"))) == n + 1,
                       timeout=10, what=f"rejection {n + 1} kept beside the earlier ones")
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    kept = {p.name: p.read_text() for p in rejected.iterdir()}
    assert {k: v for k, v in kept.items() if not k.endswith(".error")} == {
        "bad.json": "{first", "bad.json.1": "[2]", "bad.json.2": '{"third": 3}'}
    assert "not a message" in kept["bad.json.error"] and "not a JSON object" in kept["bad.json.1.error"]
    assert "thread" in kept["bad.json.2.error"]


def test_the_rejected_folder_and_the_outbox_are_made_again_when_removed_while_the_daemon_runs(
        cli: StrataCLI, tmp_path: Path) -> None:
    daemon, spool = _serve(cli, tmp_path)
    inbox, rejected, outbox = spool / "in", spool / "in" / "rejected", spool / "out"
    try:
        shutil.rmtree(rejected)
        _put(inbox, "bad.json", "{not json")
        wait_until(lambda: not pending(inbox) and (rejected / "bad.json.error").exists(), timeout=10,
                   what="the bad file set aside in a rejected/ made again")
        shutil.rmtree(outbox)
        drop(inbox, "good", thread="t", id="m1", text="Hello?")
        wait_until(lambda: len(replies(outbox)) == 1 and not pending(inbox), timeout=10,
                   what="the reply in an outbox made again")
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert replies(outbox)[0]["text"] == "answered"
    log = (cli.home / "logs" / "strata.log").read_text()
    assert log.count("made again") == 2, log
