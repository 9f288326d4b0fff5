"""Commands that only read work in a Strata home that cannot be written (issue 19, item 8), with real processes
and a really read-only home: each command runs in a private mount namespace where the home is bind-mounted
read-only (`unshare -m` as root; `unshare -rm`, or sudo, otherwise), so every write into it fails with EROFS
whoever the process runs as (root included). Where no mount namespace can be made, the tests skip and say so.

A read-only home is opened read-only: `sessions`, `show`, `timeline` (also `--verify` and `--follow`),
`receipts`, `export`, `config show` print what they print in a writable home, say nothing on stderr, and create
nothing; `doctor` reports that the home is not writable (exit 1) and still checks the database. That holds both
for a home at rest and for one whose write-ahead log still holds commits (its process was killed)."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from tests.cli._helpers import (
    ALLOW_EFFECTS,
    assert_clean_stderr,
    bash_mark,
    events_of,
    json_lines,
    strata,
    text,
    tool_use,
)
from tests.conftest import StrataCLI, write_script

Runner = Callable[..., subprocess.CompletedProcess[str]]

def _namespaces() -> list[tuple[list[str], str]]:
    """Ways to run a command in a private mount namespace: (the unshare invocation, what to exec with after the
    mount). As root, `unshare -m`; otherwise in a user namespace (`unshare -rm`), or through passwordless sudo,
    dropping back to this user after the mount (as CI runs when it is not root)."""
    ways: list[tuple[list[str], str]] = [(["unshare", "-m"], ""), (["unshare", "-r", "-m"], "")]
    if os.geteuid() != 0 and shutil.which("sudo") and shutil.which("setpriv"):
        ways.append((["sudo", "-n", "-E", "unshare", "-m"],
                     f"setpriv --reuid={os.getuid()} --regid={os.getgid()} --clear-groups --"))
    return ways


def _wrap(then: str) -> str:
    """Bind the home (`$0`) over itself read-only, then run the command."""
    return f'mount --bind -o ro "$0" "$0" && exec {then} "$@"'


def _unshare() -> tuple[list[str], str] | None:
    """A way to make a read-only bind mount in a private mount namespace here, or None."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return None
    for argv, then in _namespaces():
        try:
            probe = subprocess.run([*argv, "--", "sh", "-c", _wrap(then), "/tmp", "sh", "-c",
                                    "! touch /tmp/.strata-read-only-probe 2>/dev/null"],
                                   capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            continue
        if probe.returncode == 0:
            return argv, then
    return None


@pytest.fixture(scope="module")
def unshare() -> tuple[list[str], str]:
    way = _unshare()
    if way is None:
        pytest.skip("cannot make a read-only home here: a read-only bind mount in a private mount namespace "
                    "(`unshare -m`) needs root, unprivileged user namespaces, or passwordless sudo")
    return way


@pytest.fixture
def read_only(cli: StrataCLI, unshare: tuple[list[str], str]) -> Runner:
    argv, then = unshare

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([*argv, "--", "sh", "-c", _wrap(then), str(cli.home), *cli.argv(args)], cwd=cli.cwd,
                              env=cli.env(), capture_output=True, text=True, timeout=60)
        assert_clean_stderr(proc)
        return proc

    return run


def _tree(home: Path) -> dict[str, tuple[int, int]]:
    """Every file in the home with its size and mtime: what a read-only command must leave as it is."""
    return {str(p.relative_to(home)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(home.rglob("*"))
            if p.is_file()}


_READS = [("sessions",), ("sessions", "--json"), ("show", "{sid}"), ("show", "{sid}", "--json"),
          ("timeline", "{sid}", "--json"), ("timeline", "{sid}", "--verify"), ("timeline", "{sid}", "--follow"),
          ("receipts",), ("receipts", "{sid}", "--json"), ("export", "{sid}"), ("export", "{sid}", "--format", "otlp"),
          ("config", "show")]


def _session(cli: StrataCLI, workspace: Path, tmp_path: Path, *, kill: bool) -> str:
    turns = [[tool_use("look", "read_file", path="a.txt"), bash_mark("m1"), bash_mark("m2")], [text("done")]]
    (workspace / "a.txt").write_text("alpha\n")
    script = write_script(tmp_path / "script.json", turns)
    env = {"STRATA_FAULT": "before_batch_completed"} if kill else None
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), *ALLOW_EFFECTS, "--json",
                 "read and mark", env=env)
    assert run.returncode == (-signal.SIGKILL if kill else 0), run.stderr
    return str(events_of(run.stdout)[0]["session_id"])


def _compare_reads(cli: StrataCLI, read_only: Runner, sid: str, reads: list[tuple[str, ...]]) -> None:
    for args in reads:
        argv = [a.replace("{sid}", sid) for a in args]
        writable = strata(cli, *argv)
        assert writable.returncode == 0, (argv, writable.stderr)
        before = _tree(cli.home)
        ro = read_only(*argv)
        assert (ro.returncode, ro.stderr) == (0, ""), (argv, ro.returncode, ro.stderr)
        assert ro.stdout == writable.stdout, argv
        assert _tree(cli.home) == before, argv


