"""Rows edited by hand (sqlite3, the append-only triggers dropped first) against the reading commands, with the
real `strata` script as a subprocess on a real SQLite home made by `strata run --model script:FILE`.

The promise: a row that no longer reads back is one `strata: error:` line naming the session, the row and what is
wrong (exit 1, no traceback, no "internal error"); the database is left as it was; the other sessions are still
listed and readable; `--verify` still names the changed row."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memory._encoding import TIMELINE_KINDS
from tests.cli._helpers import ScriptCLI, error_lines, json_lines, scripted_session

Proc = subprocess.CompletedProcess[str]
SEQ_BITS = 40

pytestmark = pytest.mark.timeout(300)


@dataclass
class Home:
    cli: ScriptCLI
    first: str
    """The session whose rows the cases damage."""
    second: str
    """A session left alone."""

    @property
    def db(self) -> Path:
        return self.cli.home / "strata.db"

    @property
    def script(self) -> Path:
        """The scripted model both sessions ran (past its end: one short final text per turn)."""
        return self.cli.cwd.parent / "script.json"

    def edit(self, sql: str, *params: Any) -> None:
        conn = sqlite3.connect(self.db, isolation_level=None)
        try:
            for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
                conn.execute(f"DROP TRIGGER {name}")
            conn.execute(sql, params)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()

    def num(self, session_id: str) -> int:
        conn = sqlite3.connect(self.db)
        try:
            return int(conn.execute("SELECT num FROM sessions WHERE id = ?", (session_id,)).fetchone()[0])
        finally:
            conn.close()


def _clean(proc: Proc) -> None:
    assert "Traceback" not in proc.stderr, f"{proc.args}:\n{proc.stderr}"
    assert "internal error" not in proc.stderr, f"{proc.args}:\n{proc.stderr}"


def _one_error(proc: Proc, *needles: str) -> str:
    _clean(proc)
    assert proc.returncode == 1, (proc.args, proc.returncode, proc.stderr)
    lines = error_lines(proc.stderr)
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], (needle, proc.stderr)
    return lines[0]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Home:
    root = tmp_path_factory.mktemp("damaged-rows")
    (root / "home").mkdir()
    ws = root / "ws"
    ws.mkdir()
    cli = ScriptCLI(root / "home", ws)
    return Home(cli, scripted_session(cli, root, "first"), scripted_session(cli, root, "second"))


@pytest.fixture
def home(base: Home, tmp_path: Path) -> Iterator[Home]:
    shutil.copytree(base.cli.home, tmp_path / "home")
    yield Home(ScriptCLI(tmp_path / "home", base.cli.cwd), base.first, base.second)


def _runs(home: Home, *commands: tuple[str, ...]) -> list[Proc]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda args: home.cli.run(*args), commands))


def _model_attempt_key(home: Home, session_id: str) -> int:
    conn = sqlite3.connect(home.db)
    try:
        ((key,),) = conn.execute("SELECT key FROM timeline WHERE kind = ? AND key >> ? = ?",
                                 (TIMELINE_KINDS.pack("model_attempt"), SEQ_BITS, home.num(session_id))).fetchall()
        return int(key)
    finally:
        conn.close()


def test_a_timeline_row_with_text_for_its_duration_is_one_error_naming_session_and_row(home: Home) -> None:
    key = _model_attempt_key(home, home.first)
    seq = key & ((1 << SEQ_BITS) - 1)
    home.edit("UPDATE timeline SET duration_ms = 'abc' WHERE key = ?", key)
    before = home.db.read_bytes()
    table, full, as_json, export, html, other = _runs(
        home, ("timeline", home.first), ("--verbose", "timeline", home.first), ("timeline", "--json", home.first),
        ("export", home.first), ("export", "--format", "otlp", home.first), ("timeline", home.second))
    for proc in (table, full, as_json, export, html):
        _one_error(proc, f"session {home.first}", f"row {seq}", "duration_ms", "'abc'")
        assert "hint:" in proc.stderr and "--verify" in proc.stderr
    assert table.stdout == as_json.stdout == ""  # nothing half-printed
    _clean(other)
    assert other.returncode == 0 and f"timeline of session {home.second}" in other.stdout
    verify = home.cli.run("timeline", "--verify", home.first)  # still names the changed row by its hash
    _one_error(verify, f"row {seq} was changed")
    assert home.db.read_bytes() == before


def test_a_timeline_row_whose_data_no_longer_parses_is_reported_not_drawn(home: Home) -> None:
    key = _model_attempt_key(home, home.first)
    home.edit("UPDATE timeline SET data = '{\"number\": 1,' WHERE key = ?", key)
    table, as_json = _runs(home, ("timeline", home.first), ("timeline", "--json", home.first))
    for proc in (table, as_json):
        _one_error(proc, f"session {home.first}", f"row {key & ((1 << SEQ_BITS) - 1)}", "data: not JSON")


@pytest.mark.parametrize("data", ['{"number": NaN}', '{"number": -Infinity}', '{"number": 1, "x": "\\ud800"}'])
def test_a_timeline_row_edited_to_hold_what_json_has_not_is_reported_not_printed(home: Home, data: str) -> None:
    """Python's parser takes `NaN`, `Infinity` and a lone surrogate's escape; no store writes them. Printed as they
    are, `--json` was JSON no reader takes (exit 0) and a lone surrogate ended it as an internal error."""
    key = _model_attempt_key(home, home.first)
    home.edit("UPDATE timeline SET data = ? WHERE key = ?", data, key)
    table, as_json, export = _runs(home, ("timeline", home.first), ("timeline", "--json", home.first),
                                   ("export", home.first, "--format", "jsonl"))
    for proc in (table, as_json, export):
        _one_error(proc, f"session {home.first}", f"row {key & ((1 << SEQ_BITS) - 1)}", "data: not JSON")
    assert table.stdout == as_json.stdout == export.stdout == ""


def test_a_blob_in_a_timeline_row_is_reported_and_verify_names_it(home: Home) -> None:
    key = _model_attempt_key(home, home.first)
    home.edit("UPDATE timeline SET duration_ms = x'00ff' WHERE key = ?", key)
    as_json, verify = _runs(home, ("timeline", "--json", home.first), ("timeline", "--verify", home.first))
    _one_error(as_json, f"session {home.first}", "duration_ms")
    _one_error(verify, "was changed")


def test_other_sessions_stay_listable_beside_a_damaged_session_row(home: Home) -> None:
    home.edit("UPDATE sessions SET created_at = 'garbage' WHERE id = ?", home.first)
    before = home.db.read_bytes()
    listing, as_json, other, damaged, resumed = _runs(
        home, ("sessions",), ("sessions", "--json"), ("timeline", home.second), ("timeline", home.first),
        ("resume", home.first, "more", "--model", f"script:{home.script}"))
    for proc in (listing, as_json):
        _one_error(proc, f"session {home.first}", "damaged session row", "created_at", "'garbage'")
    assert home.second in listing.stdout and home.first not in listing.stdout
    assert [v["id"] for v in json_lines(as_json.stdout)] == [home.second]
    _clean(other)
    assert other.returncode == 0, other.stderr
    for proc in (damaged, resumed):
        _one_error(proc, f"session {home.first}", "created_at")
    assert home.db.read_bytes() == before


def test_a_session_row_with_a_status_no_strata_writes_is_named_with_its_field(home: Home) -> None:
    home.edit("UPDATE sessions SET status = 'weird' WHERE id = ?", home.first)
    proc = home.cli.run("show", home.first)
    line = _one_error(proc, f"session {home.first}", "(status: ", "'weird'")
    assert "literal" not in line


def test_a_prefix_naming_a_good_and_a_damaged_session_is_ambiguous_not_a_guess(home: Home) -> None:
    lookalike = home.second[:12] + "-damaged"
    home.edit("UPDATE sessions SET id = ?, fork_seq = 'x' WHERE id = ?", lookalike, home.first)
    ambiguous, exact = _runs(home, ("show", home.second[:12]), ("show", lookalike))
    _clean(ambiguous)
    assert ambiguous.returncode == 2, ambiguous.stderr
    assert "names 2 sessions" in ambiguous.stderr and lookalike in ambiguous.stderr
    _one_error(exact, f"session {lookalike}", "fork_seq")


def test_an_event_payload_that_no_longer_parses_is_one_error_and_the_listing_goes_on(home: Home) -> None:
    key = (home.num(home.first) << SEQ_BITS) | 2
    home.edit("UPDATE events SET payload = '{\"text\": ' WHERE key = ?", key)
    show, export, resume, listing = _runs(
        home, ("show", home.first), ("export", home.first),
        ("resume", home.first, "more", "--model", f"script:{home.script}"), ("sessions", "--json"))
    for proc in (show, export, resume):
        _one_error(proc, f"session {home.first}", "event 2 does not load")
    _clean(listing)
    assert listing.returncode == 0, listing.stderr
    counts = {v["id"]: v["turns"] for v in json_lines(listing.stdout)}
    assert counts == {home.first: None, home.second: 1}


def test_an_event_whose_time_and_payload_were_both_edited_is_named_by_its_time(home: Home) -> None:
    """The store reads an event's time before its payload: a row damaged in both is reported with the time's
    error, the same line every Strata before the envelope's fast path gave (not the payload's JSON error)."""
    key = (home.num(home.first) << SEQ_BITS) | 2
    home.edit("UPDATE events SET at = 'garbage', payload = '{\"text\": ' WHERE key = ?", key)
    show, resume = _runs(home, ("show", home.first), ("resume", home.first, "more", "--model", f"script:{home.script}"))
    for proc in (show, resume):
        line = _one_error(proc, f"session {home.first}", "event 2 does not load", "'garbage'")
        assert "JSON" not in line
