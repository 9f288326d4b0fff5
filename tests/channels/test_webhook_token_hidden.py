"""A webhook channel's bearer token is the daemon's alone: a `bash` command a channel session runs (any channel's,
any thread's) did inherit it from the daemon's environment, so a sender of another channel, or text a session read,
could have the model print it and then post to the webhook as anyone. Now the variable is removed from the
daemon's environment once every channel is open, and its value blanked in the environment block the kernel shows
(/proc/PID/environ), while the webhook goes on accepting requests that bear it."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.channels._support import drop, replies, spool_table, write_config
from tests.channels.test_webhook import _http
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until

pytestmark = pytest.mark.slow

TOKEN = "webhook-fake-token-0123456789"


def test_a_bash_command_of_a_channel_session_does_not_get_the_webhooks_token(cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    model = script(tmp_path / "s.json", [tool_use("c", "bash", command='echo "got=$HOOK_TOKEN" > leak.txt')],
                   [text("done")], [text("hello from strata")])
    write_config(cli, '[[policy.rules]]\ntool = "bash"\naction = "allow"\n\n[daemon]\nenable = ["bash"]\n\n'
                 + spool_table("sp", spool, ws, model)
                 + f'[[channels]]\nname = "hook"\nkind = "webhook"\nport = {port}\ntoken_env = "HOOK_TOKEN"\n'
                 f'workspace = "{ws}"\nmodel = "{model}"\n')
    drop(spool / "in", "m1", thread="t", id="m1", text="hi")
    daemon = Daemon(cli, env={"HOOK_TOKEN": TOKEN})
    try:
        wait_until(lambda: len(replies(spool / "out")) == 1, timeout=60, what="the spool message answered")
        shown = Path(f"/proc/{daemon.pid}/environ").read_bytes()
        posted = _http("POST", f"http://127.0.0.1:{port}/messages", headers={"Authorization": f"Bearer {TOKEN}"},
                       json_body={"thread": "w", "id": "w1", "sender": "me", "text": "hi"})
        refused = _http("POST", f"http://127.0.0.1:{port}/messages", headers={"Authorization": "Bearer x"},
                        json_body={"thread": "w", "id": "w1", "sender": "me", "text": "hi"})
    finally:
        daemon.stop()
    assert (ws / "leak.txt").read_text(encoding="utf-8") == "got=\n"
    assert TOKEN.encode() not in shown and b"PATH=" in shown
    assert posted.status_code == 202, posted.text  # the webhook still takes its token
    assert refused.status_code == 401
