"""`strata timeline ID` with real processes: the `--json` shape and its hash chain, the filters, the table,
`--verify` (ok, and naming a row edited or deleted in the database file), `--follow` of a live session, and
one-line errors. The session is made by `strata run`; its timeline rows are seeded through the store, in the
same commits a runtime would make, with tools and kinds no runtime emits (so rows the executor writes, if any,
do not disturb the assertions)."""

from __future__ import annotations

import hashlib
import hmac
import os
import queue
import shutil
import socket
import sqlite3
import subprocess
import threading
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from core.clock import SystemClock
from core.hashing import canonical_json
from core.timeline import TimelineEntry
from memory import LeaseHolder, SqliteEventStore, Write
from memory.leases import process_start
from tests.cli._helpers import error_lines, events_of, json_lines, parallel, strata, strata_json, text, tool_use
from tests.conftest import StrataCLI, write_script

SEED: list[list[TimelineEntry]] = [
    [TimelineEntry(kind="seed_probe", turn=90, summary="probe one"),
     TimelineEntry(kind="seed_call", turn=90, call_id="seed-1", tool="t_alpha", decision="allowed", check="policy",
                   outcome="ok", duration_ms=3.25, summary="alpha ran", data={"args_sha256": "aa", "n": 1})],
    [TimelineEntry(kind="seed_call", turn=91, call_id="seed-2", tool="t_alpha", decision="denied",
                   check="rule deny t_alpha(rm*)", outcome="denied", summary="alpha denied [MASKED:key:0f3a]"),
     TimelineEntry(kind="seed_call", turn=91, call_id="seed-3", tool="t_beta", decision="denied", check="schema",
                   outcome="denied", summary="beta denied"),
     TimelineEntry(kind="seed_approval", turn=91, call_id="seed-4", tool="t_beta", decision="approved",
                   check="alice", summary="approved by alice")],
    [TimelineEntry(kind="seed_probe", turn=92, summary="probe two", data={"nested": {"list": [1, 2]}})],
]
JSON_KEYS = {"session_id", "seq", "at", "turn", "kind", "call_id", "tool", "decision", "check", "outcome",
             "duration_ms", "summary", "data", "prev_hash", "hash"}


@dataclass
class Seeded:
    cli: StrataCLI
    session_id: str
    seqs: dict[str, int]
    """call id or summary of each seeded row -> its seq"""
    times: list[datetime]
    """commit time of each seeded Write"""


def db(home: Path) -> Path:
    return home / "strata.db"


