"""A real `strata serve` with a spool channel keeps what it sets aside: a rejected file never replaces an earlier
rejected file of the same name (it gets a .1, .2 suffix), and the folders it writes to are made again when someone
removes them while it runs."""

from __future__ import annotations

import os
import shutil
import time
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


def test_a_removed_spool_inbox_is_logged_once_not_every_poll_and_polling_goes_on_when_it_is_back(
        cli: StrataCLI, tmp_path: Path) -> None:
    daemon, spool = _serve(cli, tmp_path)
    log = cli.home / "logs" / "strata.log"
    try:
        shutil.rmtree(spool / "in")
        time.sleep(1.5)  # several polls (0.2 s apart) find no inbox
        (spool / "in").mkdir()  # the writer's folder: the daemon does not make it again
        drop(spool / "in", "good", thread="t", id="m1", text="Hello?")
        wait_until(lambda: len(replies(spool / "out")) == 1, timeout=10, what="the reply once the inbox is back")
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    text_ = log.read_text()
    assert text_.count("channel cannot be polled") == 1, text_
    assert text_.count("channel polled again") == 1, text_
