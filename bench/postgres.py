"""The event store on PostgreSQL beside SQLite: durable tool calls per second for 1, 2 and 4 worker processes on
one database, and the time to restore a 10,000-event session.

A *call* is what one effectful tool call costs the store in the runtime: two durable commits, the batch with the
call's receipt (before the tool runs) and then its result with the receipt settled, the batch closed and its
timeline row. Each worker is its own process with its own store object and its own session, as several daemons
would be; all start together, and calls per second is all calls over the wall time from the first start to the
last finish. SQLite runs with its defaults (WAL, synchronous=FULL) on one file; PostgreSQL is a throwaway cluster
(tests/_postgres.py) with the server's defaults (fsync and synchronous_commit on), on this machine over loopback.

Restore is `memory.restore.restore` (the latest snapshot plus the tail, as resume reads it) of a session of 10,000
events written as the runtime writes them (the session writer, a snapshot every 500 events); median of the rounds.

It ends with three lines:

    calls_per_s sqlite 1=<f> 2=<f> 4=<f>
    calls_per_s postgres 1=<f> 2=<f> 4=<f>
    restore_ms_10k sqlite=<f> postgres=<f>

Usage: python bench/postgres.py [--calls N] [--rounds R] [--events E]   (needs PostgreSQL's programs: initdb, pg_ctl)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from core.events import (  # noqa: E402
    AssistantMessage,
    BatchCompleted,
    BatchProposed,
    CallResult,
    PlannedCall,
    SessionStarted,
    UserMessage,
)
from core.messages import TextBlock, ToolUseBlock  # noqa: E402
from core.state import SessionState, apply  # noqa: E402
from core.timeline import TimelineEntry  # noqa: E402
from memory import NewReceipt, ReceiptUpdate, SessionRecord, SqliteEventStore, Write  # noqa: E402
from memory.restore import restore  # noqa: E402
from memory.session_writer import SessionWriter  # noqa: E402
from memory.store import EventStore  # noqa: E402

WORKERS = (1, 2, 4)


async def open_store(target: str, home: Path) -> EventStore:
    if target.startswith("postgresql://"):
        from memory.postgres import PostgresEventStore

        return await PostgresEventStore.open(target, home=home)
    return await SqliteEventStore.open(Path(target))


def record(session_id: str) -> SessionRecord:
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    return SessionRecord(id=session_id, created_at=now, updated_at=now, mode="headless", workspace="/ws",
                         model="script:bench", status="active")


def started(session_id: str) -> SessionStarted:
    return SessionStarted(session_id=session_id, mode="headless", workspace="/ws", model="script:bench",
                          max_turns=100_000, plan_digest="bench")


async def calls(store: EventStore, session_id: str, n: int) -> None:
    for k in range(n):
        call_id = f"c{k}"
        planned = PlannedCall(call_id=call_id, tool="write_file", input={"path": f"f{k}.txt", "content": "x" * 64},
                              input_sha256=f"{k:064x}")
        batch = BatchProposed(batch_id=f"b{k}", calls=(planned,),
                              content=(ToolUseBlock(id=call_id, name="write_file", input=planned.input),))
        receipt_id = f"{session_id}-r{k}"
        await store.commit(session_id, Write(
            events=[(batch, k + 1)],
            new_receipts=[NewReceipt(id=receipt_id, call_id=call_id, tool="write_file",
                                     idempotency_key=f"{session_id}:{call_id}", args_sha256=f"{k:064x}",
                                     resource_keys=(f"file:/ws/f{k}.txt",))]))
        result = CallResult(batch_id=f"b{k}", call_id=call_id, tool="write_file", status="ok", content="wrote 64 bytes",
                            is_error=False, receipt_id=receipt_id)
        await store.commit(session_id, Write(
            events=[(result, k + 1), (BatchCompleted(batch_id=f"b{k}"), k + 1)],
            receipt_updates=[ReceiptUpdate(id=receipt_id, status="done")],
            timeline=[TimelineEntry(kind="call", turn=k + 1, call_id=call_id, tool="write_file", decision="allowed",
                                    outcome="ok", summary="write_file f.txt")]))


async def worker(target: str, home: Path, session_id: str, n: int, start_at: float) -> dict[str, float]:
    store = await open_store(target, home)
    try:
        await store.create_session(record(session_id), Write(events=[(started(session_id), 0)]))
        await anyio.sleep(max(0.0, start_at - time.time()))  # all workers start together
        began = time.time()
        await calls(store, session_id, n)
        return {"began": began, "ended": time.time()}
    finally:
        await store.close()


def run_workers(target: str, home: Path, count: int, n: int, tag: str) -> float:
    start_at = time.time() + 2.0 + 0.3 * count  # every worker has opened its store by then
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", target, str(home), f"{tag}-w{i}", str(n),
                               str(start_at)], stdout=subprocess.PIPE, text=True) for i in range(count)]
    spans = []
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        if proc.returncode != 0:
            raise SystemExit(f"a worker failed ({proc.returncode})")
        spans.append(json.loads(out.strip().splitlines()[-1]))
    wall = max(s["ended"] for s in spans) - min(s["began"] for s in spans)
    return count * n / wall


async def build_long_session(store: EventStore, session_id: str, events: int) -> None:
    state = SessionState()
    stored = await store.create_session(record(session_id), Write(events=[(started(session_id), 0)]))
    for item in stored:
        apply(state, item)

    def applied(items: list) -> None:  # type: ignore[type-arg]
        for item in items:
            apply(state, item)

    writer = SessionWriter(store, session_id, on_commit=applied, state=state, snapshot_every=500)
    turn = 0
    while state.last_seq < events:
        turn += 1
        writer.stage(UserMessage(text=f"question {turn} " + "words " * 20), turn)
        writer.stage(AssistantMessage(content=(TextBlock(text=f"answer {turn} " + "more words " * 30),)), turn)
        if turn % 20 == 0:
            await writer.flush()
    await writer.flush()


async def restore_ms(target: str, home: Path, rounds: int, events: int) -> float:
    store = await open_store(target, home)
    try:
        await build_long_session(store, "long", events)
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            restored = await restore(store, "long")
            times.append((time.perf_counter() - t0) * 1000)
            assert restored.state.last_seq >= events
        return statistics.median(times)
    finally:
        await store.close()


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        target, home, session_id, n, start_at = sys.argv[2:7]
        print(json.dumps(anyio.run(worker, target, Path(home), session_id, int(n), float(start_at))))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per worker (default 300)")
    parser.add_argument("--rounds", type=int, default=5, help="restore rounds (default 5)")
    parser.add_argument("--events", type=int, default=10_000, help="events of the restored session (default 10000)")
    args = parser.parse_args()

    from tests._postgres import start_cluster

    cluster_run = start_cluster(durable=True)
    cluster = next(cluster_run)
    try:
        results: dict[str, dict[int, float]] = {"sqlite": {}, "postgres": {}}
        restores: dict[str, float] = {}
        with tempfile.TemporaryDirectory(prefix="strata-bench-pg-") as tmp:
            for count in WORKERS:
                home = Path(tmp) / f"sqlite-{count}"
                home.mkdir()
                results["sqlite"][count] = run_workers(str(home / "strata.db"), home, count, args.calls, "s")
                pg_home = Path(tmp) / f"pg-{count}"
                pg_home.mkdir()
                results["postgres"][count] = run_workers(cluster.new_database(), pg_home, count, args.calls, "p")
                print(f"{count} worker(s): sqlite {results['sqlite'][count]:.0f} calls/s, "
                      f"postgres {results['postgres'][count]:.0f} calls/s", flush=True)
            home = Path(tmp) / "restore-sqlite"
            home.mkdir()
            restores["sqlite"] = anyio.run(restore_ms, str(home / "strata.db"), home, args.rounds, args.events)
            home = Path(tmp) / "restore-pg"
            home.mkdir()
            restores["postgres"] = anyio.run(restore_ms, cluster.new_database(), home, args.rounds, args.events)
        for name in ("sqlite", "postgres"):
            print(f"calls_per_s {name} " + " ".join(f"{c}={results[name][c]:.1f}" for c in WORKERS))
        print(f"restore_ms_{args.events // 1000}k sqlite={restores['sqlite']:.1f} postgres={restores['postgres']:.1f}")
    finally:
        with contextlib.suppress(StopIteration):
            next(cluster_run)


if __name__ == "__main__":
    main()
