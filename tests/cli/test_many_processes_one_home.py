"""Several `strata` processes on one Strata home at once.

Each scenario uses real processes on one home. Where a race window is only microseconds wide, a helper process
(`_HELPER`, written beside the test) runs the real CLI or the real module with one *pause point*: a store method
that touches a "reached" file and waits for a "go" file before (or after) it runs. The interleaving is then
decided by the test, not by luck. A pause only widens a window the code already has; it changes no behaviour.

Passing tests document what holds. Fixed since it was first run: concurrent `strata trust` (a lock around the record),
a busy database at lease renewal (the heartbeat retries), a failed approve/resume restoring a stale status (the
status is derived from the state folded under the lease), reconcile racing a resume (reconciled under the
lease), a second contradicting decision (refused), log rotation by several processes at once (one rotation at a
time, under a lock, and a process reopens the log when another rotated it away)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memory.migrations import MIGRATIONS
from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import assert_clean_stderr, error_lines, json_lines, parallel, result_line, text, tool_use
from tests.conftest import StrataCLI, write_script

# The helper: `python HELPER MODE ARGS...` with MP_PATCHES (a JSON list) applied first.
_HELPER = r'''
import asyncio, datetime, json, os, sys, time
from pathlib import Path

def touch(path):
    Path(path).touch()

def wait_sync(path, timeout):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True

async def wait_async(path, timeout):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.005)
    return True

def pause(cls, name, reached, go, nth=1, after=False, timeout=15.0):
    original = getattr(cls, name)
    calls = [0]
    async def paused(self, *args, **kwargs):
        calls[0] += 1
        hit = calls[0] == nth
        if hit and not after:
            touch(reached)
            await wait_async(go, timeout)
        result = await original(self, *args, **kwargs)
        if hit and after:
            touch(reached)
            await wait_async(go, timeout)
        return result
    setattr(cls, name, paused)

for patch in json.loads(os.environ.get("MP_PATCHES", "[]")):
    kind = patch.pop("kind")
    if kind == "pause":
        from memory.sqlite_store import SqliteEventStore
        pause(SqliteEventStore, **patch)
    elif kind == "heartbeat":  # the lease heartbeat renews every TTL/3; make that fast
        import agent.session
        agent.session.LEASE_TTL = datetime.timedelta(seconds=patch["ttl_s"])
    elif kind == "lease_ttl":  # the lease this process records expires after ttl_s (memory.leases.new_holder)
        import memory.leases
        memory.leases.LEASE_TTL = datetime.timedelta(seconds=patch["ttl_s"])
    elif kind == "busy_timeout":  # how long a commit waits for another process's write lock (default 5 s)
        from memory.sqlite_store import SqliteEventStore
        opener = SqliteEventStore.open.__func__
        async def open_with(cls, path, *, busy_timeout_ms=5000, _ms=patch["ms"], _open=opener, **kw):
            return await _open(cls, path, busy_timeout_ms=_ms, **kw)
        SqliteEventStore.open = classmethod(open_with)
    elif kind == "trust_rendezvous":  # both `strata trust` processes have read the record before either writes
        import config.trust as trust
        read, write = trust._read, trust._write
        def read_then_say(home, _read=read, _mine=patch["mine"]):
            store = _read(home)
            touch(_mine)
            return store
        def wait_then_write(home, store, _write=write, _other=patch["other"]):
            wait_sync(_other, 3.0)
            return _write(home, store)
        trust._read, trust._write = read_then_say, wait_then_write
    elif kind == "start":  # imported, say "ready" (a file) and start only when GO appears
        import agent.cli.main
        touch(patch["ready"])
        wait_sync(patch["go"], 30)
    elif kind == "old_schema":
        import memory.migrations
        memory.migrations.MIGRATIONS = memory.migrations.MIGRATIONS[:patch["count"]]

mode, args = sys.argv[1], sys.argv[2:]
if mode == "cli":
    sys.argv = ["strata", *args]
    from agent.cli.main import main
    main()
elif mode == "open":  # a fresh process opening a home at the instant GO appears: masking key, then database
    home, go = Path(args[0]), args[1]
    from config.masking_key import load_masking_key
    from memory.sqlite_store import SqliteEventStore
    from core.errors import StrataError
    print("ready", flush=True)
    wait_sync(go, 30)
    key = load_masking_key(home)
    async def main():
        store = await SqliteEventStore.open(home / "strata.db")
        try:
            version = await store._run(lambda c: c.execute("PRAGMA user_version").fetchone()[0])
        finally:
            await store.close()
        return version
    try:
        print(json.dumps({"key": key.hex(), "version": asyncio.run(main())}), flush=True)
    except StrataError as err:
        print(json.dumps({"error": err.message}), flush=True)
        sys.exit(1)
elif mode == "seen":  # append values to masking.seen at the instant GO appears
    home, go, tag, count = Path(args[0]), args[1], args[2], int(args[3])
    from config.seen_secrets import SeenSecrets
    seen = SeenSecrets(home)
    print("ready", flush=True)
    wait_sync(go, 30)
    for i in range(count):
        seen.add(f"{tag}-{i}-" + "s" * (i * 997 % 20000))
elif mode == "log":  # a process logging to the home's rotating log; stdin lines say how many to log
    home, tag, max_bytes = Path(args[0]), args[1], int(args[2])
    import structlog
    from observability.logging import attach_home, configure_logging
    configure_logging(False)
    attach_home(home, max_bytes=max_bytes, backups=3)
    log = structlog.get_logger("review")
    count = 0
    print("ready", flush=True)
    for line in sys.stdin:
        if line.startswith("go "):
            wait_sync(line.split()[1], 30)
            continue
        for _ in range(int(line)):
            log.info("line", tag=tag, n=count, pad="x" * 100)
            count += 1
        print("logged", count, flush=True)
'''


@pytest.fixture
def helper(tmp_path: Path) -> Path:
    path = tmp_path / "mp_helper.py"
    path.write_text(_HELPER, encoding="utf-8")
    return path


def _popen(cli: StrataCLI, helper: Path, mode: str, *args: str, patches: list[dict[str, Any]] | None = None,
           stdin: bool = False) -> subprocess.Popen[str]:
    env = cli.env({"MP_PATCHES": json.dumps(patches or [])})
    return subprocess.Popen([sys.executable, str(helper), mode, *args], cwd=cli.cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL)


def _finish(proc: subprocess.Popen[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _wait_file(path: Path, proc: subprocess.Popen[str] | None = None, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc is not None and proc.poll() is not None:
            return False
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _ready(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        assert p.stdout is not None
        line = p.stdout.readline().strip()
        assert line == "ready", (line, _finish(p).stderr)


def _sessions(cli: StrataCLI) -> list[dict[str, Any]]:
    return json_lines_in_process(cli, "sessions", "--json")


@contextlib.contextmanager
def _killing(*procs: subprocess.Popen[str]) -> Iterator[None]:
    try:
        yield
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            with contextlib.suppress(Exception):
                p.communicate(timeout=10)  # reaps it and closes its pipes


def _kill_group_from(pid_file: Path) -> None:
    """A bash call runs in its own process group, which outlives a SIGKILLed runtime: end it by its id."""
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text().split()[0])
    with contextlib.suppress(OSError):
        if b"sleep" in Path(f"/proc/{pid}/cmdline").read_bytes():
            os.killpg(pid, signal.SIGKILL)


# -- a brand-new home ------------------------------------------------------------------------------------------

def test_many_runs_starting_together_on_a_brand_new_home(tmp_path: Path) -> None:
    """Eight `strata run` at once on a home that does not exist yet: every run completes, the data directory,
    database (migrated once), masking key, ledgers and log are created once and shared; every process masked
    with the same key (the same secret in every prompt gives the same fingerprint in every title)."""
    home = tmp_path / "new" / "home"
    cli = StrataCLI(home, tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path / "s.json", [[tool_use("c1", "bash", command="echo hi")], [text("done")]])
    procs = [cli.popen("run", "--model", f"script:{script}", "--workspace", str(ws), "--allow", "bash", "--json",
                       "deploy with password=correct-horse-battery-staple") for _ in range(8)]
    done = [_finish(p) for p in procs]
    for proc in done:
        assert_clean_stderr(proc)
        assert proc.returncode == 0, proc.stderr
    rows = _sessions(cli)
    assert sorted(r["id"] for r in rows) == sorted(result_line(p.stdout)["session_id"] for p in done)  # type: ignore[index]
    titles = {r["title"] for r in rows}
    assert len(titles) == 1 and "[MASKED:" in next(iter(titles)), titles
    names = sorted(p.name for p in home.iterdir() if p.name not in ("strata.db-wal", "strata.db-shm"))
    assert names == ["chain.key", "ledger", "locks", "logs", "masking.key", "strata.db"]  # no temporary key file
    with closing(sqlite3.connect(home / "strata.db")) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY name")] == [
            name for name, _ in MIGRATIONS]
    ledgers = sorted((home / "ledger").glob("*.jsonl"))
    assert len(ledgers) == 8 and len(list((home / "ledger").glob("*.heads"))) == 8
    for ledger in ledgers:
        rows_ = json_lines(ledger.read_text())
        assert rows_ and all(r["session_id"] in ledger.name for r in rows_)
    assert all(json.loads(line) for line in (home / "logs" / "strata.log").read_text().splitlines())


def test_processes_opening_a_new_home_at_the_same_instant(cli: StrataCLI, helper: Path, tmp_path: Path) -> None:
    """Ten processes, already started, create the masking key and the database of an empty home at the same
    instant: one key for all, the schema migrated exactly once, no error and no temporary file left."""
    home = tmp_path / "instant" / "home"
    go = tmp_path / "go"
    procs = [_popen(cli, helper, "open", str(home), str(go)) for _ in range(10)]
    with _killing(*procs):
        _ready(procs)
        go.touch()
        done = [_finish(p) for p in procs]
    for proc in done:
        assert proc.returncode == 0 and not proc.stderr.strip(), (proc.stdout, proc.stderr)
    outs = [json.loads(p.stdout) for p in done]
    assert len({o["key"] for o in outs}) == 1 and {o["version"] for o in outs} == {len(MIGRATIONS)}
    assert (home / "masking.key").read_text().strip() == outs[0]["key"]
    assert sorted(p.name for p in home.iterdir() if not p.name.startswith("strata.db")) == ["chain.key",
                                                                                             "masking.key"]
    with closing(sqlite3.connect(home / "strata.db")) as conn:
        assert conn.execute("SELECT COUNT(*) FROM schema_migrations").fetchone() == (len(MIGRATIONS),)
        assert len(conn.execute("SELECT key_id FROM chain_key").fetchall()) == 1


def test_migration_004_racing_in_several_processes(cli: StrataCLI, helper: Path, tmp_path: Path) -> None:
    """A database at schema 3 (made by a process that knows only the first three migrations) holding a session,
    opened by eight processes at once: migration 004 (and every later one) runs once, every process ends at the
    latest version, no event is lost and the append-only triggers are back."""
    home = tmp_path / "old" / "home"
    first_go = tmp_path / "go0"
    first_go.touch()
    made = _finish(_popen(cli, helper, "open", str(home), str(first_go),
                          patches=[{"kind": "old_schema", "count": 3}]))
    assert made.returncode == 0 and json.loads(made.stdout.split("\n", 1)[1])["version"] == 3, made
    with closing(sqlite3.connect(home / "strata.db")) as conn:
        conn.execute("INSERT INTO sessions(num, id, created_at, updated_at, mode, workspace, model, status) "
                     "VALUES (1, 's1', 't', 't', 'headless', '/w', 'm', 'idle')")
        conn.executemany("INSERT INTO events(key, seq, kind, at, turn, payload, schema_version) "
                         "VALUES (?, ?, 'x', 't', 0, ?, 1)", [((1 << 40) | i, i, "p" * 300) for i in range(1, 3001)])
        conn.commit()
    go = tmp_path / "go"
    procs = [_popen(cli, helper, "open", str(home), str(go)) for _ in range(8)]
    with _killing(*procs):
        _ready(procs)
        go.touch()
        done = [_finish(p) for p in procs]
    for proc in done:
        assert proc.returncode == 0 and not proc.stderr.strip(), (proc.stdout, proc.stderr)
        assert json.loads(proc.stdout)["version"] == len(MIGRATIONS)
    with closing(sqlite3.connect(home / "strata.db")) as conn:
        assert conn.execute("SELECT COUNT(*), MIN(seq), MAX(seq) FROM events").fetchone() == (3000, 1, 3000)
        assert [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY name")] == [
            name for name, _ in MIGRATIONS]
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute("DELETE FROM events")


# -- `strata trust` ------------------------------------------------------------------------------------------

def _project(root: Path, name: str) -> Path:
    project = root / name
    (project / ".strata").mkdir(parents=True)
    (project / ".strata" / "config.toml").write_text("max_turns = 5\n", encoding="utf-8")
    return project


def test_two_trusts_at_once_keep_both_records(cli: StrataCLI, helper: Path, tmp_path: Path) -> None:
    """Two `strata trust` of different projects at the same time: both say "trusted", so both must be recorded.
    Both start at one instant, and each waits (at most 3 s) for the other to have read the record before it writes,
    so both read before either writes; a version that serialises the read-modify-write passes too."""
    a, b = _project(tmp_path, "a"), _project(tmp_path, "b")
    said_a, said_b, go = tmp_path / "read-a", tmp_path / "read-b", tmp_path / "go"
    procs = [_popen(cli, helper, "cli", "trust", str(project),
                    patches=[{"kind": "trust_rendezvous", "mine": str(mine), "other": str(other)},
                             {"kind": "start", "ready": str(tmp_path / f"ready-{project.name}"), "go": str(go)}])
             for project, mine, other in ((a, said_a, said_b), (b, said_b, said_a))]
    with _killing(*procs):
        for project, proc in zip((a, b), procs, strict=True):
            assert _wait_file(tmp_path / f"ready-{project.name}", proc), _finish(proc)
        go.touch()
        done = [_finish(p) for p in procs]
    for proc in done:
        assert proc.returncode == 0 and proc.stdout.startswith("trusted "), proc.stderr
    stored = json.loads((cli.home / "trusted_projects.json").read_text())["projects"]
    assert sorted(stored) == sorted(str(p / ".strata" / "config.toml") for p in (a, b))


# -- files appended by several processes -------------------------------------------------------------------------

def test_masking_seen_appended_by_four_processes_at_once(cli: StrataCLI, helper: Path, tmp_path: Path) -> None:
    """Four processes append 40 values each (up to 20 KB, larger than a stdio buffer) to masking.seen at the same
    instant: every line is one whole JSON string, none is lost, and the file stays 0600."""
    go = tmp_path / "go"
    procs = [_popen(cli, helper, "seen", str(cli.home), str(go), f"p{k}", "40") for k in range(4)]
    with _killing(*procs):
        _ready(procs)
        go.touch()
        done = [_finish(p) for p in procs]
    assert all(p.returncode == 0 and not p.stderr for p in done), [p.stderr for p in done]
    path = cli.home / "masking.seen"
    lines = path.read_text("utf-8").splitlines()
    values = [json.loads(line) for line in lines]  # a torn or interleaved line would not parse
    expected = {f"p{k}-{i}-" + "s" * (i * 997 % 20000) for k in range(4) for i in range(40)}
    assert len(values) == len(expected) and set(values) == expected
    assert path.stat().st_mode & 0o777 == 0o600


def _log_lines(home: Path) -> list[dict[str, Any]]:
    rows = []
    for f in sorted((home / "logs").iterdir()):
        rows += [json.loads(line) for line in f.read_text("utf-8").splitlines()]
    return [r for r in rows if r.get("event") == "line"]


def _say(proc: subprocess.Popen[str], line: str) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    if not line.startswith("go "):
        answer = proc.stdout.readline()
        assert answer.startswith("logged"), (answer, _finish(proc).stderr)


def test_newest_log_line_of_a_long_lived_process_survives_others_rotating(cli: StrataCLI, helper: Path) -> None:
    """Two processes open the log. The long-lived one (a chat, say) logs enough to rotate it once, and goes on
    writing a few lines to the new strata.log. The other then logs enough for four rotations (its first rotation
    renames the chat's current file away), and the chat logs one more line: the newest line in the home, which
    must be somewhere in the logs."""
    max_bytes = 20_000
    chat = _popen(cli, helper, "log", str(cli.home), "chat", str(max_bytes), stdin=True)
    other = _popen(cli, helper, "log", str(cli.home), "other", str(max_bytes), stdin=True)
    with _killing(chat, other):
        _ready([chat, other])
        _say(chat, "100")  # one rotation at ~87 lines, then ~13 lines in the new strata.log
        _say(other, "450")  # about five files of 20 KB: four rotations
        _say(chat, "1")
        done = [_finish(p) for p in (chat, other)]
    assert all(p.returncode == 0 and not p.stderr for p in done), [p.stderr for p in done]
    lines = _log_lines(cli.home)
    assert ("other", 449) in {(r["tag"], r["n"]) for r in lines}
    assert ("chat", 100) in {(r["tag"], r["n"]) for r in lines}


def test_processes_rotating_the_log_together_keep_logging_to_the_file(cli: StrataCLI, helper: Path,
                                                                      tmp_path: Path) -> None:
    """Four processes log 300 lines each at the same instant to a log that rotates every 3 KB, then one more line
    each: none of them gives up on the file (its stderr stays empty), each one's last line is in the logs, and
    the lines the rotation kept of each process are an unbroken run up to its newest (none lost in between)."""
    go = tmp_path / "go"
    procs = [_popen(cli, helper, "log", str(cli.home), f"p{k}", "3000", stdin=True) for k in range(4)]
    with _killing(*procs):
        _ready(procs)
        for p in procs:
            assert p.stdin is not None
            p.stdin.write(f"go {go}\n300\n")
            p.stdin.flush()
        go.touch()
        for p in procs:
            assert p.stdout is not None
            assert p.stdout.readline().startswith("logged 300")
        for p in procs:  # after the burst, whoever finished first: a line the rotations cannot have dropped yet
            _say(p, "1")
        done = [_finish(p) for p in procs]
    assert [p.stderr for p in done] == [""] * 4
    kept: dict[str, set[int]] = {}
    for r in _log_lines(cli.home):
        kept.setdefault(r["tag"], set()).add(r["n"])
    for k in range(4):
        lines = kept.get(f"p{k}", set())
        assert 300 in lines, (k, sorted(lines)[-5:])
        assert lines == set(range(min(lines), 301)), (k, sorted(set(range(min(lines), 301)) - lines))


# -- resource locks and leases -------------------------------------------------------------------------------------

def _flock_free(lock_dir: Path) -> bool:
    import fcntl

    files = list(lock_dir.iterdir())
    assert files, "no lock file"
    for path in files:
        fd = os.open(path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        finally:
            os.close(fd)
    return True


def test_sigkill_while_holding_a_resource_lock_releases_it(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """A run is SIGKILLed while its bash call holds the workspace's shell lock: the flock goes with the process
    (the command's own process group, which outlives it, never had the descriptor). The orphaned command itself
    holds the key while it runs (tests/cli/test_orphans.py); once it is ended, the next run on the same workspace
    is not blocked for `lock_timeout_s` by the dead process and runs at once. The lock file stays, as designed."""
    log = workspace / "shared.log"
    a = write_script(tmp_path / "a.json", [
        [tool_use("a1", "bash", command=f"echo $$ > a.pid; echo A1 >> {log}; exec sleep 30")], [text("a done")]])
    b = write_script(tmp_path / "b.json", [[tool_use("b1", "bash", command=f"echo B1 >> {log}")], [text("b done")]])
    first = cli.popen("run", "--model", f"script:{a}", "--workspace", str(workspace), "--allow", "bash", "a")
    try:
        with _killing(first):
            deadline = time.monotonic() + 30
            while not (log.exists() and log.read_text().startswith("A1")):
                assert first.poll() is None and time.monotonic() < deadline, _finish(first).stderr
                time.sleep(0.02)
            assert not _flock_free(cli.home / "locks")  # held while the runtime lives
            first.send_signal(signal.SIGKILL)
            assert _finish(first, 10).returncode == -signal.SIGKILL
        assert _flock_free(cli.home / "locks")
        _kill_group_from(workspace / "a.pid")  # the orphan is ended, as a person (or --kill-orphans) would
        started = time.monotonic()
        second = cli.run("run", "--model", f"script:{b}", "--workspace", str(workspace), "--allow", "bash", "--json",
                         "b")
        elapsed = time.monotonic() - started
    finally:
        _kill_group_from(workspace / "a.pid")
    assert second.returncode == 0, second.stderr
    assert elapsed < 10, f"the second run waited {elapsed:.1f} s for a dead process's lock"
    assert log.read_text().split() == ["A1", "B1"]
    assert len(list((cli.home / "locks").iterdir())) == 1


_UNTIL_RELEASED = "while [ ! -e release ] && [ $SECONDS -lt 300 ]; do sleep 0.05; done; echo released"
"""A command that runs until the test touches `release` in the workspace."""


def _completed_session(cli: StrataCLI, workspace: Path, tmp_path: Path, second_turn: list[dict[str, Any]]) -> str:
    """A completed headless session whose next turn (the first resume with a prompt) is `second_turn`."""
    script = write_script(tmp_path / "script.json", [[text("ready")], second_turn, [text("finished")]])
    proc = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "bash", "--json",
                   "start")
    assert proc.returncode == 0, proc.stderr
    summary = result_line(proc.stdout)
    assert summary is not None
    return str(summary["session_id"])


def _lease_expires(home: Path, session_id: str) -> str | None:
    with closing(sqlite3.connect(home / "strata.db", timeout=10)) as conn:
        row = conn.execute("SELECT lease_expires FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return None if row is None else row[0]


def _wait_dispatched(home: Path, call_id: str, proc: subprocess.Popen[str], timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, _finish(proc)
        with closing(sqlite3.connect(home / "strata.db", timeout=10)) as conn:
            row = conn.execute("SELECT id FROM receipts WHERE call_id = ? AND status = 'dispatched'",
                               (call_id,)).fetchone()
        if row is not None:
            return str(row[0])
        time.sleep(0.05)
    raise AssertionError(f"no dispatched receipt for {call_id}")


def test_an_expired_lease_of_a_live_owner_is_not_taken(cli: StrataCLI, helper: Path, workspace: Path,
                                                       tmp_path: Path) -> None:
    """The owner runs a long bash call (until the test releases it) and its lease has expired unrenewed (TTL cut
    to 0.5 s, heartbeat never due): on the same host the owner's pid decides, so a second `strata resume` is refused
    as active and `strata reconcile` refuses the in-flight receipt; the owner then finishes normally."""
    sid = _completed_session(cli, workspace, tmp_path,
                             [tool_use("long", "bash", command=_UNTIL_RELEASED)])
    owner = _popen(cli, helper, "cli", "resume", sid, "go", "--json",
                   patches=[{"kind": "lease_ttl", "ttl_s": 0.5}, {"kind": "heartbeat", "ttl_s": 3600}])
    try:
        with _killing(owner):
            receipt = _wait_dispatched(cli.home, "long", owner)
            time.sleep(0.6)
            expires = _lease_expires(cli.home, sid)
            assert expires is not None and expires < datetime.now(UTC).isoformat()  # expired, owner alive
            # Both at once: each waits out SHORT_LEASE_S for the owner's lease before it refuses, and neither
            # takes the lease (one after the other they waited it out twice).
            second, refused = parallel(lambda args: cli.run(*args),
                                       [("resume", sid, "me too"), ("reconcile", receipt, "--not-applied")])
            assert owner.poll() is None  # the owner ran all along: both were refused by a live owner
            (workspace / "release").touch()
            done = _finish(owner)
    finally:
        (workspace / "release").touch()  # the command's loop ends even if the test failed
    assert second.returncode == 1 and "is active" in error_lines(second.stderr)[0], second.stderr
    assert refused.returncode == 1 and "running now" in refused.stderr, refused.stderr
    assert done.returncode == 0, done.stderr
    (row,) = json_lines_in_process(cli, "receipts", sid, "--json")
    assert row["status"] == "done"


def test_a_busy_database_at_lease_renewal_does_not_kill_the_run(cli: StrataCLI, helper: Path, workspace: Path,
                                                                 tmp_path: Path) -> None:
    """Scaled down in time (lease TTL 3 s so the heartbeat renews every second, busy timeout 0.3 s instead of 5):
    while a bash call runs (until the test releases it), another process holds the database's write lock for
    1.5 s, so at least one renewal waits out the busy timeout. The lease is still valid for seconds: the run should
    go on and complete."""
    script = write_script(tmp_path / "s.json", [
        [tool_use("slow", "bash", command=f"touch started; {_UNTIL_RELEASED}")], [text("done")]])
    run = _popen(cli, helper, "cli", "run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow",
                 "bash", "--json", "go",
                 patches=[{"kind": "heartbeat", "ttl_s": 3}, {"kind": "busy_timeout", "ms": 300}])
    try:
        with _killing(run):
            assert _wait_file(workspace / "started", run), _finish(run)
            with closing(sqlite3.connect(cli.home / "strata.db", isolation_level=None, timeout=10)) as conn:
                conn.execute("BEGIN IMMEDIATE")
                time.sleep(1.5)
                conn.execute("ROLLBACK")
            (workspace / "release").touch()
            done = _finish(run)
    finally:
        (workspace / "release").touch()  # the command's loop ends even if the test failed
    assert "internal error" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    summary = result_line(done.stdout)
    assert summary is not None
    (row,) = json_lines_in_process(cli, "receipts", summary["session_id"], "--json")
    assert row["status"] == "done"


# -- approve / reconcile racing resume --------------------------------------------------------------------------

def _parked_session(cli: StrataCLI, workspace: Path, tmp_path: Path) -> str:
    script = write_script(tmp_path / "park.json", [
        [tool_use("w", "write_file", path="out.txt", content="hello\n")], [text("done")]])
    proc = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--on-ask", "park", "--json",
                   "go")
    assert proc.returncode == 4, proc.stderr
    summary = result_line(proc.stdout)
    assert summary is not None
    return str(summary["session_id"])


def _status(cli: StrataCLI, session_id: str) -> str:
    (row,) = [r for r in _sessions(cli) if r["id"] == session_id]
    return str(row["status"])


def test_approve_losing_to_a_resume_leaves_the_status_the_resume_set(cli: StrataCLI, helper: Path, workspace: Path,
                                                                      tmp_path: Path) -> None:
    """`strata approve` reads the session (awaiting approval) and, before it takes the lease, `strata resume
    --on-ask deny` denies the parked call and completes the session. The approve is then refused (the call no
    longer waits), and must leave the session completed."""
    sid = _parked_session(cli, workspace, tmp_path)
    reached, go = tmp_path / "approve-reached", tmp_path / "approve-go"
    approve = _popen(cli, helper, "cli", "approve", sid, "w",
                     patches=[{"kind": "pause", "name": "acquire_lease", "reached": str(reached), "go": str(go)}])
    with _killing(approve):
        assert _wait_file(reached, approve), _finish(approve)
        resumed = cli.run("resume", sid, "--on-ask", "deny", "--json")
        assert resumed.returncode == 0, resumed.stderr
        assert _status(cli, sid) == "completed"
        go.touch()
        refused = _finish(approve)
    assert refused.returncode != 0 and "is not waiting for approval" in refused.stderr, refused
    assert_clean_stderr(refused)
    assert not (workspace / "out.txt").exists()
    assert _status(cli, sid) == "completed"


def test_reconcile_racing_a_resume_of_the_crashed_session(cli: StrataCLI, helper: Path, workspace: Path,
                                                           tmp_path: Path) -> None:
    """A crash leaves a dispatched receipt. `strata reconcile R --applied` checks the owner is dead; `strata
    resume` then takes the lease and lists the receipts (dispatched); the reconcile writes `done`; the resume
    commits. Correct: the resume is either refused up front ("is active") or finishes the session settled from
    the reconciled receipt, never fails on a receipt state error; the receipt ends `done`."""
    script = write_script(tmp_path / "crash.json", [
        [tool_use("eff", "bash", command="echo effect >> effects.log")], [text("done")]])
    crashed = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "bash",
                      "--json", "go", env={"STRATA_FAULT": "after_receipt"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    (row,) = json_lines_in_process(cli, "receipts", "--json")
    assert row["status"] == "dispatched"
    sid, receipt = row["session_id"], row["id"]
    r_reached, r_go = tmp_path / "reconcile-reached", tmp_path / "reconcile-go"
    s_reached, s_go = tmp_path / "resume-reached", tmp_path / "resume-go"
    reconcile = _popen(cli, helper, "cli", "reconcile", receipt, "--applied", "--note", "seen in effects.log",
                       patches=[{"kind": "pause", "name": "commit", "reached": str(r_reached),
                                 "go": str(r_go)}])
    with _killing(reconcile):
        assert _wait_file(r_reached, reconcile), _finish(reconcile)  # it found the owner dead; now it waits
        resume = _popen(cli, helper, "cli", "resume", sid, "--json",
                        patches=[{"kind": "pause", "name": "list_receipts", "reached": str(s_reached),
                                  "go": str(s_go), "after": True}])
        with _killing(resume):
            _wait_file(s_reached, resume, timeout=10)  # a resume refused as active never gets here
            r_go.touch()
            decided = _finish(reconcile)
            s_go.touch()
            resumed = _finish(resume)
    assert_clean_stderr(decided, resumed)
    assert "not in the expected state" not in resumed.stderr, resumed.stderr
    assert resumed.returncode in (0, 5) or "is active" in resumed.stderr, resumed.stderr
    (after,) = json_lines_in_process(cli, "receipts", "--json")
    assert after["status"] == "done"
    assert not (workspace / "effects.log").exists()  # killed before its handler started, and never re-run


def test_a_second_contradicting_decision_on_one_call_is_refused(cli: StrataCLI, workspace: Path,
                                                                 tmp_path: Path) -> None:
    """Deny then approve of the same parked call, from two terminals (the deterministic order of the two racing):
    the approve must be refused, naming the standing denial, and the resume must not run the call."""
    sid = _parked_session(cli, workspace, tmp_path)
    denied = cli.run("deny", sid, "w", "--reason", "not this file")
    assert denied.returncode == 0 and "denied call w" in denied.stdout, denied.stderr
    approved = cli.run("approve", sid, "w")
    resumed = cli.run("resume", sid, "--json")
    assert_clean_stderr(approved, resumed)
    assert not (workspace / "out.txt").exists(), "the denied call ran"
    assert approved.returncode != 0, approved.stdout


def test_two_reconciles_of_one_receipt_at_once_one_wins(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """Two people reconcile the same crashed call at the same moment with opposite verdicts: exactly one is
    recorded, the other is told plainly that the receipt is no longer undecided."""
    script = write_script(tmp_path / "crash.json", [
        [tool_use("eff", "bash", command="echo effect >> effects.log")], [text("done")]])
    crashed = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "bash",
                      "--json", "go", env={"STRATA_FAULT": "after_receipt"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    (row,) = json_lines_in_process(cli, "receipts", "--json")
    procs = [cli.popen("reconcile", row["id"], verdict) for verdict in ("--applied", "--not-applied")]
    with _killing(*procs):
        done = [_finish(p) for p in procs]
    assert_clean_stderr(*done)
    assert sorted(p.returncode for p in done) == [0, 1], [(p.returncode, p.stderr) for p in done]
    (winner,) = [p for p in done if p.returncode == 0]
    (loser,) = [p for p in done if p.returncode == 1]
    (line,) = error_lines(loser.stderr)
    said = "applied" if "--applied" in winner.args else "not applied"  # what was decided, and by whom:
    assert f"receipt {row['id']} was already reconciled as {said} by person:" in line, line
    (after,) = json_lines_in_process(cli, "receipts", "--json")
    assert after["status"] == ("done" if "--applied" in winner.args else "failed")
