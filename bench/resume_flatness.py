"""Resume cost against session length: flat, because resume reads one snapshot and the tail after it.

Builds sessions in one SQLite store as the runtime writes them: realistic events (prompts, batches of one to three
tool calls whose outputs run from a few hundred bytes to a few KiB, now and then a large output kept as a blob,
receipts for the effectful calls, answers, a timeline row per turn), compaction whenever the default context
budget is reached, and a snapshot every 500 events. The writes go straight through the store in larger commits
(the session writer wired to the live state, as the loop wires it, flushed every few turns), so that 100,000
events take seconds to build. Then it measures:

  (a) resume in-process: `resume_session` (lease, snapshot + tail, the SessionResumed commit) and the lease's
      release, for sessions of about 1k, 10k and 100k events; next to it, restore alone and a full fold;
  (b) the whole process `strata resume ID PROMPT` with the scripted model (a subprocess with STRATA_HOME at the
      bench database), for a 10-turn and a 10,000-turn session, alternating, median of the rounds.

It ends with two lines:

    resume_ratio_10000_vs_10=<float>
    resume_ms_1k=<float> resume_ms_10k=<float> resume_ms_100k=<float>

Usage: python bench/resume_flatness.py [--rounds R] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio

from agent.phases.perceive import compaction, overhead_chars
from agent.prompts import SYSTEM_PROMPT
from agent.session import Runtime, resume_session
from core.clock import SystemClock
from core.compaction import DEFAULT_CONTEXT_BUDGET
from core.events import (
    AssistantMessage,
    BatchCompleted,
    BatchProposed,
    CallResult,
    Event,
    PlannedCall,
    SessionEnded,
    SessionStarted,
    StoredEvent,
    TurnVerified,
    UserMessage,
)
from core.hashing import idempotency_key, sha256_json, sha256_text
from core.ids import IdFactory
from core.messages import TextBlock, ToolUseBlock
from core.model.scripted import ScriptedModel
from core.snapshot import DEFAULT_SNAPSHOT_EVERY
from core.state import apply, fold
from core.timeline import TimelineEntry
from memory import NewReceipt, ReceiptUpdate, SessionRecord, SqliteEventStore, Write
from memory.restore import restore
from memory.session_writer import SessionWriter
from observability import configure_logging
from tool_executor import builtin_tools

REPO = Path(__file__).resolve().parent.parent
WORDS = ("alpha", "build", "config", "deploy", "error", "fixture", "handler", "import", "kernel", "log", "module",
         "network", "output", "parser", "query", "render", "schema", "test", "update", "value", "warning", "yield")
FLUSH_TURNS = 8
"""Model turns per commit while building (the runtime commits more often; the log is the same)."""


def _text(rng: random.Random, chars: int) -> str:
    line = " ".join(rng.choice(WORDS) for _ in range(12))
    out = "\n".join(f"{i:04d} {line}" for i in range(chars // (len(line) + 6) + 1))
    return out[:chars]


class Builder:
    """Writes one session: the writer commits, `apply` keeps the live state, compaction and snapshots are the
    runtime's own functions."""

    def __init__(self, store: SqliteEventStore, rt: Runtime, workspace: Path, model: str, seed: int) -> None:
        self.store, self.rt, self.workspace, self.model = store, rt, workspace, model
        self.rng = random.Random(seed)
        self.n = 0
        self.overhead = overhead_chars(rt.plan("headless"), SYSTEM_PROMPT)

    async def build(self, session_id: str, *, events: int | None = None, turns: int | None = None) -> int:
        now = self.rt.clock.now()
        record = SessionRecord(id=session_id, created_at=now, updated_at=now, mode="headless",
                               workspace=str(self.workspace), model=self.model, title="bench", status="idle")
        started = SessionStarted(session_id=session_id, mode="headless", workspace=str(self.workspace),
                                 model=self.model, max_turns=10**6, plan_digest=self.rt.plan("headless").digest)
        state = fold(await self.store.create_session(record, Write(events=[(started, 0)])))

        def applied(stored: list[StoredEvent]) -> None:
            for item in stored:
                apply(state, item)

        writer = SessionWriter(self.store, session_id, on_commit=applied, state=state,
                               snapshot_every=DEFAULT_SNAPSHOT_EVERY)
        staged = 0  # model turns staged since the last flush
        pending = 0  # events staged since the last flush
        turn = 0

        def put(event: Event) -> None:
            nonlocal pending
            writer.stage(event, turn)
            pending += 1

        async def flush() -> None:
            nonlocal pending, staged
            await writer.flush()
            pending = staged = 0

        async def model_turn() -> int:
            """Compaction exactly where the loop checks it: before each model turn, on the live state."""
            nonlocal staged, turn
            if staged >= FLUSH_TURNS:
                await flush()
            if staged == 0:
                event = compaction(state, overhead=self.overhead, budget_tokens=DEFAULT_CONTEXT_BUDGET)
                if event is not None:
                    put(event)
            staged += 1
            turn += 1
            writer.stage_timeline(TimelineEntry(kind="phase", turn=turn, outcome="perceive", summary="perceive"))
            return turn

        def done() -> bool:
            if turns is not None:
                return turn + 1 >= turns  # the closing answer is the last turn
            return state.last_seq + pending >= (events or 0)

        async def answer(text: str) -> None:
            await model_turn()
            put(AssistantMessage(content=(TextBlock(text=text),)))
            put(TurnVerified())
            put(SessionEnded(status="completed"))

        while not done():
            put(UserMessage(text=_text(self.rng, self.rng.randint(40, 400))))
            for _ in range(self.rng.randint(1, 6)):
                if done():
                    break
                await model_turn()
                self._round(put, writer)
            await answer(_text(self.rng, self.rng.randint(100, 800)))  # each request ends with an answer
        writer.stage_status("completed")
        await flush()
        return state.last_seq

    def _round(self, put: Callable[[Event], None], writer: SessionWriter) -> None:
        rng = self.rng
        calls = []
        for _ in range(rng.randint(1, 3)):
            self.n += 1
            tool, args = rng.choice([("read_file", {"path": f"src/m{self.n % 97}.py"}),
                                     ("list_dir", {"path": "src"}),
                                     ("write_file", {"path": f"out/{self.n}.txt", "content": "v" * 60})])
            calls.append(PlannedCall(call_id=f"toolu_{self.n:08d}", tool=tool, input=args,
                                     input_sha256=sha256_json(args)))
        batch_id = f"batch_{self.n:08d}"
        content = (TextBlock(text=_text(rng, rng.randint(20, 200))),
                   *(ToolUseBlock(id=c.call_id, name=c.tool, input=c.input) for c in calls))
        put(BatchProposed(batch_id=batch_id, content=content, calls=tuple(calls)))
        for c in calls:
            size = 40_000 if rng.random() < 0.005 else rng.randint(200, 3_000)
            output = _text(rng, size)
            receipt = None
            if c.tool == "write_file":
                receipt = f"rcpt_{c.call_id}"
                writer.stage_receipt(NewReceipt(id=receipt, call_id=c.call_id, tool=c.tool,
                                                idempotency_key=idempotency_key(writer.session_id, c.call_id,
                                                                                c.input_sha256),
                                                args_sha256=c.input_sha256))
                writer.stage_receipt_update(ReceiptUpdate(id=receipt, status="done",
                                                          outcome_sha256=sha256_text(output)))
            put(CallResult(batch_id=batch_id, call_id=c.call_id, tool=c.tool, status="ok", content=output,
                           is_error=False, receipt_id=receipt, duration_ms=1.0))
        put(BatchCompleted(batch_id=batch_id))


