"""Durable calls per second with many sessions in one process, and how many commits each fsync carried.

Runs 1, 8 and 32 (by default) concurrent sessions on one runtime and one SQLite store (WAL, synchronous=FULL),
as a daemon hosts them: real AgenticLoops with a scripted model, batches of read-only no-op calls (the calls
cost nothing, so what is measured is the runtime: its checks, its commits and their fsyncs). The store's group
commit (memory/_group_commit.py) lets commits that queue while one is being made durable share the next fsync.
Prints, per size, calls/s, commits, fsyncs and commits per fsync, wall and CPU time per call (the process's CPU,
all threads: when one session's CPU per call is close to its wall time per call, no number of sessions can go
much faster on one interpreter), and the speed-up over one session, ending with

    sessions_1=<calls/s> sessions_8=<calls/s> sessions_32=<calls/s> speedup_32=<float>

Usage: python bench/concurrent_sessions.py [--sizes 1,8,32] [--batches N] [--k K] [--rounds R]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import anyio
from _throughput import Figures, best, script, summary  # shared with bench/daemon_throughput.py
from loop_overhead import TOOLS  # the no-op tools, defined once (bench/ is on sys.path)

from agent.session import Runtime, start_session
from core.clock import SystemClock
from core.ids import IdFactory
from core.model.scripted import ScriptedModel, parse_script
from memory import SqliteEventStore


def _model(tag: str, batches: int, k: int) -> ScriptedModel:
    turns = script(tag, batches, lambda j: ("noop_read", {"n": j}), k=k)
    return ScriptedModel(parse_script(turns, "bench"), name="bench")


async def _round(rt: Runtime, store: SqliteEventStore, tmp: Path, sessions: int, batches: int, k: int) -> Figures:
    """`sessions` sessions started together, each `batches` batches of k read-only calls."""
    commits, fsyncs = store.commits, store.fsyncs
    outcomes: list[str] = []

    async def one(n: int) -> None:
        model = _model(f"{sessions}_{n}_{time.monotonic_ns()}", batches, k)
        live = await start_session(rt, model=model, workspace=tmp, mode="headless", rules=[], prompt="bench",
                                   max_turns=batches + 5)
        outcome = await live.loop.run()
        await live.release(None)
        outcomes.append(outcome.status)

    t0, cpu0 = time.perf_counter(), time.process_time()
    async with anyio.create_task_group() as tg:
        for n in range(sessions):
            tg.start_soon(one, n)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    assert outcomes == ["completed"] * sessions, outcomes
    return Figures(sessions=sessions, calls=sessions * batches * k, seconds=elapsed,
                   commits=store.commits - commits, fsyncs=store.fsyncs - fsyncs, cpu=cpu)


async def main(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="strata-bench-"))
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"concurrent sessions in one process (durable: WAL, synchronous=FULL) in {tmp}")
    print(f"each session: {args.batches} batches of {args.k} read-only calls; best of {args.rounds} rounds")
    clock = SystemClock()
    store = await SqliteEventStore.open(tmp / "strata.db", durability="full", clock=clock)
    rt = Runtime(store=store, clock=clock, ids=IdFactory(clock), tools=TOOLS)
    try:
        await _round(rt, store, tmp, 2, 5, args.k)  # warm up (imports, the database's first pages)
        results: dict[int, Figures] = {}
        for size in sizes:
            fastest, median = best([await _round(rt, store, tmp, size, args.batches, args.k)
                                    for _ in range(args.rounds)])
            results[size] = fastest
            print(fastest.line(median))
        for line in summary(results):
            print(line)
    finally:
        await store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,8,32")
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--k", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    anyio.run(main, parser.parse_args())
