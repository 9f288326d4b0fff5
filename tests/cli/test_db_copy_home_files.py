"""`strata db copy` into another home's `strata.db`: what the target home gets besides the rows (the seen secrets,
0600), and what a refused copy leaves there (nothing)."""

from __future__ import annotations

import fcntl
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tests.cli._helpers import error_lines, result_line, strata, text
from tests.conftest import StrataCLI, write_script

SECRET = "kq8vZ2mT7xw4Lp9dHs3N"
SECRET_ENV = {"DEPLOY_API_TOKEN": SECRET}


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[StrataCLI, str]:
    """A home with one session whose prompt holds a known secret (so the home remembers it in masking.seen)."""
    base = tmp_path_factory.mktemp("copy_home")
    cli = StrataCLI(base / "home", base)
    script = write_script(base / "turns.json", [[text("done")]])
    run = strata(cli, "run", "--json", "--model", f"script:{script}", f"deploy with {SECRET}", env=SECRET_ENV)
    assert run.returncode == 0, run.stderr
    session_id = str((result_line(run.stdout) or {})["session_id"])
    assert SECRET in (cli.home / "masking.seen").read_text()
    return cli, session_id


def fresh(source: tuple[StrataCLI, str], tmp_path: Path) -> StrataCLI:
    """A copy of the source home, to change without touching the module's."""
    home = tmp_path / "src"
    shutil.copytree(source[0].home, home)
    return StrataCLI(home, tmp_path)


def test_a_copied_home_keeps_the_seen_secrets_private_and_masks_them(source: tuple[StrataCLI, str],
                                                                     tmp_path: Path) -> None:
    cli, session_id = source
    target = tmp_path / "target"
    copied = strata(cli, "db", "copy", "--to", str(target / "strata.db"))
    assert copied.returncode == 0, copied.stderr
    seen = target / "masking.seen"
    assert SECRET in seen.read_text()
    assert seen.stat().st_mode & 0o777 == 0o600
    exported = strata(StrataCLI(target, tmp_path), "export", session_id)
    assert exported.returncode == 0, exported.stderr
    assert SECRET not in exported.stdout
    assert "[MASKED:known_secret:" in exported.stdout


def test_copying_again_adds_only_the_seen_secrets_the_target_lacks(source: tuple[StrataCLI, str],
                                                                 tmp_path: Path) -> None:
    cli, _ = source
    target = tmp_path / "target"
    target.mkdir(mode=0o700)
    (target / "masking.seen").write_text('"already-known-value-1234"\n')
    for _ in range(2):
        copied = strata(cli, "db", "copy", "--to", str(target / "strata.db"))
        assert copied.returncode == 0, copied.stderr
    lines = (target / "masking.seen").read_text().splitlines()
    assert lines == ['"already-known-value-1234"', f'"{SECRET}"']


def break_newest_session(cli: StrataCLI, tmp_path: Path) -> str:
    """A second session, made and then edited in the database (a timeline row's summary): it does not verify."""
    script = write_script(tmp_path / "more.json", [[text("more")]])
    run = strata(cli, "run", "--json", "--model", f"script:{script}", "second")
    assert run.returncode == 0, run.stderr
    session_id = str((result_line(run.stdout) or {})["session_id"])
    with closing(sqlite3.connect(cli.home / "strata.db", isolation_level=None)) as conn:
        conn.execute("DROP TRIGGER IF EXISTS timeline_no_update")
        (num,) = conn.execute("SELECT num FROM sessions WHERE id = ?", (session_id,)).fetchone()
        conn.execute("UPDATE timeline SET summary = 'edited' WHERE key = ?", ((num << 40) | 1,))
    return session_id


@pytest.mark.parametrize("target_dir_exists", [False, True], ids=["new_home", "empty_home"])
def test_a_refused_copy_leaves_nothing_in_the_target(source: tuple[StrataCLI, str], tmp_path: Path,
                                                     target_dir_exists: bool) -> None:
    """The first session is sound, the second does not verify: nothing is copied (every session is checked before
    any is written), and the target is left as it was found: no database, no chain.key, no directory made."""
    cli = fresh(source, tmp_path)
    broken = break_newest_session(cli, tmp_path)
    target = tmp_path / "target" / "home"
    if target_dir_exists:
        target.mkdir(parents=True)
    refused = strata(cli, "db", "copy", "--to", str(target / "strata.db"))
    assert refused.returncode != 0
    (line,) = error_lines(refused.stderr)
    assert line.startswith(f"strata: error: session {broken} was not copied: its timeline does not verify")
    assert "copied:" not in refused.stdout
    if target_dir_exists:
        assert list(target.iterdir()) == []
    else:
        assert not (tmp_path / "target").exists()


