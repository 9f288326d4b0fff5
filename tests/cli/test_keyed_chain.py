"""The keyed chains and the recorded heads against someone who can write the database file: with the append-only
triggers dropped they edit a row and recompute every later hash with the old, unkeyed rule, delete the newest
rows (and rewrite the session row's head to match), edit a state event, remove the head, or take the database to
a home without its key. `strata timeline ID --verify` (the real CLI) names each; an old database is re-chained
under the key when it is first opened and verifies, unless its unkeyed chain was already broken."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from core.hashing import canonical_json
from memory._encoding import EVENT_KINDS, time_sql
from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import error_lines, events_of, strata, strata_read, text, tool_use
from tests.conftest import StrataCLI, write_script

SEQ_MASK = (1 << 40) - 1


@dataclass
class Made:
    cli: StrataCLI
    session_id: str
    timeline: list[dict[str, Any]]
    """The rows as `timeline --json` printed them."""
    events: int


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Made:
    base = tmp_path_factory.mktemp("chain")
    cli = StrataCLI(base / "home", base)
    ws = base / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("hello notes\n")
    script = write_script(base / "turns.json", [
        [text("reading"), tool_use("r1", "read_file", path="notes.txt"), tool_use("l1", "list_dir", path=".")],
        [tool_use("w1", "write_file", path="out.txt", content="x\n")],
        [text("done")],
    ])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(ws), "--allow", "write_file",
                 "--json", "hello there")
    assert run.returncode == 0, run.stderr
    events = events_of(run.stdout)
    session_id = events[0]["session_id"]
    ok = strata_read(cli, "timeline", session_id, "--verify")
    assert ok.returncode == 0, ok.stderr
    return Made(cli, session_id, json_lines_in_process(cli, "timeline", session_id, "--json"), len(events))


def copy_home(made: Made, tmp_path: Path, name: str = "tampered") -> StrataCLI:
    home = tmp_path / name
    shutil.copytree(made.cli.home, home)
    return StrataCLI(home, tmp_path)


def sql(cli: StrataCLI, *statements: str, params: list[tuple[Any, ...]] | None = None) -> None:
    """Edit the database file directly, the append-only triggers dropped first."""
    with closing(sqlite3.connect(cli.home / "strata.db", isolation_level=None)) as conn:
        for trigger in ("timeline_no_update", "timeline_no_delete", "events_no_update", "events_no_delete"):
            conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        for k, statement in enumerate(statements):
            conn.execute(statement, params[k] if params else ())


def num(cli: StrataCLI, session_id: str) -> int:
    with closing(sqlite3.connect(cli.home / "strata.db")) as conn:
        return conn.execute("SELECT num FROM sessions WHERE id = ?", (session_id,)).fetchone()[0]


def has_heads(cli: StrataCLI) -> bool:
    with closing(sqlite3.connect(cli.home / "strata.db")) as conn:
        return any(row[1] == "head_timeline_hash" for row in conn.execute("PRAGMA table_info(sessions)"))


def unkeyed_hash(prev: str, row: dict[str, Any]) -> str:
    """The rule the README documented before the chain was keyed: sha256(prev_hash || canonical JSON)."""
    body = {k: v for k, v in row.items() if k != "hash"}
    body["prev_hash"] = prev
    return hashlib.sha256((prev + canonical_json(body)).encode("utf-8")).hexdigest()


def verify(cli: StrataCLI, session_id: str, *args: str) -> tuple[int, str, list[str]]:
    proc = strata_read(cli, "timeline", session_id, "--verify", *args)
    return proc.returncode, proc.stdout, [*error_lines(proc.stderr), proc.stderr]


def test_rows_recomputed_with_the_unkeyed_rule_fail_verify(made: Made, tmp_path: Path) -> None:
    """An edited row whose hash, and every later row's prev_hash and hash, were recomputed with the documented
    unkeyed rule does not verify: the row is named, since nobody without the home's key can make its HMAC."""
    cli = copy_home(made, tmp_path)
    base = num(cli, made.session_id) << 40
    k = 3
    rows = [dict(r) for r in made.timeline]
    rows[k - 1]["summary"] = "nothing to see"
    prev = rows[k - 2]["hash"]
    statements, params = [], []
    for row in rows[k - 1:]:
        row["prev_hash"] = prev
        row["hash"] = unkeyed_hash(prev, row)
        prev = row["hash"]
        statements.append("UPDATE timeline SET summary = ?, prev_hash = ?, hash = ? WHERE key = ?")
        params.append((row["summary"], row["prev_hash"], row["hash"], base | row["seq"]))
    if has_heads(cli):  # the attacker also points the session row's head at the recomputed last row
        statements.append("UPDATE sessions SET head_timeline_hash = ? WHERE id = ?")
        params.append((prev, made.session_id))
    sql(cli, *statements, params=params)
    code, out, (line, *_) = verify(cli, made.session_id)
    assert code == 1 and "chain verified" not in out
    assert line == f"strata: error: timeline of session {made.session_id}: row {k} was changed (hash mismatch)"


