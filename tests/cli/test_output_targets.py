"""Where output goes, with real processes and real files (issue 19, item 5): `export --output` writes a device,
a FIFO or a file this process already has open (`/dev/stdout`) in place, never replacing it; it follows a symlink
to its target; a regular file is still written atomically. Every command that prints reports a failed write to
standard output (a full disk) in one line with exit 1, while a reader that stops reading (`| head`) is not an
error. No test here touches the machine's own /dev: device nodes and links are made in a temporary directory."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli._helpers import assert_clean_stderr, error_lines, events_of, strata, text, tool_use
from tests.conftest import StrataCLI, write_script


@dataclass(frozen=True)
class Done:
    cli: StrataCLI
    session_id: str
    jsonl: str
    script: Path
    workspace: Path


@pytest.fixture(scope="module")
def done(tmp_path_factory: pytest.TempPathFactory) -> Done:
    base = tmp_path_factory.mktemp("targets")
    cli = StrataCLI(base / "home", base)
    ws = base / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("alpha\n")
    script = write_script(base / "script.json", [[tool_use("look", "read_file", path="a.txt"),
                                                   tool_use("copy", "write_file", path="b.txt", content="alpha\n")],
                                                  [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(ws), "--allow", "write_file", "--json",
                 "copy a.txt")
    assert run.returncode == 0, run.stderr
    session_id = events_of(run.stdout)[0]["session_id"]
    jsonl = strata(cli, "export", session_id)
    assert jsonl.returncode == 0 and jsonl.stdout, jsonl.stderr
    return Done(cli, session_id, jsonl.stdout, script, ws)


def _one_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert_clean_stderr(proc)
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    (line,) = error_lines(proc.stderr)
    return line


# -- export --output ------------------------------------------------------------------------------------------------

def test_export_to_a_device_writes_in_place_and_reports_a_full_disk(done: Done, tmp_path: Path) -> None:
    """`--output` naming a device like /dev/full (here a node of it made in a temporary directory) is opened
    and written in place: the node stays a device, and its ENOSPC is one error line with exit 1."""
    full = tmp_path / "full"
    try:
        os.mknod(full, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    except OSError as exc:
        pytest.skip(f"cannot make a device node here (it needs CAP_MKNOD): {exc.strerror}")
    proc = done.cli.run("export", done.session_id, "--output", str(full))
    line = _one_error(proc)
    assert str(full) in line and "No space left on device" in line, line
    assert stat.S_ISCHR(full.lstat().st_mode), "the device node was replaced"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full"]  # no temporary file left beside it


def test_export_to_a_fifo_writes_through_it(done: Done, tmp_path: Path) -> None:
    """A FIFO given to `--output` stays a FIFO and its reader gets the export; no path is printed, since no
    file was made."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    keep = tmp_path / "pipe.keep"  # a second name for the FIFO, to free the reader if the path is replaced
    os.link(fifo, keep)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    try:
        proc = done.cli.run("export", done.session_id, "--output", str(fifo), timeout=60)
    finally:
        if reader.is_alive():  # the export never wrote to the FIFO: let the reader go
            with open(keep, "wb"):
                pass
        reader.join(30)
    assert_clean_stderr(proc)
    assert proc.returncode == 0, proc.stderr
    assert received == [done.jsonl.encode()]
    assert stat.S_ISFIFO(fifo.lstat().st_mode), "the FIFO was replaced"
    assert proc.stdout == ""


