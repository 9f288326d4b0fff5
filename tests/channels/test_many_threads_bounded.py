"""Many threads with queued messages in a real `strata serve`: the daemon's OS thread count stays bounded however
many threads it has run (a session's evidence-ledger writer used to live on after its run, one OS thread and two
open files for every session the daemon ever ran), at most `daemon.max_workers` threads run at once (the others
wait their turn, in arrival order), a thread with many messages lets the others go between its own, and every
message is answered exactly once."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.channels._support import drop, pending, replies, spool_table, write_config
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until
from tests.wire.conftest import TEST_KEY
from tests.wire.messages_server import MessagesServer, Reply

pytestmark = pytest.mark.slow

THREADS = 300
ALLOW_BASH = ('[daemon]\nenable = ["bash"]\nmax_workers = {workers}\n\n'
              '[[policy.rules]]\ntool = "bash"\naction = "allow"\n\n')


def _os_threads(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Threads:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def test_hundreds_of_threads_are_answered_with_a_bounded_number_of_os_threads(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    model = script(tmp_path / "s.json", [text("done")])
    write_config(cli, spool_table("many", spool, ws, model))  # the default number of workers
    for i in range(THREADS):
        drop(spool / "in", f"m{i:04d}", thread=f"t{i}", id=f"m{i}", text=f"Message {i}")
    peak = 0
    stop = threading.Event()
    daemon = Daemon(cli)

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, _os_threads(daemon.pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        wait_until(lambda: len(replies(spool / "out")) == THREADS, timeout=300, what=f"{THREADS} replies")
        wait_until(lambda: not pending(spool / "in"), what="every message acknowledged")
        open_files = len(list(Path(f"/proc/{daemon.pid}/fd").iterdir()))
    finally:
        stop.set()
        sampler.join()
        daemon.stop()
    got = replies(spool / "out")
    assert sorted(r["in_reply_to"] for r in got) == sorted(f"m{i}" for i in range(THREADS))
    assert {r["status"] for r in got} == {"completed"}
    assert len({r["session_id"] for r in got}) == THREADS
    # the event loop, anyio's worker threads (40 at most), the store's connection: never one a session
    assert 0 < peak <= 64, f"the daemon ran {peak} OS threads at once for {THREADS} threads"
    assert open_files < 100, f"the daemon held {open_files} open files after answering {THREADS} threads"


def test_at_most_max_workers_threads_run_at_once(cli: StrataCLI, tmp_path: Path) -> None:
    """The sessions' model is the real Anthropic client against a loopback Messages API whose answers wait on a
    gate: while they wait, the turns running are the model requests that arrived."""
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    gate = threading.Event()
    with MessagesServer(api_key=TEST_KEY, gate_timeout_s=60) as server:
        server.script(*(Reply([{"type": "text", "text": f"answer {i}"}], gate=gate) for i in range(8)))
        write_config(cli, "[daemon]\nmax_workers = 2\n\n" + spool_table("few", spool, ws, "anthropic:claude-test"))
        for i in range(8):
            drop(spool / "in", f"m{i}", thread=f"t{i}", id=f"m{i}", text=f"Question {i}")
        daemon = Daemon(cli, env={"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": TEST_KEY})
        try:
            wait_until(lambda: len(server.requests) >= 2, what="the first model requests")
            time.sleep(1.5)  # ten polls: time for every thread's turn to start, were they not held back
            running = len(server.requests)
            gate.set()
            wait_until(lambda: len(replies(spool / "out")) == 8, timeout=120, what="8 replies")
        finally:
            gate.set()
            daemon.stop()
    assert running == 2, f"{running} turns ran at once with max_workers = 2"
    assert sorted(r["text"] for r in replies(spool / "out")) == sorted(f"answer {i}" for i in range(8))
    assert server.unexpected == []


def test_a_thread_with_many_messages_lets_a_waiting_thread_go_between_its_own(cli: StrataCLI, tmp_path: Path) -> None:
    """One worker place: the busy thread's six messages were queued first, the quiet thread's one after them; the
    quiet one is answered before the busy thread's last (its worker gives the place up after each message while
    another thread waits), not after all six."""
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    command = "sleep 0.2"
    turns = [[tool_use(f"b{i}", "bash", command=command)] if i % 2 == 0 else [text(f"answer {i // 2}")]
             for i in range(12)]
    model = script(tmp_path / "s.json", *turns)
    write_config(cli, ALLOW_BASH.format(workers=1) + spool_table("fair", spool, ws, model))
    for i in range(6):
        drop(spool / "in", f"a{i}", thread="busy", id=f"busy-{i}", text=f"Busy work {i}")
        time.sleep(0.01)  # distinct modification times: the inbox is read oldest first
    drop(spool / "in", "q", thread="quiet", id="quiet-0", text="A quick question")
    daemon = Daemon(cli)
    try:
        wait_until(lambda: len(replies(spool / "out")) == 7, timeout=120, what="7 replies")
    finally:
        daemon.stop()
    order = [r["in_reply_to"] for r in sorted(replies(spool / "out"), key=_written(spool / "out"))]
    assert [m for m in order if m.startswith("busy")] == [f"busy-{i}" for i in range(6)]
    assert order.index("quiet-0") < order.index("busy-5"), order


def _written(outbox: Path):  # type: ignore[no-untyped-def]
    def key(reply: dict[str, object]) -> int:
        return next(p.stat().st_mtime_ns for p in outbox.glob("*.json") if p.stem == reply["key"])
    return key