def test_deleting_the_newest_rows_is_reported_as_truncation(made: Made, tmp_path: Path) -> None:
    """Removing the newest timeline rows leaves a chain that links, but the session row's head names a row that
    is gone: verify exits 1 calling it a truncation."""
    cli = copy_home(made, tmp_path)
    base = num(cli, made.session_id) << 40
    last = made.timeline[-1]["seq"]
    sql(cli, f"DELETE FROM timeline WHERE key > {base | (last - 3)} AND key <= {base | last}")
    code, out, (line, *_) = verify(cli, made.session_id)
    assert code == 1 and "chain verified" not in out
    assert line.startswith(f"strata: error: timeline of session {made.session_id}: truncated")
    assert f"row {last}" in line and f"row {last - 3}" in line


def test_truncation_with_the_session_head_rewritten_shows_in_the_ledger(made: Made, tmp_path: Path) -> None:
    """Someone with the database only can also move the session row's head back to the new last rows; the head
    the evidence ledger (a file outside the database) recorded still shows the truncation, of both logs."""
    cli = copy_home(made, tmp_path)
    base = num(cli, made.session_id) << 40
    last = made.timeline[-1]["seq"]
    keep = last - 3
    with closing(sqlite3.connect(cli.home / "strata.db")) as conn:
        # The table holds a hash as its 32 bytes (memory/_encoding.py); the session row, as hex.
        (t_hash,) = conn.execute("SELECT lower(hex(hash)) FROM timeline WHERE key = ?", (base | keep,)).fetchone()
        e_seq, e_hash = conn.execute("SELECT seq, lower(hex(hash)) FROM events WHERE key BETWEEN ? AND ? "
                                     "ORDER BY key DESC LIMIT 1 OFFSET 2", (base, base | SEQ_MASK)).fetchone()
    sql(cli, f"DELETE FROM timeline WHERE key > {base | keep} AND key <= {base | last}",
        f"DELETE FROM events WHERE key > {base | e_seq} AND key <= {base | SEQ_MASK}",
        "UPDATE sessions SET head_timeline_seq = ?, head_timeline_hash = ?, head_events_seq = ?, "
        "head_events_hash = ? WHERE id = ?",
        params=[(), (), (keep, t_hash, e_seq, e_hash, made.session_id)])
    code, out, (line, *rest) = verify(cli, made.session_id)
    assert code == 1 and "chain verified" not in out
    assert line.startswith(f"strata: error: timeline of session {made.session_id}: truncated")
    assert "evidence ledger" in line and f"row {last}" in line
    assert f"state log of session {made.session_id}: truncated" in rest[-1]


