"""Deadlines that hold for the read tools (robustness review, item 2), with the real `strata` process: a grep with a
catastrophic regex ends at its deadline, Ctrl-C during it ends the run at once, a resume after a kill during it
finishes; read_file (and edit_file) on a FIFO fail at once; read_file on a 2 GiB file keeps the process small and
says the result is truncated."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from tests._in_process_cli import show_in_process
from tests.cli._helpers import (
    PEAK_RSS_LAUNCHER,
    assert_clean_stderr,
    call_results,
    events_of,
    result_line,
    strata,
    text,
    tool_use,
)
from tests.conftest import StrataCLI, write_script

CATASTROPHIC = "(a+)+$"
"""Exponential backtracking on a line of a's that ends in something else: 2**34 steps for the line below."""
LINE = "a" * 34 + "!"


def _tool_timeout(cli: StrataCLI, tool: str, seconds: float) -> None:
    """The deadline of one tool, set in the user config file (the `[tools.NAME] timeout_s` setting)."""
    path = cli.home / "xdg-config" / "strata" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"[tools.{tool}]\ntimeout_s = {seconds}\n")


def _script(ws: Path, calls: list[dict[str, Any]]) -> Path:
    return write_script(ws.parent / "turns.json", [calls, [text("done")]])


def _catastrophic_workspace(ws: Path) -> Path:
    (ws / "line.txt").write_text(LINE + "\n")
    return _script(ws, [tool_use("g1", "grep", pattern=CATASTROPHIC)])


