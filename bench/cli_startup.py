"""Start-up of the command line: each command as a whole process (interpreter start, imports, work, exit), against
a bare `python -c pass` measured in the same rounds.

Builds three Strata homes in a temporary directory:
  - a home with 100 sessions (written through the store as the runtime writes them: a start, prompts, answers
    and timeline rows), one of them holding 1,000 timeline rows;
  - a home with one session made by a real `strata run` with the scripted model, for `strata resume ID PROMPT`;
  - a home with one session of 100,000 timeline rows (calls over eight tools, ~2% of them denied, hooks,
    approvals, receipts) and two other sessions of 10,000 rows around it.
Then it runs, in rounds (every command once per round, so a burst of load hits them all alike), each of:

    python -c pass
    strata --help
    strata sessions                                   (100 sessions)
    strata timeline ID                                (1,000 rows)
    strata resume ID PROMPT                           (scripted model)
    strata timeline ID --kind call --decision denied  (100,000 rows)

and prints each one's median and its ratio to `python -c pass`, with the issue's goal beside it. Every run must
exit 0 and print what it should (the listing's 100 sessions, the 1,000 rows, the denied calls). Children run
without PYTHONDONTWRITEBYTECODE, after one untimed warm-up run each, so they start from cached bytecode as an
installed `strata` does. The last line is:

    python_ms=<f> help_ms=<f> sessions_ms=<f> timeline_ms=<f> resume_ms=<f> denied_100k_ms=<f> denied_query_ms=<f>

(the last one: the denied calls' query alone, in-process, as `strata timeline` runs it).

Usage: python bench/cli_startup.py [--runs N] [--small] [--dir DIR]
  --small: 20 sessions, 200 and 2,000 timeline rows, 3 runs (for the test that runs this bench).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timeline_query import _entries, _session

from core.clock import SystemClock
from core.events import AssistantMessage, SessionStarted, UserMessage
from core.messages import TextBlock
from memory import SessionRecord, SqliteEventStore, Write

REPO = Path(__file__).resolve().parent.parent
GOALS_MS = {"help": 150.0, "sessions": 150.0, "timeline": 150.0, "resume": 250.0, "denied_100k": 100.0}


@dataclass(frozen=True)
class Sizes:
    sessions: int
    timeline_rows: int
    long_rows: int
    runs: int


def strata_argv() -> list[str]:
    """The `strata` console script beside this interpreter (what a user runs), else `python -m agent`."""
    script = Path(sys.executable).with_name("strata")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "agent"]


def child_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(STRATA_HOME=str(home), XDG_CONFIG_HOME=str(home / "xdg-config"))
    return env


async def build_listing_home(home: Path, size: Sizes) -> str:
    """`size.sessions` sessions as the runtime leaves them (two turns each, a few timeline rows); the first one
    holds `size.timeline_rows` rows. Returns its id."""
    rng = random.Random(11)
    store = await SqliteEventStore.open(home / "strata.db", durability="normal")
    try:
        first = "bench-timeline-1000"
        await _session(store, first, size.timeline_rows, rng)
        for k in range(1, size.sessions):
            sid = f"bench-session-{k:03d}"
            now = SystemClock().now()
            started = SessionStarted(session_id=sid, mode="headless", workspace="/ws", model="script:bench",
                                     max_turns=50, plan_digest="p")
            await store.create_session(
                SessionRecord(id=sid, created_at=now, updated_at=now, mode="headless", workspace="/ws",
                              model="script:bench", title=f"listing bench session {k}", status="completed"),
                Write(events=[(started, 0)]))
            for turn in (1, 2):
                await store.commit(sid, Write(
                    events=[(UserMessage(text=f"question {turn} of session {k}"), turn),
                            (AssistantMessage(content=(TextBlock(text=f"answer {turn}"),)), turn)],
                    timeline=_entries(rng, turn, 6, [k * 100])))
    finally:
        await store.close()
    return first


async def build_long_home(home: Path, size: Sizes) -> str:
    rng = random.Random(7)
    store = await SqliteEventStore.open(home / "strata.db", durability="normal")
    try:
        await _session(store, "other-before", size.long_rows // 10, rng)
        sid = "bench-timeline-long"
        await _session(store, sid, size.long_rows, rng)
        await _session(store, "other-after", size.long_rows // 10, rng)
    finally:
        await store.close()
    return sid


def build_resume_home(home: Path, workspace: Path) -> str:
    """One session made by a real `strata run` with the scripted model (past its script's end it answers with a
    short final text, so every resume is one model turn). Returns its id."""
    script = home.parent / "script.json"
    script.write_text(json.dumps([]), encoding="utf-8")
    proc = subprocess.run([*strata_argv(), "run", "--json", "--model", f"script:{script}", "hello"], cwd=workspace,
                          env=child_env(home), capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise SystemExit(f"strata run failed ({proc.returncode}): {proc.stderr.strip()}")
    result = json.loads(proc.stdout.splitlines()[-1])
    return str(result["session_id"])


@dataclass(frozen=True)
class Case:
    name: str
    argv: list[str]
    home: Path | None
    cwd: Path
    lines: int | None
    """The lines of output a run must print (None: any)."""
    wraps: bool = False
    """`lines` is a least: the plain timeline wraps a long reason onto lines of its own."""


def run_once(case: Case) -> float:
    env = child_env(case.home) if case.home is not None else dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    t0 = time.perf_counter()
    proc = subprocess.run(case.argv, cwd=case.cwd, env=env, capture_output=True, text=True, timeout=120)
    elapsed = (time.perf_counter() - t0) * 1e3
    if proc.returncode != 0:
        raise SystemExit(f"{case.name} failed ({proc.returncode}): {proc.stderr.strip()}")
    printed = len(proc.stdout.splitlines())
    if case.lines is not None and (printed < case.lines if case.wraps else printed != case.lines):
        wanted = f"at least {case.lines}" if case.wraps else str(case.lines)
        raise SystemExit(f"{case.name} printed {printed} lines, expected {wanted}")
    return elapsed


def measure(cases: list[Case], runs: int) -> dict[str, list[float]]:
    for case in cases:  # warm the file cache and write the bytecode, untimed
        run_once(case)
    times: dict[str, list[float]] = {case.name: [] for case in cases}
    for _ in range(runs):
        for case in cases:
            times[case.name].append(run_once(case))
    return times


async def denied_query_ms(home: Path, sid: str, repeat: int = 7) -> float:
    """The query alone, in-process through the path `strata timeline` uses (median ms)."""
    from observability.session_timeline import load_timeline

    store = await SqliteEventStore.open(home / "strata.db", read_only=True)
    try:
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            await load_timeline(store, sid, kinds=["call"], decisions=["denied"])
            times.append((time.perf_counter() - t0) * 1e3)
    finally:
        await store.close()
    return statistics.median(times)


def denied_rows(home: Path, sid: str) -> int:
    """How many denied call rows the long session holds, read with plain sqlite3 (what the command must print)."""
    import sqlite3

    with sqlite3.connect(home / "strata.db") as db:
        (n,) = db.execute("SELECT count(*) FROM session_timeline WHERE session_id = ? AND kind = 'call' "
                          "AND decision = 'denied'", (sid,)).fetchone()
    return int(n)


def main(args: argparse.Namespace) -> None:
    if args.dir:
        base = Path(args.dir)
        if base.exists() and any(base.iterdir()):  # homes built again on old ones would hold twice the sessions
            raise SystemExit(f"--dir {base} is not empty: give a new or empty directory")
        run(args, base)
        return
    base = Path(tempfile.mkdtemp(prefix="strata-startup-bench-"))
    try:  # the homes take ~35 MB: a temporary directory of ours goes when the run ends
        run(args, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run(args: argparse.Namespace, base: Path) -> None:
    size = (Sizes(sessions=20, timeline_rows=200, long_rows=2_000, runs=3) if args.small
            else Sizes(sessions=100, timeline_rows=1_000, long_rows=100_000, runs=args.runs))
    listing, resuming, long, workspace = base / "listing", base / "resume", base / "long", base / "ws"
    for d in (listing, resuming, long, workspace):
        d.mkdir(parents=True, exist_ok=True)
    print(f"strata start-up benchmark in {base}", flush=True)
    t0 = time.perf_counter()
    timeline_sid = anyio.run(build_listing_home, listing, size)
    long_sid = anyio.run(build_long_home, long, size)
    resume_sid = build_resume_home(resuming, workspace)
    denied = denied_rows(long, long_sid)
    print(f"built {size.sessions} sessions ({size.timeline_rows:,} timeline rows in one), a resumable session, and "
          f"a {size.long_rows:,}-row session ({denied} denied calls) in {time.perf_counter() - t0:.1f} s", flush=True)

    strata = strata_argv()
    cases = [
        Case("python", [sys.executable, "-c", "pass"], None, base, 0),
        Case("help", [*strata, "--help"], listing, base, None),
        Case("sessions", [*strata, "sessions"], listing, base, size.sessions + 1),  # a header, a line each
        Case("timeline", [*strata, "timeline", timeline_sid], listing, base, size.timeline_rows + 2, wraps=True),
        Case("resume", [*strata, "resume", resume_sid, "one more question"], resuming, workspace, None),
        Case("denied_100k", [*strata, "timeline", long_sid, "--kind", "call", "--decision", "denied"], long, base,
             denied + 2, wraps=True),
    ]
    load = os.getloadavg()
    times = measure(cases, size.runs)
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    floor = medians["python"]
    print(f"whole process, median of {size.runs} runs each (command: median, ratio to `python -c pass`, goal):")
    for case in cases:
        ms = medians[case.name]
        goal = GOALS_MS.get(case.name)
        verdict = "" if goal is None else f"  goal <= {goal:.0f} ms: {'holds' if ms <= goal else 'does not hold'}"
        shown = " ".join(case.argv[len(strata):] if case.name != "python" else ["python -c pass"])
        print(f"  {case.name:<12} {ms:7.1f} ms  {ms / floor:5.2f}x{verdict}   ({shown[:70]})")
    print("  runs (ms): " + "; ".join(f"{n} {', '.join(f'{t:.0f}' for t in ts)}" for n, ts in times.items()))
    print(f"load average before: {' '.join(f'{x:.2f}' for x in load)}; after: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    query = anyio.run(denied_query_ms, long, long_sid)
    print(f"the denied calls' query alone, in-process: {query:.1f} ms (median of 7)")
    print(" ".join(f"{name}_ms={medians[name]:.1f}" for name in times) + f" denied_query_ms={query:.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--small", action="store_true")
    parser.add_argument("--dir", help="a new or empty directory to build the homes in, kept afterwards (default: a new "
                        "temporary directory, removed at the end)")
    main(parser.parse_args())
