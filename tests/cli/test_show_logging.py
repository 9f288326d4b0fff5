"""`strata show` sets up logging only when something is logged (agent/cli/logging_setup.py `enter_at_first_record`,
observability/deferred_logging.py): a plain show imports no structlog (it cost a few percent of the command's CPU);
a snapshot that restore ignores is still logged, masked, on stderr and in the home's log file (real processes, a
real SQLite file whose snapshot's version names a secret)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from observability.logging import LOG_DIR, LOG_FILE
from tests.cli._helpers import result_line, run_noting_modules
from tests.conftest import StrataCLI, write_script

SECRET = "show-log-secret-77310"
SECRET_ENV = {"SHOW_PROBE_TOKEN": SECRET}
"""A secret of the environment (a name that looks secret): the home's masker masks its value."""


def _session_with_snapshots(cli: StrataCLI, tmp_path: Path) -> str:
    script = write_script(tmp_path / "turns.json", [])
    ran = cli.run("run", "--json", "--model", f"script:{script}", "hello", env={"STRATA_SNAPSHOT_EVERY": "1"})
    assert ran.returncode == 0, ran.stderr
    return str((result_line(ran.stdout) or {})["session_id"])


def test_show_imports_no_structlog(cli: StrataCLI, tmp_path: Path) -> None:
    session_id = _session_with_snapshots(cli, tmp_path)
    for args in (["show", session_id], ["show", session_id, "--json"]):
        done, loaded = run_noting_modules(cli, args, tmp_path)
        assert done.returncode == 0, (args, done.stderr)
        assert session_id in done.stdout and done.stderr == "", (args, done.stdout, done.stderr)
        assert "structlog" not in loaded, args


def test_show_verbose_sets_up_logging_at_once(cli: StrataCLI, tmp_path: Path) -> None:
    session_id = _session_with_snapshots(cli, tmp_path)
    done, loaded = run_noting_modules(cli, ["--verbose", "show", session_id], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "structlog" in loaded  # `--verbose` asks to see everything: logging is set up before the command runs


def test_a_snapshot_show_ignores_is_logged_with_its_secret_masked(cli: StrataCLI, tmp_path: Path) -> None:
    session_id = _session_with_snapshots(cli, tmp_path)
    with sqlite3.connect(cli.home / "strata.db") as db:
        assert db.execute("SELECT count(*) FROM snapshots").fetchone()[0] > 0
        db.execute("UPDATE snapshots SET version = ?", (f"v-{SECRET}",))  # restore's reason names the version
    log_file = cli.home / LOG_DIR / LOG_FILE
    before = log_file.read_text(encoding="utf-8") if log_file.exists() else ""

    done, loaded = run_noting_modules(cli, ["show", session_id], tmp_path, env=SECRET_ENV)

    assert done.returncode == 0, done.stderr
    assert session_id in done.stdout  # the whole log folded instead
    (line,) = done.stderr.splitlines()
    assert "snapshot ignored; folding the whole log" in line and session_id in line, line
    assert SECRET not in line and "v-[MASKED:" in line, line
    logged = log_file.read_text(encoding="utf-8")[len(before):]
    assert "snapshot ignored; folding the whole log" in logged and "v-[MASKED:" in logged, logged
    assert SECRET not in logged
    assert "structlog" in loaded  # set up at the record, to mask it
