"""`strata chat --model anthropic:claude-test` in a real pseudo-terminal, against the loopback Messages API server:
the model's text appears while the answer is still streaming, a retry is shown, an approval is answered, Ctrl-C
in a slow tool (or in the stream, or at the approval prompt) gives the prompt back, the session goes on, Ctrl-D
leaves, and `strata chat --resume ID` shows the history and continues. Every request the server saw must be
valid (every tool_use answered, first and in order, in the next user message)."""

from __future__ import annotations

import io
import re
import threading
import time
from pathlib import Path

import pexpect
import pytest

from tests._in_process_cli import json_lines_in_process, show_in_process
from tests._terminal import CHAT_SESSION, answer, asked, leave_chat
from tests.conftest import StrataCLI
from tests.serve._procs import wait_until
from tests.wire.messages_server import Fault, MessagesServer, Reply
from tests.wire.wire_helpers import (
    assert_all_valid,
    messages_of,
    model_env,
    result_text,
    results_after,
    text,
    use,
    user_texts,
)

pytestmark = pytest.mark.slow

MODEL = "anthropic:claude-test"


def spawn(cli: StrataCLI, server: MessagesServer, *args: str) -> pexpect.spawn:
    return cli.spawn_pty(*args, env=model_env(server))


def test_chat_streams_approves_interrupts_and_resumes(cli: StrataCLI, messages_server: MessagesServer,
                                                      workspace: Path) -> None:
    """The whole interactive path against the wire: streamed text seen before the reply ends, a retried 529
    shown, an approval, Ctrl-C in `sleep 30`, a new prompt in the same chat, Ctrl-D, then chat --resume."""
    gate = threading.Event()
    streamed = "Streaming this answer piece by piece before writing."
    messages_server.script(
        Reply([text(streamed), use("write_file", "toolu_w", path="a.txt", content="A\n")], chunk=6, gate=gate),
        Fault(529),
        Reply([text("Wrote a.txt.")]),
        Reply([use("bash", "toolu_slow", command="touch started; sleep 30; echo late > late.txt")]),
        Reply([text("Stopped as you asked.")]),
    )
    child = spawn(cli, messages_server, "chat", "--model", MODEL, "--workspace", str(workspace))
    try:
        child.expect(CHAT_SESSION)
        session_id = child.match.group(1)
        child.expect("strata>")
        child.sendline("write a.txt please")
        # The first chunk is on the screen while the server still holds the rest of the stream.
        child.expect("assistant: Stream")
        assert messages_server.requests[0].outcome == "reply" and not gate.is_set()
        gate.set()
        answer(child, "write_file", "y", r"path: a.txt")
        child.expect("write_file ok")
        child.expect("model attempt 1 failed: Anthropic API is overloaded")
        child.expect("retrying in")
        child.expect("assistant: Wrote a.txt.")
        child.expect("strata>")

        child.sendline("now something slow")
        answer(child, "bash", "y")
        child.expect(r"running \[bash\]")  # the proposal line may show before the question: not a sync point
        wait_until(lambda: (workspace / "started").exists(), what="the slow command started")
        child.sendintr()
        child.expect("bash UNKNOWN")
        child.expect("interrupted")
        child.expect("strata>")
        child.sendline("what happened?")
        child.expect("assistant: Stopped as you asked.")
        leave_chat(child, session_id)
    finally:
        gate.set()
        child.close(force=True)

    assert messages_server.gate_timeouts == 0
    assert_all_valid(messages_server)
    assert [r.outcome for r in messages_server.requests] == ["reply", "fault", "reply", "reply", "reply"]
    after_interrupt = messages_of(messages_server.requests[4])
    assert [m["role"] for m in after_interrupt] == ["user", "assistant", "user", "assistant", "user", "assistant",
                                                    "user"]
    (slow,) = results_after(after_interrupt, 5)
    assert slow["is_error"] is True and "interrupted" in result_text(slow)
    assert user_texts(after_interrupt[6]) == ["what happened?"]
    (written,) = results_after(after_interrupt, 1)
    assert not written.get("is_error")
    assert (workspace / "a.txt").read_text() == "A\n"
    time.sleep(0.3)
    assert not (workspace / "late.txt").exists(), "the interrupted command was not stopped"

    # chat --resume: the history is shown, the next prompt continues the same conversation.
    messages_server.script(Reply([text("Continued after resume.")]))
    child = spawn(cli, messages_server, "chat", "--resume", session_id)
    try:
        child.expect(f"history of session {session_id}")
        child.expect("user: write a.txt please")
        child.expect("Wrote a.txt.")
        child.expect("Stopped as you asked.")
        child.expect("strata>")
        child.sendline("carry on")
        child.expect("assistant: Continued after resume.")
        child.expect("strata>")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0
    finally:
        child.close(force=True)
    assert_all_valid(messages_server)
    last = messages_of(messages_server.requests[-1])
    assert len(last) == 9 and user_texts(last[-1]) == ["carry on"]
    assert last[:6] == after_interrupt[:6]  # the resumed session rebuilt the same conversation from its log
    assert results_after(last, 5)[0]["tool_use_id"] == "toolu_slow" and user_texts(last[6]) == ["what happened?"]
    assert messages_server.pending == 0
    receipts = {r["call_id"]: r["status"] for r in json_lines_in_process(cli, "receipts", session_id, "--json")}
    assert receipts == {"toolu_w": "done", "toolu_slow": "unknown"}