@dataclass
class Sessions:
    by_events: dict[str, tuple[str, int]]
    turns_10: str
    turns_10000: str


async def build_all(home: Path, workspace: Path, script: Path) -> Sessions:
    clock = SystemClock()
    store = await SqliteEventStore.open(home / "strata.db", durability="normal", clock=clock)
    rt = Runtime(store=store, clock=clock, ids=IdFactory(clock), tools=builtin_tools())
    builder = Builder(store, rt, workspace, f"script:{script}", seed=7)
    by_events = {}
    try:
        for label, n in (("1k", 1_000), ("10k", 10_000), ("100k", 100_000)):
            sid = rt.ids.session_id()
            t0 = time.perf_counter()
            last = await builder.build(sid, events=n)
            by_events[label] = (sid, last)
            print(f"built {label}: {last} events in {time.perf_counter() - t0:.1f} s")
        ten, ten_k = rt.ids.session_id(), rt.ids.session_id()
        for sid, turns in ((ten, 10), (ten_k, 10_000)):
            t0 = time.perf_counter()
            last = await builder.build(sid, turns=turns)
            print(f"built {turns}-turn session: {last} events in {time.perf_counter() - t0:.1f} s")
    finally:
        await store.close()
    return Sessions(by_events, ten, ten_k)


