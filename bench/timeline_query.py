"""Filtered timeline queries on a long session, through the code path `strata timeline` uses.

Builds one session with N timeline rows (default 100,000; a realistic mix of phases, model attempts, calls over
eight tools with ~2% denied, hooks, approvals, receipts; summaries of 60-200 characters and small `data`),
committed in large Writes, in a database that also holds other sessions' rows. Then times, in-process through
observability/session_timeline.py (the CLI's path), the median of several runs of:

    --tool X --decision denied,  --kind K,  --turn T,  --since SEQ (last 1%),  and the whole chain's --verify

and the whole `strata timeline ID --json --tool X --decision denied` process once (interpreter start included).
It also reports what timeline rows cost a commit: the store's Python time per row, and a durable commit with
six rows against one with none. Ends with one line:

    timeline_filtered_query_ms=<float>

Usage: python bench/timeline_query.py [--rows N] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from core.clock import SystemClock
from core.events import SessionStarted, UserMessage
from core.timeline import TimelineEntry
from memory import SessionRecord, SqliteEventStore, Write
from observability.session_timeline import load_timeline, verify_session

TOOLS = ["read_file", "write_file", "edit_file", "bash", "grep", "glob", "web_fetch", "mcp__git__status"]
REPO = Path(__file__).resolve().parent.parent


def _entries(rng: random.Random, turn: int, n: int, counter: list[int]) -> list[TimelineEntry]:
    """About one turn's worth of rows: a phase, a model attempt, then calls with their hooks, approvals and
    receipts."""
    out = [TimelineEntry(kind="phase", turn=turn, outcome="ok", duration_ms=rng.random() * 5, summary="perceive"),
           TimelineEntry(kind="model_attempt", turn=turn, outcome="ok", duration_ms=300 + rng.random() * 2000,
                         summary="claude-sonnet: 1 attempt, 2,310 input tokens, 188 output tokens",
                         data={"attempt": 1, "input_tokens": 2310, "output_tokens": 188})]
    while len(out) < n:
        counter[0] += 1
        tool = rng.choice(TOOLS)
        call = f"toolu_{counter[0]:08d}"
        denied = rng.random() < 0.02
        summary = f"{tool} " + "".join(rng.choice("abcdefghij/._- ") for _ in range(rng.randint(50, 190)))
        data = {"args_sha256": f"{rng.getrandbits(256):064x}", "resource_keys": [f"file:/ws/{counter[0]}"]}
        if denied:
            out.append(TimelineEntry(kind="call", turn=turn, call_id=call, tool=tool, decision="denied",
                                     check="policy: deny bash(rm *)", outcome="denied", duration_ms=0.2,
                                     summary=summary, data=data))
            continue
        if rng.random() < 0.1:
            out.append(TimelineEntry(kind="hook", turn=turn, call_id=call, tool=tool, decision="allowed",
                                     check="PreToolUse: lint-guard", duration_ms=12.0, summary="hook allowed"))
        if rng.random() < 0.05:
            out.append(TimelineEntry(kind="approval", turn=turn, call_id=call, tool=tool, decision="approved",
                                     check="terminal: alice", summary="approved once", data=data))
        if tool in ("write_file", "edit_file", "bash"):
            out.append(TimelineEntry(kind="receipt", turn=turn, call_id=call, tool=tool, outcome="done",
                                     summary="dispatched -> done"))
        out.append(TimelineEntry(kind="call", turn=turn, call_id=call, tool=tool, decision="allowed",
                                 check="policy: allow", outcome="ok", duration_ms=rng.random() * 200,
                                 summary=summary, data=data))
    return out


async def _session(store: SqliteEventStore, session_id: str, rows: int, rng: random.Random,
                   per_write: int = 5000) -> float:
    """A session with `rows` timeline rows. Returns the seconds the commits took."""
    now = SystemClock().now()
    started = SessionStarted(session_id=session_id, mode="headless", workspace="/ws", model="script:bench",
                             max_turns=10**6, plan_digest="p")
    await store.create_session(SessionRecord(id=session_id, created_at=now, updated_at=now, mode="headless",
                                             workspace="/ws", model="script:bench", status="completed"),
                               Write(events=[(started, 0)]))
    counter, turn, made, took = [0], 0, 0, 0.0
    while made < rows:
        batch: list[TimelineEntry] = []
        while len(batch) < min(per_write, rows - made):
            turn += 1
            batch += _entries(rng, turn, rng.randint(6, 14), counter)
        batch = batch[: rows - made]
        t0 = time.perf_counter()
        await store.commit(session_id, Write(events=[(UserMessage(text=f"turn {turn}"), turn)], timeline=batch))
        took += time.perf_counter() - t0
        made += len(batch)
    return took


async def _median_ms(fn: Callable[[], Awaitable[Any]], repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = await fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), result


async def _commit_cost(store: SqliteEventStore, rng: random.Random, rounds: int = 300) -> tuple[float, float]:
    """Median ms of a durable commit of one event, with six timeline rows and with none (alternating)."""
    sid = "commit-cost"
    await _session(store, sid, 0, rng)
    with_rows, without = [], []
    counter = [0]
    for k in range(rounds):
        rows = _entries(rng, k, 6, counter)
        for timeline, into in (([], without), (rows, with_rows)):
            t0 = time.perf_counter()
            await store.commit(sid, Write(events=[(UserMessage(text="x"), k)], timeline=timeline))
            into.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(with_rows), statistics.median(without)


async def _size_mib(path: Path) -> float:
    return (await anyio.Path(path).stat()).st_size / 2**20


async def queries(args: argparse.Namespace, tmp: Path) -> tuple[str, float]:
    """Build the database and time the in-process queries. Returns (session id, filtered query ms)."""
    rng = random.Random(7)
    store = await SqliteEventStore.open(tmp / "strata.db", durability="full")
    try:
        await _session(store, "other-before", args.rows // 10, rng)
        sid = "bench-" + datetime.now(UTC).strftime("%Y%m%d%H%M%S")
        build = await _session(store, sid, args.rows, rng)
        await _session(store, "other-after", args.rows // 10, rng)
        n = len(TOOLS)
        print(f"built {args.rows:,} rows in {args.rows // 5000 + 1} commits: {build:.2f} s "
              f"({build / args.rows * 1e6:.1f} us per row, commit fsync included); 2 other sessions of "
              f"{args.rows // 10:,} rows around it; db {await _size_mib(tmp / 'strata.db'):.0f} MiB "
              f"+ wal {await _size_mib(tmp / 'strata.db-wal'):.0f} MiB")

        repeat = args.repeat
        filtered, rows = await _median_ms(
            lambda: load_timeline(store, sid, tools=["bash"], decisions=["denied"]), repeat)
        print(f"--tool bash --decision denied: {filtered:.1f} ms -> {len(rows)} rows (median of {repeat})")
        ms, rows = await _median_ms(lambda: load_timeline(store, sid, kinds=["approval"]), repeat)
        print(f"--kind approval:               {ms:.1f} ms -> {len(rows)} rows")
        ms, rows = await _median_ms(lambda: load_timeline(store, sid, turn=5000), repeat)
        print(f"--turn 5000:                   {ms:.1f} ms -> {len(rows)} rows")
        ms, rows = await _median_ms(lambda: load_timeline(store, sid, since_seq=args.rows - args.rows // 100),
                                    repeat)
        print(f"--since {args.rows - args.rows // 100} (last 1%):       {ms:.1f} ms -> {len(rows)} rows")
        ms, rows = await _median_ms(lambda: load_timeline(store, sid, tools=TOOLS[: n // 2]), 3)
        print(f"--tool x4 (half the rows):      {ms:.1f} ms -> {len(rows)} rows")
        ms, result = await _median_ms(lambda: verify_session(store, sid), 3)
        print(f"--verify (whole chain):        {ms:.1f} ms -> ok={result.ok}, {result.rows:,} rows")

        with_rows, without = await _commit_cost(store, rng)
        print(f"durable commit of one event: {without:.3f} ms; with 6 timeline rows: {with_rows:.3f} ms "
              f"(+{with_rows - without:.3f} ms)")
        await _row_cost(store, rng)
    finally:
        await store.close()
    return sid, filtered


def cli_once(tmp: Path, sid: str) -> None:
    """The whole `strata timeline` process once, interpreter start and imports included."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
    env.update(STRATA_HOME=str(tmp), PYTHONPATH=str(REPO))
    argv = [sys.executable, "-m", "agent", "timeline", sid, "--json", "--tool", "bash", "--decision", "denied"]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    cli_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "agent", "--help"], env=env, capture_output=True, check=True)
    help_ms = (time.perf_counter() - t0) * 1e3
    print(f"whole CLI process `strata timeline ID --json --tool bash --decision denied`: {cli_ms:.0f} ms -> "
          f"{len(proc.stdout.splitlines())} lines (`strata --help` alone: {help_ms:.0f} ms)")


