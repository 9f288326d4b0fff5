"""The real `strata` process with `--model anthropic:claude-test`, its ANTHROPIC_BASE_URL pointed at the loopback
Messages API server: a headless session with parallel tool calls, a run killed at a fault point and resumed by
id, transient faults retried and recorded in the timeline, refusals sent once and reported in one line with the
request id, the attempt bound, and the one-line answer when no API key is set.

Each `strata` process that calls the API imports the SDK (~1.2 s of CPU more than a scripted run), so the
scenarios whose checks are about the requests, the outcome and the stored timeline (a resume with a new prompt,
the retried faults, the attempt bound, the `retry-after: inf` run) run the same parts in the test's process
(tests/wire/in_process.py: the real SDK client against the same server, the real AnthropicModel with the default
retry policy, the real loop and a real SQLite file); those that check exit codes, printed lines or a SIGKILL stay
whole processes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent.models import NO_API_KEY
from agent.session import Runtime
from observability.session_timeline import verify_session
from tests._in_process_cli import json_lines_in_process, run_in_process, show_in_process
from tests.cli._helpers import assert_clean_stderr, check_pairing
from tests.conftest import StrataCLI
from tests.wire.in_process import resume_headless, run_headless, timeline_in_process
from tests.wire.messages_server import DROP, Fault, MessagesServer, Reply
from tests.wire.wire_helpers import (
    assert_all_valid,
    json_lines,
    messages_of,
    model_env,
    result_text,
    results_after,
    text,
    use,
    user_texts,
)

MODEL = "anthropic:claude-test"


def run(cli: StrataCLI, server: MessagesServer, *args: str, env: dict[str, str] | None = None,
        ) -> subprocess.CompletedProcess[str]:
    proc = cli.run(*args, env={**model_env(server), **(env or {})})
    assert_clean_stderr(proc)
    return proc


def result_of(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    (line,) = [o for o in json_lines(proc.stdout) if o.get("type") == "result"]
    return line


def timeline(cli: StrataCLI, session_id: str, *args: str) -> list[dict[str, Any]]:
    return json_lines_in_process(cli, "timeline", session_id, "--json", *args)


def verify_chain(cli: StrataCLI, session_id: str) -> None:
    proc = run_in_process(cli, "timeline", session_id, "--verify")
    assert proc.returncode == 0 and "chain verified" in proc.stdout, (proc.stdout, proc.stderr)


def env_without_key(cli: StrataCLI) -> dict[str, str]:
    env = cli.env()
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "STRATA_MODEL"):
        env.pop(name, None)
    return env


@pytest.fixture
def ws(workspace: Path) -> Path:
    (workspace / "a.txt").write_text("alpha\n")
    (workspace / "docs").mkdir()
    (workspace / "docs" / "readme.md").write_text("# hi\n")
    return workspace


# -- a whole session -------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_run_with_parallel_tool_calls_sends_only_valid_requests(cli: StrataCLI, messages_server: MessagesServer,
                                                                ws: Path) -> None:
    """`strata run`: two reads in parallel, then an allowed write, then the answer; each request the server saw
    was valid, answers the calls first and in proposal order, and the session completes (exit 0)."""
    messages_server.script(
        Reply([text("Reading."), use("read_file", "toolu_r", path="a.txt"), use("list_dir", "toolu_l", path="docs"),
               use("glob", "toolu_g", pattern="**/*.md")]),
        Reply([text("Writing."), use("write_file", "toolu_w", path="b.txt", content="beta\n")]),
        Reply([text("All done.")]),
    )
    proc = run(cli, messages_server, "run", "--model", MODEL, "--workspace", str(ws), "--allow", "write_file",
               "--json", "summarise and write b.txt")
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    summary = result_of(proc)
    assert summary["status"] == "completed"
    assert_all_valid(messages_server)
    assert [r.outcome for r in messages_server.requests] == ["reply"] * 3 and messages_server.pending == 0
    second, third = messages_of(messages_server.requests[1]), messages_of(messages_server.requests[2])
    read, listing, found = results_after(second, 1)
    assert result_text(read) == "alpha\n" and "readme.md" in result_text(listing)
    assert "docs/readme.md" in result_text(found)
    (written,) = results_after(third, 3)
    assert not written.get("is_error")
    assert (ws / "b.txt").read_text() == "beta\n"
    # What the session recorded is the conversation the server received.
    view = show_in_process(cli, summary["session_id"])
    check_pairing(view["messages"])
    assert view["session"]["model"] == MODEL
    rows = timeline(cli, summary["session_id"], "--kind", "model_attempt")
    assert [(r["turn"], r["outcome"], r["data"]["request_id"]) for r in rows] == [
        (n, "ok", r.request_id) for n, r in enumerate(messages_server.requests, start=1)]
    verify_chain(cli, summary["session_id"])


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "unknown"), [("after_dispatch:3", True), ("after_commit:1", False)])
def test_killed_run_resumes_with_valid_requests(cli: StrataCLI, messages_server: MessagesServer, ws: Path,
                                                fault: str, unknown: bool) -> None:
    """Killed (SIGKILL) after the write was dispatched, or right after the batch commit: `strata resume ID`
    sends one valid request answering every call in order; a dispatched write is an unknown result, never
    re-run, and the exit code says an unknown effect is pending."""
    messages_server.script(
        Reply([use("read_file", "toolu_r", path="a.txt"), use("list_dir", "toolu_l", path="."),
               use("write_file", "toolu_w", path="b.txt", content="beta\n")]),
    )
    killed = cli.run("run", "--model", MODEL, "--workspace", str(ws), "--allow", "write_file", "--json", "go",
                     env={**model_env(messages_server), "STRATA_FAULT": fault})
    assert killed.returncode == -9, (killed.returncode, killed.stderr)
    (session,) = json_lines_in_process(cli, "sessions", "--json")
    assert messages_server.pending == 0 and len(messages_server.requests) == 1

    messages_server.script(Reply([text("Resumed and finished.")]))
    resumed = run(cli, messages_server, "resume", session["id"], "--json")
    assert_all_valid(messages_server)
    assert len(messages_server.requests) == 2 and messages_server.pending == 0
    messages = messages_of(messages_server.requests[1])
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    read, listing, write = results_after(messages, 1)
    assert result_text(read) == "alpha\n" and not read.get("is_error")
    assert "a.txt" in result_text(listing)
    receipts = {r["call_id"]: r["status"] for r in json_lines_in_process(cli, "receipts", session["id"], "--json")}
    if unknown:
        assert write["is_error"] is True and "unknown" in result_text(write).lower()
        assert "not re-run" in result_text(write)
        assert receipts == {"toolu_w": "unknown"}
        assert resumed.returncode == 5 and result_of(resumed)["unknown_receipts"] == 1
    else:
        assert not write.get("is_error")
        assert receipts == {"toolu_w": "done"}
        assert resumed.returncode == 0
    assert (ws / "b.txt").read_text() == "beta\n"  # after_dispatch: it ran once, before the kill
    assert result_of(resumed)["status"] == "completed"
    verify_chain(cli, session["id"])


async def test_resume_with_a_new_prompt_after_completion(runtime: Runtime, messages_server: MessagesServer,
                                                         ws: Path) -> None:
    """A completed session resumed with a new prompt: the request carries the closed batch and then the prompt.
    (In this process, tests/wire/in_process.py: what is checked is the request the runtime builds.)"""
    messages_server.script(Reply([use("read_file", "toolu_r", path="a.txt")]), Reply([text("Read it.")]))
    first = await run_headless(runtime, messages_server.url, ws, "read a.txt")
    assert (first.exit_code, first.status) == (0, "completed"), first
    messages_server.script(Reply([text("Still here.")]))
    again = await resume_headless(runtime, messages_server.url, first.session_id, "and now?")
    assert (again.exit_code, again.status) == (0, "completed"), again
    assert_all_valid(messages_server)
    messages = messages_of(messages_server.requests[-1])
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert result_text(results_after(messages, 1)[0]) == "alpha\n"
    assert user_texts(messages[4]) == ["and now?"]


# -- retries and refusals --------------------------------------------------------------------------------------


async def test_transient_faults_are_retried_and_in_the_timeline(runtime: Runtime, messages_server: MessagesServer,
                                                                ws: Path) -> None:
    """529 and 429 (retry-after-ms: 100) on the first turn, 500 and a dropped connection on the second: each is
    retried (real, short waits: the default policy `strata run` uses) and each attempt is a `model_attempt` row of
    the timeline (the objects `strata timeline ID --json` prints), with its error kind, status code and request
    id, followed by the ok attempt; the chain verifies. In this process (tests/wire/in_process.py)."""
    messages_server.script(
        Fault(529), Fault(429, headers={"retry-after-ms": "100"}), Reply([use("read_file", "toolu_r", path="a.txt")]),
        Fault(500), DROP, Reply([text("Recovered.")]),
    )
    outcome = await run_headless(runtime, messages_server.url, ws, "read a.txt")
    assert (outcome.exit_code, outcome.status) == (0, "completed"), outcome
    assert_all_valid(messages_server)
    sent = messages_server.requests
    assert [r.outcome for r in sent] == ["fault", "fault", "reply", "fault", "drop", "reply"]
    rows = await timeline_in_process(runtime, outcome.session_id, "model_attempt")
    got = [(r["turn"], r["data"]["number"], r["outcome"], r["data"].get("error_kind"), r["data"].get("status_code"),
            r["data"].get("request_id")) for r in rows]
    rid = [r.request_id for r in sent]
    assert got == [(1, 1, "retry", "overloaded", 529, rid[0]), (1, 2, "retry", "rate_limited", 429, rid[1]),
                   (1, 3, "ok", None, None, rid[2]),
                   (2, 1, "retry", "server_error", 500, rid[3]), (2, 2, "retry", "connection", None, None),
                   (2, 3, "ok", None, None, rid[5])]
    assert rows[1]["data"]["retry_after_s"] == 0.1 and rows[1]["data"]["delay_s"] >= 0.1
    assert all(r["data"]["delay_s"] > 0 for r in rows if r["outcome"] == "retry")
    assert rid[0] in rows[0]["summary"] and "retrying in" in rows[0]["summary"]
    assert rows[2]["data"]["usage"]["output_tokens"] == 5
    assert (await verify_session(runtime.store, outcome.session_id)).ok


@pytest.mark.parametrize("status", [400, 401])
def test_refusal_is_sent_once_and_reported_in_one_line(cli: StrataCLI, messages_server: MessagesServer, ws: Path,
                                                       status: int) -> None:
    """A 400 (scripted) or 401 (the server refusing a wrong key) is sent once; the run fails (exit 1) and one
    line of its output names the status and the request id; the attempt is in the timeline as an error."""
    env: dict[str, str] = {}
    if status == 400:
        messages_server.script(Fault(400, message="scripted refusal"), Reply([text("never sent")]))
    else:
        env = {"ANTHROPIC_API_KEY": "sk-ant-test-wrong-key"}
    proc = run(cli, messages_server, "run", "--model", MODEL, "--workspace", str(ws), "hello", env=env)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    (sent,) = messages_server.requests
    assert sent.outcome == ("fault" if status == 400 else "unauthorized")
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if sent.request_id in line]
    assert len(lines) == 1, proc.stdout + proc.stderr
    (line,) = lines
    assert f"{status} " in line and "model error" in line
    assert ("scripted refusal" in line) if status == 400 else ("check ANTHROPIC_API_KEY" in line)
    session_id = proc.stdout.split()[1]
    (row,) = timeline(cli, session_id, "--kind", "model_attempt")
    assert (row["outcome"], row["data"]["status_code"], row["data"]["request_id"]) == ("error", status,
                                                                                       sent.request_id)


async def test_a_retry_after_of_infinity_is_no_wait_and_the_timeline_stays_json(cli: StrataCLI, home_runtime: Runtime,
                                                                               messages_server: MessagesServer,
                                                                               ws: Path) -> None:
    """`retry-after: inf` (which float() reads) is no wait the server asked for: the 429 is retried after the usual
    backoff, and `strata timeline ID --json` prints JSON every reader takes (the attempt row held `Infinity`).
    The run in this process, on the home's database (tests/wire/in_process.py); the timeline a real `strata`."""
    messages_server.script(Fault(429, headers={"retry-after": "inf"}), Reply([text("Recovered.")]))
    outcome = await run_headless(home_runtime, messages_server.url, ws, "hello")
    assert (outcome.exit_code, outcome.status) == (0, "completed"), outcome
    shown = run_in_process(cli, "timeline", outcome.session_id, "--json", "--kind", "model_attempt")
    assert shown.returncode == 0, shown.stderr

    def refuse(name: str) -> None:
        raise AssertionError(f"{name} in timeline --json: {shown.stdout}")

    retry, ok = [json.loads(line, parse_constant=refuse) for line in shown.stdout.splitlines()]
    assert (retry["outcome"], retry["data"].get("retry_after_s"), ok["outcome"]) == ("retry", None, "ok")
    assert retry["data"]["delay_s"] > 0


