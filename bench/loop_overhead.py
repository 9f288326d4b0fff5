"""Runtime overhead per tool call, side by side with the raw floor.

Drives the real AgenticLoop (scripted model, no-op tools, SQLite store in WAL with synchronous=FULL) and, in the
same process and in alternating rounds, performs the same number of aiosqlite WAL synchronous=FULL commits
directly (one small insert and a commit each: the floor any durable runtime pays). Prints commits per call, both
times and their ratio, and flatness with session length, ending with one line:

    overhead_ratio=<float> commits_per_effectful_call=<float> same_rows_ratio=<float> loop_cpu_us=<float>
    floor_loop_cpu_us=<float>

`same_rows_ratio` compares with a second floor, the raw commit of the same rows: every write transaction the
store made for a session (its events, receipts and timeline rows with their indexes, as the SQL statements the
store ran, captured by sqlite3's trace callback in an untimed copy of the session) is replayed with plain `sqlite3`
(WAL, synchronous=FULL, same schema) into a database of its own, one COMMIT per transaction. `loop_cpu_us` is the
CPU time of the event loop's thread per call (`time.thread_time` around the session): the Python the runtime adds
on the loop, apart from the store's thread. `floor_loop_cpu_us` is the same measure for the raw aiosqlite floor's
commits, times the runtime's commits per call: what the loop's thread spends on durable commits alone (two hops to
aiosqlite's thread and the wake-ups after waiting on fsync), with no Python of the runtime.

Both databases are kept across rounds and warmed up first, so both are measured in the same steady state.
Flatness compares, in the same database and alternating, calls in a session ~200 events long with calls in one
~10,000 events long (the long one is the older session, so its rows are not the newest in the store). It also
counts the database pages (WAL frames) a commit writes, the runtime's and the floor's: on a disk where fsync
dominates, each extra page is a few percent of a commit.

Usage: python bench/loop_overhead.py [--batches N] [--k K] [--rounds R] [--window W] [--long-events E]
"""

from __future__ import annotations

import argparse
import itertools
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiosqlite
import anyio

from agent.session import Runtime, resume_session, start_session
from core.clock import SystemClock
from core.ids import IdFactory
from core.messages import TextBlock, ToolUseBlock
from core.model.scripted import ScriptedModel
from core.policy import PermissionRule
from core.tools import ToolContext, ToolOutput, ToolSpec
from memory import SqliteEventStore
from observability import configure_logging

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
          "additionalProperties": False}