def test_export_to_a_link_to_its_own_stdout_appends_to_what_stdout_is(done: Done, tmp_path: Path) -> None:
    """A path that names a file this process already has open (a link to /proc/self/fd/1, which is what
    /dev/stdout is) is written in place: into stdout's pipe, or appended to the file stdout was redirected to
    (`>> FILE`); the link is left as it is."""
    link = tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")
    piped = done.cli.run("export", done.session_id, "--output", str(link))
    assert_clean_stderr(piped)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == done.jsonl
    assert link.is_symlink() and os.readlink(link) == "/proc/self/fd/1"

    appended = tmp_path / "collected.jsonl"
    appended.write_text("a line that was there before\n")
    with open(appended, "a") as out:
        proc = subprocess.run(done.cli.argv(["export", done.session_id, "--output", str(link)]), cwd=done.cli.cwd,
                              env=done.cli.env(), stdout=out, stderr=subprocess.PIPE, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert appended.read_text() == "a line that was there before\n" + done.jsonl
    assert link.is_symlink()

    # Safe now that the same path through a link of our own was written in place: /dev/stdout itself.
    direct = done.cli.run("export", done.session_id, "--output", "/dev/stdout")
    assert direct.returncode == 0 and direct.stdout == done.jsonl, direct.stderr
    assert Path("/dev/stdout").is_symlink()


def test_export_follows_a_symlink_to_its_target(done: Done, tmp_path: Path) -> None:
    """A symlink given to `--output` is followed: its target is written (atomically, as any regular file), the
    link stays, and the path printed is the target's. A dangling link's target is created."""
    target = tmp_path / "real" / "session.jsonl"
    target.parent.mkdir()
    target.write_text("an older export\n")
    link = tmp_path / "latest.jsonl"
    link.symlink_to(target)
    proc = strata(done.cli, "export", done.session_id, "--output", str(link))
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink() and link.resolve() == target
    assert target.read_text() == done.jsonl
    assert proc.stdout == f"{target}\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["session.jsonl"]

    dangling = tmp_path / "next.jsonl"
    dangling.symlink_to(tmp_path / "real" / "new.jsonl")
    proc = strata(done.cli, "export", done.session_id, "--output", str(dangling))
    assert proc.returncode == 0, proc.stderr
    assert dangling.is_symlink() and (tmp_path / "real" / "new.jsonl").read_text() == done.jsonl


def test_export_to_a_regular_file_still_replaces_it_atomically(done: Done, tmp_path: Path) -> None:
    """A regular file is replaced by a complete new one (a reader holding the old one keeps the old text)."""
    out = tmp_path / "session.jsonl"
    out.write_text("old\n")
    with open(out) as held:
        proc = strata(done.cli, "export", done.session_id, "--output", str(out))
        assert proc.returncode == 0, proc.stderr
        assert held.read() == "old\n"
    assert out.read_text() == done.jsonl and not out.is_symlink()


# -- standard output ------------------------------------------------------------------------------------------------

READERS = [
    ("sessions",), ("sessions", "--json"), ("show", "{sid}"), ("show", "{sid}", "--json"), ("timeline", "{sid}"),
    ("timeline", "{sid}", "--json"), ("timeline", "{sid}", "--verify"), ("receipts",), ("receipts", "--json"),
    ("export", "{sid}"), ("export", "{sid}", "--format", "html", "--output", "-"), ("config", "show"),
]


@pytest.mark.parametrize("args", READERS, ids=lambda a: " ".join(a).replace("{sid}", "ID"))
def test_a_full_disk_on_stdout_is_one_error_line_and_exit_1(done: Done, args: tuple[str, ...]) -> None:
    """`strata ... > /dev/full`: the failed write is reported in one line naming standard output (not an
    internal error, not a silent exit 0)."""
    argv = [a.replace("{sid}", done.session_id) for a in args]
    with open("/dev/full", "w") as full:
        proc = subprocess.run(done.cli.argv(argv), cwd=done.cli.cwd, env=done.cli.env(), stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    line = _one_error(proc)
    assert "standard output" in line and "No space left on device" in line, line


@pytest.mark.parametrize("args", READERS, ids=lambda a: " ".join(a).replace("{sid}", "ID"))
def test_a_reader_that_stops_reading_is_not_an_error(done: Done, args: tuple[str, ...]) -> None:
    """`strata ... | head`, with the reader gone before the first line: quiet, and the exit status is the
    command's own."""
    argv = [a.replace("{sid}", done.session_id) for a in args]
    proc = subprocess.Popen(done.cli.argv(argv), cwd=done.cli.cwd, env=done.cli.env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (0, "")


def test_a_run_whose_stdout_fails_finishes_its_session_and_exits_1(done: Done, tmp_path: Path) -> None:
    """A full disk under `strata run`'s output does not cut the session short: it runs to the end (recorded as
    completed), and the lost output is one error line with exit 1."""
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path / "s.json", [[tool_use("w", "write_file", path="out.txt", content="x\n")],
                                                [text("written")]])
    with open("/dev/full", "w") as full:
        proc = subprocess.run(done.cli.argv(["run", "--model", f"script:{script}", "--workspace", str(ws),
                                             "--allow", "write_file", "--json", "write out.txt"]),
                              cwd=done.cli.cwd, env=done.cli.env(), stdout=full, stderr=subprocess.PIPE, text=True,
                              timeout=60)
    line = _one_error(proc)
    assert "standard output" in line, line
    assert (ws / "out.txt").read_text() == "x\n"
    sessions = [s for s in done.cli.json_lines("sessions", "--json") if s["workspace"] == str(ws.resolve())]
    assert [s["status"] for s in sessions] == ["completed"]


def test_a_run_whose_reader_goes_away_finishes_quietly(done: Done, tmp_path: Path) -> None:
    """`strata run ... | head -0`: the session still runs to its end, nothing is said, the exit status is the
    run's."""
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path / "s.json", [[tool_use("w", "write_file", path="out.txt", content="x\n")],
                                                [text("written")]])
    proc = subprocess.Popen(done.cli.argv(["run", "--model", f"script:{script}", "--workspace", str(ws), "--allow",
                                           "write_file", "write out.txt"]),
                            cwd=done.cli.cwd, env=done.cli.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (0, "")
    assert (ws / "out.txt").read_text() == "x\n"


def test_follow_stops_when_its_reader_goes_away(done: Done, tmp_path: Path) -> None:
    """`strata timeline ID --follow | head` on a session that is still running ends once the reader is gone,
    instead of following it to its end."""
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path / "s.json", [[tool_use("wait", "bash", command="sleep 60", timeout_s=90)],
                                                [text("done")]])
    run = done.cli.popen("run", "--model", f"script:{script}", "--workspace", str(ws), "--allow", "bash", "--json",
                         "wait a minute")
    try:
        assert run.stdout is not None
        session_id = json.loads(run.stdout.readline())["session_id"]
        follower = subprocess.Popen(done.cli.argv(["timeline", session_id, "--follow"]), cwd=done.cli.cwd,
                                    env=done.cli.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert follower.stdout is not None
        follower.stdout.close()
        try:
            _, err = follower.communicate(timeout=20)
        finally:
            if follower.poll() is None:
                follower.kill()
                follower.communicate()
        assert (follower.returncode, err) == (0, "")
        assert run.poll() is None  # the session was live all along
    finally:
        run.send_signal(signal.SIGINT)
        try:
            run.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            run.kill()
            run.communicate()


@pytest.mark.parametrize("target", ["strata.db", "strata.db-wal", "chain.key", "masking.key", "masking.seen",
                                    "trusted_projects.json", "ledger/{sid}.jsonl", "link-to-the-database"])
def test_export_never_writes_over_the_strata_homes_own_files(done: Done, tmp_path: Path, target: str) -> None:
    """`-o` naming the event store (or its WAL, the chain or masking key, the ledger, ... or a symlink to one) is
    refused in one line and the home is left as it was: it used to replace `strata.db` with the export, and every
    session of the home was gone."""
    home = tmp_path / "home"
    shutil.copytree(done.cli.home, home)
    cli = StrataCLI(home, tmp_path)
    (tmp_path / "link-to-the-database").symlink_to(home / "strata.db")
    path = (tmp_path if target.startswith("link") else home) / target.format(sid=done.session_id)
    before = {p: p.read_bytes() for p in home.rglob("*") if p.is_file() and not p.name.endswith("-shm")}
    line = _one_error(strata(cli, "export", done.session_id, "-o", str(path)))
    assert line.startswith(f"strata: error: {path} "), line
    assert "is a file of the Strata home" in line, line
    after = {p: p.read_bytes() for p in home.rglob("*") if p.is_file() and not p.name.endswith("-shm")}
    assert {p: after.get(p) for p in before} == before
    listed = strata(cli, "sessions")
    assert listed.returncode == 0 and done.session_id in listed.stdout, listed.stderr


def test_export_into_the_home_directory_under_a_name_of_its_own_is_written(done: Done, tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(done.cli.home, home)
    proc = strata(StrataCLI(home, tmp_path), "export", done.session_id, "-o", str(home / "mine.jsonl"))
    assert proc.returncode == 0, proc.stderr
    assert (home / "mine.jsonl").read_text() == done.jsonl
