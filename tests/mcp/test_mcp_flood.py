"""A stdio MCP server that writes a message line without end (tests/mcp/flood_server.py, a real process) against
real `strata` processes: Strata reads a line up to its bound (8 MiB), then cuts the server off: the call is an error
naming the server and the reason, never retried, the server's tools are gone, the rest of the session goes on, and
what the server could write (so what Strata could hold of it) stays near the bound. A line that is not UTF-8 is one
unreadable message, dropped (the SDK's reader died on it, and the connection with it)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tests.cli._helpers import call_results, events_of, strata, strata_peak_rss, text, tool_use
from tests.conftest import StrataCLI, write_script
from tests.mcp._servers import user_config

FLOOD = Path(__file__).with_name("flood_server.py")
FLOOD_BYTES = 200 * 1024 * 1024
MiB = 1024 * 1024


def flood_table(name: str, state: Path, *extra_args: str, effect: str = "read_only") -> str:
    args = ", ".join(f'"{a}"' for a in (FLOOD, state, *extra_args))
    return (f'[mcp.servers.{name}]\ncommand = "{sys.executable}"\nargs = [{args}]\nstartup_timeout_s = 20\n'
            f'[mcp.servers.{name}.tools.flood]\nsafety = "read"\neffect = "{effect}"\ntimeout_s = 60\n'
            f'[mcp.servers.{name}.tools.echo]\nsafety = "read"\neffect = "read_only"\n'
            f'[mcp.servers.{name}.tools.junk]\nsafety = "read"\neffect = "read_only"\ntimeout_s = 20\n'
            f'[mcp.servers.{name}.tools.ask]\nsafety = "read"\neffect = "read_only"\ntimeout_s = 3\n'
            f'[mcp.servers.{name}.tools.shout]\nsafety = "read"\neffect = "read_only"\ntimeout_s = 60\n')


def written(state: Path) -> int:
    path = state / "written"
    return int(path.read_text(encoding="ascii")) if path.exists() else 0


def calls(state: Path) -> list[str]:
    log = state / "calls.log"
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def test_a_stdio_server_writing_an_endless_line_is_cut_off_at_the_bound_and_the_session_goes_on(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    hostile, other = tmp_path / "h", tmp_path / "g"
    user_config(cli, flood_table("h", hostile) + flood_table("g", other))
    script = write_script(tmp_path / "script.json", [
        [tool_use("c1", "mcp__h__flood", bytes=FLOOD_BYTES)],
        [tool_use("c2", "mcp__g__echo", q="other server"), tool_use("c3", "mcp__h__echo", q="cut server")],
        [text("done")]])
    began = time.monotonic()
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "flood")
    elapsed = time.monotonic() - began
    assert run.returncode == 0, run.stderr
    results = call_results(events_of(run.stdout))
    assert results["c1"]["status"] == "error", results["c1"]
    assert "MCP server 'h' was cut off" in results["c1"]["content"], results["c1"]
    assert "message line longer than 8 MiB" in results["c1"]["content"], results["c1"]
    assert results["c2"]["status"] == "ok" and results["c2"]["content"] == "echo other server", results["c2"]
    assert results["c3"]["is_error"] and "not available" in results["c3"]["content"], results["c3"]
    notices = [line for line in run.stderr.splitlines() if "MCP server 'h'" in line]
    assert len(notices) == 1 and "longer than 8 MiB" in notices[0], run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert calls(hostile) == [f'flood {{"bytes": {FLOOD_BYTES}}}']  # once: never retried, nothing else reached it
    assert written(hostile) < 16 * MiB, written(hostile)  # cut at the bound (plus what the pipe held), not read on
    assert elapsed < 30, elapsed  # promptly, not at the call's 60 s deadline


def test_an_effectful_call_whose_answer_is_cut_off_is_unknown_and_never_rerun(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    hostile = tmp_path / "h"
    user_config(cli, flood_table("h", hostile, effect="effectful"))
    script = write_script(tmp_path / "script.json", [[tool_use("c1", "mcp__h__flood", bytes=FLOOD_BYTES)],
                                                     [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json",
                 "--allow", "mcp__h__flood", "flood")
    result = call_results(events_of(run.stdout))["c1"]
    assert result["status"] == "unknown" and "was cut off" in result["content"], result
    assert run.returncode == 5, run.stderr  # an unknown effect waits for `strata reconcile`
    assert calls(hostile) == [f'flood {{"bytes": {FLOOD_BYTES}}}'] and written(hostile) < 16 * MiB


def test_a_tool_listing_that_never_ends_is_cut_off_and_named_in_the_notice(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    hostile = tmp_path / "h"
    user_config(cli, flood_table("h", hostile, "--flood-listing", str(FLOOD_BYTES)))
    script = write_script(tmp_path / "script.json", [[text("nothing to do")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "look")
    assert run.returncode == 0, run.stderr
    (notice,) = [line for line in run.stderr.splitlines() if "MCP server 'h'" in line]
    assert "longer than 8 MiB" in notice and "continues without its tools" in notice, notice
    assert "Traceback" not in run.stderr and written(hostile) < 16 * MiB


def test_a_stdout_line_that_is_not_utf8_is_dropped_and_the_answer_after_it_is_read(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    hostile = tmp_path / "h"
    user_config(cli, flood_table("h", hostile))
    script = write_script(tmp_path / "script.json", [[tool_use("c1", "mcp__h__junk", q="after junk")],
                                                     [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "junk")
    assert run.returncode == 0 and run.stderr == "", run.stderr  # the SDK's reader died on it, mid-session
    result = call_results(events_of(run.stdout))["c1"]
    assert result["status"] == "ok" and result["content"] == "echo after junk", result


def test_a_server_sending_requests_without_reading_the_answers_is_held_back_not_buffered(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """The SDK starts a task for each request the server sends, and each waits until its answer is written; a server
    that does not read its stdin made Strata hold one per request (100,000 pings: 1 GB of memory), and read on. At
    most 64 wait at once: the server's output is read on once answers are written, so this server is held back after
    a few thousand (what the pipes and buffers hold), its call ends at its deadline, and the session goes on.
    How far the server got is read by the next call, while the session goes on: when the session ends, the server
    is closed (its stdin, then SIGTERM after 2 s) and what it writes meanwhile is read and dropped so that it can
    exit (it then sends all its pings; what it sends then is never held); the peak memory of the strata process is
    what that costs."""
    hostile = tmp_path / "h"
    user_config(cli, flood_table("h", hostile))
    script = write_script(tmp_path / "script.json", [
        [tool_use("c1", "mcp__h__ask", pings=20000)], [tool_use("c2", "bash", command=f"cat {hostile / 'asked'}")],
        [text("done")]])
    run, peak_mib = strata_peak_rss(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace),
                                    "--json", "--allow", "bash", "pings")
    assert run.returncode == 0, run.stderr
    results = call_results(events_of(run.stdout))
    assert results["c1"]["status"] == "timeout", results["c1"]
    assert results["c2"]["status"] == "ok", results["c2"]
    asked = int(results["c2"]["content"].splitlines()[-1])  # after c1's deadline, the server still up
    assert asked < 10000, asked  # it was not read on: 64 waiting, the rest in the pipes
    assert peak_mib < 160, f"peak RSS {peak_mib:.0f} MiB"  # about 80 MiB; each request held took about 10 KiB


def test_a_server_held_back_at_the_request_bound_is_read_at_the_close_so_it_exits_on_its_own(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """A server held back at the bound of 64 unanswered requests (it does not read its stdin while it sends pings) is
    still writing when the session ends. Strata's reader waited for a free place and read no more, so the server,
    blocked on its full stdout, never got back to its stdin to see it closed, and was terminated (SIGTERM after 2 s).
    At the close its output is read and dropped, as on the close's other path (the session gone while a message
    waits for it): it sends the rest, reads its stdin to the end and exits on its own."""
    hostile = tmp_path / "h"
    user_config(cli, flood_table("h", hostile))
    script = write_script(tmp_path / "script.json", [[tool_use("c1", "mcp__h__ask", pings=20000)], [text("done")]])
    run, peak_mib = strata_peak_rss(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace),
                                    "--json", "pings")
    assert run.returncode == 0, run.stderr
    assert call_results(events_of(run.stdout))["c1"]["status"] == "timeout"  # held back: no answer by its deadline
    assert (hostile / "asked").read_text(encoding="ascii") == "20000"  # it sent them all, once read at the close
    assert (hostile / "ended").read_text(encoding="ascii") == "stdin closed"  # not SIGTERM
    assert peak_mib < 160, f"peak RSS {peak_mib:.0f} MiB"  # what it wrote at the close was read and dropped


def test_a_server_logging_without_end_to_stderr_keeps_its_log_bounded(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """The server's stderr was the log file itself, appended to by every start: a server writing 24 MiB of stderr
    per call grew `<home>/mcp/NAME.log` by 24 MiB each session, without end (the disk of the Strata home). A start
    adds at most 8 MiB, then a line saying the rest was not kept; a log past 8 MiB is kept as NAME.log.1 at the
    next start. The call is answered: the rest of its stderr is read, only not kept."""
    user_config(cli, flood_table("h", tmp_path / "h"))
    script = write_script(tmp_path / "script.json", [[tool_use("c1", "mcp__h__shout", mib=24)], [text("done")]])
    log = cli.home / "mcp" / "h.log"
    for _ in range(2):
        run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "shout")
        assert run.returncode == 0, run.stderr
        assert call_results(events_of(run.stdout))["c1"]["status"] == "ok"
        assert log.stat().st_size < 9 * MiB, log.stat().st_size
        assert log.read_bytes().endswith(b"since it started; the rest is not kept]\n")
    assert log.with_name("h.log.1").stat().st_size < 9 * MiB  # the first session's, kept once
