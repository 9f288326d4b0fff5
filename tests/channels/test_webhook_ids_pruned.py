"""The webhook's `ids/` folder (each message id's thread, for the 409 to another thread's message reusing it) is
pruned, when the daemon starts and every hour: a record untouched for `keep_ids_days` goes, unless its message still
waits in the queue (put off, however long). It used to grow for ever, one file for every id ever accepted. A pruned
id whose reply is still in `out/` is still refused to another thread (the reply names its thread); a recent one
keeps its record."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from core.hashing import sha256_text
from tests.channels._support import pending, replies, write_config
from tests.channels.test_webhook import TOKEN, _free_port, _http
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until

pytestmark = pytest.mark.slow

JUNK = 300
DAY = 86400


def _age(path: Path, days: float) -> None:
    then = time.time() - days * DAY
    os.utime(path, (then, then))


def test_old_id_records_are_pruned_at_start_but_not_a_waiting_messages_nor_a_recent_one(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    port = _free_port()
    model = script(tmp_path / "s.json", [tool_use("b1", "bash", command="true")], [text("denied")],
                   [text("answered")])
    write_config(cli, '[daemon]\nenable = ["bash"]\n\n'
                 f'[[channels]]\nname = "hook"\nkind = "webhook"\nport = {port}\ntoken_env = "HOOK_TOKEN"\n'
                 f'workspace = "{ws}"\nmodel = "{model}"\non_ask = "park"\nkeep_ids_days = 7\n')
    folder = cli.home / "channels" / "hook"
    ids, auth, url = folder / "ids", {"Authorization": f"Bearer {TOKEN}"}, f"http://127.0.0.1:{port}/messages"

    def post(thread: str, message_id: str) -> int:
        return _http("POST", url, headers=auth, json_body={"thread": thread, "id": message_id,
                                                           "text": "Run the tests"}).status_code

    daemon = Daemon(cli, env={"HOOK_TOKEN": TOKEN})
    try:
        assert post("alpha", "w-old") == 202  # alpha's session parks on its bash call: answered "parked"
        wait_until(lambda: len(replies(folder / "out")) == 1 and not pending(folder / "in"), what="w-old answered")
        assert post("alpha", "w-wait") == 202  # put off while the call waits: it stays in in/
        assert post("gamma", "w-recent") == 202
        wait_until(lambda: len(replies(folder / "out")) == 2 and len(pending(folder / "in")) == 1,
                   what="w-recent answered, w-wait put off")
    finally:
        daemon.stop()
    record = {m: ids / sha256_text(m) for m in ("w-old", "w-wait", "w-recent")}
    assert all(p.is_file() for p in record.values())
    _age(record["w-old"], 8)
    _age(record["w-wait"], 8)  # older than the retention, but its message still waits
    for i in range(JUNK):  # ids of messages long handled
        junk = ids / sha256_text(f"junk-{i}")
        junk.write_text("old-thread")
        _age(junk, 7.5)
    fresh = ids / sha256_text("fresh-one")
    fresh.write_text("delta")
    _age(fresh, 6)

    daemon = Daemon(cli, env={"HOOK_TOKEN": TOKEN})
    try:
        wait_until(lambda: len(list(ids.iterdir())) == 3, timeout=10, what="the old records pruned")
        assert sorted(ids.iterdir()) == sorted([record["w-wait"], record["w-recent"], fresh])
        # the waiting message's id, a recent one, and a pruned one whose reply is kept: all still alpha's/gamma's
        assert post("beta", "w-wait") == 409
        assert post("beta", "w-recent") == 409
        assert post("beta", "w-old") == 409
        assert not record["w-old"].exists()  # refused by its reply, not recorded again for beta
        assert post("alpha", "w-old") == 202  # its own thread's retry: recorded again, and only acknowledged
        assert record["w-old"].read_text() == "alpha"
    finally:
        daemon.stop()
    log = (cli.home / "logs" / "strata.log").read_text()
    assert "message id records pruned" in log
    assert len(replies(folder / "out")) == 2


def test_keep_ids_days_is_refused_on_a_spool_channel_with_one_line(cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    write_config(cli, f'[[channels]]\nname = "s"\nkind = "spool"\ninbox = "{tmp_path / "in"}"\n'
                 f'outbox = "{tmp_path / "out"}"\nworkspace = "{ws}"\nmodel = "script:x"\nkeep_ids_days = 3\n')
    proc = cli.run("serve", "--foreground", timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert "keep_ids_days" in proc.stderr and "Traceback" not in proc.stderr
