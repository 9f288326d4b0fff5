"""The `strata` command line against bad input and a bad environment, with real processes.

The promise under test: bad input gets a clear one-line error (exit 1 for an error, 2 for usage), never a
traceback or an "internal error", and loses nothing: a corrupt, locked or unusable database is reported and left
as it was. The bugs a review found (tests named `test_bug_...`) are fixed; their tests state the behaviour that
now holds.

To stay fast, every `strata` process the tests look at is started once, by the module fixture `world`, in a
thread pool (the ones that wait out SQLite's 5 s busy timeout, overlap with the rest); each test then
checks the results it is about. Homes that a case damages are copies of one base home, so no case sees
another's damage.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.cli._helpers import error_lines, result_line, text, tool_use
from tests.conftest import StrataCLI, write_script

Proc = subprocess.CompletedProcess[str]

BIG = "99999999999999999999999"  # more than SQLite's 64-bit INTEGER holds
SEQ_BITS = 40  # events.key = (session num << 40) | seq (memory/migrations.py)


def _clean(proc: Proc) -> None:
    """No traceback and no 'internal error' (a bug report, not a user error)."""
    assert "Traceback" not in proc.stderr, f"{proc.args}:\n{proc.stderr}"
    assert "internal error" not in proc.stderr, f"{proc.args}:\n{proc.stderr}"


def _one_error(proc: Proc, *needles: str) -> str:
    """Exactly one `strata: error:` line, holding every needle."""
    _clean(proc)
    lines = error_lines(proc.stderr)
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], (needle, proc.stderr)
    return lines[0]


def _click_usage(proc: Proc, *needles: str) -> None:
    """A usage error reported by click: exit 2, 'Error: ...' naming the problem."""
    _clean(proc)
    assert proc.returncode == 2, (proc.args, proc.returncode, proc.stderr)
    assert "Error:" in proc.stderr
    for needle in needles:
        assert needle in proc.stderr, (needle, proc.stderr)


def _db(home: Path) -> Path:
    return home / "strata.db"


def _query(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def _checkpoint(db: Path) -> None:
    """Fold the WAL into the main file, so a copy of the file alone is the whole database."""
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def _session_num(db: Path, session_id: str) -> int:
    ((num,),) = _query(db, "SELECT num FROM sessions WHERE id = ?", session_id)
    return int(num)


def _rewrite_event(db: Path, session_id: str, seq: int, payload: str) -> None:
    """Hand-edit one event's payload (the append-only trigger dropped first): a damaged log."""
    key = (_session_num(db, session_id) << SEQ_BITS) | seq
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute("UPDATE events SET payload = ? WHERE key = ?", (payload, key))
    finally:
        conn.close()


def _event_payload(db: Path, session_id: str, seq: int) -> str:
    """The event's JSON, kind included (the table keeps it without its kind: memory/_encoding.py)."""
    ((payload,),) = _query(db, "SELECT payload FROM session_events WHERE session_id = ? AND seq = ?", session_id,
                           seq)
    return str(payload)


@dataclass
class World:
    root: Path
    base: StrataCLI
    session_id: str
    """A headless session parked on call `c1` (bash), in `base`'s home."""
    base_workspace: Path
    base_db_bytes: bytes
    results: dict[str, Any] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    """What the setup observed before or after the runs (file contents, table names, ...)."""

    def __getitem__(self, name: str) -> Any:
        return self.results[name]


PARKED_SCRIPT = [[text("let me write"), tool_use("c1", "bash", command="echo hi > hi.txt")], [text("done")]]


def _new_cli(root: Path, name: str, home: Path | None = None) -> StrataCLI:
    where = root / name
    where.mkdir(parents=True)
    if home is None:
        home = where / "home"
        home.mkdir()
    return StrataCLI(home, where)


def _copy_home(world_root: Path, base: StrataCLI, name: str) -> StrataCLI:
    cli = _new_cli(world_root, name, home=None)
    shutil.rmtree(cli.home)
    shutil.copytree(base.home, cli.home)
    return cli


