"""The Strata home is private: under `umask 022` a real `strata` creates its home 0700 and every file in it 0600
(the database and its WAL and SHM, keys, ledger, logs, locks, trust record, chat history), and `strata doctor`
reports an older, looser home with the exact `chmod` that fixes it, without repairing anything."""

from __future__ import annotations

import io
import os
import stat
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pexpect
import pytest

from tests.cli._helpers import assert_clean_stderr, text, tool_use
from tests.conftest import StrataCLI, write_script


@contextmanager
def umask(mask: int) -> Iterator[None]:
    """The umask the `strata` processes inherit (a common default: group and others may read)."""
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def modes(home: Path) -> dict[str, int]:
    """Path (relative to the home, the home itself as '.') -> permission bits, for everything in the home."""
    out = {".": stat.S_IMODE(home.stat().st_mode)}
    for path in sorted(home.rglob("*")):
        out[str(path.relative_to(home))] = stat.S_IMODE(path.lstat().st_mode)
    return out


def loose(found: dict[str, int], home: Path) -> dict[str, str]:
    """What is not private: directories other than 0700, files other than 0600."""
    bad = {}
    for name, mode in found.items():
        want = 0o700 if (home / name).is_dir() else 0o600
        if mode != want:
            bad[name] = oct(mode)
    return bad


def _session(cli: StrataCLI, tmp_path: Path) -> tuple[Path, str]:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    script = write_script(tmp_path / "turns.json", [
        [tool_use("w1", "write_file", path="out.txt", content="private\n"), tool_use("b1", "bash", command="true")],
        [text("done")],
    ])
    proc = cli.run("run", "--model", f"script:{script}", "--workspace", str(ws), "--allow", "write_file",
                   "--allow", "bash", "--json", "write it")
    assert proc.returncode == 0, proc.stderr
    assert_clean_stderr(proc)
    return ws, script.name


def test_home_and_every_file_strata_creates_are_private_under_umask_022(tmp_path: Path) -> None:
    """A home Strata creates itself (and its parent directories) is 0700; the database, its WAL and SHM, the
    masking and chain keys, the seen-secrets file, ledger, log, lock files and trust record are 0600, although
    the processes run under umask 022."""
    home = tmp_path / "data" / "strata"  # neither directory exists yet
    cli = StrataCLI(home, tmp_path)
    with umask(0o022):
        ws, _ = _session(cli, tmp_path)
        (ws / ".strata").mkdir()
        (ws / ".strata" / "config.toml").write_text("max_turns = 7\n")
        trusted = cli.run("trust", str(ws))
        assert trusted.returncode == 0, trusted.stderr
        # a second process while the first left the WAL behind: the WAL and SHM exist now
        listed = cli.run("sessions")
        assert listed.returncode == 0, listed.stderr
    found = modes(home)
    for name in ("strata.db", "ledger", "logs", "locks", "masking.key", "chain.key", "trusted_projects.json"):
        assert name in found, sorted(found)
    assert any(n.startswith("ledger/") for n in found) and any(n.startswith("locks/") for n in found)
    assert loose(found, home) == {}
    assert stat.S_IMODE((tmp_path / "data").stat().st_mode) == 0o700, "a parent Strata created is private too"


def test_wal_and_shm_are_private_while_a_session_runs(cli: StrataCLI, tmp_path: Path) -> None:
    """SQLite creates the WAL and SHM itself, with the database file's mode: both are 0600 while they exist."""
    ws = tmp_path / "ws"
    ws.mkdir()
    hold = "for i in $(seq 1200); do [ -e release ] && break; sleep 0.05; done"  # until the test has looked (<= 60 s)
    script = write_script(tmp_path / "turns.json", [[tool_use("b1", "bash", command=hold)], [text("done")]])
    with umask(0o022):
        proc = cli.popen("run", "--model", f"script:{script}", "--workspace", str(ws), "--allow", "bash", "go")
        try:
            wal, shm = cli.home / "strata.db-wal", cli.home / "strata.db-shm"
            for _ in range(100):
                if wal.exists() and shm.exists():
                    break
                time.sleep(0.05)
            got = {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in (cli.home / "strata.db", wal, shm)}
        finally:
            (ws / "release").touch()  # the run's command waited for this: the WAL and SHM existed until now
            _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert got == {"strata.db": "0o600", "strata.db-wal": "0o600", "strata.db-shm": "0o600"}


def test_chat_history_is_private(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """The prompt history of `strata chat` (what the person typed) is created 0600."""
    script = write_script(tmp_path / "turns.json", [[text("hello back")]])
    with umask(0o022):
        child = cli.spawn_pty("chat", "--model", f"script:{script}", "--workspace", str(workspace))
        child.logfile_read = io.StringIO()
        child.expect("strata>")
        child.sendline("my secret plan")
        child.expect("hello back")
        child.expect("strata>")
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
        child.close()
    history = cli.home / "chat_history"
    assert "my secret plan" in history.read_text()
    assert oct(stat.S_IMODE(history.stat().st_mode)) == "0o600"


def test_doctor_reports_a_loose_home_with_the_chmod_fix_and_repairs_nothing(cli: StrataCLI, workspace: Path,
                                                                         tmp_path: Path) -> None:
    """An older home (0755, a 0644 database and ledger): doctor warns, naming what others can read and the exact
    command that fixes it; the modes are left as they were."""
    _session(cli, tmp_path)
    os.chmod(cli.home, 0o755)
    os.chmod(cli.home / "strata.db", 0o644)
    ledger = next((cli.home / "ledger").iterdir())
    os.chmod(ledger, 0o644)
    before = modes(cli.home)
    proc = cli.run("doctor", "--workspace", str(workspace), env={"ANTHROPIC_API_KEY": ""})
    assert_clean_stderr(proc)
    assert proc.returncode == 0, proc.stdout  # a warning: Strata works, but others can read the home
    (line,) = [line for line in proc.stdout.splitlines() if "permissions" in line]
    assert line.startswith("warn")
    assert str(cli.home) in line and "strata.db" in line and ledger.name in line
    assert f"chmod -R go-rwx {cli.home}" in line
    assert modes(cli.home) == before
    # the printed fix is exact: after it, doctor has nothing to say about permissions
    subprocess.run(["chmod", "-R", "go-rwx", str(cli.home)], check=True)
    again = cli.run("doctor", "--workspace", str(workspace), env={"ANTHROPIC_API_KEY": ""})
    assert not [line for line in again.stdout.splitlines() if "permissions" in line and line.startswith("warn")]


@pytest.mark.parametrize("mask", [0o000, 0o077])
def test_modes_do_not_depend_on_the_umask(tmp_path: Path, mask: int) -> None:
    """Not 'at most 0600' by luck of the umask: exactly 0700 and 0600 under umask 000 and 077 too."""
    home = tmp_path / "home"
    cli = StrataCLI(home, tmp_path)
    with umask(mask):
        _session(cli, tmp_path)
    assert loose(modes(home), home) == {}
