"""The action-required gate reads a channel message as a person sees it: a request hidden by zero-width characters,
full-width letters or Cyrillic lookalikes still makes a task, and a negation or question written with them is not
dropped, leaving a task behind (a real `strata serve` process with a scripted model, real spool files)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.channels._support import drop, pending, replies, spool_table, write_config
from tests.cli._helpers import text
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until

pytestmark = pytest.mark.slow

MESSAGES = {
    "hidden-zw": "Se\u200bnd the in\u200dvoice",
    "hidden-wide": "\uff52\uff45\uff56\uff49\uff45\uff57 \uff54\uff48\uff45 \uff52\uff45\uff50\uff4f\uff52\uff54",
    "hidden-cyrillic": "Pl\u0435as\u0435 s\u0435nd th\u0435 invoic\u0435",
    "harmless-wide-negation": "\uff4e\uff45\uff56\uff45\uff52 send the invoice",
    "harmless-wide-question": "\uff57\uff48\uff59 review the report?",
    "harmless-zw-chat": "g\u200bood job on the re\u200bport \ufeff",
}


def test_odd_characters_neither_hide_a_request_nor_make_harmless_text_a_task(cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    model = script(tmp_path / "s.json", *([text(f"answer {i}")] for i in range(len(MESSAGES))))
    write_config(cli, spool_table("team", spool, ws, model))
    daemon = Daemon(cli)
    try:
        for n, (mid, body) in enumerate(MESSAGES.items()):
            drop(spool / "in", mid, thread=f"t{n}", id=mid, sender="anna@example.com", text=body)
            wait_until(lambda n=n: len(replies(spool / "out")) == n + 1 and not pending(spool / "in"),
                       what=f"the reply to {mid}")
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    listed = cli.run("tasks", "--json")
    assert listed.returncode == 0, listed.stderr
    tasks = {t["message"]: t["rule"] for t in (json.loads(line) for line in listed.stdout.splitlines())}
    assert tasks == {"hidden-zw": "imperative", "hidden-wide": "imperative", "hidden-cyrillic": "imperative"}, tasks