def seed(home: Path, session_id: str, writes: list[list[TimelineEntry]]) -> list[datetime]:
    """Commit timeline rows into the Strata home's database, one Write per list, as a runtime would."""
    async def main() -> list[datetime]:
        store = await SqliteEventStore.open(db(home))
        try:
            times = []
            for entries in writes:
                await store.commit(session_id, Write(timeline=entries))
                times.append((await store.read_timeline(session_id))[-1].at)
            return times
        finally:
            await store.close()

    return anyio.run(main)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    base = tmp_path_factory.mktemp("timeline")
    cli = StrataCLI(base / "home", base)
    ws = base / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("hello\n")
    script = write_script(base / "script.json", [[tool_use("rd", "read_file", path="notes.txt")], [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(ws), "--json", "read the notes")
    assert run.returncode == 0, run.stderr
    session_id = events_of(run.stdout)[0]["session_id"]
    times = seed(cli.home, session_id, SEED)
    rows = strata_json(cli, "timeline", session_id, "--json")
    seqs = {r["call_id"] or r["summary"]: r["seq"] for r in rows if r["kind"].startswith("seed_")}
    return Seeded(cli, session_id, seqs, times)


def timeline_json(s: Seeded, *args: str) -> list[dict[str, Any]]:
    return strata_json(s.cli, "timeline", s.session_id, "--json", *args)


def ids(rows: list[dict[str, Any]]) -> list[str]:
    return [r["call_id"] or r["summary"] for r in rows]


def tampered_copy(s: Seeded, tmp_path: Path, *statements: str) -> StrataCLI:
    """A copy of the Strata home whose database was edited with sqlite3, append-only triggers dropped first."""
    home = tmp_path / "tampered"
    shutil.copytree(s.cli.home, home)
    with closing(sqlite3.connect(db(home), isolation_level=None)) as conn:
        conn.execute("DROP TRIGGER timeline_no_update")
        conn.execute("DROP TRIGGER timeline_no_delete")
        for statement in statements:
            conn.execute(statement)
    return StrataCLI(home, tmp_path)


def test_json_is_one_row_per_line_with_a_recomputable_chain(seeded: Seeded) -> None:
    """`--json` prints every row, seq 1..n, with the chain fields; each hash is HMAC-SHA256(the home's chain key,
    prev_hash || canonical JSON of the line without "hash") and each prev_hash is the hash of the line before."""
    key = bytes.fromhex((seeded.cli.home / "chain.key").read_text().strip())
    rows = timeline_json(seeded)
    assert [r["seq"] for r in rows] == list(range(1, len(rows) + 1))
    assert all(set(r) >= JSON_KEYS for r in rows)
    assert all(r["session_id"] == seeded.session_id for r in rows)
    prev = "0" * 64
    for r in rows:
        assert r["prev_hash"] == prev
        body = {k: v for k, v in r.items() if k != "hash"}
        assert r["hash"] == hmac.new(key, (prev + canonical_json(body)).encode(), hashlib.sha256).hexdigest()
        prev = r["hash"]
    (alpha,) = [r for r in rows if r["call_id"] == "seed-1"]
    assert {k: alpha[k] for k in ("kind", "turn", "tool", "decision", "check", "outcome", "duration_ms", "summary",
                                  "data")} == {
        "kind": "seed_call", "turn": 90, "tool": "t_alpha", "decision": "allowed", "check": "policy",
        "outcome": "ok", "duration_ms": 3.25, "summary": "alpha ran", "data": {"args_sha256": "aa", "n": 1}}
    assert datetime.fromisoformat(alpha["at"]) == seeded.times[0]


def test_filters_combine(seeded: Seeded) -> None:
    """--kind, --tool, --decision (each repeatable), --turn and --since (seq or ISO time) narrow the rows (AND)."""
    s = seeded
    since = s.times[1].astimezone(UTC).replace(tzinfo=None).isoformat()  # no offset: read as UTC
    later = (s.times[2] + timedelta(hours=1)).isoformat()
    cases: list[tuple[list[str], list[str]]] = [
        (["--tool", "t_alpha"], ["seed-1", "seed-2"]),
        (["--tool", "t_alpha", "--tool", "t_beta"], ["seed-1", "seed-2", "seed-3", "seed-4"]),
        (["--tool", "t_alpha", "--decision", "denied"], ["seed-2"]),
        (["--decision", "denied", "--decision", "approved", "--kind", "seed_call", "--kind", "seed_approval"],
         ["seed-2", "seed-3", "seed-4"]),
        (["--kind", "seed_probe"], ["probe one", "probe two"]),
        (["--turn", "91"], ["seed-2", "seed-3", "seed-4"]),
        (["--kind", "seed_call", "--since", str(s.seqs["seed-2"])], ["seed-2", "seed-3"]),
        (["--tool", "t_beta", "--since", since], ["seed-3", "seed-4"]),
        (["--since", later], []),
    ]
    got = parallel(lambda case: ids(timeline_json(s, *case[0])), cases, workers=2)
    assert got == [expected for _, expected in cases]


def test_table_lists_rows_readably(seeded: Seeded) -> None:
    """Without --json the rows are a table with the documented columns; summaries print literally."""
    proc = strata(seeded.cli, "timeline", seeded.session_id, "--tool", "t_alpha")
    assert proc.returncode == 0, proc.stderr
    header = next(line for line in proc.stdout.splitlines() if "seq" in line)
    for column in ("seq", "time", "turn", "kind", "tool", "decision", "outcome", "duration", "summary"):
        assert column in header
    (denied,) = [line for line in proc.stdout.splitlines() if "alpha denied" in line]
    assert "[MASKED:key:0f3a]" in denied and " denied " in denied
    assert any("3.2ms" in line and "alpha ran" in line for line in proc.stdout.splitlines())
    empty = strata(seeded.cli, "timeline", seeded.session_id, "--tool", "nothing")
    assert (empty.returncode, empty.stdout.strip()) == (0, "no timeline rows match")


def test_verify_of_an_untouched_timeline_exits_0(seeded: Seeded) -> None:
    """--verify recomputes the chain and says how many rows it checked."""
    proc = strata(seeded.cli, "timeline", seeded.session_id, "--verify")
    n = len(timeline_json(seeded))
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout.startswith(f"chain verified: {n} rows")


def test_verify_names_a_row_edited_in_the_database(seeded: Seeded, tmp_path: Path) -> None:
    """A summary changed with sqlite3 (triggers dropped) makes --verify exit 1 naming that row."""
    seq = seeded.seqs["seed-2"]
    cli = tampered_copy(seeded, tmp_path, f"UPDATE timeline SET summary = 'nothing to see' "
                                          f"WHERE key & 1099511627775 = {seq}")
    proc = strata(cli, "timeline", seeded.session_id, "--verify")
    assert proc.returncode == 1
    assert "chain verified" not in proc.stdout
    (line,) = error_lines(proc.stderr)
    assert line == f"strata: error: timeline of session {seeded.session_id}: row {seq} was changed (hash mismatch)"
    (checked,) = json_lines(strata(cli, "timeline", seeded.session_id, "--verify", "--json").stdout)
    first = {k: checked[k] for k in ("session_id", "ok", "rows", "first_bad_seq", "reason", "head")}
    assert first == {"session_id": seeded.session_id, "ok": False, "rows": seq, "first_bad_seq": seq,
                     "reason": f"row {seq} was changed (hash mismatch)", "head": checked["head"]}


def test_verify_names_a_row_deleted_from_the_database(seeded: Seeded, tmp_path: Path) -> None:
    """A row deleted with sqlite3 makes --verify exit 1 saying that row is missing."""
    seq = seeded.seqs["seed-3"]
    cli = tampered_copy(seeded, tmp_path, f"DELETE FROM timeline WHERE key & 1099511627775 = {seq}")
    proc = strata(cli, "timeline", seeded.session_id, "--verify")
    assert proc.returncode == 1
    (line,) = error_lines(proc.stderr)
    assert line == f"strata: error: timeline of session {seeded.session_id}: row {seq} is missing"


def test_unknown_session_and_bad_usage_are_one_line(seeded: Seeded) -> None:
    """An unknown id exits 1 with one error line; a bad --decision, --since or flag mix is a usage error (2)."""
    proc = strata(seeded.cli, "timeline", "no-such-session", "--json")
    assert (proc.returncode, proc.stdout) == (1, "")
    (line,) = error_lines(proc.stderr)
    assert "no-such-session" in line
    for args in (["--decision", "maybe"], ["--since", "last tuesday"], ["--verify", "--tool", "t_alpha"],
                 ["--verify", "--follow"]):
        bad = strata(seeded.cli, "timeline", seeded.session_id, *args)
        assert bad.returncode == 2, (args, bad.stderr)
        assert bad.stdout == ""


def test_follow_of_a_finished_session_prints_its_rows_and_exits(seeded: Seeded) -> None:
    """--follow of a session no process drives prints what is stored and ends (exit 0)."""
    assert timeline_json(seeded, "--follow", "--tool", "t_beta") == timeline_json(seeded, "--tool", "t_beta")


def _lines(proc: subprocess.Popen[str]) -> tuple[queue.Queue[str | None], threading.Thread]:
    """The process's stdout lines as they come (None at the end), read by a thread."""
    out: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.put(line)
        out.put(None)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    return out, reader


def test_follow_tails_a_live_session_until_it_is_released(seeded: Seeded, tmp_path: Path) -> None:
    """While a live process holds the session, --follow keeps printing rows as they are committed; when the
    holder releases the session it prints the last rows and exits 0."""
    home = tmp_path / "live"
    shutil.copytree(seeded.cli.home, home)
    cli = StrataCLI(home, tmp_path)
    sid = seeded.session_id
    pid = os.getpid()
    me = LeaseHolder(token="test-holder", pid=pid, host=socket.gethostname(), proc_start=process_start(pid),
                     expires_at=SystemClock().now() + timedelta(minutes=5))

    async def lease(action: str) -> None:
        store = await SqliteEventStore.open(db(home))
        try:
            if action == "take":
                await store.acquire_lease(sid, me, lambda _: False, SystemClock().now())
            else:
                await store.release_lease(sid, me.token, "completed")
        finally:
            await store.close()

    anyio.run(lease, "take")
    proc = cli.popen("timeline", sid, "--follow", "--json", "--kind", "seed_live")
    lines, reader = _lines(proc)
    try:
        seed(home, sid, [[TimelineEntry(kind="seed_live", summary="first")]])
        first = lines.get(timeout=30)
        assert first is not None and '"first"' in first, first
        assert proc.poll() is None, "follow ended while the session was still driven"
        seed(home, sid, [[TimelineEntry(kind="seed_live", summary="second")],
                         [TimelineEntry(kind="seed_live", summary="third")]])
        anyio.run(lease, "release")
        assert proc.wait(timeout=30) == 0
        rest = []
        while (line := lines.get(timeout=10)) is not None:
            rest.append(line)
        assert [obj["summary"] for obj in json_lines("".join(rest))] == ["second", "third"]
        assert proc.stderr is not None and proc.stderr.read() == ""
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        reader.join(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