def test_an_edited_event_payload_fails_the_state_log_chain(made: Made, tmp_path: Path) -> None:
    """The state log is chained too: a user message changed in the database is named as that event."""
    cli = copy_home(made, tmp_path)
    with closing(sqlite3.connect(cli.home / "strata.db")) as conn:
        (seq,) = conn.execute("SELECT seq FROM events WHERE kind = ? AND payload LIKE '%hello there%'",
                              (EVENT_KINDS.pack("user_message"),)).fetchone()
    sql(cli, "UPDATE events SET payload = replace(payload, 'hello there', 'rm -rf everything') "
             f"WHERE kind = {EVENT_KINDS.pack('user_message')}")
    code, out, (line, *_) = verify(cli, made.session_id)
    assert code == 1 and "chain verified" not in out
    assert line == f"strata: error: state log of session {made.session_id}: event {seq} was changed (hash mismatch)"
    checked = json.loads(strata_read(cli, "timeline", made.session_id, "--verify", "--json").stdout)
    assert checked["ok"] is False and checked["events"]["first_bad_seq"] == seq


def test_a_deleted_session_head_is_named(made: Made, tmp_path: Path) -> None:
    """Removing the head from the session row (so nothing inside the database records where the logs end) is
    reported as such."""
    cli = copy_home(made, tmp_path)
    sql(cli, "UPDATE sessions SET head_timeline_seq = NULL, head_timeline_hash = NULL, head_events_seq = NULL, "
             f"head_events_hash = NULL WHERE id = '{made.session_id}'")
    code, out, (line, *_) = verify(cli, made.session_id)
    assert code == 1 and "chain verified" not in out
    assert "the session row's head is missing" in line


def test_untouched_session_verifies_both_chains_and_both_heads(made: Made) -> None:
    """The untouched session: both chains, the session row's head and the ledger's head agree; --json says so."""
    code, out, _ = verify(made.cli, made.session_id)
    assert code == 0
    assert out.startswith(f"chain verified: {len(made.timeline)} rows")
    assert f"state log verified: {made.events} events" in out
    (checked,) = [json.loads(line) for line in strata_read(made.cli, "timeline", made.session_id, "--verify",
                                                       "--json").stdout.splitlines()]
    assert checked["ok"] is True and checked["rows"] == len(made.timeline)
    assert checked["events"]["rows"] == made.events
    assert checked["session_head"] == checked["ledger_head"] == {
        "timeline_seq": len(made.timeline), "timeline_hash": made.timeline[-1]["hash"],
        "events_seq": made.events, "events_hash": checked["events"]["head"]}


def test_verify_without_the_homes_key_cannot_verify_and_nothing_is_written(made: Made, tmp_path: Path) -> None:
    """The database taken to a home without its chain key: verify says it cannot verify (exit 1, not "ok"), no
    new key is made, and a resume is refused rather than chaining new rows under another key."""
    cli = copy_home(made, tmp_path)
    (cli.home / "chain.key").unlink()
    code, out, (line, *_) = verify(cli, made.session_id)
    assert code == 1 and "chain verified" not in out
    assert "cannot verify" in line and "chain.key" in line
    resumed = strata(cli, "resume", made.session_id, "more")
    assert resumed.returncode == 1
    (line,) = error_lines(resumed.stderr)
    assert "chain.key" in line
    assert not (cli.home / "chain.key").exists()
    # with a different key in its place, the same
    (cli.home / "chain.key").write_text("ab" * 32 + "\n")
    code, _, (line, *_) = verify(cli, made.session_id)
    assert code == 1 and "cannot verify" in line


# -- databases made before the chain was keyed ---------------------------------------------------------------------


