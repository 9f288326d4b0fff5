"""A careless sender's "Send the invoice.Thanks" (no space after the period, as phones and quick typists leave it)
is the imperative "send the invoice" followed by "thanks": the action-required gate makes it a task, as it does
"Send the invoice. Thanks". A file name ("send invoice_17.pdf") stays one word (a real `strata serve` process with a
scripted model, real spool files)."""

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
    "m1": "Send the invoice.Thanks",
    "m2": "Please review the report.Thx!",
    "m3": "send invoice_17.pdf",
    "m4": "What is the invoice.Thanks",  # a question stays a question
}


def test_a_request_with_no_space_after_its_period_makes_a_task(cli: StrataCLI, tmp_path: Path) -> None:
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
    assert tasks == {"m1": "imperative", "m2": "imperative", "m3": "imperative"}, tasks
