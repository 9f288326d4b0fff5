"""Helpers for the real-process CLI tests: scripted turns whose effects can be counted, parsing of `--json`
output, and the invariants every crashed-and-resumed session must satisfy."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tests.conftest import StrataCLI, write_script

T = TypeVar("T")
R = TypeVar("R")

EFFECTS_LOG = "effects.log"
# The built-in tools' declared effect classes (tool_executor/builtin): these take a receipt before they run.
EFFECTFUL_TOOLS = frozenset({"bash", "write_file", "edit_file"})
ALLOW_EFFECTS = ("--allow", "bash", "--allow", "write_file")


# -- scripted turns ----------------------------------------------------------------------------------------------

def marker(call_id: str) -> str:
    return f"MARK-{call_id}"


def bash_mark(call_id: str, *, sleep_before: float | None = None) -> dict[str, Any]:
    """A bash call whose only effect is appending its unique marker line to effects.log."""
    cmd = f"echo {marker(call_id)} >> {EFFECTS_LOG}"
    if sleep_before is not None:
        cmd = f"sleep {sleep_before}; {cmd}"
    return tool_use(call_id, "bash", command=cmd)


def tool_use(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": args}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


@dataclass(frozen=True)
class Call:
    call_id: str
    tool: str
    input: dict[str, Any]
    batch: int

    @property
    def effectful(self) -> bool:
        return self.tool in EFFECTFUL_TOOLS


def script_calls(turns: Sequence[Sequence[dict[str, Any]]]) -> list[Call]:
    """Every tool call of a script, in proposal order."""
    return [Call(b["id"], b["name"], b["input"], k) for k, turn in enumerate(turns)
            for b in turn if b["type"] == "tool_use"]


def batches(turns: Sequence[Sequence[dict[str, Any]]]) -> list[list[Call]]:
    calls = script_calls(turns)
    return [[c for c in calls if c.batch == k] for k, turn in enumerate(turns)
            if any(b["type"] == "tool_use" for b in turn)]


# -- output parsing ----------------------------------------------------------------------------------------------

def json_lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def events_of(stdout: str) -> list[dict[str, Any]]:
    """The committed events a `--json` run printed (one object per line; the final `result` line is not one)."""
    return [obj for obj in json_lines(stdout) if obj.get("type") == "event"]


def result_line(stdout: str) -> dict[str, Any] | None:
    found = [obj for obj in json_lines(stdout) if obj.get("type") == "result"]
    assert len(found) <= 1, found
    return found[0] if found else None


def call_results(events: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for ev in events:
        if ev["kind"] == "call_result":
            assert ev["call_id"] not in out, f"two call_result events for {ev['call_id']}"
            out[ev["call_id"]] = ev
    return out


def effect_counts(workspace: Path) -> Counter[str]:
    log = workspace / EFFECTS_LOG
    if not log.exists():
        return Counter()
    return Counter(line for line in log.read_text().splitlines() if line.strip())


def assert_clean_stderr(*procs: subprocess.CompletedProcess[str]) -> None:
    for proc in procs:
        assert "Traceback" not in proc.stderr, f"{proc.args}:\n{proc.stderr}"
        assert "internal error" not in proc.stderr, f"{proc.args}:\n{proc.stderr}"


def strata(cli: StrataCLI, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real `strata`; whatever it exits with, its stderr never carries a traceback."""
    proc = cli.run(*args, env=env)
    assert_clean_stderr(proc)
    return proc


def strata_read(cli: StrataCLI, *args: str) -> subprocess.CompletedProcess[str]:
    """`strata(cli, *args)` for a reading command, run in this process (tests/_in_process_cli.py): whatever it exits
    with, its stderr never carries a traceback."""
    from tests._in_process_cli import run_in_process

    proc = run_in_process(cli, *args)
    assert_clean_stderr(proc)
    return proc


