"""`strata run` and `strata resume` on the Anthropic API model close its HTTP client when the session ends: the
connection the SDK keeps alive in its pool is closed before the command returns, not left for the interpreter to
close after the event loop is gone (an unclosed-transport ResourceWarning, and a connection the server keeps
waiting on until then). The real command in the test's process (tests/_in_process_cli.py), the real SDK client
against the loopback Messages API server, which sees the client's end of each connection."""

from __future__ import annotations

import gc
import json
import subprocess
import time
import warnings
from pathlib import Path

import pytest

from core import env_block
from tests._in_process_cli import set_up_in_process
from tests.conftest import StrataCLI
from tests.wire.messages_server import Fault, MessagesServer, Reply
from tests.wire.wire_helpers import model_env, text, use

MODEL = "anthropic:claude-test"
CLOSED_WITHIN_S = 5.0


@pytest.fixture(autouse=True)
def _key_kept_for_this_test_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command takes the API key out of the environment and keeps it for the process (core/env_block.py): in
    this worker, only until the test ends."""
    monkeypatch.setattr(env_block, "_taken", {})


def _closing(server: MessagesServer, cli: StrataCLI, *args: str) -> dict[str, object]:
    """The result line of `strata ARGS --json` run in this process against `server`, checked to have left no
    connection to the server open, and no unclosed transport or socket behind (collected or not)."""
    gc.collect()  # what earlier tests left is not this command's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        done = _strata(server, cli, *args)
        left_open = _open_after(server)
        gc.collect()
    unclosed = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert left_open == 0, f"{left_open} connection(s) to the API left open after the command returned"
    assert unclosed == [], unclosed
    return _result(done)


def _strata(server: MessagesServer, cli: StrataCLI, *args: str) -> subprocess.CompletedProcess[str]:
    done = set_up_in_process(cli, *args, "--json", env=model_env(server))
    assert "Traceback" not in done.stderr, done.stderr
    return done


def _open_after(server: MessagesServer) -> int:
    """The server's open connections once they stop closing (the client's close reaches its handler thread as the
    end of the stream), or after CLOSED_WITHIN_S."""
    deadline = time.monotonic() + CLOSED_WITHIN_S
    while server.open_connections and time.monotonic() < deadline:
        time.sleep(0.02)
    return server.open_connections


def _result(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    (line,) = [o for o in map(json.loads, done.stdout.splitlines()) if o.get("type") == "result"]
    return dict(line)


def _session(server: MessagesServer, cli: StrataCLI, workspace: Path) -> str:
    """A completed session on the API model (its client closed, or the resume's check would count it)."""
    server.script(Reply([text("Hello.")]))
    session_id = _result(_strata(server, cli, "run", "--model", MODEL, "--workspace", str(workspace), "hi"))[
        "session_id"]
    assert _open_after(server) == 0
    return str(session_id)


def test_run_closes_the_api_client_when_the_session_ends(cli: StrataCLI, messages_server: MessagesServer,
                                                          workspace: Path) -> None:
    messages_server.script(Reply([text("Hello.")]))
    result = _closing(messages_server, cli, "run", "--model", MODEL, "--workspace", str(workspace), "hi")
    assert result["status"] == "completed" and len(messages_server.requests) == 1


def test_run_closes_the_api_client_when_the_model_call_fails(cli: StrataCLI, messages_server: MessagesServer,
                                                             workspace: Path) -> None:
    """A refusal the session ends on (400, sent once): the client is closed on that way out too."""
    messages_server.script(Fault(400))
    result = _closing(messages_server, cli, "run", "--model", MODEL, "--workspace", str(workspace), "hi")
    assert result["status"] == "failed" and len(messages_server.requests) == 1


def test_resume_closes_the_client_of_the_model_the_session_recorded(cli: StrataCLI, messages_server: MessagesServer,
                                                                     workspace: Path) -> None:
    """`strata resume ID PROMPT` without --model: resume_session's factory builds the recorded model, and the
    session closes it as it is released."""
    session_id = _session(messages_server, cli, workspace)
    messages_server.script(Reply([text("Again.")]))
    result = _closing(messages_server, cli, "resume", session_id, "once more")
    assert result["status"] == "completed" and len(messages_server.requests) == 2


def test_resume_closes_the_client_of_the_model_it_is_given(cli: StrataCLI, messages_server: MessagesServer,
                                                           workspace: Path) -> None:
    session_id = _session(messages_server, cli, workspace)
    messages_server.script(Reply([text("Again.")]))
    result = _closing(messages_server, cli, "resume", session_id, "--model", MODEL, "once more")
    assert result["status"] == "completed" and len(messages_server.requests) == 2


def test_run_closes_the_api_client_of_a_delegate_child_whose_model_call_fails(
        cli: StrataCLI, messages_server: MessagesServer, workspace: Path) -> None:
    """A child session on the parent's API model has a client of its own: its model call refused (400), the child
    fails, the parent is told and completes, and neither client is left open."""
    messages_server.script(Reply([use("delegate", "p1", task="do a thing")]), Fault(400), Reply([text("Done.")]))
    result = _closing(messages_server, cli, "run", "--model", MODEL, "--workspace", str(workspace),
                      "--allow", "delegate", "go")
    assert result["status"] == "completed"
    assert [r.outcome for r in messages_server.requests] == ["reply", "fault", "reply"]
