"""`strata timeline ID --verify` checks the receipts table (mutable: a receipt's status changes) against the chained
timeline, whose receipt rows are committed with every change: a receipt whose status was changed in the database,
one removed, or one added outside Strata is named, and the verdict is broken."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tests.cli._helpers import error_lines, strata, text, tool_use
from tests.conftest import StrataCLI, write_script


@pytest.fixture(scope="module")
def reconciled(tmp_path_factory: pytest.TempPathFactory) -> tuple[StrataCLI, str, str]:
    """A write killed after its receipt, reconciled as applied by a person: its receipt went through three
    transitions (dispatched, unknown, reconciled)."""
    base = tmp_path_factory.mktemp("receipts")
    cli = StrataCLI(base / "home", base)
    ws = base / "ws"
    ws.mkdir()
    script = write_script(base / "turns.json", [
        [tool_use("toolu_w", "write_file", path="out.txt", content="hello\n")], [text("done")]])
    killed = cli.run("run", "--model", f"script:{script}", "--workspace", str(ws), "--allow", "write_file", "go",
                     env={"STRATA_FAULT": "after_receipt"})
    assert killed.returncode == -9
    (session,) = cli.json_lines("sessions", "--json")
    (receipt,) = cli.json_lines("receipts", session["id"], "--json")
    assert strata(cli, "reconcile", receipt["id"], "--applied").returncode == 0
    ok = strata(cli, "timeline", session["id"], "--verify")
    assert ok.returncode == 0, ok.stderr
    return cli, session["id"], receipt["id"]


def tampered(made: tuple[StrataCLI, str, str], tmp_path: Path, *statements: str) -> StrataCLI:
    home = tmp_path / "home"
    shutil.copytree(made[0].home, home)
    with closing(sqlite3.connect(home / "strata.db", isolation_level=None)) as conn:
        for statement in statements:
            conn.execute(statement)
    return StrataCLI(home, tmp_path)


def verify_error(cli: StrataCLI, session_id: str) -> str:
    proc = strata(cli, "timeline", session_id, "--verify")
    assert proc.returncode == 1, proc.stdout
    assert "chain verified" not in proc.stdout
    return error_lines(proc.stderr)[0]


def test_a_receipt_whose_status_was_changed_fails_verify(reconciled: tuple[StrataCLI, str, str],
                                                         tmp_path: Path) -> None:
    _, sid, rid = reconciled
    cli = tampered(reconciled, tmp_path, f"UPDATE receipts SET status = 'unknown' WHERE id = '{rid}'")
    line = verify_error(cli, sid)
    assert line.startswith(f"strata: error: receipts of session {sid}: receipt {rid} is unknown in the receipts "
                           "table, but its last timeline row")
    assert "leaves it done" in line


def test_a_removed_receipt_fails_verify(reconciled: tuple[StrataCLI, str, str], tmp_path: Path) -> None:
    _, sid, rid = reconciled
    cli = tampered(reconciled, tmp_path, f"DELETE FROM receipts WHERE id = '{rid}'")
    assert verify_error(cli, sid).endswith(f"receipt {rid}, named by timeline row 6, is missing from the receipts "
                                           "table (it was removed)")


def test_a_receipt_added_outside_strata_fails_verify(reconciled: tuple[StrataCLI, str, str], tmp_path: Path) -> None:
    _, sid, rid = reconciled
    cli = tampered(reconciled, tmp_path,
                   "INSERT INTO receipts SELECT 'rcpt_forged', session_id, call_id, tool, status, "
                   f"idempotency_key || 'x', args_sha256, resource_keys, created_at, updated_at, outcome_sha256, "
                   f"note, reconciled_by, process FROM receipts WHERE id = '{rid}'")
    assert "receipt rcpt_forged (call toolu_w) is on no timeline row" in verify_error(cli, sid)
