"""What a reading command leaves in a home at rest (no `-wal`, no `-shm`). SQLite opens a WAL database read-only
only with a `-shm` (and a `-wal`) beside it, creating them when the directory can be written; a read-only
connection cannot checkpoint, so it does not remove them when it closes (memory/_read_only.py). That is SQLite's
WAL at work, not something to fight: what must hold is that the reader changes no commit and leaves nothing a
writer would have to recover, and that the next writer's close removes both files as usual."""

from __future__ import annotations

from pathlib import Path

from tests.cli._helpers import ScriptCLI, scripted_session


def test_a_reading_command_changes_no_byte_and_leaves_at_most_an_empty_wal_the_next_writer_removes(
        tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    cli = ScriptCLI(tmp_path / "home", tmp_path)
    sid = scripted_session(cli, tmp_path)
    db = cli.home / "strata.db"
    wal, shm = Path(f"{db}-wal"), Path(f"{db}-shm")
    assert not wal.exists() and not shm.exists()  # at rest: the writer's close removed them
    before = db.read_bytes()
    for args in (("sessions",), ("timeline", sid), ("--verbose", "timeline", sid), ("show", sid)):
        proc = cli.run(*args)
        assert proc.returncode == 0, (args, proc.stderr)
        assert db.read_bytes() == before, args
        assert not wal.exists() or wal.stat().st_size == 0, args  # nothing for a writer to recover
    scripted_session(cli, tmp_path, "again")  # the next writer
    assert not wal.exists() and not shm.exists()
