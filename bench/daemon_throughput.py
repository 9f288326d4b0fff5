"""Durable calls per second through a real `strata serve` daemon, and how many commits each fsync carried.

Starts `strata serve --foreground` as a subprocess on a fresh Strata home (its own socket), then, for each size
(1, 8 and 32 by default), starts that many sessions in it over the socket (one client connection each, the
protocol of the README's "The serve daemon", `agent.ipc.IpcClient`), each a scripted model (`script:` file) making
`--calls` read-only calls, one per batch: `read_file` of a small file in the session's own workspace,
auto-allowed. Every session is prompted at once and the round ends when every session's turn has ended; a call
counts once its `call_result` event reached the client (the daemon pushes an event only once it is committed,
durably: WAL, synchronous=FULL). Each size runs `--rounds` rounds on the same sessions (each prompt plays the next
segment of the script); the fastest is printed with the median.

Per size: calls/s, the store's commits and fsyncs in the round (from the `status` reply's `store` counts) and
commits per fsync, fsyncs per call, wall time, and CPU per call of the daemon process (utime + stime of every
thread, /proc/PID/stat) and of this client process. When the daemon's CPU per call is close to its wall time
per call with one session, more sessions can only overlap the fsync waits: one interpreter runs the Python of
all of them. Ends with the speed-up over the smallest size and

    sessions_1=<calls/s> sessions_8=<calls/s> sessions_32=<calls/s> speedup_32=<float>

Usage: python bench/daemon_throughput.py [--sizes 1,8,32] [--calls N] [--rounds R] [--small] [--json]
                                         [--home DIR]
`--small`: tiny sizes for CI. `--json`: one JSON object instead of the text. `--home DIR`: use (and keep) that
Strata home instead of a temporary one, to inspect the sessions afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from _throughput import Figures, best, script, speedups, summary  # shared with bench/concurrent_sessions.py

from agent import ipc

SMALL = {"sizes": "1,4", "calls": 4, "rounds": 1}
NOTE = "A small file the bench's sessions read.\n" * 4
START_TIMEOUT_S = 60.0
ROUND_TIMEOUT_S = 600.0


class Daemon:
    """`strata serve --foreground` on `home`, ready once it says where it listens; its output goes to files."""

    def __init__(self, home: Path) -> None:
        self.home = home
        env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
        env.update(STRATA_HOME=str(home), XDG_CONFIG_HOME=str(home / "xdg-config"))
        self.out_path, self.err_path = home / "bench-serve.out", home / "bench-serve.err"
        with self.out_path.open("wb") as out, self.err_path.open("wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "agent", "serve", "--foreground"], env=env,
                                         cwd=home, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        self.pid = self.proc.pid
        self.socket = ipc.daemon_paths(home, None).socket
        deadline = time.monotonic() + START_TIMEOUT_S
        while "listening on" not in self.out_path.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise SystemExit(f"the daemon did not start: {self.err_path.read_text(errors='replace')}")
            time.sleep(0.05)

    def cpu_s(self) -> float:
        """User + system CPU seconds of the daemon process so far, every thread (/proc/PID/stat)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14, 15

    def stop(self) -> int:
        """SIGTERM (the daemon drains: every session is released) and its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@dataclass
class Session:
    client: ipc.IpcClient
    session_id: str
    results: int = 0


async def _store_counts(status: ipc.IpcClient) -> ipc.StoreCounts:
    reply = await status.request(ipc.Status)
    assert reply.store is not None and reply.store.fsyncs is not None, "the daemon's status has no store counts"
    return reply.store


async def _turn(session: Session, calls: int) -> None:
    """Prompt the session and wait for its turn's result; every call's result must have been committed."""
    done: list[ipc.ResultPush] = []
    results = 0

    async def until_result() -> None:
        nonlocal results
        async with contextlib.aclosing(session.client.pushes()) as pushes:
            async for push in pushes:
                if isinstance(push, ipc.EventPush) and push.event.kind == "call_result":
                    results += 1
                elif isinstance(push, ipc.ResultPush):
                    done.append(push)
                    return
                elif isinstance(push, ipc.Notice) and push.kind in ("dropped", "closed", "detached"):
                    raise AssertionError(f"session {session.session_id}: {push.text}")

    async with anyio.create_task_group() as tg:
        tg.start_soon(until_result)
        await session.client.request(ipc.Prompt, session_id=session.session_id, text="bench")
    assert done and done[0].status == "completed", (session.session_id, done)
    assert results == calls, f"session {session.session_id}: {results} call results pushed, {calls} expected"
    session.results += results


async def _round(daemon: Daemon, status: ipc.IpcClient, sessions: list[Session], calls: int) -> Figures:
    before = await _store_counts(status)
    cpu0, client0 = daemon.cpu_s(), time.process_time()
    t0 = time.perf_counter()
    with anyio.fail_after(ROUND_TIMEOUT_S):
        async with anyio.create_task_group() as tg:
            for session in sessions:
                tg.start_soon(_turn, session, calls)
    elapsed = time.perf_counter() - t0
    cpu, client = daemon.cpu_s() - cpu0, time.process_time() - client0
    after = await _store_counts(status)
    assert before.fsyncs is not None and after.fsyncs is not None
    return Figures(sessions=len(sessions), calls=len(sessions) * calls, seconds=elapsed,
                   commits=after.commits - before.commits, fsyncs=after.fsyncs - before.fsyncs, cpu=cpu,
                   client_cpu=client)


async def _size(daemon: Daemon, status: ipc.IpcClient, work: Path, size: int, calls: int,
                rounds: int) -> tuple[list[Figures], list[str]]:
    """`size` new sessions in the daemon, each on its own connection and workspace, run for `rounds` rounds."""
    async with contextlib.AsyncExitStack() as stack:
        sessions: list[Session] = []
        for n in range(size):
            ws = work / f"size{size}" / f"ws{n:02d}"
            ws.mkdir(parents=True)
            (ws / "note.txt").write_text(NOTE)
            turns = script(f"{size}_{n}", calls, lambda j: ("read_file", {"path": "note.txt"}), segments=rounds)
            model = ws.parent / f"script{n:02d}.json"
            model.write_text(json.dumps(turns))
            client = await stack.enter_async_context(ipc.IpcClient.connect(daemon.socket, client_name="bench"))
            sid = (await client.request(ipc.NewSession, workspace=str(ws), model=f"script:{model}")).session_id
            assert sid is not None
            await client.request(ipc.Attach, session_id=sid, role="drive")
            sessions.append(Session(client, sid))
        figures = [await _round(daemon, status, sessions, calls) for _ in range(rounds)]
        for session in sessions:
            await session.client.request(ipc.Detach, session_id=session.session_id)
        return figures, [s.session_id for s in sessions]


def _machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"cpus": os.cpu_count(), "cpu": model, "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version}


async def run(args: argparse.Namespace, home: Path) -> dict[str, Any]:
    sizes = [int(s) for s in args.sizes.split(",")]
    config = home / "xdg-config" / "strata" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f"max_turns = {(args.rounds + 1) * (args.calls + 1) + 10}\n")  # every segment's turns
    work = home / "bench-work"
    work.mkdir()
    load_before = os.getloadavg()
    daemon = Daemon(home)
    try:
        async with ipc.IpcClient.connect(daemon.socket, client_name="bench-status") as status:
            await _size(daemon, status, work / "warm-up", 2, 5, 1)  # imports, the database's first pages
            results: dict[int, Figures] = {}
            medians: dict[int, float] = {}
            session_ids: dict[int, list[str]] = {}
            for size in sizes:
                rounds, session_ids[size] = await _size(daemon, status, work, size, args.calls, args.rounds)
                results[size], medians[size] = best(rounds)
                if not args.json:
                    print(results[size].line(medians[size]), flush=True)
    finally:
        code = daemon.stop()
    assert code == 0, f"the daemon exited {code}: {daemon.err_path.read_text(errors='replace')}"
    return {"home": str(home), "daemon_pid": daemon.pid, "calls_per_session": args.calls, "rounds": args.rounds,
            "machine": _machine(), "load_average_before": load_before, "load_average_after": os.getloadavg(),
            "sizes": [results[s].as_json(medians[s]) | {"session_ids": session_ids[s]} for s in sizes],
            "speedups": {str(s): round(up, 3) for s, up in speedups(results).items()},
            "summary": summary(results)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,8,32")
    parser.add_argument("--calls", type=int, default=20, help="read-only calls per session and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--small", action="store_true", help=f"tiny sizes for CI: {SMALL}")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--home", type=Path, default=None, help="a new Strata home to use and keep")
    args = parser.parse_args()
    if args.small:
        for key, value in SMALL.items():
            setattr(args, key, value)
    keep = args.home is not None
    home = args.home.absolute() if keep else Path(tempfile.mkdtemp(prefix="strata-daemon-bench-"))
    home.mkdir(parents=True, exist_ok=True)
    if not args.json:
        print(f"sessions in one `strata serve` daemon over its socket (durable: WAL, synchronous=FULL), home {home}")
        print(f"each session: {args.calls} read-only calls (read_file), one per batch; best of {args.rounds} "
              f"rounds; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    try:
        report = anyio.run(run, args, home)
    finally:
        if not keep:
            shutil.rmtree(home, ignore_errors=True)
    if args.json:
        print(json.dumps(report))
        return
    for line in report["summary"][:-1]:
        print(line)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in report['load_average_after'])}")
    print(report["summary"][-1])


if __name__ == "__main__":
    main()