class _Reader:
    """Collects a running process's stdout lines in a thread and lets the test wait for one that holds a text."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()

    def wait_for(self, fragment: str, within_s: float = 30) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: any(fragment in line for line in self.lines), within_s), (
                fragment, self.lines)

    def finish(self, within_s: float) -> subprocess.CompletedProcess[str]:
        """Wait for the process to exit (killing it when it does not, and failing) and return its output."""
        try:
            self.proc.wait(within_s)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGABRT)  # faulthandler (PYTHONFAULTHANDLER) prints every thread's stack
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
            self._thread.join(30)
            assert self.proc.stderr is not None and self.proc.stdout is not None
            err = self.proc.stderr.read()
            self.proc.stderr.close()
            self.proc.stdout.close()
            raise AssertionError(f"the process did not exit within {within_s} s; stderr: {err}") from None
        finally:
            self._thread.join(30)
        assert self.proc.stderr is not None
        err = self.proc.stderr.read()
        self.proc.stderr.close()
        self.proc.stdout.close()  # type: ignore[union-attr]
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, "".join(self.lines), err)


def test_a_catastrophic_grep_ends_at_its_deadline(cli: StrataCLI, workspace: Path) -> None:
    """grep `(a+)+$` over a 35-character line with a 2 s deadline: a `timeout` result within a few seconds, and
    the session completes."""
    script = _catastrophic_workspace(workspace)
    _tool_timeout(cli, "grep", 2)
    started = time.monotonic()
    proc = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "search")
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    result = call_results(events_of(proc.stdout))["g1"]
    assert result["status"] == "timeout", result
    assert "2 s deadline" in result["content"], result
    assert result["duration_ms"] < 10_000, result
    assert elapsed < 30, elapsed


def test_ctrl_c_during_a_catastrophic_grep_ends_the_run_promptly(cli: StrataCLI, workspace: Path) -> None:
    """SIGINT to `strata run` while grep backtracks (under the default 60 s deadline): the run exits within
    seconds with 130, the batch closed and the call reported as interrupted."""
    script = _catastrophic_workspace(workspace)
    proc = cli.popen("run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "search")
    reader = _Reader(proc)
    reader.wait_for('"batch_proposed"')
    _search_started(proc)  # the grep is running now
    interrupted_at = time.monotonic()
    proc.send_signal(signal.SIGINT)
    done = reader.finish(within_s=15)
    assert time.monotonic() - interrupted_at < 10
    assert_clean_stderr(done)
    assert done.returncode == 130, (done.returncode, done.stderr)
    session_id = events_of(done.stdout)[0]["session_id"]
    view = show_in_process(cli, session_id)
    assert view["open_batch"] is None
    (result,) = [b for m in view["messages"] for b in m["content"] if b["type"] == "tool_result"]
    assert "interrupted" in str(result["content"]), result


def _children(pid: int) -> list[int]:
    found = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat_file.parent.name))
    return found


def _search_started(proc: subprocess.Popen[str], within_s: float = 30) -> list[int]:
    """The search process(es) `proc` started for the grep call, once there is one."""
    deadline = time.monotonic() + within_s
    while not (searching := _children(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert searching, "the search process never started"
    return searching


def _gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_resume_after_a_kill_during_a_catastrophic_grep_completes(cli: StrataCLI, workspace: Path) -> None:
    """A run killed while grep backtracks leaves the batch open and no search process behind; `strata resume`
    runs the read-only grep again, which now ends at its deadline (2 s here), and the session completes instead
    of hanging again."""
    script = _catastrophic_workspace(workspace)
    proc = cli.popen("run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "search")
    reader = _Reader(proc)
    reader.wait_for('"batch_proposed"')
    searching = _search_started(proc)
    proc.send_signal(signal.SIGKILL)
    killed = reader.finish(within_s=15)
    assert all(_gone(child, within_s=5) for child in searching), "the search process outlived strata"
    session_id = events_of(killed.stdout)[0]["session_id"]
    _tool_timeout(cli, "grep", 2)
    started = time.monotonic()
    resumed = cli.run("resume", session_id, "--json", timeout=60)
    assert_clean_stderr(resumed)
    assert resumed.returncode == 0, resumed.stderr
    assert time.monotonic() - started < 30
    assert call_results(events_of(resumed.stdout))["g1"]["status"] == "timeout"
    assert result_line(resumed.stdout)["status"] == "completed"  # type: ignore[index]
    assert show_in_process(cli, session_id)["open_batch"] is None


def test_read_file_and_edit_file_on_a_fifo_fail_at_once(cli: StrataCLI, workspace: Path) -> None:
    """A FIFO nobody writes to: read_file and edit_file refuse it with a clear error instead of blocking past
    their deadline (the run would hang for ever before)."""
    os.mkfifo(workspace / "pipe")
    script = _script(workspace, [tool_use("r1", "read_file", path="pipe"),
                                 tool_use("e1", "edit_file", path="pipe", old="a", new="b")])
    started = time.monotonic()
    proc = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json",
                  "--allow", "edit_file", "read")
    assert time.monotonic() - started < 20
    assert proc.returncode == 0, proc.stderr
    results = call_results(events_of(proc.stdout))
    for call_id in ("r1", "e1"):
        assert results[call_id]["status"] == "error", results[call_id]
        assert "pipe is not a regular file (a FIFO)" in results[call_id]["content"], results[call_id]


def test_read_file_of_a_2_gib_file_keeps_the_process_small(cli: StrataCLI, workspace: Path) -> None:
    """read_file on a 2 GiB (sparse) file: the process's peak memory stays far below the file's size, and the
    result says it is truncated, how much it shows, and where the part read is kept (a blob)."""
    big = workspace / "big.log"
    with big.open("wb") as fh:
        fh.write(b"FIRST LINE of the big file\n")
        fh.truncate(2 * 1024**3)
    script = _script(workspace, [tool_use("r1", "read_file", path="big.log")])

    # PEAK_RSS_LAUNCHER caps the address space and reports strata's own peak RSS.
    peak_file = workspace.parent / "peak-rss-kib"
    argv = cli.argv(["run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "read"])
    proc = subprocess.Popen([argv[0], "-c", PEAK_RSS_LAUNCHER, str(peak_file), str(3 * 1024**3), *argv],
                            cwd=cli.cwd, env=cli.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reader = _Reader(proc)
    done = reader.finish(within_s=60)
    assert_clean_stderr(done)
    peak_mib = int(peak_file.read_text()) / 1024
    assert peak_mib < 200, f"peak RSS {peak_mib:.0f} MiB"
    result = call_results(events_of(done.stdout))["r1"]
    assert result["status"] == "ok", result
    first, rest = result["content"].split("\n", 1)
    assert first == f"[truncated: showing the first 1048576 of {2 * 1024**3} bytes of big.log; read on with " \
                    "offset=1048576]", first
    assert rest.startswith("FIRST LINE of the big file\n")
    assert result["blob"] is not None and "kept as blob sha256:" in result["content"]
    assert result_line(done.stdout)["status"] == "completed"  # type: ignore[index]


def test_a_deadline_for_a_tool_that_does_not_exist_is_one_clear_error(cli: StrataCLI, workspace: Path) -> None:
    """`[tools.NAME] timeout_s` for a name no tool has is a configuration error naming the file and key, before
    any session starts; a valid one shows in `strata config show`."""
    script = _script(workspace, [tool_use("g1", "grep", pattern="x")])
    _tool_timeout(cli, "grepp", 2)
    proc = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "look")
    assert proc.returncode == 2
    (line, *_) = proc.stderr.splitlines()
    assert "key tools.grepp: no tool is named 'grepp'" in line and "config.toml" in line, proc.stderr
    assert strata(cli, "sessions").stdout.strip() == "no sessions yet"
    _tool_timeout(cli, "grep", 2.5)
    shown = strata(cli, "config", "show", "--workspace", str(workspace))
    assert "tool grep: deadline 2.5s" in shown.stdout, shown.stdout


def test_config_show_and_doctor_refuse_a_deadline_for_a_tool_that_does_not_exist_as_run_does(
        cli: StrataCLI, workspace: Path) -> None:
    """`strata config show` fails with the same one line as `strata run` (file, key, reason), and `strata doctor`
    lists it as a problem (exit 1) instead of passing a config that no session could start with."""
    _tool_timeout(cli, "nosuch", 5)
    script = _script(workspace, [text("hi")])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "hi")
    shown = strata(cli, "config", "show", "--workspace", str(workspace))
    assert shown.returncode == run.returncode == 2, shown.stdout
    assert shown.stderr.splitlines() == run.stderr.splitlines()[:1], (shown.stderr, run.stderr)
    assert "key tools.nosuch: no tool is named 'nosuch'" in shown.stderr and "config.toml" in shown.stderr
    as_json = strata(cli, "config", "show", "--workspace", str(workspace), "--json")
    assert as_json.returncode == 2 and as_json.stdout == "", as_json.stdout
    doctor = strata(cli, "doctor", "--workspace", str(workspace))
    assert doctor.returncode == 1, doctor.stdout
    problems = [line for line in doctor.stdout.splitlines() if line.startswith("FAIL")]
    assert len(problems) == 1 and "key tools.nosuch: no tool is named 'nosuch'" in problems[0], doctor.stdout
    assert doctor.stdout.splitlines()[-1] == "1 problem(s)" and "Traceback" not in doctor.stderr