# One module fixture plays dozens of strata processes before the first test: on a loaded 2-core machine that
# alone can pass the suite's 120 s per-test limit, so this module's tests get more (each test's own checks are fast).
pytestmark = pytest.mark.timeout(480)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("robustness")
    base = _new_cli(root, "base")
    ws = base.cwd / "ws"
    ws.mkdir()
    script = write_script(base.cwd / "parked.json", PARKED_SCRIPT)
    first = base.run("run", "--model", f"script:{script}", "--workspace", str(ws), "--on-ask", "park", "--json",
                     "write hi")
    assert first.returncode == 4, first.stderr
    sid = result_line(first.stdout)["session_id"]  # type: ignore[index]
    _checkpoint(_db(base.home))
    w = World(root=root, base=base, session_id=sid, base_workspace=ws, base_db_bytes=_db(base.home).read_bytes())
    jobs: dict[str, Callable[[], Any]] = {}
    holders: list[sqlite3.Connection] = []
    _locked_jobs(w, jobs, holders)
    _chain_jobs(w, jobs)
    _id_jobs(w, jobs)
    _usage_jobs(w, jobs)
    _damage_jobs(w, jobs)
    # The locked-database jobs (submitted first) each sit out the 5 s busy timeout: a thread each beyond the 4 that
    # keep the others' processes going, so those waits overlap the rest instead of holding up all 4 threads.
    waiting = sum(1 for name in jobs if name.startswith("locked-"))
    try:
        with ThreadPoolExecutor(max_workers=4 + waiting) as pool:
            futures = {name: pool.submit(fn) for name, fn in jobs.items()}
            w.results = {name: f.result() for name, f in futures.items()}
    finally:
        for conn in holders:
            conn.rollback()
            conn.close()
    w.facts["base_db_after"] = _db(base.home).read_bytes()
    w.facts["rollback_tables"] = _query(_db(w.facts["rollback_home"]), "SELECT name FROM sqlite_master")
    yield w


# -- first, those that wait: a database locked by another process (each waits out the 5 s busy timeout) -----------

