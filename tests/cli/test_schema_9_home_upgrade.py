"""A home written by Strata at schema 9 (before the coded words of migration 010), opened by this Strata: every
command prints exactly what the Strata that wrote it printed, the chains verify, and what this Strata writes into
the upgraded home (a fork, a new run, a copy to another home or to PostgreSQL) verifies and reads the same.

The home in schema_9_home/ was made by the real `strata` of main at da01b7b (schema 9): `strata run` with the
scripted model (reads, a write allowed by a flag, a write outside the workspace denied by scope, `bash` denied by
policy), then `strata fork` of it at turn 2; its expected/ outputs are what that Strata printed for the commands
below on the same home. The database file is stored as strata.db.schema9 (the repository ignores *.db)."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from memory.migrations import MIGRATIONS
from tests._in_process_cli import json_lines_in_process, run_in_process
from tests._postgres import Cluster
from tests.cli._helpers import events_of, strata
from tests.conftest import StrataCLI, write_script

pytestmark = pytest.mark.timeout(240)

FIXTURE = Path(__file__).parent / "schema_9_home"
RUN = "01a24e23-73d8-7000-9095-7c45921cadb0"
FORK = "01a24e23-cd44-7000-820d-435029784a09"
COMMANDS = {  # expected/<first 13 characters of the id>.<name>: the arguments after the session id
    "timeline.json": ("timeline", "--json"),
    "timeline.txt": ("timeline",),
    "denied.json": ("timeline", "--kind", "call", "--decision", "denied", "--json"),
    "verify.txt": ("timeline", "--verify"),
    "export.jsonl": ("export", "--format", "jsonl"),
    "show.txt": ("show",),
}


def _schema_9_home(tmp_path: Path) -> StrataCLI:
    home = tmp_path / "home"
    shutil.copytree(FIXTURE / "home", home)
    (home / "strata.db.schema9").rename(home / "strata.db")
    home.chmod(0o700)
    for key in ("chain.key", "masking.key"):
        (home / key).chmod(0o600)
    with closing(sqlite3.connect(home / "strata.db")) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (9,)
    return StrataCLI(home, tmp_path)


def _expected(session_id: str, name: str) -> str:
    return (FIXTURE / "expected" / f"{session_id[:13]}.{name}").read_text()


def _printed(cli: StrataCLI, session_id: str, args: tuple[str, ...]) -> str:
    proc = run_in_process(cli, args[0], session_id, *args[1:])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _verified(cli: StrataCLI, session_id: str) -> None:
    proc = run_in_process(cli, "timeline", session_id, "--verify")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("chain verified:"), proc.stdout


def test_a_schema_9_home_prints_the_same_after_the_upgrade_and_takes_new_rows(tmp_path: Path) -> None:
    cli = _schema_9_home(tmp_path)
    for session_id in (RUN, FORK):
        for name, args in COMMANDS.items():
            assert _printed(cli, session_id, args) == _expected(session_id, name), (session_id, name)
    assert run_in_process(cli, "sessions", "--json").stdout == (FIXTURE / "expected" / "sessions.json").read_text()
    with closing(sqlite3.connect(cli.home / "strata.db")) as conn:  # upgraded: the words are stored as numbers
        assert conn.execute("PRAGMA user_version").fetchone() == (len(MIGRATIONS),)
        assert conn.execute("SELECT DISTINCT typeof(kind) FROM timeline").fetchall() == [("integer",)]
        assert conn.execute("SELECT DISTINCT typeof(kind) FROM events").fetchall() == [("integer",)]

    # What this Strata writes into the upgraded home: a fork of the upgraded session and a new run.
    forked = cli.json_lines("fork", RUN, "--at-turn", "3", "--json")[0]["session_id"]
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("hello\n")
    script = write_script(tmp_path / "turns.json", [
        [{"type": "tool_use", "id": "r1", "name": "read_file", "input": {"path": "notes.txt"}}],
        [{"type": "text", "text": "done"}]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(ws), "--json", "read it")
    assert run.returncode == 0, run.stderr
    new = events_of(run.stdout)[0]["session_id"]
    for session_id in (RUN, FORK, forked, new):
        _verified(cli, session_id)
    phases = json_lines_in_process(cli, "timeline", new, "--kind", "phase", "--json")
    assert [r["outcome"] for r in phases] == ["perceive", "commit", "act", "observe", "perceive", "reflect"]
    assert phases[1]["data"] != {} and phases[2]["data"] == {}

    # Copied to another home, rows and hashes as they are (not the evidence ledger, which is the home's): the
    # same rows there, and the chains verify.
    other = tmp_path / "other"
    copied = cli.run("db", "copy", "--to", str(other / "strata.db"))
    assert copied.returncode == 0, copied.stderr
    there = StrataCLI(other, tmp_path)
    for session_id in (RUN, FORK):
        for name in ("timeline.json", "export.jsonl"):
            assert _printed(there, session_id, COMMANDS[name]) == _expected(session_id, name), (session_id, name)
    for session_id in (RUN, FORK, forked, new):
        _verified(there, session_id)
        assert (json_lines_in_process(there, "timeline", session_id, "--json")
                == json_lines_in_process(cli, "timeline", session_id, "--json"))


def test_an_upgraded_schema_9_home_copied_to_postgresql_reads_the_same(postgres_cluster: Cluster,
                                                                        tmp_path: Path) -> None:
    cli = _schema_9_home(tmp_path)
    url = postgres_cluster.new_database()
    copied = cli.run("db", "copy", "--to", url)
    assert copied.returncode == 0, copied.stderr
    on_pg = StrataCLI(cli.home, tmp_path, store_url=url)
    for session_id in (RUN, FORK):
        for name in ("timeline.json", "verify.txt", "export.jsonl"):
            assert _printed(on_pg, session_id, COMMANDS[name]) == _expected(session_id, name), (session_id, name)
