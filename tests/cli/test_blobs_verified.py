"""A large output is kept as a blob beside the state log, by its sha256. A blob changed or removed in the database
fails `strata timeline ID --verify` (the event naming it is named), and `strata db copy` refuses to copy that
session rather than carry the damage into a store where it would look fresh."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import error_lines, strata, text, tool_use
from tests.conftest import StrataCLI, write_script


@pytest.fixture(scope="module")
def with_blob(tmp_path_factory: pytest.TempPathFactory) -> tuple[StrataCLI, str, str]:
    base = tmp_path_factory.mktemp("blobs")
    cli = StrataCLI(base / "home", base)
    ws = base / "ws"
    ws.mkdir()
    script = write_script(base / "turns.json", [[tool_use("b1", "bash", command="seq 1 10000")], [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(ws), "--allow", "bash", "go")
    assert run.returncode == 0, run.stderr
    (session,) = json_lines_in_process(cli, "sessions", "--json")
    with closing(sqlite3.connect(cli.home / "strata.db")) as conn:
        (sha,) = conn.execute("SELECT sha256 FROM blobs").fetchone()
    return cli, session["id"], sha


CHANGE = ("DROP TRIGGER IF EXISTS blobs_no_update",
          "UPDATE blobs SET data = CAST(replace(CAST(data AS TEXT), '9999', '9998') AS BLOB)")
REMOVE = ("DROP TRIGGER IF EXISTS blobs_no_delete", "DELETE FROM blobs")


@pytest.mark.parametrize(("statements", "how"), [(CHANGE, "does not hold the output its event names (it was changed)"),
                                                 (REMOVE, "is missing (it was removed)")], ids=["changed", "removed"])
def test_a_damaged_blob_fails_verify_and_is_not_copied(with_blob: tuple[StrataCLI, str, str], tmp_path: Path,
                                                       statements: tuple[str, ...], how: str) -> None:
    home = tmp_path / "home"
    shutil.copytree(with_blob[0].home, home)
    cli, sid, sha = StrataCLI(home, tmp_path), with_blob[1], with_blob[2]
    with closing(sqlite3.connect(home / "strata.db", isolation_level=None)) as conn:
        for statement in statements:
            conn.execute(statement)

    checked = strata(cli, "timeline", sid, "--verify")
    assert checked.returncode == 1 and "chain verified" not in checked.stdout
    (line,) = error_lines(checked.stderr)
    assert line.startswith(f"strata: error: state log of session {sid}: event ") and f"blob {sha} {how}" in line

    copied = strata(cli, "db", "copy", "--to", str(tmp_path / "target" / "strata.db"))
    assert copied.returncode != 0
    (line,) = error_lines(copied.stderr)
    assert line.startswith(f"strata: error: session {sid} was not copied: event ") and f"blob {sha} {how}" in line