def _schema4_copy(made: Made, tmp_path: Path, *, break_row: int | None = None) -> StrataCLI:
    """The session's database as Strata wrote it before migration 005: schema 4, the timeline chained with the
    unkeyed rule, no event chain, no heads, no chain key in the home."""
    from memory.migrations import MIGRATIONS

    cli = copy_home(made, tmp_path, "old")
    (cli.home / "chain.key").unlink()
    for heads in (cli.home / "ledger").glob("*.heads"):  # the ledger recorded no heads before 005 either
        heads.unlink()
    src = made.cli.home / "strata.db"
    dst = cli.home / "strata.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{dst}{suffix}").unlink(missing_ok=True)
    with closing(sqlite3.connect(dst, isolation_level=None)) as new, closing(sqlite3.connect(src)) as old:
        new.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
        for name, step in MIGRATIONS[:4]:
            step(new)
            new.execute("INSERT INTO schema_migrations VALUES (?, '2026-01-01T00:00:00+00:00')", (name,))
        new.execute("PRAGMA user_version = 4")
        cols = ("num, id, created_at, updated_at, mode, workspace, model, title, parent_id, fork_seq, status, "
                "lease_token, lease_pid, lease_host, lease_proc_start, lease_expires")
        for row in old.execute(f"SELECT {cols} FROM sessions"):
            new.execute(f"INSERT INTO sessions({cols}) VALUES ({','.join('?' * 16)})", row)
        ecols = "key, seq, kind, at, turn, payload, schema_version"
        # A schema-4 database holds times as ISO text and kinds as text (this one packs them: memory/_encoding.py).
        for key, seq, kind, *rest in old.execute(f"SELECT key, seq, kind, {time_sql('at')}, turn, payload, "
                                                 "schema_version FROM events ORDER BY pos"):
            new.execute(f"INSERT INTO events({ecols}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (key, seq, EVENT_KINDS.unpack(kind), *rest))
        base = num(made.cli, made.session_id) << 40
        prev = "0" * 64
        for row in made.timeline:
            body = dict(row)
            body["prev_hash"] = prev
            digest = unkeyed_hash(prev, body)
            summary = "changed before the upgrade" if row["seq"] == break_row else row["summary"]
            new.execute("INSERT INTO timeline(key, kind, turn, tool, decision, at, call_id, check_name, outcome, "
                        "duration_ms, prev_hash, hash, summary, data) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (base | row["seq"], row["kind"], row["turn"], row["tool"], row["decision"], row["at"],
                         row["call_id"], row["check"], row["outcome"], row["duration_ms"], prev, digest, summary,
                         json.dumps(row["data"], ensure_ascii=False)))
            prev = digest
    return cli


def test_an_old_database_is_rechained_under_the_key_and_verifies(made: Made, tmp_path: Path) -> None:
    """A schema-4 database (unkeyed chain, no event chain, no heads) opened by this Strata: its chain is checked
    with the old rule, re-chained under a new key in the home, and verify says so; the session goes on."""
    cli = _schema4_copy(made, tmp_path)
    code, out, _ = verify(cli, made.session_id)
    assert code == 0, out
    assert out.startswith(f"chain verified: {len(made.timeline)} rows")
    assert "re-chained under the key" in out and "unkeyed chain verified" in out
    assert (cli.home / "chain.key").exists()
    with closing(sqlite3.connect(cli.home / "strata.db")) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] >= 5
    resumed = strata(cli, "resume", made.session_id, "one more")
    assert resumed.returncode == 0, resumed.stderr
    code, out, _ = verify(cli, made.session_id)
    assert code == 0, out


def test_an_old_chain_broken_before_the_upgrade_stays_broken(made: Made, tmp_path: Path) -> None:
    """Re-chaining does not launder an edit made before the upgrade: the unkeyed chain is checked first and
    verify keeps naming the row it found changed."""
    cli = _schema4_copy(made, tmp_path, break_row=2)
    code, out, (line, *_) = verify(cli, made.session_id)
    assert code == 1 and "chain verified" not in out
    assert f"timeline of session {made.session_id}" in line and "before the chain was keyed" in line
    assert "row 2 was changed" in line
