"""Runtime overhead per tool call, side by side with the raw floor.

Drives the real AgenticLoop (scripted model, no-op tools, SQLite store in WAL with synchronous=FULL) and, in the
same process and in alternating rounds, performs the same number of aiosqlite WAL synchronous=FULL commits
directly (one small insert and a commit each: the floor any durable runtime pays). Prints commits per call, both
times and their ratio, and flatness with session length, ending with one line:

    overhead_ratio=<float> commits_per_effectful_call=<float>

Usage: python bench/loop_overhead.py [--batches N] [--k K] [--rounds R] [--long-events E]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiosqlite
import anyio

from agent.session import Runtime, start_session
from core.clock import SystemClock
from core.ids import IdFactory
from core.messages import TextBlock, ToolUseBlock
from core.model.scripted import ScriptedModel
from core.policy import PermissionRule
from core.tools import ToolContext, ToolOutput, ToolSpec
from memory import SqliteEventStore

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
        turns.append(tuple(ToolUseBlock(id=f"toolu_{b}_{j}", name=tool, input={"n": j}) for j in range(k)))
    turns.append((TextBlock(text="done"),))
    return turns


class _TimedModel(ScriptedModel):
    """Records when each turn is requested, so per-batch times can be read off a single long run."""

    def __init__(self, turns: list[tuple[Any, ...]]) -> None:
        super().__init__(turns, name="bench")
        self.stamps: list[float] = []

    async def complete(self, request):  # type: ignore[no-untyped-def]
        self.stamps.append(time.perf_counter())
        return await super().complete(request)


async def run_session(db: Path, batches: int, k: int, tool: str) -> tuple[float, int, _TimedModel, int]:
    """One session of `batches` batches of `k` calls. Returns (seconds, commits, model, events)."""
    clock = SystemClock()
    store = await SqliteEventStore.open(db, durability="full", clock=clock)
    rt = Runtime(store=store, clock=clock, ids=IdFactory(clock), tools=TOOLS)
    model = _TimedModel(_turns(batches, k, tool))
    workspace = db.parent
    try:
        live = await start_session(rt, model=model, workspace=workspace, mode="headless", rules=RULES,
                                   prompt="bench", max_turns=batches + 5)
        before = store.commits
        t0 = time.perf_counter()
        outcome = await live.loop.run()
        elapsed = time.perf_counter() - t0
        assert outcome.status == "completed", outcome
        commits = store.commits - before - 1  # the final commit (answer + verify + end) is not a tool call's
        events = live.state.last_seq
    finally:
        await store.close()
    return elapsed, commits, model, events


async def raw_commits(db: Path, n: int) -> float:
    """The floor: n aiosqlite commits, WAL + synchronous=FULL, each one small insert."""
    conn = await aiosqlite.connect(str(db), isolation_level=None)
    try:
        await conn.execute("PRAGMA journal_mode=WAL")
        await conn.execute("PRAGMA synchronous=FULL")
        await conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, payload TEXT)")
        payload = "x" * 300
        t0 = time.perf_counter()
        for _ in range(n):
            await conn.execute("BEGIN")
            await conn.execute("INSERT INTO t(payload) VALUES (?)", (payload,))
            await conn.execute("COMMIT")
        return time.perf_counter() - t0
    finally:
        await conn.close()


async def main(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="strata-bench-"))
    print(f"strata loop overhead benchmark (durable: WAL, synchronous=FULL) in {tmp}")

    # Read-only batches: commits per batch.
    _, ro_commits, _, _ = await run_session(tmp / "ro.db", 50, 8, "noop_read")
    print(f"read-only batches of 8 calls: {ro_commits / 50:.2f} commits per batch")

    # Effectful batches, alternating with the raw floor.
    ratios, per_call, floor_per_commit, cpc = [], [], [], []
    for r in range(args.rounds):
        secs, commits, _, _ = await run_session(tmp / f"fx{r}.db", args.batches, args.k, "noop_write")
        calls = args.batches * args.k
        raw = await raw_commits(tmp / f"raw{r}.db", commits)
        per_call.append(secs / calls)
        floor_per_commit.append(raw / commits)
        cpc.append(commits / calls)
        ratios.append((secs / calls) / ((raw / commits) * (commits / calls)))
    commits_per_call = statistics.median(cpc)
    ratio = statistics.median(ratios)
    print(f"effectful batches of k={args.k}: {commits_per_call:.3f} commits per call (target (k+1)/k = "
          f"{(args.k + 1) / args.k:.3f})")
    print(f"runtime per effectful call: {statistics.median(per_call) * 1e3:.3f} ms (median of {args.rounds} rounds)")
    print(f"raw aiosqlite FULL commit:  {statistics.median(floor_per_commit) * 1e3:.3f} ms; floor per call = "
          f"{statistics.median(floor_per_commit) * commits_per_call * 1e3:.3f} ms")
    print(f"overhead ratio per round: {', '.join(f'{x:.2f}' for x in ratios)}")

    # Flatness: per-batch time early in a long session vs at its end.
    batches = max(50, args.long_events // (args.k + 2))
    secs, _, model, events = await run_session(tmp / "long.db", batches, args.k, "noop_write")
    gaps = [b - a for a, b in zip(model.stamps, model.stamps[1:], strict=False)]
    per_batch_events = args.k + 2
    early_start = max(0, 200 // per_batch_events)
    window = min(200, len(gaps) // 4)
    early = statistics.median(gaps[early_start:early_start + window])
    late = statistics.median(gaps[-window:])
    print(f"long session: {events} events; per call at ~{early_start * per_batch_events} events "
          f"{early / args.k * 1e3:.3f} ms, at ~{events} events {late / args.k * 1e3:.3f} ms; "
          f"late/early = {late / early:.3f}")
    print(f"overhead_ratio={ratio:.3f} commits_per_effectful_call={commits_per_call:.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--long-events", type=int, default=10_000)
    anyio.run(main, parser.parse_args())
