"""Model output that used to wedge a session, streamed by the loopback Messages API server to the real `strata`
process through the real `anthropic` SDK: two tool_use blocks with one id, an id reused in a later turn, an id
outside the API's alphabet, and unpaired surrogates (`\\ud800`) in a streamed tool input and in streamed text.

The server validates every request as the API does, so a conversation that Strata stored wrongly shows up as a
refused request. The promise: the plan phase repairs the proposal before it is committed (fresh safe ids in both
the assistant content and the planned calls, text as valid UTF-8), so every later request is valid and the
session shows and resumes.

The id repairs run in the test's process (tests/wire/in_process.py: the same SDK, adapter, loop and SQLite file,
without paying ~3 s of CPU per `strata` process for importing the SDK), except the first, which stays whole
`strata run`/`resume`/`show` processes, as do the surrogate and deep-nesting ones, whose harm reached the CLI's
own output."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent.session import Runtime
from tests._in_process_cli import show_in_process
from tests.cli._helpers import assert_clean_stderr, check_pairing, json_lines
from tests.conftest import StrataCLI
from tests.wire.in_process import logged_messages, resume_headless, run_headless
from tests.wire.messages_server import MessagesServer, Reply
from tests.wire.wire_helpers import assert_all_valid, messages_of, model_env, result_text, results_after, text, use

MODEL = "anthropic:claude-test"
SAFE_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def run(cli: StrataCLI, server: MessagesServer, *args: str) -> subprocess.CompletedProcess[str]:
    proc = cli.run(*args, env=model_env(server))
    assert_clean_stderr(proc)
    return proc


def result_of(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    (line,) = [o for o in json_lines(proc.stdout) if o.get("type") == "result"]
    return line


def ids_of(messages: list[dict[str, Any]]) -> list[str]:
    return [b["id"] for m in messages if m["role"] == "assistant" for b in m["content"]
            if isinstance(b, dict) and b["type"] == "tool_use"]


@pytest.fixture
def ws(workspace: Path) -> Path:
    (workspace / "a.txt").write_text("alpha\n")
    return workspace


def finish(cli: StrataCLI, server: MessagesServer, session_id: str) -> dict[str, Any]:
    """The session afterwards: it shows with valid pairing and unique safe ids, and resumes with a new prompt,
    sending a valid request."""
    view = show_in_process(cli, session_id)
    check_pairing(view["messages"])
    ids = ids_of(view["messages"])
    assert len(ids) == len(set(ids)) and all(SAFE_ID.match(i) for i in ids), ids
    server.script(Reply([text("Still here.")]))
    again = run(cli, server, "resume", session_id, "--model", MODEL, "--json", "and now?")
    assert again.returncode == 0, again.stderr
    assert_all_valid(server)
    return view


async def finish_in_process(rt: Runtime, server: MessagesServer, session_id: str) -> list[dict[str, Any]]:
    """`finish` in this process: the logged conversation pairs and has unique safe ids; a resume completes."""
    messages = await logged_messages(rt, session_id)
    check_pairing(messages)
    ids = ids_of(messages)
    assert len(ids) == len(set(ids)) and all(SAFE_ID.match(i) for i in ids), ids
    server.script(Reply([text("Still here.")]))
    again = await resume_headless(rt, server.url, session_id, "and now?")
    assert (again.exit_code, again.status) == (0, "completed"), again
    assert_all_valid(server)
    return messages


def test_two_tool_uses_with_one_id_in_one_response_both_run(cli: StrataCLI, messages_server: MessagesServer,
                                                            ws: Path) -> None:
    """Two tool_use blocks share an id: the second is renamed, both calls run and are answered in order, and
    the next request is valid (it used to fail with "second call_result" after the batch was committed)."""
    messages_server.script(
        Reply([use("read_file", "toolu_dup", path="a.txt"), use("list_dir", "toolu_dup", path=".")]),
        Reply([text("Read both.")]),
    )
    proc = run(cli, messages_server, "run", "--model", MODEL, "--workspace", str(ws), "--json", "look")
    assert proc.returncode == 0, proc.stderr
    assert_all_valid(messages_server)
    second = messages_of(messages_server.requests[1])
    read, listing = results_after(second, 1)
    assert result_text(read) == "alpha\n" and "a.txt" in result_text(listing)
    first, renamed = ids_of(second)
    assert first == "toolu_dup" and renamed != "toolu_dup"
    finish(cli, messages_server, result_of(proc)["session_id"])


async def test_an_id_reused_in_a_later_turn_keeps_every_request_valid(runtime: Runtime,
                                                                      messages_server: MessagesServer,
                                                                      ws: Path) -> None:
    """The model reuses the id of an earlier turn's call: the later call is renamed, so the API never sees one
    id twice (it used to refuse every later request of the session)."""
    messages_server.script(
        Reply([use("read_file", "toolu_same", path="a.txt")]),
        Reply([use("list_dir", "toolu_same", path=".")]),
        Reply([text("Done.")]),
    )
    outcome = await run_headless(runtime, messages_server.url, ws, "look twice")
    assert (outcome.exit_code, outcome.status) == (0, "completed"), outcome
    assert_all_valid(messages_server)
    assert [r.outcome for r in messages_server.requests] == ["reply"] * 3
    ids = ids_of(messages_of(messages_server.requests[2]))
    assert ids[0] == "toolu_same" and ids[1] != "toolu_same", ids
    await finish_in_process(runtime, messages_server, outcome.session_id)


async def test_an_id_outside_the_api_alphabet_is_renamed(runtime: Runtime, messages_server: MessagesServer,
                                                         ws: Path) -> None:
    """An id the API itself would refuse to read back ("call 1/2", spaces and a slash) is renamed to a safe one
    in the conversation; the original is never stored."""
    messages_server.script(Reply([use("read_file", "call 1/2", path="a.txt")]), Reply([text("Done.")]))
    outcome = await run_headless(runtime, messages_server.url, ws, "look")
    assert outcome.exit_code == 0, outcome
    assert_all_valid(messages_server)
    messages = await finish_in_process(runtime, messages_server, outcome.session_id)
    assert "call 1/2" not in json.dumps(messages)
    assert "call 1/2" not in repr(await runtime.store.read_events(outcome.session_id))


def test_unpaired_surrogates_in_streamed_input_and_text_are_replaced(cli: StrataCLI, messages_server: MessagesServer,
                                                                     ws: Path) -> None:
    """A streamed tool input whose JSON holds `\\ud800`, and streamed text holding one: stored and sent back as
    U+FFFD (they used to end the run with UnicodeEncodeError, on every resume too)."""
    (ws / "b\ufffd.txt").write_text("beta\n")
    messages_server.script(
        Reply([text("odd \ud800 text"),
               {"type": "tool_use", "id": "toolu_s", "name": "read_file", "input": {},
                "partial_json": '{"path": "b\\ud800.txt"}'}]),
        Reply([text("Done \udbff.")]),
    )
    proc = run(cli, messages_server, "run", "--model", MODEL, "--workspace", str(ws), "--json", "look")
    assert proc.returncode == 0, proc.stderr
    assert_all_valid(messages_server)
    second = messages_of(messages_server.requests[1])
    assert second[1]["content"][0]["text"] == "odd \ufffd text"
    assert second[1]["content"][1]["input"] == {"path": "b\ufffd.txt"}
    (read,) = results_after(second, 1)
    assert result_text(read) == "beta\n"
    view = finish(cli, messages_server, result_of(proc)["session_id"])
    assert "Done \ufffd." in json.dumps(view, ensure_ascii=False)


def test_a_streamed_input_nested_300_levels_is_denied_and_replaced(cli: StrataCLI, messages_server: MessagesServer,
                                                                   ws: Path) -> None:
    """A streamed tool input nested 300 levels deep (it used to fail with "Maximum serialization depth exceeded",
    on every resume too): the call is denied by the `plan` check, its input is a placeholder in the conversation,
    and the next request is valid."""
    deep = '{"path": "a.txt", "deep": ' + '{"a": ' * 300 + "1" + "}" * 300 + "}"
    messages_server.script(
        Reply([{"type": "tool_use", "id": "toolu_deep", "name": "read_file", "input": {}, "partial_json": deep}],
              chunk=512),
        Reply([text("Understood.")]),
    )
    proc = run(cli, messages_server, "run", "--model", MODEL, "--workspace", str(ws), "--json", "look")
    assert proc.returncode == 0, proc.stderr
    assert_all_valid(messages_server)
    second = messages_of(messages_server.requests[1])
    (denied,) = results_after(second, 1)
    assert denied["is_error"] and "plan check" in result_text(denied) and "nested more than" in result_text(denied)
    assert list(second[1]["content"][0]["input"]) == ["removed_by_strata"]
    finish(cli, messages_server, result_of(proc)["session_id"])
