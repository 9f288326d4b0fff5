"""Guards from a review by attack of `daemon.max_workers` (real `strata serve`, spool channels): SIGKILLs while
many threads wait for two places leave each message answered exactly once; with one place, a turn that hangs until
its budget is stopped there and the waiting threads (and the hung thread's next message) are answered after it; a
message id a second thread reuses is rejected, the first thread's message answered."""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.channels._support import drop, pending, replies, spool_table, write_config
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until

pytestmark = pytest.mark.slow

BASH = '[[policy.rules]]\ntool = "bash"\naction = "allow"\n\n[daemon]\nenable = ["bash"]\nmax_workers = {w}\n{extra}\n'


def test_sigkill_with_many_threads_queued_behind_two_places_answers_each_message_once(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    model = script(tmp_path / "s.json", [tool_use("c", "bash", command="sleep 0.15")], [text("done")])
    write_config(cli, BASH.format(w=2, extra="") + spool_table("kq", spool, ws, model))
    ids = [f"t{t}-m{i}" for i in range(2) for t in range(12)]
    for mid in ids:
        drop(spool / "in", mid, thread=mid.split("-")[0], id=mid, text=f"part {mid}")
    for delay in (0.9, 1.7, 0.4, 2.3):
        daemon = Daemon(cli)
        time.sleep(delay)
        daemon.signal(signal.SIGKILL)
        daemon.wait()
    daemon = Daemon(cli)
    try:
        wait_until(lambda: not pending(spool / "in") and len(replies(spool / "out")) >= len(ids), timeout=180,
                   what="every message answered")
        time.sleep(1.0)
    finally:
        daemon.stop()
    got = Counter(r["in_reply_to"] for r in replies(spool / "out"))
    assert got == Counter(dict.fromkeys(ids, 1)), got


def test_one_place_and_a_turn_hanging_until_its_budget_other_threads_still_answered(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "hang.flag").write_text("x")
    spool = tmp_path / "spool"
    cmd = "if [ -e hang.flag ]; then rm hang.flag; sleep 600; fi; echo ok"
    model = script(tmp_path / "s.json", [tool_use("c", "bash", command=cmd)], [text("done")],
                   [tool_use("c2", "bash", command=cmd)], [text("done again")])
    write_config(cli, BASH.format(w=1, extra="turn_budget_s = 4\n") + spool_table("hang", spool, ws, model))
    drop(spool / "in", "a0", thread="hang", id="h0", text="first")
    time.sleep(0.05)
    for i in range(4):
        drop(spool / "in", f"b{i}", thread=f"o{i}", id=f"o{i}", text=f"other {i}")
        time.sleep(0.02)
    daemon = Daemon(cli)
    try:
        wait_until(lambda: {r["in_reply_to"] for r in replies(spool / "out")} >= {"o0", "o1", "o2", "o3"},
                   timeout=90, what="the other threads answered")
        drop(spool / "in", "a1", thread="hang", id="h1", text="second")
        wait_until(lambda: "h1" in {r["in_reply_to"] for r in replies(spool / "out")}, timeout=60,
                   what="the hung thread answers its next message")
    finally:
        daemon.stop()
    got = {r["in_reply_to"]: r["status"] for r in replies(spool / "out")}
    assert len(replies(spool / "out")) == len(got) == 6, got  # each message answered once
    assert got.pop("h0") == "over_budget" and set(got.values()) == {"completed"}, got


def test_an_id_reused_by_a_second_thread_is_rejected_and_the_first_threads_message_answered(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    model = script(tmp_path / "s.json", [text("done")])
    write_config(cli, spool_table("dup", spool, ws, model))
    drop(spool / "in", "x1", thread="a", id="same", text="first")
    time.sleep(0.05)
    drop(spool / "in", "x2", thread="b", id="same", text="second")
    daemon = Daemon(cli)
    try:
        wait_until(lambda: not pending(spool / "in"), timeout=60, what="both handled")
        time.sleep(0.5)
    finally:
        daemon.stop()
    assert [r["thread"] for r in replies(spool / "out")] == ["a"]
    assert (spool / "in" / "rejected" / "x2.json").exists()