def test_ctrl_c_while_the_model_streams(cli: StrataCLI, messages_server: MessagesServer, workspace: Path) -> None:
    """Ctrl-C while the answer is still streaming gives the prompt back; the next request is valid, with the
    unanswered prompt and the new one in one user message, and nothing of the cut answer."""
    gate = threading.Event()
    messages_server.script(
        Reply([text("This answer is cut short by the person at the keyboard.")], chunk=5, gate=gate),
        Reply([text("Here is a fresh answer.")]),
    )
    child = spawn(cli, messages_server, "chat", "--model", MODEL, "--workspace", str(workspace))
    try:
        child.expect(CHAT_SESSION)
        session_id = child.match.group(1)
        child.expect("strata>")
        child.sendline("tell me a long story")
        child.expect("assistant: This ")
        child.sendintr()
        child.expect("interrupted")
        child.expect("strata>")
        gate.set()
        child.sendline("shorter please")
        child.expect("assistant: Here is a fresh answer.")
        leave_chat(child, session_id)
    finally:
        gate.set()
        child.close(force=True)
    assert_all_valid(messages_server)
    assert [r.outcome for r in messages_server.requests] == ["reply"] * 2
    second = messages_of(messages_server.requests[1])
    assert [m["role"] for m in second] == ["user"]
    assert user_texts(second[0]) == ["tell me a long story", "shorter please"]
    view = show_in_process(cli, session_id)
    assert [m["role"] for m in view["messages"]] == ["user", "assistant"]


def test_ctrl_c_at_the_approval_prompt(cli: StrataCLI, messages_server: MessagesServer, workspace: Path) -> None:
    """Ctrl-C at an approval prompt gives the prompt back; the next request carries the unapproved call and its
    result (the model must learn its call did not run), as the session's log does."""
    messages_server.script(
        Reply([text("Writing b.txt."), use("write_file", "toolu_w", path="b.txt", content="B\n")]),
        Reply([text("Fine, no file.")]),
    )
    child = spawn(cli, messages_server, "chat", "--model", MODEL, "--workspace", str(workspace))
    try:
        child.expect(CHAT_SESSION)
        session_id = child.match.group(1)
        child.expect("strata>")
        child.sendline("write b.txt")
        asked(child, "write_file")
        child.sendintr()
        child.expect("interrupted")
        child.expect("strata>")
        child.sendline("ok then")
        child.expect("assistant: Fine, no file.")
        leave_chat(child, session_id)
    finally:
        child.close(force=True)
    assert_all_valid(messages_server)
    assert not (workspace / "b.txt").exists()
    logged = show_in_process(cli, session_id)["messages"]
    assert [m["role"] for m in logged] == ["user", "assistant", "user", "assistant"]
    last = messages_of(messages_server.requests[1])
    assert [m["role"] for m in last] == ["user", "assistant", "user"], last
    (refused,) = results_after(last, 1)
    assert refused["is_error"] is True
    assert user_texts(last[2]) == ["ok then"]


def screen_lines(log: io.StringIO) -> list[str]:
    """What the terminal showed, line by line, with the escape sequences taken out."""
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", log.getvalue())
    return [line.strip() for line in plain.replace("\r", "\n").split("\n") if line.strip()]


def test_a_refusal_in_chat_then_the_next_prompt_works(cli: StrataCLI, messages_server: MessagesServer,
                                                      workspace: Path) -> None:
    """A 400 is sent once and shown with its request id; the chat stays usable, and the next prompt's request
    is valid (the refused prompt and the new one share a user message)."""
    messages_server.script(Fault(400, message="scripted refusal"), Reply([text("Fine now.")]))
    child = spawn(cli, messages_server, "chat", "--model", MODEL, "--workspace", str(workspace))
    try:
        child.expect(CHAT_SESSION)
        session_id = child.match.group(1)
        child.expect("strata>")
        child.sendline("hello")
        child.expect(r"400 invalid_request_error, request req_test000001: scripted refusal")
        child.expect("strata>")
        child.sendline("again")
        child.expect("assistant: Fine now.")
        leave_chat(child, session_id)
    finally:
        child.close(force=True)
    assert_all_valid(messages_server)
    assert [r.outcome for r in messages_server.requests] == ["fault", "reply"]
    assert user_texts(messages_of(messages_server.requests[1])[0]) == ["hello", "again"]


def test_a_wrong_key_in_chat_is_reported_in_one_line(cli: StrataCLI, messages_server: MessagesServer,
                                                     workspace: Path) -> None:
    """The server's 401 for a wrong key: one request, and one line on the screen naming the request id and
    saying to check ANTHROPIC_API_KEY."""
    child = cli.spawn_pty("chat", "--model", MODEL, "--workspace", str(workspace),
                          env={**model_env(messages_server), "ANTHROPIC_API_KEY": "sk-ant-test-wrong-key"})
    log = io.StringIO()
    child.logfile_read = log
    try:
        child.expect(CHAT_SESSION)
        session_id = child.match.group(1)
        child.expect("strata>")
        child.sendline("hello")
        child.expect("check ANTHROPIC_API_KEY")
        leave_chat(child, session_id)
    finally:
        child.close(force=True)
    (sent,) = messages_server.requests
    assert sent.outcome == "unauthorized"
    shown = [line for line in screen_lines(log) if sent.request_id in line]
    assert len(shown) == 1, shown
    assert "401" in shown[0] and "check ANTHROPIC_API_KEY" in shown[0]
