"""A channel's reply and rejected folders are pruned when the daemon starts (and every hour): they used to grow for
ever, one file for every reply and every rejected message. A reply goes `keep_replies_days` after it was written,
but only once nothing needs it: its message acknowledged in the book (a message not yet acknowledged is redelivered,
and its reply's presence is what keeps it from running again), no uncertain `reply` effect in its session (the
probe that settles one reads the outbox), and, on a webhook, the reply taken (fetched, or posted to the callback
when there is one) and its id's record gone (a retry of the message is answered with the reply's address while the
record is kept). A rejected file goes with its `.error` `keep_rejected_days` after it was set aside. The two crash
states (a reply effect left `unknown`, a message `replied` but not `acked`) are written into the databases as a
crash at those points leaves them (tests/channels/test_sigkill_exactly_once.py kills the daemon for real)."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import pytest

from agent.channels import reply_key
from core.hashing import sha256_text
from tests.channels._support import drop, pending, replies, spool_table, write_config
from tests.channels.test_webhook import TOKEN, _free_port, _http
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until

pytestmark = pytest.mark.slow

DAY = 86400


def _age(path: Path, days: float) -> None:
    then = time.time() - days * DAY
    os.utime(path, (then, then), follow_symlinks=False)


def _reply_model(tmp_path: Path) -> str:
    return script(tmp_path / "s.json", [tool_use("r1", "reply", text="done it")], [text("replied")])


def test_old_spool_replies_and_rejected_files_go_but_not_one_something_still_needs(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    inbox, outbox, rejected = spool / "in", spool / "out", spool / "in" / "rejected"
    write_config(cli, spool_table("ops", spool, ws, _reply_model(tmp_path), keep_replies_days="7",
                                  keep_rejected_days="3"))
    daemon = Daemon(cli)
    try:
        for n in ("done", "unsure", "unacked", "recent"):
            drop(inbox, n, thread=f"t-{n}", id=n, text="Write the summary")
        (inbox / "bad-old.json").write_text("{not json")
        (inbox / "bad-new.json").write_text("[]")
        wait_until(lambda: len(replies(outbox)) == 4 and not pending(inbox), what="four answered, two rejected")
    finally:
        daemon.stop()
    reply = {n: outbox / f"{reply_key('ops', n)}.json" for n in ("done", "unsure", "unacked", "recent")}
    assert all(json.loads(p.read_text())["in_reply_to"] == n for n, p in reply.items())
    for n in ("done", "unsure", "unacked"):
        _age(reply[n], 8)
    _age(reply["recent"], 6)
    stranger = outbox / "notes.json"  # not a reply of the channel's: never touched
    stranger.write_text("{}")
    _age(stranger, 100)
    forged = outbox / f"{reply_key('ops', 'other')}.json"  # a reply's name, not its content
    forged.write_text(json.dumps({"in_reply_to": "someone-else"}))
    _age(forged, 100)
    _age(rejected / "bad-old.json.error", 4)
    _age(rejected / "bad-old.json", 400)
    _age(rejected / "bad-new.json", 400)  # set aside just now (its .error is new): kept
    sid = json.loads(reply["unsure"].read_text())["session_id"]
    with sqlite3.connect(cli.home / "strata.db") as db:  # the daemon died with the reply call dispatched
        assert db.execute("UPDATE receipts SET status = 'unknown' WHERE session_id = ? AND tool = 'reply'",
                          (sid,)).rowcount == 1
    with sqlite3.connect(cli.home / "channels.db") as db:  # ... between the book's `replied` and `acked`
        assert db.execute("UPDATE channel_intake SET status = 'replied' WHERE message_id = 'unacked'").rowcount == 1

    daemon = Daemon(cli)
    try:
        wait_until(lambda: not reply["done"].exists(), timeout=10, what="the old reply pruned")
        wait_until(lambda: not (rejected / "bad-old.json").exists(), timeout=10, what="the old rejected file pruned")
    finally:
        daemon.stop()
    assert sorted(outbox.iterdir()) == sorted([reply["unsure"], reply["unacked"], reply["recent"], stranger, forged])
    assert sorted(p.name for p in rejected.iterdir()) == ["bad-new.json", "bad-new.json.error"]
    log = (cli.home / "logs" / "strata.log").read_text()
    assert "channel files pruned" in log


def test_keep_days_out_of_range_is_a_one_line_config_error(cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    for key, value in (("keep_replies_days", "0"), ("keep_rejected_days", '"30"')):
        write_config(cli, spool_table("s", tmp_path / "spool", ws, "script:x", **{key: value}))
        proc = cli.run("serve", "--foreground", timeout=30)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert key in proc.stderr and "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr


def _webhook(name: str, port: int, ws: Path, model: str, extra: str = "") -> str:
    return (f'[[channels]]\nname = "{name}"\nkind = "webhook"\nport = {port}\ntoken_env = "HOOK_TOKEN"\n'
            f'workspace = "{ws}"\nmodel = "{model}"\nkeep_ids_days = 7\nkeep_replies_days = 7\n'
            f'keep_rejected_days = 7\n{extra}\n')


def test_old_webhook_replies_go_once_taken_and_their_id_record_is_gone_with_their_markers(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [text("answered")])
    ports = {"hook": _free_port(), "cb": _free_port()}
    refused = f"http://127.0.0.1:{_free_port()}/x"  # nothing listens: no reply of `cb` is ever delivered
    write_config(cli, _webhook("hook", ports["hook"], ws, model)
                 + _webhook("cb", ports["cb"], ws, model, f'callback_url = "{refused}"'))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    folder = {name: cli.home / "channels" / name for name in ports}

    def post(channel: str, thread: str, message_id: str) -> int:
        return _http("POST", f"http://127.0.0.1:{ports[channel]}/messages", headers=auth,
                     json_body={"thread": thread, "id": message_id, "text": "Any news?"}).status_code

    def get(channel: str, message_id: str) -> int:
        return _http("GET", f"http://127.0.0.1:{ports[channel]}/replies/{reply_key(channel, message_id)}",
                     headers=auth).status_code

    def reply(channel: str, message_id: str) -> Path:
        return folder[channel] / "out" / f"{reply_key(channel, message_id)}.json"

    def record(channel: str, message_id: str) -> Path:
        return folder[channel] / "ids" / sha256_text(message_id)

    daemon = Daemon(cli, env={"HOOK_TOKEN": TOKEN})
    try:
        for thread, message_id in (("a", "w-taken"), ("b", "w-unfetched"), ("c", "w-retried")):
            assert post("hook", thread, message_id) == 202
        assert post("cb", "d", "c-fetched") == 202
        wait_until(lambda: len(replies(folder["hook"] / "out")) == 3 and len(replies(folder["cb"] / "out")) == 1,
                   what="the four answered")
        assert get("hook", "w-taken") == get("hook", "w-retried") == get("cb", "c-fetched") == 200
    finally:
        daemon.stop()
    delivered = folder["hook"] / "delivered"
    assert (delivered / f"{reply_key('hook', 'w-taken')}.fetched").exists()
    for channel, message_id in (("hook", "w-taken"), ("hook", "w-unfetched"), ("hook", "w-retried"),
                                ("cb", "c-fetched")):
        _age(reply(channel, message_id), 8)
        if message_id != "w-retried":  # its record stays: its thread may send it again
            _age(record(channel, message_id), 8)
    orphan_old, orphan_new = delivered / f"reply-{'a' * 32}", delivered / f"reply-{'b' * 32}.fetched"
    for path, days in ((orphan_old, 8), (orphan_new, 1)):
        path.touch()
        _age(path, days)
    for channel in ports:
        gone = folder[channel] / "in" / "rejected"
        gone.mkdir(parents=True, exist_ok=True)
        (gone / "x.json").write_text("{}")
        (gone / "x.json.error").write_text("message id 'x' is already taken\n")
        _age(gone / "x.json.error", 8)

    daemon = Daemon(cli, env={"HOOK_TOKEN": TOKEN})
    try:
        wait_until(lambda: not any((folder[c] / "in" / "rejected" / "x.json").exists() for c in ports), timeout=10,
                   what="both channels pruned")
        assert not reply("hook", "w-taken").exists()  # fetched, its record gone: nothing needs it
        assert not (delivered / f"{reply_key('hook', 'w-taken')}.fetched").exists()
        assert reply("hook", "w-unfetched").exists()  # never fetched
        assert reply("hook", "w-retried").exists()  # its record kept: a retry gets this reply's address
        assert reply("cb", "c-fetched").exists()  # fetched, but owed to the callback still
        assert not orphan_old.exists() and orphan_new.exists()
        assert post("hook", "c", "w-retried") == 202
        wait_until(lambda: not pending(folder["hook"] / "in"), what="the retry acknowledged")
        assert get("hook", "w-retried") == 200
        assert post("hook", "z", "w-unfetched") == 409  # its reply still names its thread
    finally:
        daemon.stop()
    assert len(replies(folder["hook"] / "out")) == 2
