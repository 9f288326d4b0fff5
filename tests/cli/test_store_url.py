"""Choosing the event store (issue 17): `STRATA_DB` (or `db` in the user's file) sends every command to PostgreSQL;
a project file may not choose it; a password in the URL is never printed."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from memory.postgres._schema import MIGRATIONS
from tests._postgres import Cluster, rows
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI, write_script

pytestmark = pytest.mark.slow


def test_run_sessions_timeline_and_doctor_use_the_postgresql_store(postgres_cluster: Cluster, tmp_path: Path) -> None:
    url = postgres_cluster.new_database()
    cli = StrataCLI(tmp_path / "home", tmp_path, store_url=url)
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path / "s.json", [[tool_use("w1", "write_file", path="a.txt", content="A\n")],
                                                 [text("written")]])
    run = cli.run("run", "--model", f"script:{script}", "--workspace", str(ws), "--allow", "write_file", "--json",
                  "write a")
    assert run.returncode == 0, run.stderr
    assert (ws / "a.txt").read_text() == "A\n"
    (session,) = cli.json_lines("sessions", "--json")
    assert session["status"] == "completed"
    verify = cli.run("timeline", session["id"], "--verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert not (tmp_path / "home" / "strata.db").exists()
    doctor = cli.run("doctor", "--workspace", str(ws))
    (line,) = [ln for ln in doctor.stdout.splitlines() if "database" in ln and "postgresql://" in ln]
    assert "1 sessions" in line


def test_a_project_file_cannot_choose_the_store(cli: StrataCLI, workspace: Path) -> None:
    project = workspace / ".strata" / "config.toml"
    project.parent.mkdir()
    project.write_text('db = "postgresql://attacker@203.0.113.9/loot"\n')
    shown = cli.run("config", "show", "--workspace", str(workspace))
    assert shown.returncode == 2  # a config error, as any malformed config
    line, *hint = shown.stderr.strip().splitlines()
    assert "a project file cannot choose the event store" in line and str(project) in line and "key db" in line
    assert hint == ["hint: set STRATA_DB, or `db` in the user's config file"]


def test_the_store_password_is_never_printed(cli: StrataCLI, workspace: Path) -> None:
    user = cli.home / "xdg-config" / "strata" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('db = "postgresql://strata:hunter2-not-real@127.0.0.1:1/x"\n')
    for args in (("config", "show", "--workspace", str(workspace)),
                 ("config", "show", "--workspace", str(workspace), "--json")):
        shown = cli.run(*args)
        assert shown.returncode == 0, shown.stderr
        assert "hunter2-not-real" not in shown.stdout + shown.stderr
        assert "postgresql://strata:***@127.0.0.1:1/x" in shown.stdout
    view = json.loads(cli.run("config", "show", "--workspace", str(workspace), "--json").stdout)
    assert view["settings"]["db"]["value"] == "postgresql://strata:***@127.0.0.1:1/x"
    failed = cli.run("sessions")  # nothing listens there: one line, without the password
    assert failed.returncode == 1
    assert "hunter2-not-real" not in failed.stdout + failed.stderr
    line, *hint = failed.stderr.strip().splitlines()
    assert line.startswith("strata: error: cannot connect to postgresql://strata@127.0.0.1:1/x: "), failed.stderr
    assert hint == ["hint: check the URL, that the server runs, and the credentials"], failed.stderr


def test_reading_commands_leave_an_older_postgresql_schema_as_it_is(postgres_cluster: Cluster, tmp_path: Path) -> None:
    """A reading command does not migrate the database: a migration shuts every older Strata still working on it
    out ("schema migrations this Strata does not know"), which a read must never do. A writing command does."""
    url = postgres_cluster.new_database()
    cli = StrataCLI(tmp_path / "home", tmp_path, store_url=url)
    script = write_script(tmp_path / "s.json", [[text("hello")]])
    assert cli.run("run", "--model", f"script:{script}", "hi").returncode == 0
    latest = MIGRATIONS[-1][0]
    with psycopg.connect(url, autocommit=True) as conn:  # as an older Strata left it
        conn.execute("DELETE FROM strata_schema WHERE name = %s", (latest,))

    (session,) = cli.json_lines("sessions", "--json")
    for args in (("sessions",), ("show", session["id"]), ("timeline", session["id"], "--verify"),
                 ("receipts", session["id"]), ("doctor",)):
        done = cli.run(*args)
        assert done.returncode == 0, (args, done.stdout + done.stderr)
        assert latest not in {name for (name,) in rows(url, "SELECT name FROM strata_schema")}, args
    resumed = cli.run("resume", session["id"], "--model", f"script:{script}", "again")
    assert resumed.returncode == 0, resumed.stderr
    assert latest in {name for (name,) in rows(url, "SELECT name FROM strata_schema")}