async def _noop(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
    return ToolOutput("ok")


def _key(args: Mapping[str, Any], ctx: ToolContext) -> list[str]:
    return [f"noop:{args['n']}"]


TOOLS = [
    ToolSpec("noop_read", "no-op read", SCHEMA, _noop, safety="read", effect="read_only", resource_keys=_key),
    ToolSpec("noop_write", "no-op effect", SCHEMA, _noop, safety="write", effect="effectful", resource_keys=_key),
]
RULES = [PermissionRule(action="allow", tool="noop_write")]


def _turns(batches: int, k: int, tool: str) -> list[tuple[Any, ...]]:
    turns = []
    for b in range(batches):
        turns.append(tuple(ToolUseBlock(id=f"toolu_{b:06d}_{j:02d}", name=tool, input={"n": j}) for j in range(k)))
    turns.append((TextBlock(text="done"),))
    return turns


class _TimedModel(ScriptedModel):
    """Records when each turn is requested, so per-batch times can be read off a run."""

    def __init__(self, turns: list[tuple[Any, ...]]) -> None:
        super().__init__(turns, name="bench")
        self.stamps: list[float] = []

    async def complete(self, request, listener=None):  # type: ignore[no-untyped-def]
        self.stamps.append(time.perf_counter())
        return await super().complete(request, listener)


def _segments(*sizes: int, k: int) -> list[tuple[Any, ...]]:
    """A script of several runs: `sizes[i]` batches of k effectful calls, then a final text, and so on.
    Each `resume ID PROMPT` plays the next segment (turn k is answered by entry k)."""
    turns: list[tuple[Any, ...]] = []
    for size in sizes:
        base = len(turns)
        turns += [tuple(ToolUseBlock(id=f"toolu_{base + b:06d}_{j:02d}", name="noop_write", input={"n": j})
                        for j in range(k)) for b in range(size)]
        turns.append((TextBlock(text="done"),))
    return turns


class Bench:
    """One durable store for the runtime and one raw database for the floor, both kept across rounds so that
    both are measured in the same steady state (WAL checkpoints included), not one fresh and one aged."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp

    async def __aenter__(self) -> Bench:
        clock = SystemClock()
        self.store = await SqliteEventStore.open(self.tmp / "strata.db", durability="full", clock=clock)
        self.rt = Runtime(store=self.store, clock=clock, ids=IdFactory(clock), tools=TOOLS)
        self.raw = await aiosqlite.connect(str(self.tmp / "raw.db"))
        await self.raw.execute("PRAGMA journal_mode=WAL")
        await self.raw.execute("PRAGMA synchronous=FULL")
        await self.raw.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, payload TEXT)")
        await self.raw.commit()
        floor = await SqliteEventStore.open(self.tmp / "same_rows.db", durability="full", clock=clock)
        await floor.close()  # the store's schema, migrations included; the rows come from the replay
        self.same = sqlite3.connect(str(self.tmp / "same_rows.db"), isolation_level=None, check_same_thread=False)
        self.same.execute("PRAGMA journal_mode=WAL")
        self.same.execute("PRAGMA synchronous=FULL")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.same.close()
        await self.raw.close()
        await self.store.close()

    async def session(self, batches: int, k: int, tool: str) -> tuple[float, int]:
        """A new session of `batches` batches of k calls. Returns (seconds in the loop, commits for calls)."""
        elapsed, _, commits = await self.timed_session(batches, k, tool)
        return elapsed, commits

    async def timed_session(self, batches: int, k: int, tool: str) -> tuple[float, float, int]:
        """A new session: (seconds in the loop, CPU seconds of the loop's thread, commits for calls)."""
        model = _TimedModel(_turns(batches, k, tool))
        live = await start_session(self.rt, model=model, workspace=self.tmp, mode="headless", rules=RULES,
                                   prompt="bench", max_turns=batches + 5)
        before = self.store.commits
        t0, c0 = time.perf_counter(), time.thread_time()
        outcome = await live.loop.run()
        elapsed, cpu = time.perf_counter() - t0, time.thread_time() - c0
        commits = self.store.commits - before - 1  # the closing commit (answer, verify, end) is no call's
        await live.release(None)
        assert outcome.status == "completed", outcome
        return elapsed, cpu, commits

    async def traced_writes(self, batches: int, k: int, tool: str) -> list[list[str]]:
        """An untimed session whose write transactions are captured as the SQL the store ran (values inlined):
        one list of statements per COMMIT, for calls only: the session's creation (before the loop runs) and
        what follows the calls (the closing commit, the lease's release) are left out, as in `session`."""
        statements: list[str] = []
        await self.store._run(lambda c: c.set_trace_callback(statements.append))
        try:
            _, commits = await self.session(batches, k, tool)
        finally:
            await self.store._run(lambda c: c.set_trace_callback(None))
        transactions: list[list[str]] = []
        current: list[str] | None = None
        for sql in statements:
            head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
            if head == "BEGIN":
                current = []
            elif head == "COMMIT" and current is not None:
                transactions.append(current)
                current = None
            elif current is not None and head in ("INSERT", "UPDATE", "DELETE", "REPLACE"):
                current.append(sql)
        return transactions[1:1 + commits]

    def same_rows(self, transactions: list[list[str]]) -> float:
        """The second floor: the same rows written with plain sqlite3, one BEGIN IMMEDIATE ... COMMIT each."""
        conn = self.same
        t0 = time.perf_counter()
        for statements in transactions:
            conn.execute("BEGIN IMMEDIATE")
            for sql in statements:
                conn.execute(sql)
            conn.execute("COMMIT")
        return time.perf_counter() - t0

    async def pages_per_commit(self, batches: int, k: int) -> tuple[float, float]:
        """WAL frames (database pages) written per commit: the runtime's effectful commits and the raw floor's.
        Untimed; automatic checkpoints are paused meanwhile so that the WAL holds every frame written."""
        def frames(conn: sqlite3.Connection) -> int:
            return int(conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1])

        def pause(conn: sqlite3.Connection, pages: int) -> None:
            conn.execute(f"PRAGMA wal_autocheckpoint = {pages}")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

        await self.store._run(lambda c: pause(c, 0))
        before = self.store.commits
        _, _ = await self.session(batches, k, "noop_write")
        ours = await self.store._run(frames) / (self.store.commits - before)
        await self.store._run(lambda c: pause(c, 1000))
        await self.raw.execute("PRAGMA wal_autocheckpoint = 0")
        await self.raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        await self.raw_commits(200)
        async with self.raw.execute("PRAGMA wal_checkpoint(PASSIVE)") as cursor:
            raw = (await cursor.fetchone())[1] / 200  # type: ignore[index]
        await self.raw.execute("PRAGMA wal_autocheckpoint = 1000")
        return ours, raw

    async def raw_commits(self, n: int) -> float:
        """The floor: n aiosqlite commits, WAL + synchronous=FULL, each one small insert and commit()."""
        payload = "x" * 300
        t0 = time.perf_counter()
        for _ in range(n):
            await self.raw.execute("INSERT INTO t(payload) VALUES (?)", (payload,))
            await self.raw.commit()
        return time.perf_counter() - t0

    async def one_hop_commits(self, n: int) -> float:
        """The floor's insert and commit done in one hop to aiosqlite's thread (as the store does a commit): the
        least a thread-offloaded durable commit costs the loop's thread. Returns the loop thread's CPU seconds."""
        payload = "x" * 300

        def commit() -> None:
            conn = self.raw._conn
            conn.execute("INSERT INTO t(payload) VALUES (?)", (payload,))
            conn.commit()

        c0 = time.thread_time()
        for _ in range(n):
            await self.raw._execute(commit)  # type: ignore[no-untyped-call]
        return time.thread_time() - c0

    async def play(self, session_id: str | None, model: _TimedModel, first: bool) -> tuple[str, list[float]]:
        """Run the next segment of a segmented script (a new session, or a resume). Returns per-batch times."""
        start = len(model.stamps)
        if session_id is None:
            live = await start_session(self.rt, model=model, workspace=self.tmp, mode="headless", rules=RULES,
                                       prompt="bench", max_turns=10**6)
            await live.loop.run()
        else:
            live = await resume_session(self.rt, session_id, model=model, rules=[])
            await live.loop.run("more")
        await live.release(None)
        stamps = model.stamps[start:]
        return live.id, [b - a for a, b in itertools.pairwise(stamps)]


async def main(args: argparse.Namespace) -> None:
    configure_logging()  # an entry point configures logging: warnings only, on stderr, not the sessions' info lines
    tmp = Path(tempfile.mkdtemp(prefix="strata-bench-"))
    print(f"strata loop overhead benchmark (durable: WAL, synchronous=FULL) in {tmp}")
    k = args.k
    async with Bench(tmp) as bench:
        # Read-only batches: commits per batch.
        _, ro_commits = await bench.session(50, 8, "noop_read")
        print(f"read-only batches of 8 calls: {ro_commits / 50:.2f} commits per batch")

        ours, raw_pages = await bench.pages_per_commit(50, k)
        print(f"pages written per commit: runtime {ours:.2f} (events, receipts and timeline rows, each a table and "
              f"an index), raw floor {raw_pages:.2f}")

        # Warm both databases up (untimed), then alternate rounds of runtime and raw floor.
        _, commits = await bench.session(args.batches, k, "noop_write")
        await bench.raw_commits(commits)
        bench.same_rows(await bench.traced_writes(args.batches, k, "noop_write"))
        ratios, per_call, floor_per_commit, cpc = [], [], [], []
        same_ratios, loop_cpu, same_per_call, floor_cpu, hop_cpu = [], [], [], [], []
        for _ in range(args.rounds):
            writes = await bench.traced_writes(args.batches, k, "noop_write")
            secs, cpu, commits = await bench.timed_session(args.batches, k, "noop_write")
            c0 = time.thread_time()
            raw = await bench.raw_commits(commits)
            floor_cpu.append((time.thread_time() - c0) / commits)
            hop_cpu.append(await bench.one_hop_commits(commits) / commits)
            same = await anyio.to_thread.run_sync(bench.same_rows, writes)
            calls = args.batches * k
            assert len(writes) == commits, (len(writes), commits)
            per_call.append(secs / calls)
            floor_per_commit.append(raw / commits)
            cpc.append(commits / calls)
            ratios.append((secs / calls) / ((raw / commits) * (commits / calls)))
            same_ratios.append(secs / same)
            same_per_call.append(same / calls)
            loop_cpu.append(cpu / calls)
        commits_per_call = statistics.median(cpc)
        ratio = statistics.median(ratios)
        floor = statistics.median(floor_per_commit)
        print(f"effectful batches of k={k}: {commits_per_call:.3f} commits per call (target (k+1)/k = "
              f"{(k + 1) / k:.3f})")
        print(f"runtime per effectful call: {statistics.median(per_call) * 1e3:.3f} ms "
              f"(median of {args.rounds} rounds)")
        print(f"raw aiosqlite FULL commit:  {floor * 1e3:.3f} ms; floor per call = "
              f"{floor * commits_per_call * 1e3:.3f} ms")
        print(f"overhead ratio per round: {', '.join(f'{x:.2f}' for x in ratios)}")
        same_ratio, cpu_us = statistics.median(same_ratios), statistics.median(loop_cpu) * 1e6
        print(f"raw sqlite3 commit of the same rows: {statistics.median(same_per_call) * 1e3:.3f} ms per call; "
              f"runtime / same rows per round: {', '.join(f'{x:.2f}' for x in same_ratios)}")
        print(f"loop-thread CPU per effectful call: {cpu_us:.0f} us (median of {args.rounds} rounds)")
        floor_cpu_us = statistics.median(floor_cpu) * commits_per_call * 1e6
        print(f"loop-thread CPU of the raw aiosqlite floor: {statistics.median(floor_cpu) * 1e6:.0f} us per commit, "
              f"{floor_cpu_us:.0f} us per call at {commits_per_call:.3f} commits per call (waking from each commit's "
              f"wait costs the loop's thread this much with no Python of ours); above it: "
              f"{cpu_us - floor_cpu_us:.0f} us")
        hop_us = statistics.median(hop_cpu) * 1e6
        print(f"the same insert and commit in one hop (as the store commits): {hop_us:.0f} us of loop-thread CPU per "
              f"commit, {hop_us * commits_per_call:.0f} us per call")

        # Flatness: per-call cost in a session ~10,000 events long vs one ~200 events long, same database,
        # alternating so that both meet the same database state.
        per_batch = k + 2
        fill_long = args.long_events // per_batch
        fill_short = 200 // per_batch
        window = args.window
        long_model = _TimedModel(_segments(fill_long, *([window] * args.rounds), k=k))
        long_id, _ = await bench.play(None, long_model, True)
        early, late = [], []
        for _ in range(args.rounds):
            short_model = _TimedModel(_segments(fill_short, window, k=k))
            short_id, _ = await bench.play(None, short_model, True)
            _, gaps = await bench.play(short_id, short_model, False)
            early += gaps
            _, gaps = await bench.play(long_id, long_model, False)
            late += gaps
        long_events = (await bench.store.read_events(long_id))[-1].seq
        e, lt = statistics.median(early) / k, statistics.median(late) / k
        print(f"per call in a session at ~200 events: {e * 1e3:.3f} ms; at ~{long_events} events: {lt * 1e3:.3f} ms;"
              f" ratio {lt / e:.3f}")
    print(f"overhead_ratio={ratio:.3f} commits_per_effectful_call={commits_per_call:.3f} "
          f"same_rows_ratio={same_ratio:.3f} loop_cpu_us={cpu_us:.1f} floor_loop_cpu_us={floor_cpu_us:.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--window", type=int, default=100, help="batches timed per flatness sample")
    parser.add_argument("--long-events", type=int, default=10_000)
    anyio.run(main, parser.parse_args())
