"""The approval choreography of the terminal tests (`strata chat` and `strata attach` in a pty): one place that knows
what the prompt looks like and how a person answers it."""

from __future__ import annotations

import termios
import time

import pexpect

APPROVE = r"approve\? \[y/n/a(?:/e)?\]"
CHAT_SESSION = r"session ([0-9a-f-]{36}) \(interactive\)"


def asked(child: pexpect.spawn, tool: str, *shown: str) -> None:
    """Wait for the approval of a `tool` call, each of `shown` (patterns, in order) on the screen before the
    question."""
    child.expect(f"approval needed: {tool}")
    for pattern in shown:
        child.expect(pattern)
    child.expect(APPROVE)


def answer(child: pexpect.spawn, tool: str, reply: str, *shown: str) -> None:
    """Wait for the approval of a `tool` call and answer it (`y`, `n`, `a`)."""
    asked(child, tool, *shown)
    child.sendline(reply)


def enter_alone_is_refused(child: pexpect.spawn) -> None:
    """At the approval question, Enter alone is not an answer: the question comes again."""
    child.sendline("")
    child.expect("Enter alone is not an answer")
    child.expect(APPROVE)


def leave_chat(child: pexpect.spawn, session_id: str) -> None:
    """Ctrl-D at the chat prompt: the chat says how to resume and ends with status 0."""
    child.expect("strata>")
    child.sendcontrol("d")
    child.expect(f"resume it: strata chat --resume {session_id}")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before


def keys_read_as_keys(child: pexpect.spawn, timeout: float = 30) -> None:
    """Wait until the program in the pty reads keys itself (prompt_toolkit's raw mode: the terminal's ISIG is off), so
    that a control key sent next reaches the prompt as a key. A prompt's text can be on the screen a moment before:
    Ctrl-C sent then is turned into SIGINT by the terminal, Ctrl-D into an end of line, and the test takes the other
    path than the one it means to."""
    deadline = time.monotonic() + timeout
    while termios.tcgetattr(child.child_fd)[3] & termios.ISIG:
        if time.monotonic() > deadline:
            raise AssertionError(f"the terminal did not go into raw mode within {timeout} s")
        time.sleep(0.01)