async def in_process(home: Path, sessions: Sessions, rounds: int) -> dict[str, float]:
    """Median ms of resume_session + release per session; prints restore-only and full-fold figures beside."""
    clock = SystemClock()
    store = await SqliteEventStore.open(home / "strata.db", durability="full", clock=clock)
    rt = Runtime(store=store, clock=clock, ids=IdFactory(clock), tools=builtin_tools())
    out = {}
    try:
        for label, (sid, events) in sessions.by_events.items():
            resume_ms, restore_ms = [], []
            tail = 0
            for _ in range(rounds):
                t0 = time.perf_counter()
                restored = await restore(store, sid)
                t1 = time.perf_counter()
                live = await resume_session(rt, sid, model=ScriptedModel([]), rules=[])
                await live.release("completed")  # nothing to run: the session stays as it was
                t2 = time.perf_counter()
                restore_ms.append((t1 - t0) * 1e3)
                resume_ms.append((t2 - t1) * 1e3)
                tail = restored.events_read
            t0 = time.perf_counter()
            full = fold(await store.read_events(sid))
            full_ms = (time.perf_counter() - t0) * 1e3
            snapshot = await store.read_latest_snapshot(sid)
            size = len(snapshot.data) if snapshot else 0
            out[label] = statistics.median(resume_ms)
            print(f"{label:>5} ({events} events, {len(full.messages)} messages after {full.compactions} "
                  f"compactions): resume {out[label]:.1f} ms, restore alone {statistics.median(restore_ms):.1f} ms "
                  f"(snapshot {size / 1024:.0f} KiB + {tail} tail events); a full fold would take {full_ms:.0f} ms")
    finally:
        await store.close()
    return out


def whole_process(home: Path, workspace: Path, sessions: Sessions, rounds: int) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
    env.update(STRATA_HOME=str(home), XDG_CONFIG_HOME=str(home / "xdg-config"), PYTHONPATH=str(REPO))
    argv = [sys.executable, "-m", "agent", "resume"]

    def once(sid: str) -> float:
        t0 = time.perf_counter()
        proc = subprocess.run([*argv, sid, "one more question"], cwd=workspace, env=env, capture_output=True,
                              text=True, timeout=300)
        elapsed = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"strata resume failed ({proc.returncode}): {proc.stderr.strip()}")
        return elapsed * 1e3

    once(sessions.turns_10)  # warm the file cache and the bytecode, untimed
    once(sessions.turns_10000)
    short, long = [], []
    for _ in range(rounds):
        short.append(once(sessions.turns_10))
        long.append(once(sessions.turns_10000))
    s, lg = statistics.median(short), statistics.median(long)
    print(f"strata resume ID PROMPT, whole process (median of {rounds}): 10 turns {s:.0f} ms, "
          f"10,000 turns {lg:.0f} ms")
    print(f"  10 turns:     {', '.join(f'{x:.0f}' for x in short)} ms")
    print(f"  10,000 turns: {', '.join(f'{x:.0f}' for x in long)} ms")
    return lg / s


async def main(args: argparse.Namespace) -> None:
    configure_logging()  # warnings only, on stderr: the resumes' info lines are not figures
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="strata-resume-bench-"))
    home, workspace = base / "home", base / "ws"
    home.mkdir(parents=True, exist_ok=True)
    workspace.mkdir(exist_ok=True)
    script = base / "script.json"
    script.write_text(json.dumps([]), encoding="utf-8")  # past its end the scripted model gives a final answer
    print(f"strata resume flatness benchmark in {base}")
    sessions = await build_all(home, workspace, script)
    ms = await in_process(home, sessions, args.rounds)
    ratio = await anyio.to_thread.run_sync(whole_process, home, workspace, sessions, args.rounds)
    print(f"resume_ratio_10000_vs_10={ratio:.3f}")
    print(f"resume_ms_1k={ms['1k']:.2f} resume_ms_10k={ms['10k']:.2f} resume_ms_100k={ms['100k']:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--dir", help="where to build the database (default: a new temporary directory)")
    anyio.run(main, parser.parse_args())