def strata_set_up(cli: StrataCLI, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`strata(cli, *args)` for a command that makes the state a test then checks (a `run`, `resume`, decision or
    fork whose process is not what the test is about), run in this process (tests/_in_process_cli.py
    `set_up_in_process`): whatever it exits with, its stderr never carries a traceback."""
    from tests._in_process_cli import set_up_in_process

    proc = set_up_in_process(cli, *args, env=env)
    assert_clean_stderr(proc)
    return proc


PEAK_RSS_LAUNCHER = (
    "import os, resource, sys\n"
    "limit = int(sys.argv[2])\n"
    "resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.execvp(sys.argv[3], sys.argv[3:])\n"
    "_, status, usage = os.wait4(pid, 0)\n"
    "open(sys.argv[1], 'w').write(str(usage.ru_maxrss))\n"
    "sys.exit(os.waitstatus_to_exitcode(status) & 0xFF)\n"
)
"""`python -c PEAK_RSS_LAUNCHER PEAK_FILE ADDRESS_SPACE_BYTES COMMAND...`: runs COMMAND with its address space capped
(unfixed code then fails with MemoryError instead of taking the shared machine) and writes its peak RSS (KiB, from
wait4) to PEAK_FILE. The kernel keeps the peak RSS of the image a process had before exec: a process forked from the
(large) pytest worker would report the worker's size, so this small launcher, started afresh, forks and execs."""


def strata_peak_rss(cli: StrataCLI, *args: str, address_space: int = 3 * 1024**3,
                    timeout: float = 60) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run the real `strata ARGS` through PEAK_RSS_LAUNCHER: its result (stderr checked as `strata` does) and its
    peak RSS in MiB."""
    peak_file = cli.home / f"peak-rss-kib.{os.getpid()}.{time.monotonic_ns()}"
    argv = cli.argv(args)
    proc = subprocess.run([argv[0], "-c", PEAK_RSS_LAUNCHER, str(peak_file), str(address_space), *argv],
                          cwd=cli.cwd, env=cli.env(), capture_output=True, text=True, timeout=timeout)
    assert_clean_stderr(proc)
    peak = int(peak_file.read_text(encoding="ascii")) / 1024
    peak_file.unlink()
    return proc, peak


def strata_json(cli: StrataCLI, *args: str) -> list[dict[str, Any]]:
    proc = strata(cli, *args)
    assert proc.returncode == 0, (args, proc.returncode, proc.stderr)
    return json_lines(proc.stdout)


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("strata: error")]


def parallel(fn: Callable[[T], R], items: Sequence[T], workers: int | None = None) -> list[R]:
    """Run `fn` over `items` in threads (each call drives real subprocesses); results in input order."""
    workers = workers or max(2, os.cpu_count() or 2)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, items))


# -- the conversation as `strata show --json` gives it ------------------------------------------------------------

def check_pairing(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every tool_use has exactly one tool_result, in the next message, which is a user message whose
    tool_results come first; no tool_result answers anything else. Returns tool_use_id -> tool_result block."""
    results: dict[str, dict[str, Any]] = {}
    for i, msg in enumerate(messages):
        assert msg["role"] in ("user", "assistant"), msg
        assert isinstance(msg["content"], list) and msg["content"], msg
        if i > 0:
            assert msg["role"] != messages[i - 1]["role"], f"two {msg['role']} messages in a row at {i}"
        uses = [b for b in msg["content"] if b["type"] == "tool_use"]
        if msg["role"] == "user":
            assert not uses, f"tool_use in a user message at {i}"
        if not uses:
            continue
        assert i + 1 < len(messages), f"tool_use at message {i} has no next message"
        nxt = messages[i + 1]
        assert nxt["role"] == "user", nxt
        kinds = [b["type"] for b in nxt["content"]]
        n = len([k for k in kinds if k == "tool_result"])
        assert kinds[:n] == ["tool_result"] * n, f"tool_results are not first in message {i + 1}: {kinds}"
        answered = [b["tool_use_id"] for b in nxt["content"] if b["type"] == "tool_result"]
        assert sorted(answered) == sorted(u["id"] for u in uses), (answered, [u["id"] for u in uses])
        assert len(set(answered)) == len(answered), answered
        for b in nxt["content"]:
            if b["type"] == "tool_result":
                assert b["tool_use_id"] not in results
                results[b["tool_use_id"]] = b
    all_results = [b for m in messages for b in m["content"] if b["type"] == "tool_result"]
    assert len(all_results) == len(results), "a tool_result answers no tool_use of the message before it"
    return results


# -- a crashed run and its resume ---------------------------------------------------------------------------------

@dataclass
class CrashCase:
    """One killed `strata run --json` and everything observed about it before and after `strata resume`."""

    name: str
    turns: list[list[dict[str, Any]]]
    workspace: Path
    run: subprocess.CompletedProcess[str] | None = None
    session_id: str = ""
    receipts_before: list[dict[str, Any]] = field(default_factory=list)
    resume: subprocess.CompletedProcess[str] | None = None
    show: dict[str, Any] = field(default_factory=dict)
    receipts_after: list[dict[str, Any]] = field(default_factory=list)

    @property
    def calls(self) -> list[Call]:
        return script_calls(self.turns)

    @property
    def killed_events(self) -> list[dict[str, Any]]:
        assert self.run is not None
        return events_of(self.run.stdout)

    @property
    def resume_events(self) -> list[dict[str, Any]]:
        assert self.resume is not None
        return events_of(self.resume.stdout)

    def receipt_status(self, when: str) -> dict[str, str]:
        rows = self.receipts_before if when == "before" else self.receipts_after
        return {r["call_id"]: r["status"] for r in rows}


def settle(cases: Sequence[CrashCase], cli: StrataCLI) -> None:
    """After the killed runs: find each session by its workspace, list receipts, resume, show, list again. The
    resumes are real `strata` processes, run side by side; the readings (`sessions`, `receipts`, `show`, each with
    --json) run in this process one after another (tests/_in_process_cli.py): what they print is what is checked,
    not that they are processes of their own (~0.25 s of CPU each saved; a crash case reads four times)."""
    from tests._in_process_cli import json_lines_in_process

    def read(*args: str) -> list[dict[str, Any]]:
        return json_lines_in_process(cli, *args)

    by_workspace = {s["workspace"]: s for s in read("sessions", "--json")}
    for case in cases:
        assert case.run is not None
        assert_clean_stderr(case.run)
        session = by_workspace.get(os.path.realpath(case.workspace))
        assert session is not None, f"{case.name}: no session for {case.workspace}; run stderr: {case.run.stderr}"
        case.session_id = session["id"]
    receipts = read("receipts", "--json")
    for case in cases:
        case.receipts_before = [r for r in receipts if r["session_id"] == case.session_id]
    parallel(lambda c: setattr(c, "resume", cli.run("resume", c.session_id, "--json")), cases)
    for case in cases:
        case.show = read("show", case.session_id, "--json")[0]
    receipts = read("receipts", "--json")
    for case in cases:
        case.receipts_after = [r for r in receipts if r["session_id"] == case.session_id]


def check_invariants(case: CrashCase, *, exact_output: bool = True) -> None:
    """What must hold after any kill and a resume (ARCHITECTURE.md sections 5 and 6). `exact_output`: the kill
    came from a fault point, which fires after the committed events were printed, so the killed run's output
    holds every event it committed (a kill at a random moment may fall between a commit and its printing)."""
    assert case.resume is not None
    assert_clean_stderr(case.resume)
    killed = call_results(case.killed_events)
    calls = {c.call_id: c for c in case.calls}

    # The conversation is valid: every tool_use has one tool_result, together and first in the next message,
    # and every call the script proposed got one; no batch is left open.
    messages = case.show["messages"]
    results = check_pairing(messages)
    assert set(results) == set(calls), (sorted(results), sorted(calls))
    assert case.show["open_batch"] is None
    assert case.show["session"]["ended"] == "completed", case.show["session"]

    # Results finished before the kill were kept, and such calls were not run again by the resume.
    for call_id, ev in killed.items():
        assert results[call_id]["content"] == ev["content"], call_id
        assert results[call_id]["is_error"] == ev["is_error"], call_id
    rerun = call_results(case.resume_events)
    assert not set(rerun) & set(killed), f"resume produced second results for {sorted(set(rerun) & set(killed))}"
    if exact_output:
        assert set(rerun) | set(killed) == set(calls), sorted(set(calls) - set(rerun) - set(killed))

    # Receipts: one per effectful call that passed its checks, never for read-only calls.
    after = case.receipt_status("after")
    assert len(after) == len(case.receipts_after), "two receipts for one call"
    assert all(calls[cid].effectful for cid in after), after
    assert "dispatched" not in after.values(), after

    # Unknown receipts exist exactly where the kill fell after the receipt's commit and before the result's:
    # the calls with a `dispatched` receipt when the process died, whose result the killed run never committed.
    dispatched_before = {cid for cid, st in case.receipt_status("before").items() if st == "dispatched"}
    unknown = {cid for cid, st in after.items() if st == "unknown"}
    assert unknown == dispatched_before, (unknown, dispatched_before)
    assert not unknown & set(killed), unknown & set(killed)
    for cid in unknown:
        assert results[cid]["is_error"] is True
        assert "unknown" in results[cid]["content"].lower(), results[cid]
        assert rerun[cid]["status"] == "unknown", rerun[cid]  # settled by the resume, not run again
    for cid, status in case.receipt_status("before").items():
        if status in ("done", "failed"):
            assert after[cid] == status, (cid, status, after[cid])

    # No effect ran twice; every effect reported ok ran exactly once; nothing ran that no call asked for.
    counts = effect_counts(case.workspace)
    assert set(counts) <= {marker(c.call_id) for c in calls.values() if c.tool == "bash"}, counts
    for c in calls.values():
        if c.tool == "bash":
            assert counts[marker(c.call_id)] <= 1, (c.call_id, counts)
            if not results[c.call_id]["is_error"]:
                assert counts[marker(c.call_id)] == 1, (c.call_id, counts)
        elif c.tool == "write_file" and not results[c.call_id]["is_error"]:
            assert (case.workspace / c.input["path"]).read_text() == c.input["content"]

    # The exit code says whether unknown effects remain.
    summary = result_line(case.resume.stdout)
    assert summary is not None, case.resume.stdout
    assert summary["unknown_receipts"] == len(unknown)
    assert case.resume.returncode == summary["exit_code"] == (5 if unknown else 0), (
        case.resume.returncode, summary, case.resume.stderr)


def kill_after_first_output(proc: subprocess.Popen[str], delay: float) -> subprocess.CompletedProcess[str]:
    """SIGKILL `proc` `delay` seconds after its first line of output (its first committed event, for
    `--json` runs), and return what it printed. The process is killed and reaped whatever happens."""
    lines: list[str] = []
    first = threading.Event()

    def drain() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            first.set()
        first.set()

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        assert first.wait(30), "the process printed nothing"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        reader.join(30)
        assert proc.stderr is not None and proc.stdout is not None
        err = proc.stderr.read()
        proc.stderr.close()
        proc.stdout.close()
    return subprocess.CompletedProcess(proc.args, proc.returncode, "".join(lines), err)


def run_noting_modules(cli: StrataCLI, args: list[str], tmp_path: Path,
                       env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run `strata ARGS` through its real entry point in a subprocess; the modules it had imported when it exited."""
    report = tmp_path / "modules.json"
    probe = (
        "import atexit, json, sys\n"
        f"atexit.register(lambda: open({str(report)!r}, 'w').write(json.dumps(sorted(sys.modules))))\n"
        f"sys.argv = ['strata', *{args!r}]\n"
        "from agent.cli.main import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=cli.cwd, env=cli.env(env), capture_output=True,
                          text=True, timeout=60)
    return done, set(json.loads(report.read_text(encoding="utf-8")))


QUICK_NEVER = frozenset({"structlog", "pydantic", "asyncio", "anyio", "aiosqlite", "config.loader", "core.events",
                         "core.state", "memory.sqlite_store", "agent.cli._timeline_full", "agent.cli.inspect_cmds"})
"""What a reading command's quick way (agent/cli/quick_timeline.py, quick_sessions.py) never imports."""


class ScriptCLI(StrataCLI):
    """The `strata` console script of this interpreter's environment (what a user runs), not `python -m agent`."""

    def argv(self, args: Sequence[str]) -> list[str]:
        return [str(Path(sys.executable).with_name("strata")), *args]


def scripted_session(cli: StrataCLI, scripts: Path, prompt: str = "hello") -> str:
    """One session made by `strata run` with an empty script (past its end the scripted model gives one short final
    answer), in this process (tests/_in_process_cli.py `set_up_in_process`): what the tests that call this check
    is what is done with the session, not the run; its id. The script is written in `scripts`."""
    from tests._in_process_cli import set_up_in_process

    script = write_script(scripts / "script.json", [])
    proc = set_up_in_process(cli, "run", "--json", "--model", f"script:{script}", prompt)
    assert proc.returncode == 0, proc.stderr
    return str((result_line(proc.stdout) or {})["session_id"])


_LEASE_HOLDER = """
import anyio, os, sys
from config import load_config
from core.clock import SystemClock
from memory import leased
from memory.opening import open_store

class Rt:
    def __init__(self, store, clock):
        self.store, self.clock = store, clock

async def main():
    clock = SystemClock()
    store = await open_store(load_config(workspace=None, env=os.environ).settings, clock=clock)
    try:
        async with leased(Rt(store, clock), sys.argv[1]):
            print("held", flush=True)
            await anyio.sleep(float(sys.argv[2]))
    finally:
        await store.close()

anyio.run(main)
"""


@contextlib.contextmanager
def exclusively_locked(db: Path) -> Iterator[None]:
    """`db` locked by this process (EXCLUSIVE) for the block: another process's open of it waits on the lock, up to
    its busy timeout."""
    holder = sqlite3.connect(db, isolation_level=None)
    try:
        holder.execute("PRAGMA locking_mode = EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        yield
    finally:
        if holder.in_transaction:
            holder.rollback()
        holder.close()


def holds_open(pid: int, path: Path) -> bool:
    """Whether process `pid` has `path` open (Linux: its /proc fd links)."""
    fds = Path(f"/proc/{pid}/fd")
    try:
        return any(os.readlink(fds / fd) == str(path) for fd in os.listdir(fds))
    except OSError:
        return False


def hold_lease(cli: StrataCLI, session_id: str, seconds: float) -> subprocess.Popen[str]:
    """Another process holding the session's lease for `seconds` (as another decision, a reconcile or a probe holds
    it for a moment, or a running session for long), once it says it holds it."""
    holder = subprocess.Popen([sys.executable, "-c", _LEASE_HOLDER, session_id, str(seconds)], cwd=cli.cwd,
                              env=cli.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held", holder.communicate()
    return holder