def _locked_jobs(w: World, jobs: dict[str, Callable[[], Any]], holders: list[sqlite3.Connection]) -> None:
    # A database file in rollback-journal mode, held by another connection's exclusive transaction.
    cli = _new_cli(w.root, "locked-rollback")
    conn = sqlite3.connect(_db(cli.home), isolation_level=None)
    conn.execute("CREATE TABLE t (x)")
    conn.execute("BEGIN EXCLUSIVE")
    conn.execute("INSERT INTO t VALUES (1)")
    holders.append(conn)
    w.facts["rollback_home"] = cli.home
    jobs["locked-rollback:sessions"] = lambda: cli.run("sessions")

    # Strata's own (WAL) database, held by an exclusive transaction: reads go on, writes wait and fail.
    wal = _copy_home(w.root, w.base, "locked-wal")
    conn = sqlite3.connect(_db(wal.home), isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    holders.append(conn)
    w.facts["wal_home"] = wal.home
    script = write_script(wal.cwd / "one.json", [[text("hello")]])
    wal_ws = wal.cwd / "ws"
    wal_ws.mkdir()
    jobs["locked-wal:run"] = lambda: wal.run("run", "--model", f"script:{script}", "--workspace", str(wal_ws), "go")
    jobs["locked-wal:sessions"] = lambda: wal.run("sessions", "--json")
    jobs["locked-wal:doctor"] = lambda: wal.run("doctor", "--workspace", str(wal_ws))


# -- sequences of commands ---------------------------------------------------------------------------------------

def _chain_jobs(w: World, jobs: dict[str, Callable[[], Any]]) -> None:
    def approve_typo() -> tuple[Proc, str, str]:
        cli = _copy_home(w.root, w.base, "approve-typo")
        proc = cli.run("approve", w.session_id, "c1-typo")
        ((stored,),) = _query(_db(cli.home), "SELECT status FROM sessions WHERE id = ?", w.session_id)
        listing = cli.run("sessions", "--json")
        shown = [json.loads(line) for line in listing.stdout.splitlines() if line.strip()]
        return proc, stored, shown[0]["status"]

    def deleted_workspace() -> tuple[Proc, Proc, bool]:
        cli = _new_cli(w.root, "deleted-ws")
        ws = cli.cwd / "project"
        ws.mkdir()
        script = write_script(cli.cwd / "two.json", [
            [text("first turn")],
            [tool_use("w1", "write_file", path="notes/x.txt", content="written after the workspace was gone")],
            [text("end")]])
        run = cli.run("run", "--model", f"script:{script}", "--workspace", str(ws), "--json", "start")
        sid = result_line(run.stdout)["session_id"]  # type: ignore[index]
        shutil.rmtree(ws)  # the project was moved, or its disk is not mounted
        resumed = cli.run("resume", sid, "--allow", "write_file", "continue")
        return run, resumed, ws.exists()

    def reconcile_both_verdicts() -> tuple[Proc, str, str]:
        cli = _new_cli(w.root, "reconcile-both")
        ws = cli.cwd / "ws"
        ws.mkdir()
        script = write_script(cli.cwd / "sleepy.json",
                              [[tool_use("k1", "bash", command="touch started; sleep 2")]])
        proc = cli.popen("run", "--model", f"script:{script}", "--workspace", str(ws), "--allow", "bash", "go")
        deadline = time.monotonic() + 30
        while not (ws / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)  # the receipt is `dispatched`, its owner dead: a person may decide it
        proc.communicate()
        ((rid, before),) = _query(_db(cli.home), "SELECT id, status FROM receipts")
        decided = cli.run("reconcile", rid, "--applied", "--not-applied")
        ((after,),) = _query(_db(cli.home), "SELECT status FROM receipts WHERE id = ?", rid)
        return decided, before, after

    jobs["chain:approve-typo"] = approve_typo
    jobs["chain:deleted-workspace"] = deleted_workspace
    jobs["chain:reconcile-both"] = reconcile_both_verdicts


# -- unknown ids -------------------------------------------------------------------------------------------------

UNKNOWN_ID_CASES: dict[str, tuple[str, ...]] = {
    "resume": ("resume", "no-such-session", "go on"),
    "export": ("export", "no-such-session", "--format", "html"),
    "deny": ("deny", "no-such-session", "c1", "--reason", "no"),
    "reconcile": ("reconcile", "rcpt_no_such_receipt", "--applied"),
}


def _id_jobs(w: World, jobs: dict[str, Callable[[], Any]]) -> None:
    for name, args in UNKNOWN_ID_CASES.items():
        jobs[f"id:{name}"] = lambda args=args: w.base.run(*args)


# -- usage errors: exit 2, one line, nothing created --------------------------------------------------------------

def _usage_cases(w: World) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """name -> (argv, what the error must say)."""
    d = w.base.cwd / "scripts"
    d.mkdir()
    (d / "bad.json").write_text("[[{\"type\": \"text\", \"text\": \"unterminated\"}", encoding="utf-8")
    (d / "latin1.json").write_bytes('[[{"type": "text", "text": "caf\xe9"}]]'.encode("latin-1"))
    (d / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n", encoding="utf-8")
    good = write_script(d / "good.json", [[text("hi")]])
    ws = str(w.base_workspace)
    sid = w.session_id

    def run(*extra: str, model: str | None = f"script:{good}", workspace: str = ws) -> tuple[str, ...]:
        return ("run", *(("--model", model) if model else ()), "--workspace", workspace, *extra, "a prompt")

    return {
        "script-bad-json": (run(model=f"script:{d / 'bad.json'}"), ("invalid model script", "bad.json", "JSON")),
        # a file named like a secret field, then a colon: the message is not masked as `passwd: <secret>`
        "script-named-passwd": (run(model=f"script:{d / 'passwd'}"), ("passwd: not valid JSON",)),
        "script-missing": (run(model=f"script:{d / 'missing.json'}"), ("missing.json", "cannot read")),
        "model-unknown": (run(model="gpt:4"), ("unknown model 'gpt:4'",)),
        "workspace-missing": (run(workspace=str(w.root / "no-such-dir")), ("no-such-dir", "not a directory")),
        "allow-unclosed": (run("--allow", "bash("), ("invalid --allow rule 'bash('",)),
        "fork-at-negative": (("fork", sid, "--at-event", "-3"), ("at seq -3", "seqs 1 to")),
        "fork-beyond": (("fork", sid, "--at-event", "999"), ("at seq 999", "seqs 1 to")),
        # the non-UTF-8 script is a bug, checked below
        "script-latin1": (run(model=f"script:{d / 'latin1.json'}"), ("invalid model script", "latin1.json")),
    }


CLICK_USAGE_CASES: dict[str, tuple[tuple[str, ...], str]] = {
    "timeline-since-garbage": (("timeline", "{sid}", "--since", "yesterday"), "--since"),
    "timeline-decision-unknown": (("timeline", "{sid}", "--decision", "maybe"), "--decision"),
    "reconcile-no-verdict": (("reconcile", "rcpt_x"), "--applied or --not-applied"),
}


def _usage_jobs(w: World, jobs: dict[str, Callable[[], Any]]) -> None:
    w.facts["usage_cases"] = _usage_cases(w)
    for name, (args, _) in w.facts["usage_cases"].items():
        jobs[f"usage:{name}"] = lambda args=args: w.base.run(*args)
    for name, (args, _) in CLICK_USAGE_CASES.items():
        argv = tuple(a.replace("{sid}", w.session_id) for a in args)
        jobs[f"click:{name}"] = lambda argv=argv: w.base.run(*argv)
    jobs["timeline:turn-overflow"] = lambda: w.base.run("timeline", w.session_id, "--turn", BIG)
    jobs["timeline:since-overflow"] = lambda: w.base.run("timeline", w.session_id, "--since",
                                                         "0001-01-01T00:00:00+05:00")
    # export: output in a missing directory, onto a directory, and an empty --output, each from its own cwd
    for name, output in (("missing-dir", "missing/out.html"), ("empty", "")):
        cli = _new_cli(w.root, f"export-{name}", home=w.base.home)
        (cli.cwd / "taken").mkdir()
        w.facts[f"export-{name}:cwd"] = cli.cwd
        jobs[f"export:{name}"] = lambda cli=cli, output=output: cli.run(
            "export", w.session_id, "--format", "html", "--output", output)


# -- a damaged database or home ----------------------------------------------------------------------------------

def _damage_jobs(w: World, jobs: dict[str, Callable[[], Any]]) -> None:
    def damaged(name: str, damage: Callable[[Path], None]) -> StrataCLI:
        cli = _copy_home(w.root, w.base, name)
        damage(_db(cli.home))
        w.facts[f"{name}:db"] = _db(cli.home).read_bytes() if _db(cli.home).is_file() else None
        return cli

    garbage = damaged("db-garbage", lambda db: db.write_bytes(b"this is not a database\n" * 400))
    truncated = damaged("db-truncated", lambda db: os.truncate(db, 4096))

    def zero_sessions_page(db: Path) -> None:
        ((page_size,),) = _query(db, "PRAGMA page_size")
        ((root,),) = _query(db, "SELECT rootpage FROM sqlite_master WHERE name = 'sessions'")
        with db.open("r+b") as f:
            f.seek((root - 1) * page_size)
            f.write(b"\0" * page_size)

    zeroed = damaged("db-zeroed", zero_sessions_page)

    def make_dir(db: Path) -> None:
        db.unlink()
        db.mkdir()
        (db / "keep.txt").write_text("mine")

    as_dir = damaged("db-directory", make_dir)
    jobs["db:garbage:run"] = lambda: garbage.run("run", "--model", f"script:{w.base.cwd / 'parked.json'}",
                                                 "--workspace", str(w.base_workspace), "x")
    jobs["db:truncated:show"] = lambda: truncated.run("show", w.session_id)
    jobs["db:zeroed:sessions"] = lambda: zeroed.run("sessions")
    jobs["db:zeroed:doctor"] = lambda: zeroed.run("doctor", "--workspace", str(w.base_workspace))
    jobs["db:directory:timeline"] = lambda: as_dir.run("timeline", w.session_id)
    jobs["db:directory:doctor"] = lambda: as_dir.run("doctor", "--workspace", str(w.base_workspace))

    # A log with a payload that is not JSON, and a log that is JSON but breaks the state machine.
    def bad_json(db: Path) -> None:
        _rewrite_event(db, w.session_id, 2, "{not json")

    def second_start(db: Path) -> None:
        _rewrite_event(db, w.session_id, 3, _event_payload(db, w.session_id, 1))

    not_json = damaged("log-not-json", bad_json)
    inconsistent = damaged("log-inconsistent", second_start)
    jobs["log-not-json:show"] = lambda: not_json.run("show", w.session_id)
    jobs["log-not-json:sessions"] = lambda: not_json.run("sessions", "--json")
    jobs["log-inconsistent:show"] = lambda: inconsistent.run("show", w.session_id)
    jobs["log-inconsistent:approve"] = lambda: inconsistent.run("approve", w.session_id, "c1")
    jobs["log-inconsistent:export"] = lambda: inconsistent.run("export", w.session_id)

    # STRATA_HOME is a regular file; STRATA_HOME where nothing may be created, even by root (sysfs).
    home_file = w.root / "home-is-a-file"
    home_file.write_text("a file, not a directory\n")
    as_file = StrataCLI(home_file, w.root)
    jobs["home-file:run"] = lambda: as_file.run("run", "--model", f"script:{w.base.cwd / 'parked.json'}",
                                                "--workspace", str(w.base_workspace), "x")
    sys_home = Path("/sys/kernel/strata-review-home")
    if Path("/sys/kernel").is_dir() and not sys_home.exists():
        jobs["home-unwritable:sessions"] = lambda: StrataCLI(sys_home, w.root).run("sessions")


# =================================================================================================================
# Behaviour that holds
# =================================================================================================================

@pytest.mark.parametrize("name", sorted(UNKNOWN_ID_CASES))
def test_unknown_ids_are_one_line_errors(world: World, name: str) -> None:
    proc: Proc = world[f"id:{name}"]
    assert proc.returncode == 1, (proc.args, proc.returncode, proc.stderr)
    what = "no receipt with id" if name == "reconcile" else "no session with id 'no-such-session'"
    _one_error(proc, what)
    assert "hint:" in proc.stderr
    assert proc.stdout == ""


def test_usage_errors_exit_2_with_one_clear_line_and_create_nothing(world: World) -> None:
    failures = []
    for name, (_, needles) in world.facts["usage_cases"].items():
        if name == "script-latin1":
            continue
        proc: Proc = world[f"usage:{name}"]
        try:
            assert proc.returncode == 2, (proc.returncode, proc.stderr)
            _one_error(proc, *needles)
        except AssertionError as exc:
            failures.append(f"{name}: {exc}")
    assert not failures, "\n".join(failures)
    for name, (_, option) in CLICK_USAGE_CASES.items():
        _click_usage(world[f"click:{name}"], option)
    # no failed command created, changed or removed a session or anything else in the database
    assert world.facts["base_db_after"] == world.base_db_bytes


def test_export_to_a_path_it_cannot_write_fails_and_leaves_no_partial_file(world: World) -> None:
    proc: Proc = world["export:missing-dir"]
    assert proc.returncode == 1, proc.stderr
    _one_error(proc, "cannot write missing/out.html", "No such file or directory")
    cwd: Path = world.facts["export-missing-dir:cwd"]
    assert sorted(p.name for p in cwd.iterdir()) == ["taken"]  # no temp file, no directory created
    assert list((cwd / "taken").iterdir()) == []


def test_a_file_that_is_not_a_database_is_reported_and_left_untouched(world: World) -> None:
    proc: Proc = world["db:garbage:run"]
    assert proc.returncode == 1, proc.stderr
    _one_error(proc, "strata.db", "not a usable Strata database", "left untouched")
    assert _db(world.root / "db-garbage" / "home").read_bytes() == world.facts["db-garbage:db"]


def test_a_truncated_or_damaged_database_is_reported_and_left_untouched(world: World) -> None:
    for job, name in (("db:truncated:show", "db-truncated"), ("db:zeroed:sessions", "db-zeroed")):
        proc: Proc = world[job]
        assert proc.returncode == 1, proc.stderr
        _one_error(proc, "not a usable Strata database", "malformed")
        assert _db(world.root / name / "home").read_bytes() == world.facts[f"{name}:db"]


def test_a_database_path_that_is_a_directory_is_reported_and_kept(world: World) -> None:
    proc: Proc = world["db:directory:timeline"]
    assert proc.returncode == 1, proc.stderr
    line = error_lines(proc.stderr)[0]
    assert "cannot use" in line and "strata.db" in line and "unable to open database file" in line
    db = _db(world.root / "db-directory" / "home")
    assert db.is_dir() and (db / "keep.txt").read_text() == "mine"
    doc: Proc = world["db:directory:doctor"]
    assert doc.returncode == 1
    assert any(ln.startswith("FAIL") and "database" in ln for ln in doc.stdout.splitlines())


def test_a_log_that_breaks_the_state_machine_is_reported_by_export(world: World) -> None:
    proc: Proc = world["log-inconsistent:export"]
    assert proc.returncode == 1, proc.stderr
    _one_error(proc, "has an inconsistent log", "second session_started")


def test_a_home_that_is_a_file_is_reported_and_left_alone(world: World) -> None:
    proc: Proc = world["home-file:run"]
    assert proc.returncode == 1, proc.stderr
    _one_error(proc, "cannot create the data directory", "home-is-a-file")
    assert (world.root / "home-is-a-file").read_text() == "a file, not a directory\n"


def test_a_home_where_nothing_can_be_created_is_reported(world: World) -> None:
    if "home-unwritable:sessions" not in world.results:
        pytest.skip("no /sys/kernel to stand in for an unwritable home")
    proc: Proc = world["home-unwritable:sessions"]
    assert proc.returncode == 1, proc.stderr
    _one_error(proc, "cannot create the data directory", "strata-review-home")


def test_a_database_locked_by_an_exclusive_transaction_is_reported_not_recreated(world: World) -> None:
    proc: Proc = world["locked-rollback:sessions"]
    assert proc.returncode == 1, proc.stderr
    _one_error(proc, "strata.db is locked by another process")
    assert "retry" in proc.stderr
    # Strata did not migrate, replace or add to the other process's database.
    assert world.facts["rollback_tables"] == [("t",)]


def test_reads_go_on_while_another_process_holds_the_write_lock(world: World) -> None:
    """WAL: an exclusive transaction elsewhere blocks writers only; `sessions` still answers."""
    proc: Proc = world["locked-wal:sessions"]
    _clean(proc)
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(line)["id"] for line in proc.stdout.splitlines()] == [world.session_id]


# =================================================================================================================
# Bugs: each test states the correct behaviour
# =================================================================================================================

def test_bug_script_that_is_not_utf8_is_a_script_error(world: World) -> None:
    proc: Proc = world["usage:script-latin1"]
    _one_error(proc, "invalid model script", "latin1.json")
    assert proc.returncode == 2


def test_bug_doctor_reports_a_damaged_database_as_a_fail_line(world: World) -> None:
    proc: Proc = world["db:zeroed:doctor"]
    _clean(proc)
    assert proc.returncode == 1
    assert any(ln.startswith("FAIL") and "database" in ln for ln in proc.stdout.splitlines()), proc.stdout
    assert _db(world.root / "db-zeroed" / "home").read_bytes() == world.facts["db-zeroed:db"]


def test_bug_timeline_turn_out_of_range_is_a_usage_error(world: World) -> None:
    proc: Proc = world["timeline:turn-overflow"]
    _clean(proc)
    assert proc.returncode == 2, proc.stderr


def test_bug_timeline_since_a_time_before_year_one_in_utc_is_handled(world: World) -> None:
    proc: Proc = world["timeline:since-overflow"]
    _clean(proc)
    assert proc.returncode in (0, 2), proc.stderr  # every row is after it (0), or a usage error (2)


def test_bug_export_with_an_empty_output_path_is_a_usage_error(world: World) -> None:
    proc: Proc = world["export:empty"]
    _clean(proc)
    assert proc.returncode == 2, proc.stderr
    assert "cannot write .:" not in proc.stderr


def test_bug_show_reports_an_event_that_is_not_json_in_one_line(world: World) -> None:
    proc: Proc = world["log-not-json:show"]
    assert proc.returncode == 1
    _one_error(proc, world.session_id)
    assert len(proc.stderr.strip().splitlines()) <= 2  # the error and a hint


def test_bug_sessions_lists_a_session_whose_log_has_a_damaged_event(world: World) -> None:
    proc: Proc = world["log-not-json:sessions"]
    _clean(proc)
    assert proc.returncode == 0, proc.stderr
    (row,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert row["id"] == world.session_id and row["turns"] is None


@pytest.mark.parametrize("command", ["show", "approve"])
def test_bug_show_and_approve_report_an_inconsistent_log(world: World, command: str) -> None:
    proc: Proc = world[f"log-inconsistent:{command}"]
    assert proc.returncode == 1
    _one_error(proc, "inconsistent log", world.session_id)


def test_bug_a_mistyped_approval_leaves_the_session_awaiting_approval(world: World) -> None:
    proc, stored, shown = world["chain:approve-typo"]
    assert proc.returncode == 2
    _one_error(proc, "c1-typo", "is not waiting for approval")
    assert "c1" in proc.stderr  # the hint lists the calls that are waiting
    assert (stored, shown) == ("awaiting_approval", "awaiting_approval")


def test_bug_resume_refuses_a_workspace_that_no_longer_exists(world: World) -> None:
    run, resumed, recreated = world["chain:deleted-workspace"]
    assert run.returncode == 0, run.stderr
    _clean(resumed)
    assert resumed.returncode == 2, resumed.stdout + resumed.stderr
    assert "not a directory" in resumed.stderr
    assert not recreated


def test_bug_reconcile_refuses_contradictory_verdicts(world: World) -> None:
    proc, before, after = world["chain:reconcile-both"]
    assert before == "dispatched"
    _clean(proc)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert after == "dispatched"


def test_bug_run_on_a_locked_database_says_it_is_locked_and_to_retry(world: World) -> None:
    proc: Proc = world["locked-wal:run"]
    assert proc.returncode == 1
    _one_error(proc, "locked by another process")
    assert "strata resume" not in proc.stderr


def test_bug_doctor_reports_a_database_locked_for_writing(world: World) -> None:
    proc: Proc = world["locked-wal:doctor"]
    _clean(proc)
    assert proc.returncode == 1, proc.stdout
    assert any("database" in ln and "locked" in ln for ln in proc.stdout.splitlines()), proc.stdout


def test_bug_a_database_path_that_is_a_directory_never_prints_a_traceback(world: World) -> None:
    for proc in (world["db:directory:timeline"], world["db:directory:doctor"]):
        assert "Traceback" not in proc.stderr, proc.stderr