async def _row_cost(store: SqliteEventStore, rng: random.Random) -> None:
    """The Python work per row: the store's inside the transaction (serialise, chain, hash), and the emitter's
    (building the entry)."""
    from core.timeline import GENESIS_HASH, canonical_time, seal

    key = store.chain_key
    if key is None:
        raise SystemExit(f"the bench's store has no chain key: {store.chain_problem}")
    rows = _entries(rng, 1, 10_000, [0])
    stamp = canonical_time(SystemClock().now())
    t0 = time.perf_counter()
    prev = GENESIS_HASH
    for seq, e in enumerate(rows, start=1):
        prev = seal(key, "s", seq, stamp, prev, e)[2]
    per_row = (time.perf_counter() - t0) / len(rows) * 1e6
    t0 = time.perf_counter()
    for e in rows:
        TimelineEntry(kind=e.kind, turn=e.turn, call_id=e.call_id, tool=e.tool, decision=e.decision, check=e.check,
                      outcome=e.outcome, duration_ms=e.duration_ms, summary=e.summary, data=e.data)
    make = (time.perf_counter() - t0) / len(rows) * 1e6
    print(f"python per row: seal (data and row as canonical JSON, keyed hash) {per_row:.1f} us; making the entry "
          f"(pydantic, at the emitter) {make:.1f} us")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=7)
    tmp = Path(tempfile.mkdtemp(prefix="strata-bench-timeline-"))
    print(f"strata timeline query benchmark in {tmp}")
    sid, filtered = anyio.run(queries, parser.parse_args(), tmp)
    cli_once(tmp, sid)
    print(f"timeline_filtered_query_ms={filtered:.3f}")