def test_reading_commands_work_in_a_read_only_home(cli: StrataCLI, workspace: Path, tmp_path: Path,
                                                   read_only: Runner) -> None:
    """A home at rest (no WAL left): every reading command prints what it prints in a writable home, with an
    empty stderr, and the home is untouched; an HTML export goes to a writable place outside the home."""
    sid = _session(cli, workspace, tmp_path, kill=False)
    assert not (cli.home / "strata.db-wal").exists()
    _compare_reads(cli, read_only, sid, _READS)
    page = tmp_path / "page.html"
    exported = read_only("export", sid, "--format", "html", "--output", str(page))
    assert exported.returncode == 0 and exported.stdout == f"{page}\n", exported.stderr
    assert sid in page.read_text()


def test_reading_commands_see_the_commits_a_killed_run_left_in_the_wal(cli: StrataCLI, workspace: Path,
                                                                       tmp_path: Path, read_only: Runner) -> None:
    """A home whose run was killed: its last commits are only in strata.db-wal (with its -shm), which a
    read-only open must read too; the outputs match the writable home's."""
    sid = _session(cli, workspace, tmp_path, kill=True)
    assert (cli.home / "strata.db-wal").stat().st_size > 0
    _compare_reads(cli, read_only, sid, [("sessions", "--json"), ("show", "{sid}", "--json"),
                                         ("timeline", "{sid}", "--verify"), ("receipts", "{sid}", "--json"),
                                         ("export", "{sid}")])


def test_doctor_reports_a_read_only_home_and_still_checks_the_database(cli: StrataCLI, workspace: Path,
                                                                       tmp_path: Path, read_only: Runner) -> None:
    """`strata doctor` in a read-only home: exit 1 with the home reported as not writable, the database opened
    (read-only) and its sessions counted, no traceback, nothing created."""
    _session(cli, workspace, tmp_path, kill=False)
    before = _tree(cli.home)
    proc = read_only("doctor", "--workspace", str(workspace))
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    lines = proc.stdout.splitlines()
    assert any(line.startswith("FAIL") and "home" in line and "not writable" in line for line in lines), lines
    assert any(line.startswith("ok") and "database" in line and "1 sessions" in line for line in lines), lines
    assert _tree(cli.home) == before


def test_a_command_that_writes_fails_in_one_line_in_a_read_only_home(cli: StrataCLI, workspace: Path,
                                                                     tmp_path: Path, read_only: Runner) -> None:
    """A command that must write (a new run) still fails in one clear line, naming the home's database."""
    _session(cli, workspace, tmp_path, kill=False)
    script = write_script(tmp_path / "again.json", [[text("hello")]])
    proc = read_only("run", "--model", f"script:{script}", "--workspace", str(workspace), "say hello")
    assert proc.returncode == 1, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("strata: error")]
    assert len(errors) == 1 and str(cli.home) in errors[0], proc.stderr
    assert os.path.exists(cli.home / "strata.db")


def test_a_schema_10_home_is_read_as_it_stands_where_it_cannot_be_written(cli: StrataCLI, workspace: Path,
                                                                          tmp_path: Path,
                                                                          read_only: Runner) -> None:
    """A home Strata at schema 10 left (before migration 011, which only adds the index of the unknown receipts),
    read-only: every reading command prints what it printed at schema 11, the unknown receipts included, and
    nothing is migrated or created (before, its open needed a migration, which a read-only home cannot take)."""
    sid = _session(cli, workspace, tmp_path, kill=True)
    resumed = strata(cli, "resume", sid)  # the killed run's dispatched receipts become unknown
    assert resumed.returncode == 5, resumed.stdout + resumed.stderr
    reads = [*_READS, ("receipts", "--status", "unknown"), ("receipts", "{sid}", "--status", "unknown", "--json")]
    at_11 = {}
    for args in reads:
        proc = strata(cli, *[a.replace("{sid}", sid) for a in args])
        assert proc.returncode == 0, (args, proc.stderr)
        at_11[args] = proc.stdout
    assert [r["status"] for r in json_lines(at_11[reads[-1]])] == ["unknown"]
    with closing(sqlite3.connect(cli.home / "strata.db", isolation_level=None)) as conn:
        conn.execute("DROP INDEX receipts_unknown")
        conn.execute("DELETE FROM schema_migrations WHERE name = '011_unknown_receipts'")
        conn.execute("PRAGMA user_version = 10")
    before = _tree(cli.home)
    for args in reads:
        ro = read_only(*[a.replace("{sid}", sid) for a in args])
        assert (ro.returncode, ro.stderr, ro.stdout) == (0, "", at_11[args]), args
    assert _tree(cli.home) == before
    with closing(sqlite3.connect(cli.home / "strata.db")) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (10,)
