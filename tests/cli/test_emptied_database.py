"""A home's strata.db emptied to 0 bytes (a truncation, a failed copy, a full disk) while its evidence ledger holds
heads of the sessions it had is refused in one line, the file left as it is: never silently recreated as a new,
empty database in which those sessions are simply gone."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.cli._helpers import error_lines, result_line, strata, text
from tests.conftest import StrataCLI, write_script


@pytest.fixture(scope="module")
def had_sessions(tmp_path_factory: pytest.TempPathFactory) -> StrataCLI:
    base = tmp_path_factory.mktemp("emptied")
    cli = StrataCLI(base / "home", base)
    script = write_script(base / "turns.json", [[text("done")]])
    run = strata(cli, "run", "--json", "--model", f"script:{script}", "hello")
    assert run.returncode == 0, run.stderr
    assert result_line(run.stdout) is not None
    assert list((cli.home / "ledger").glob("*.heads"))
    return cli


def emptied(source: StrataCLI, tmp_path: Path) -> StrataCLI:
    home = tmp_path / "home"
    shutil.copytree(source.home, home)
    for leftover in home.glob("strata.db-*"):
        leftover.unlink()
    (home / "strata.db").write_bytes(b"")
    return StrataCLI(home, tmp_path)


@pytest.mark.parametrize("args", [("sessions",), ("sessions", "--json"), ("receipts",),
                                  ("run", "--model", "script:turns.json", "hi")])
def test_an_emptied_database_of_a_home_that_had_sessions_is_refused(had_sessions: StrataCLI, tmp_path: Path,
                                                                    args: tuple[str, ...]) -> None:
    cli = emptied(had_sessions, tmp_path)
    write_script(tmp_path / "turns.json", [[text("done")]])
    proc = strata(cli, *args)
    assert proc.returncode == 1, proc.stdout
    (line,) = error_lines(proc.stderr)
    assert line == (f"strata: error: {cli.home / 'strata.db'} is empty (0 bytes), but this home's evidence ledger "
                    "holds heads of 1 session(s) it had; it was left untouched, not recreated")
    assert (cli.home / "strata.db").stat().st_size == 0


def test_an_empty_database_file_in_a_home_without_sessions_is_still_made_a_database(cli: StrataCLI) -> None:
    cli.home.mkdir(parents=True, exist_ok=True)
    (cli.home / "strata.db").write_bytes(b"")
    proc = strata(cli, "sessions", "--json")
    assert proc.returncode == 0, proc.stderr
    assert (cli.home / "strata.db").stat().st_size > 0


@pytest.mark.parametrize("args", [("sessions",), ("run", "--model", "script:turns.json", "hi")])
def test_a_deleted_database_of_a_home_that_had_sessions_is_not_recreated(had_sessions: StrataCLI, tmp_path: Path,
                                                                         args: tuple[str, ...]) -> None:
    cli = emptied(had_sessions, tmp_path)
    (cli.home / "strata.db").unlink()
    write_script(tmp_path / "turns.json", [[text("done")]])
    proc = strata(cli, *args)
    assert proc.returncode == 1, proc.stdout
    (line,) = error_lines(proc.stderr)
    assert line == (f"strata: error: {cli.home / 'strata.db'} is missing, but this home's evidence ledger holds "
                    "heads of 1 session(s) it had; a new, empty database was not made in its place")
    assert not (cli.home / "strata.db").exists()
