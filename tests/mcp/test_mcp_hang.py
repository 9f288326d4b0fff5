"""A streamable HTTP MCP server that stops answering (tests/mcp/hanging_http_server.py, a real process on loopback)
against real `strata` processes: at the start it is left out at its startup timeout, mid-session its call times out
at the call's deadline, and closing its connection (the DELETE that ends its MCP session, which it never answers)
takes at most 5 s: the session never waits for the SDK's 300 s read timeout."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli._helpers import call_results, events_of, strata, text, tool_use
from tests.conftest import StrataCLI, write_script
from tests.mcp._servers import free_port, loopback_server, user_config

HANGING = Path(__file__).with_name("hanging_http_server.py")
BOUND_S = 40
"""What a run here may take at most: its startup timeout or call deadline (2 s), the SDK's courtesy cancel of the
abandoned request (at most 5 s), the close (at most 5 s) and Strata's own start on a loaded machine; without the
bound on the close it took over 300 s."""


@contextlib.contextmanager
def hanging_server(state: Path, mode: str) -> Iterator[str]:
    port = free_port()
    with loopback_server([sys.executable, str(HANGING), str(port), str(state), mode], port,
                         "hanging test server") as url:
        yield url


def declare(cli: StrataCLI, url: str, effect: str = "read_only", startup_s: int = 2, call_s: int = 2) -> None:
    safety = "read" if effect == "read_only" else "write"
    user_config(cli, f'[mcp.servers.h]\nurl = "{url}"\nstartup_timeout_s = {startup_s}\n'
                     f'[mcp.servers.h.tools.search]\nsafety = "{safety}"\neffect = "{effect}"\n'
                     f'timeout_s = {call_s}\n')


def run_timed(cli: StrataCLI, url: str, script: Path, workspace: Path, effect: str = "read_only",
              startup_s: int = 2, call_s: int = 2) -> tuple[subprocess.CompletedProcess[str], float]:
    """`strata run` of `script` with the server at `url` declared (its tool `search` of `effect`, allowed; its
    startup timeout and call deadline in seconds); its result and how long it took."""
    declare(cli, url, effect, startup_s, call_s)
    began = time.monotonic()
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json",
                 "--allow", "bash", "--allow", "mcp__h__search", "go")
    return run, time.monotonic() - began


def script_of(tmp_path: Path, *calls: dict[str, object]) -> Path:
    """A script of one call per turn, then a final answer."""
    return write_script(tmp_path / "script.json", [*([call] for call in calls), [text("done")]])


def requests(state: Path) -> list[str]:
    return (state / "requests.log").read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("mode", ["never", pytest.param("listing", marks=pytest.mark.slow)])
def test_an_http_server_that_stops_answering_at_the_start_is_left_out_and_closed_within_the_deadline(
        cli: StrataCLI, tmp_path: Path, workspace: Path, mode: str) -> None:
    state = tmp_path / "state"
    script = script_of(tmp_path, tool_use("c1", "bash", command="echo still-here"))
    # A server that never answers needs no time at all; one that answers `initialize` first keeps 2 s for it.
    startup_s = 1 if mode == "never" else 2
    with hanging_server(state, mode) as url:
        run, elapsed = run_timed(cli, url, script, workspace, startup_s=startup_s)
    assert run.returncode == 0, run.stderr
    (notice,) = [line for line in run.stderr.splitlines() if "MCP server 'h'" in line]
    assert f"did not finish initialising within {startup_s} s" in notice, notice
    assert call_results(events_of(run.stdout))["c1"]["status"] == "ok"  # the session went on without it
    assert elapsed < BOUND_S, elapsed
    if mode == "listing":  # it gave a session id: the close asked to end that session, and did not wait on
        assert requests(state)[0] == "initialize" and "DELETE" in requests(state), requests(state)


@pytest.mark.slow  # the call's deadline, then the 5 s the close waits for its DELETE
def test_an_http_server_that_stops_answering_mid_session_times_the_call_out_and_its_close_is_bounded(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    state = tmp_path / "state"
    script = script_of(tmp_path, tool_use("c1", "mcp__h__search", q="x"),
                       tool_use("c2", "bash", command="echo still-here"))
    with hanging_server(state, "call") as url:  # the call's deadline cut to 1 s: the server never answers it
        run, elapsed = run_timed(cli, url, script, workspace, call_s=1)
    assert run.returncode == 0, run.stderr
    results = call_results(events_of(run.stdout))
    assert results["c1"]["status"] == "timeout" and "1 s deadline" in results["c1"]["content"], results["c1"]
    assert results["c2"]["status"] == "ok"
    assert requests(state).count("tools/call") == 1  # a read-only call that timed out is not retried
    assert requests(state)[-1] == "DELETE", requests(state)  # the session's end was said to the server
    assert elapsed < BOUND_S, elapsed


def _two_calls_first_answer_over_the_bound(cli: StrataCLI, tmp_path: Path, workspace: Path, state: Path,
                                            mode: str) -> tuple[subprocess.CompletedProcess[str], int]:
    """Two read-only calls to a server whose first answer is over the 8 MiB bound (`mode` of
    hanging_http_server.py): the first is an error naming the bound, the second is answered. Returns the run and
    the bytes the server sent."""
    script = script_of(tmp_path, tool_use("c1", "mcp__h__search", q="x"), tool_use("c2", "mcp__h__search", q="y"))
    with hanging_server(state, mode) as url:
        run, _ = run_timed(cli, url, script, workspace)
        sent = int((state / "flood_bytes").read_text(encoding="utf-8"))
    assert run.returncode == 0, run.stderr
    results = call_results(events_of(run.stdout))
    assert results["c1"]["status"] == "error" and "longer than 8 MiB" in results["c1"]["content"], results["c1"]
    assert results["c2"]["status"] == "ok" and "short answer" in results["c2"]["content"], results["c2"]
    return run, sent


def test_an_http_server_answering_with_an_endless_json_body_fails_that_call_and_keeps_serving(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """The SDK reads a JSON answer whole (it caps only SSE events): a body announced as 200 MB was read into memory
    whole before the call failed. It is read up to 8 MiB (tool_executor/mcp/_http.py), the call is an error naming the
    bound, and the server's next call is answered."""
    state = tmp_path / "state"
    run, flood_bytes = _two_calls_first_answer_over_the_bound(cli, tmp_path, workspace, state, "flood")
    assert flood_bytes < 64 * 1024 * 1024, flood_bytes  # it stopped being read near the bound, not at 200 MB
    assert requests(state).count("tools/call") == 2  # the failed read-only call was not retried
    assert "Traceback" not in run.stderr


