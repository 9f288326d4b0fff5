"""A channel thread whose session delegated (`delegate_in_daemon`), in a real `strata serve` process: while the
child its delegate call waits on is undecided, or driven by another process (`strata resume CHILD`), the thread's
next message stays queued, and is answered once the child is done; the child's effect runs once.

Before, the worker resumed the thread's session, its open batch parked again (the child undecided, or its delegate
call failed while another process drove the child), the outcome was ignored, and the message's prompt was never
run: the message was answered "a call waits for approval ()" and acknowledged, its prompt dropped."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.channels._support import deferrals, drop, pending, replies, session_events, spool_table, write_config
from tests.cli._helpers import EFFECTS_LOG, text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, wait_until

pytestmark = pytest.mark.slow

CHILD_ANSWER = "child wrote hello.txt"


def _config(cli: StrataCLI, tmp_path: Path, ws: Path) -> Path:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({
        "turns": [
            [tool_use("p1", "delegate", task="write hello.txt", tools=["bash"])],  # one plan here and in the CLI
            [text("parent done")],
            [text("second answer")],
        ],
        "children": [[
            [tool_use("c1", "bash", command=f"touch started; while [ ! -e release ] && [ $SECONDS -lt 300 ]; "
                                            f"do sleep 0.05; done; "
                                            f"echo hi > hello.txt; echo once >> {EFFECTS_LOG}")],
            [text(CHILD_ANSWER)],
        ]],
    }), encoding="utf-8")
    write_config(cli, 'delegate_in_daemon = true\n\n[daemon]\nenable = ["bash"]\n\n'
                      '[[policy.rules]]\ntool = "delegate"\naction = "allow"\n\n'
                 + spool_table("ops", tmp_path / "spool", ws, f"script:{path}", on_ask='"park"'))
    return path


def _child_of(cli: StrataCLI) -> str:
    (child,) = [r["id"] for r in json_lines_in_process(cli, "sessions", "--json") if r["parent_id"] is not None]
    return child


def test_a_threads_message_waits_while_its_sessions_child_is_undecided_or_driven_elsewhere(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    _config(cli, tmp_path, ws)
    inbox, outbox = tmp_path / "spool" / "in", tmp_path / "spool" / "out"
    daemon = Daemon(cli)
    driver: subprocess.Popen[str] | None = None
    try:
        drop(inbox, "m1", thread="t", id="m1", text="Write hello.txt through a child")
        wait_until(lambda: len(replies(outbox)) == 1, what="the first message answered (parked)")
        (first,) = replies(outbox)
        child = _child_of(cli)
        assert first["status"] == "parked" and child in first["text"], first

        drop(inbox, "m2", thread="t", id="m2", text="And then?")  # the child undecided: m2 waits
        # put off when offered, then offered again at the daemon's retry (DEFERRED_RETRY_S later): still waiting
        wait_until(lambda: deferrals(cli.home, "m2") >= 2, what="m2 put off at its offer and again at the retry")
        assert pending(inbox) == ["m2.json"] and len(replies(outbox)) == 1

        daemon.stop()  # else its next offer of m2 could drive the decided child before `strata resume` does
        assert cli.run("approve", child, "--all").returncode == 0
        driver = cli.popen("resume", child)  # another process drives the child: m2 still waits
        wait_until(lambda: (ws / "started").exists() or driver.poll() is not None, what="the child's bash started")
        assert driver.poll() is None, driver.communicate()
        put_off = deferrals(cli.home, "m2")
        daemon = Daemon(cli)
        wait_until(lambda: deferrals(cli.home, "m2") >= put_off + 2,
                   what="m2 put off by the new daemon at its offer and again at the retry")
        assert pending(inbox) == ["m2.json"] and len(replies(outbox)) == 1
        assert driver.poll() is None, driver.communicate()

        (ws / "release").touch()
        _, err = driver.communicate(timeout=60)
        assert driver.returncode == 0, err
        wait_until(lambda: len(replies(outbox)) == 2, timeout=60, what="the second message answered")
        wait_until(lambda: not pending(inbox), what="the second message acknowledged")
    finally:
        if driver is not None and driver.poll() is None:
            driver.kill()
            driver.communicate()
        daemon.stop()
    second = next(r for r in replies(outbox) if r["in_reply_to"] == "m2")
    assert (second["status"], second["text"]) == ("completed", "second answer"), second
    results = {p["call_id"]: p for _, kind, p in session_events(cli.home, first["session_id"])
               if kind == "call_result"}
    assert results["p1"]["status"] == "ok" and CHILD_ANSWER in results["p1"]["content"], results
    assert (ws / EFFECTS_LOG).read_text() == "once\n"