def test_a_target_written_as_a_directory_is_refused_before_anything_is_made(source: tuple[StrataCLI, str],
                                                                            tmp_path: Path) -> None:
    """`--to backup/` (a trailing slash: a directory, which does not exist yet) names no database file. Copying
    into a file called `backup` would drop this home's chain key and seen secrets in the directory above it."""
    cli, _ = source
    parent = tmp_path / "parent"
    parent.mkdir()
    refused = strata(cli, "db", "copy", "--to", f"{parent / 'backup'}/")
    assert refused.returncode == 2, refused.stdout
    (line,) = error_lines(refused.stderr)
    assert line == (f"strata: error: {parent / 'backup'}/ names a directory: name the database file "
                    f"(e.g. {parent / 'backup' / 'strata.db'})")
    assert "Traceback" not in refused.stderr
    assert list(parent.iterdir()) == []


def test_a_target_home_with_another_chain_key_is_refused_as_such_not_as_a_changed_history(
        source: tuple[StrataCLI, str], tmp_path: Path) -> None:
    """Copying into another home's database, whose chain key is not this home's: the refusal says the keys
    differ. It used to say this home's first session "does not verify ... event 1 was changed", as if its own
    history had been tampered with."""
    cli, session_id = source
    other = StrataCLI(tmp_path / "other", tmp_path)
    script = write_script(tmp_path / "turns.json", [[text("theirs")]])
    made = strata(other, "run", "--json", "--model", f"script:{script}", "their session")
    assert made.returncode == 0, made.stderr
    before = (other.home / "strata.db").read_bytes()
    refused = strata(cli, "db", "copy", "--to", str(other.home / "strata.db"))
    assert refused.returncode == 1, refused.stdout
    (line,) = error_lines(refused.stderr)
    theirs = (other.home / "chain.key").read_bytes() != (cli.home / "chain.key").read_bytes()
    assert theirs
    assert line.startswith(f"strata: error: cannot copy into {other.home / 'strata.db'}: its chain key (key "), line
    assert "is not this home's (key " in line and "nothing was copied" in line, line
    assert "was changed" not in refused.stderr and "fix the database" not in refused.stderr, refused.stderr
    assert "copied:" not in refused.stdout
    assert (other.home / "strata.db").read_bytes() == before
    listed = strata(other, "sessions", "--json")
    assert session_id not in listed.stdout


def test_a_copy_into_a_target_another_copy_is_writing_is_refused_and_touches_nothing(
        source: tuple[StrataCLI, str], tmp_path: Path) -> None:
    """Two copies into one new database: the second is refused in one line while the first holds the target. Before,
    both wrote; the one that lost the race on a session id was refused, and its clean-up (a refused copy leaves no
    database behind) deleted the database the other was writing into."""
    cli, _ = source
    target = tmp_path / "target" / "strata.db"
    target.parent.mkdir()
    target.touch(mode=0o600)
    with open(target, "rb") as held:  # as the first copy holds it
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        refused = strata(cli, "db", "copy", "--to", str(target))
        assert refused.returncode == 1, refused.stdout
        assert error_lines(refused.stderr) == [
            f"strata: error: another `strata db copy` is writing into {target}; nothing was copied"], refused.stderr
        assert target.exists() and target.stat().st_size == 0
        assert sorted(p.name for p in target.parent.iterdir()) == ["strata.db"]
    copied = strata(cli, "db", "copy", "--to", str(target))
    assert copied.returncode == 0, copied.stderr


def test_two_copies_at_once_into_one_new_target_leave_every_session_there(source: tuple[StrataCLI, str],
                                                                            tmp_path: Path) -> None:
    cli, session_id = source
    target = tmp_path / "target" / "strata.db"
    procs = [cli.popen("db", "copy", "--to", str(target)) for _ in range(2)]
    outcomes = [p.communicate(timeout=60) for p in procs]
    for (out, err), proc in zip(outcomes, procs, strict=True):
        assert proc.returncode == 0 or "another `strata db copy` is writing into" in err, (out, err)
        assert "was deleted" not in err, err
    again = strata(cli, "db", "copy", "--to", str(target))
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[-1] == "0 session(s) copied, 1 already there", again.stdout
    verified = strata(StrataCLI(target.parent, tmp_path), "timeline", session_id, "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