def test_a_compressed_json_answer_is_bounded_as_inflated_not_as_sent(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """httpx inflated a gzip body whole before the 8 MiB bound counted it (the bound counted the bytes on the wire):
    an answer of 64 KB compressed, 64 MiB inflated, was read whole and the call succeeded (300 MB inflated took 2.2 GB
    of memory). The bound is on the inflated body: the call is an error naming it, the next call is answered."""
    _, sent = _two_calls_first_answer_over_the_bound(cli, tmp_path, workspace, tmp_path / "state", "gzip")
    assert sent < 8 * 1024 * 1024  # under the bound as sent: only inflated is it over


def test_an_effectful_call_whose_http_answer_cannot_be_read_is_unknown_not_refused(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """The server had the call and answered; that its answer was too long to read says nothing of what it did. The
    call was reported as the server's refusal ('nothing was done', a failed receipt); its outcome is unknown, kept for
    `strata reconcile`, and it is not run again."""
    state = tmp_path / "state"
    script = script_of(tmp_path, tool_use("c1", "mcp__h__search", q="x"))
    with hanging_server(state, "flood") as url:
        run, _ = run_timed(cli, url, script, workspace, effect="effectful")
    results = call_results(events_of(run.stdout))
    assert results["c1"]["status"] == "unknown", results["c1"]
    assert "could not read" in results["c1"]["content"] and "refused" not in results["c1"]["content"]
    assert requests(state).count("tools/call") == 1
    receipts = strata(cli, "receipts", "--json")
    assert receipts.returncode == 0, receipts.stderr
    assert '"unknown"' in receipts.stdout, receipts.stdout


def test_an_http_server_sending_requests_it_never_takes_the_answers_of_is_not_read_on(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """The SDK starts a task for each request a server sends and each waits until its answer is POSTed; a server
    that never answered those POSTs was read on regardless, one task held per request (160,000 pings: 1 GB). At most
    64 wait at once, so its event stream is read no further: of 2000 pings of 48 KiB it writes no more than the socket
    buffers hold, its call ends at its deadline, and the session goes on."""
    state = tmp_path / "state"
    script = script_of(tmp_path, tool_use("c1", "mcp__h__search", q="x"),
                       tool_use("c2", "bash", command="echo still-here"))
    with hanging_server(state, "pings") as url:
        run, _ = run_timed(cli, url, script, workspace)
        pings = int((state / "pings").read_text(encoding="ascii"))
    assert run.returncode == 0, run.stderr
    results = call_results(events_of(run.stdout))
    assert results["c1"]["status"] == "timeout", results["c1"]
    assert results["c2"]["status"] == "ok", results["c2"]
    assert pings < 1000, pings  # 64 waiting, the rest in the socket buffers


@pytest.mark.parametrize("effect", ["effectful", "read_only"])
def test_an_answer_stream_that_ends_without_the_answer_fails_that_call_and_keeps_the_server(
        cli: StrataCLI, tmp_path: Path, workspace: Path, effect: str) -> None:
    """The SDK ends a call whose event stream closed before its answer with -32000, the code of a closed connection:
    an effectful call then gave the whole server up (the calls after it were not run: 'not available'). That call
    only fails (an effectful one's outcome unknown: the server had it), and the server answers the next call."""
    state = tmp_path / "state"
    script = script_of(tmp_path, tool_use("c1", "mcp__h__search", q="x"), tool_use("c2", "mcp__h__search", q="y"))
    with hanging_server(state, "sse-end") as url:
        run, _ = run_timed(cli, url, script, workspace, effect=effect)
    results = call_results(events_of(run.stdout))
    assert "notice" not in run.stderr and "Traceback" not in run.stderr, run.stderr  # never given up on
    assert results["c2"]["status"] == "ok" and "short answer" in results["c2"]["content"], results["c2"]
    if effect == "effectful":
        assert results["c1"]["status"] == "unknown" and "answer was lost" in results["c1"]["content"], results["c1"]
        assert run.returncode == 5 and requests(state).count("tools/call") == 2  # never re-run
    else:  # retried once, on the server's new MCP session
        assert results["c1"]["status"] == "ok", results["c1"]
        assert run.returncode == 0 and requests(state).count("tools/call") == 3


def test_an_http_servers_error_answer_with_code_32000_refuses_that_call_only(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """-32000 is the code the SDK also gives a closed connection: the server's own error answer with it made an
    effectful call's outcome unknown and gave the whole server up. It is the server's refusal of that call."""
    state = tmp_path / "state"
    script = script_of(tmp_path, tool_use("c1", "mcp__h__search", q="x"), tool_use("c2", "mcp__h__search", q="y"))
    with hanging_server(state, "refuse") as url:
        run, _ = run_timed(cli, url, script, workspace, effect="effectful")
    results = call_results(events_of(run.stdout))
    assert results["c1"]["status"] == "error", results["c1"]
    assert "refused the call (error -32000: backend quota exceeded)" in results["c1"]["content"], results["c1"]
    assert results["c2"]["status"] == "ok" and "short answer" in results["c2"]["content"], results["c2"]
    assert run.returncode == 0 and "notice" not in run.stderr, run.stderr
    assert requests(state).count("tools/call") == 2
