"""A home's strata.db that is an SQLite database but not a Strata one (another program's file copied over it, or a
write-ahead log of another database left next to it, which SQLite applies without asking whose it is), or such a
file named by `strata db copy --to`, is refused in one line naming the file, and left as it was: Strata's tables
are never added to another program's database, and the foreign log is never checkpointed into the home's database
file, which would overwrite its pages.

Before the fix both were taken for a new, empty home: the schema was migrated into the foreign database, the
home's sessions were gone (`no sessions yet`), the foreign WAL was copied into strata.db when the command
closed the database, and `db copy` copied the sessions into the other program's file."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.cli._helpers import error_lines, result_line, strata, text
from tests.conftest import StrataCLI, write_script


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _other_program_database(path: Path, *, keep_wal: bool) -> sqlite3.Connection | None:
    """Another program's SQLite database at `path`: one table, 100 rows. `keep_wal`: in WAL mode, its commits left
    in `path`-wal (the connection returned holds it open, so it is not checkpointed)."""
    conn = sqlite3.connect(path)
    if keep_wal:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("CREATE TABLE notes (body BLOB)")
    conn.executemany("INSERT INTO notes VALUES (?)", [(b"x" * 1000,)] * 100)
    conn.commit()
    if keep_wal:
        return conn
    conn.close()
    return None


@pytest.fixture(scope="module")
def had_sessions(tmp_path_factory: pytest.TempPathFactory) -> StrataCLI:
    base = tmp_path_factory.mktemp("foreign")
    cli = StrataCLI(base / "home", base)
    script = write_script(base / "turns.json", [[text("done")]])
    run = strata(cli, "run", "--json", "--model", f"script:{script}", "hello")
    assert run.returncode == 0, run.stderr
    assert result_line(run.stdout) is not None
    return cli


def _copy(source: StrataCLI, tmp_path: Path) -> StrataCLI:
    home = tmp_path / "home"
    shutil.copytree(source.home, home)
    for leftover in home.glob("strata.db-*"):
        leftover.unlink()
    return StrataCLI(home, tmp_path)


def _refused(proc_stderr: str, db: Path) -> None:
    (line,) = error_lines(proc_stderr)
    assert line.startswith(f"strata: error: {db} is an SQLite database, but not a Strata one"), line
    assert "notes" in line and "left untouched" in line, line


@pytest.mark.parametrize("args", [("sessions",), ("sessions", "--json"), ("receipts",),
                                  ("run", "--model", "script:turns.json", "hi")])
def test_another_programs_database_is_refused_and_left_as_it_was(cli: StrataCLI, tmp_path: Path,
                                                                 args: tuple[str, ...]) -> None:
    cli.home.mkdir(parents=True, exist_ok=True)
    db = cli.home / "strata.db"
    _other_program_database(db, keep_wal=False)
    before = _digest(db)
    write_script(tmp_path / "turns.json", [[text("done")]])
    proc = strata(cli, *args)
    assert proc.returncode == 1, proc.stdout
    _refused(proc.stderr, db)
    assert _digest(db) == before
    with sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True) as conn:
        tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    assert tables == ["notes"]


def test_a_copy_into_another_programs_database_is_refused_and_adds_nothing_to_it(had_sessions: StrataCLI,
                                                                                 tmp_path: Path) -> None:
    """`strata db copy --to` a path that is another program's SQLite file (a typo, say)."""
    target = tmp_path / "app.db"
    _other_program_database(target, keep_wal=False)
    before = _digest(target)
    proc = strata(had_sessions, "db", "copy", "--to", str(target))
    assert proc.returncode == 1, proc.stdout
    _refused(proc.stderr, target)
    assert _digest(target) == before


@pytest.mark.parametrize("args", [("sessions",), ("run", "--model", "script:turns.json", "hi")])
def test_a_write_ahead_log_of_another_database_is_refused_and_not_checkpointed(
        had_sessions: StrataCLI, tmp_path: Path, args: tuple[str, ...]) -> None:
    cli = _copy(had_sessions, tmp_path)
    db = cli.home / "strata.db"
    before = _digest(db)
    other = tmp_path / "other.db"
    holder = _other_program_database(other, keep_wal=True)
    assert holder is not None
    try:
        shutil.copyfile(f"{other}-wal", f"{db}-wal")
    finally:
        holder.close()
    wal = _digest(Path(f"{db}-wal"))
    write_script(tmp_path / "turns.json", [[text("done")]])
    proc = strata(cli, *args)
    assert proc.returncode == 1, proc.stdout
    _refused(proc.stderr, db)
    assert _digest(db) == before  # the home's sessions are still in the file, under the foreign log
    assert _digest(Path(f"{db}-wal")) == wal
    Path(f"{db}-wal").unlink()
    Path(f"{db}-shm").unlink(missing_ok=True)
    listed = strata(cli, "sessions", "--json")
    assert listed.returncode == 0, listed.stderr
    assert len([line for line in listed.stdout.splitlines() if line.strip()]) == 1