async def test_attempt_bound_holds(runtime: Runtime, messages_server: MessagesServer, ws: Path) -> None:
    """529 on every attempt: the default policy (the one `strata run` uses) sends 4 requests and gives up, the
    session failing (exit 1) with a reason that says so and names the last request id. In this process
    (tests/wire/in_process.py); the exit code and one-line report of a refused run are checked in whole
    processes above."""
    messages_server.script(*[Fault(529)] * 5)
    outcome = await run_headless(runtime, messages_server.url, ws, "hello")
    assert (outcome.exit_code, outcome.status) == (1, "failed"), outcome
    assert len(messages_server.requests) == 4 and messages_server.pending == 1
    assert "gave up after 4 attempts" in outcome.reason
    assert messages_server.requests[-1].request_id in outcome.reason
    rows = await timeline_in_process(runtime, outcome.session_id, "model_attempt")
    assert [r["outcome"] for r in rows] == ["retry", "retry", "retry", "error"]


# -- no API key ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [("chat",), ("chat", "--model", MODEL), ("run", "--model", MODEL, "hello")])
def test_without_an_api_key_one_line_and_exit_2(cli: StrataCLI, workspace: Path, args: tuple[str, ...]) -> None:
    """No ANTHROPIC_API_KEY: one line saying how to set one or use the scripted model, exit 2, no session."""
    proc = subprocess.run(cli.argv([*args, "--workspace", str(workspace)]) if args[0] == "chat" else
                          cli.argv([args[0], "--workspace", str(workspace), *args[1:]]),
                          cwd=cli.cwd, env=env_without_key(cli), capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    out = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert out == [f"strata: error: {NO_API_KEY}"]
    assert "ANTHROPIC_API_KEY" in out[0] and "--model script:" in out[0]
    assert json_lines_in_process(cli, "sessions", "--json") == []


@pytest.mark.parametrize("prompt", ["", "   "])
def test_a_blank_prompt_is_a_usage_error_not_a_request(cli: StrataCLI, messages_server: MessagesServer,
                                                       workspace: Path, prompt: str) -> None:
    """`strata run ""` is refused as a usage error (exit 2) before any request reaches the API."""
    messages_server.script(Reply([text("never needed")]))
    proc = run(cli, messages_server, "run", "--model", MODEL, "--workspace", str(workspace), prompt)
    assert_all_valid(messages_server)
    assert messages_server.requests == []
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
