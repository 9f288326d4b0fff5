"""Acceptance 3: the daemon SIGKILLed at random points while 20 spool messages across 4 threads are processed.
After the restarts every message was processed exactly once (one turn-starting user message carrying its id, in
its thread's one session), every reply exists exactly once, and no effect ran twice (each call has at most one
result and one receipt, and the effect log has no more lines for a call than the call has receipts).

The number of kill rounds is `STRATA_CHANNEL_KILL_ROUNDS` (default 3, which fits CI; the issue's 30 were run
locally, see the README's channels section)."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import time
from collections import Counter
from pathlib import Path

import pytest

from tests._in_process_cli import run_in_process
from tests.channels._support import drop, pending, replies, session_events, spool_table, write_config
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until

pytestmark = pytest.mark.slow

ROUNDS = int(os.environ.get("STRATA_CHANNEL_KILL_ROUNDS", "3"))
THREADS, PER_THREAD = 4, 5
KILLS_PER_ROUND = 3


def _turns() -> list[list[dict[str, object]]]:
    """Message i of a thread: one effect (a line appended to effects.log, after a short sleep that widens the
    window a kill can land in), then the answer `done i`."""
    out: list[list[dict[str, object]]] = []
    for i in range(PER_THREAD):
        out.append([tool_use(f"c{i}", "bash", command=f"sleep 0.2; echo c{i} >> effects.log")])
        out.append([text(f"done {i}")])
    return out


def _book(home: Path) -> tuple[dict[str, str], dict[str, str]]:
    with sqlite3.connect(f"file:{home / 'channels.db'}?mode=ro", uri=True) as conn:
        threads = dict(conn.execute("SELECT thread_id, session_id FROM channel_threads").fetchall())
        status = dict(conn.execute("SELECT message_id, status FROM channel_intake").fetchall())
    return threads, status


def _one_round(cli: StrataCLI, tmp_path: Path, rng: random.Random) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    model = script(tmp_path / "s.json", *_turns())
    write_config(cli, '[[policy.rules]]\ntool = "bash"\naction = "allow"\n\n[daemon]\nenable = ["bash"]\n\n'
                 + spool_table("team", spool, ws, model))
    ids = [f"t{t}-m{i}" for i in range(PER_THREAD) for t in range(THREADS)]
    for message_id in ids:
        thread = message_id.split("-")[0]
        drop(spool / "in", message_id, thread=thread, id=message_id, text=f"Update the report, part {message_id}")
    for _ in range(KILLS_PER_ROUND):
        daemon = Daemon(cli)
        time.sleep(rng.uniform(0.0, 1.2))
        daemon.signal(signal.SIGKILL)
        daemon.wait()
    daemon = Daemon(cli)
    try:
        wait_until(lambda: not pending(spool / "in") and len(replies(spool / "out")) == len(ids), timeout=120,
                   what="every message replied to and acknowledged")
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr

    got = replies(spool / "out")
    assert sorted(r["in_reply_to"] for r in got) == sorted(ids)  # every reply exactly once
    threads, status = _book(cli.home)
    assert sorted(threads) == [f"t{t}" for t in range(THREADS)]
    assert status == dict.fromkeys(ids, "acked")
    started: Counter[str] = Counter()
    done_receipts: Counter[str] = Counter()
    all_receipts: Counter[str] = Counter()
    for thread, sid in threads.items():
        events = session_events(cli.home, sid)
        assert [kind for _, kind, _ in events].count("session_started") == 1
        heads = [p["text"].split("\n", 1)[0] for _, kind, p in events if kind == "user_message"
                 and p["text"].startswith("[channel team")]
        started.update(h.split(" · message ")[1].rstrip("]") for h in heads)
        results = Counter(p["call_id"] for _, kind, p in events if kind == "call_result")
        assert all(n == 1 for n in results.values()), results  # no call decided or run twice
        for r in got:
            if r["thread"] == thread:
                assert r["session_id"] == sid
                assert r["text"] == f"done {int(r['in_reply_to'].split('-m')[1])}", r
        listed = run_in_process(cli, "receipts", sid, "--json")
        assert listed.returncode == 0, listed.stderr
        for line in listed.stdout.splitlines():
            receipt = json.loads(line)
            all_receipts[receipt["call_id"]] += 1
            if receipt["status"] == "done":
                done_receipts[receipt["call_id"]] += 1
    assert started == Counter(dict.fromkeys(ids, 1))  # each message's turn started exactly once
    lines = Counter((ws / "effects.log").read_text().split()) if (ws / "effects.log").exists() else Counter()
    for call in {f"c{i}" for i in range(PER_THREAD)}:
        assert done_receipts[call] <= lines[call] <= all_receipts[call] <= THREADS, (call, lines, all_receipts)


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_sigkill_at_random_points_leaves_every_message_processed_once_and_replied_once(
        cli: StrataCLI, tmp_path: Path, round_: int) -> None:
    _one_round(cli, tmp_path, random.Random(1000 + round_))
