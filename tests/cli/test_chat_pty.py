"""`strata chat` in a real pseudo-terminal: approvals show the whole call, `n` denies, `a` grants for the session
(and the grant survives resume), Ctrl-C interrupts a slow tool and gives the prompt back, Ctrl-D leaves, and
`strata chat --resume ID` shows the history and goes on."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pexpect
import pytest

from tests._in_process_cli import json_lines_in_process, show_in_process
from tests._terminal import CHAT_SESSION, answer, asked, enter_alone_is_refused, leave_chat
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI, write_script
from tests.serve._procs import wait_until

pytestmark = pytest.mark.slow



def _spawn(cli: StrataCLI, *args: str) -> pexpect.spawn:
    child: pexpect.spawn = cli.spawn_pty(*args)
    return child


def _script(tmp_path: Path) -> Path:
    return write_script(tmp_path / "turns.json", [
        [text("first a.txt"), tool_use("toolu_a", "write_file", path="a.txt", content="A\n")],
        [tool_use("toolu_b", "write_file", path="b.txt", content="B\n")],
        [text("wrote b")],
        [tool_use("toolu_slow", "bash", command="touch started; sleep 30; echo late > late.txt")],
        [tool_use("toolu_c", "write_file", path="c.txt", content="C\n")],
        [text("all done")],
        [text("continued after resume")],
    ])


def test_terminal_approvals_interrupt_and_resume(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """The whole interactive path in a pty, then a headless resume that uses the grant, then chat --resume."""
    script = _script(tmp_path)
    child = _spawn(cli, "chat", "--model", f"script:{script}", "--workspace", str(workspace))
    child.expect(CHAT_SESSION)
    session_id = child.match.group(1)
    child.expect("strata>")
    child.sendline("write the files")
    # The first write: the whole call is shown, Enter alone is not an answer, `n` denies with a reason.
    asked(child, "write_file", r"asked by: default: write tools ask in every mode", r"path: a.txt",
          r"content \(1 line, 2 bytes\):", r"│ A")
    enter_alone_is_refused(child)
    child.sendline("n")
    child.expect("reason for the model")
    child.sendline("not a.txt")
    child.expect("write_file DENIED by approval")
    # The second write: `a` grants write_file for the session.
    answer(child, "write_file", "a")
    child.expect("write_file ok")
    child.expect("assistant: wrote b")
    child.expect("strata>")
    # A slow tool, approved once, then Ctrl-C: the turn stops, the prompt comes back.
    child.sendline("now something slow")
    # The proposal line (`-> bash`) may show before the question or after the answer, depending on when the
    # proposal is committed; the running status after the answer is there in either case.
    answer(child, "bash", "y")
    child.expect(r"running \[bash\]")
    wait_until(lambda: (workspace / "started").exists(), what="the slow command started")
    child.sendintr()
    child.expect("bash UNKNOWN")
    child.expect("interrupted")
    leave_chat(child, session_id)

    assert not (workspace / "a.txt").exists() and (workspace / "b.txt").read_text() == "B\n"
    time.sleep(0.3)
    assert not (workspace / "late.txt").exists(), "the interrupted command's process group was not killed"
    view = show_in_process(cli, session_id)
    results = {b["tool_use_id"]: b for m in view["messages"] for b in m["content"] if b["type"] == "tool_result"}
    assert "not a.txt" in results["toolu_a"]["content"] and "rejected by person:" in results["toolu_a"]["content"]
    assert results["toolu_slow"]["is_error"] and "interrupted" in results["toolu_slow"]["content"]
    receipts = {r["call_id"]: r["status"] for r in json_lines_in_process(cli, "receipts", session_id, "--json")}
    assert receipts == {"toolu_b": "done", "toolu_slow": "unknown"}

    # The "always" grant is in the log: a headless resume writes c.txt without anyone to ask.
    resumed = cli.run("resume", session_id, "one more file")
    assert resumed.returncode == 5, resumed.stderr  # completed, with the interrupted bash still unknown
    assert (workspace / "c.txt").read_text() == "C\n"

    # chat --resume shows the history and continues the same session.
    child = _spawn(cli, "chat", "--resume", session_id)
    child.expect(f"history of session {session_id}")
    child.expect("wrote b")
    child.expect("all done")
    child.expect("strata>")
    child.sendline("and now?")
    child.expect("assistant: continued after resume")
    child.expect("strata>")
    child.sendline("/receipts")
    child.expect(r"done\s+write_file\s+call toolu_b")
    child.expect(r"unknown\s+bash\s+call toolu_slow")
    child.expect("strata>")
    child.sendline("/timeline")
    child.expect(f"timeline of {session_id}")
    child.expect(r"call\s+approved .*write_file")
    child.expect("strata>")
    child.sendline("/help")
    child.expect("/receipts")
    child.expect("strata>")
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    last = show_in_process(cli, session_id)["messages"][-1]
    assert last["role"] == "assistant" and last["content"][0]["text"] == "continued after resume"
    assert json.loads(cli.run("sessions", "--json").stdout.splitlines()[-1])["id"] == session_id


def test_an_escape_sequence_typed_at_the_approval_question_is_no_answer_and_no_traceback(
        cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """An SGR colour typed or pasted (`ESC [ 3 1 m`, say from copied coloured output) parses as a mouse report
    without coordinates, whose prompt_toolkit handler raised: a traceback on the screen and "Press ENTER to
    continue". The prompt (agent/terminal/chat.py `make_prompt`, chat's and attach's) drops it: the question comes
    again, and the call runs after a yes."""
    script = write_script(tmp_path / "turns.json", [[tool_use("toolu_a", "write_file", path="a.txt", content="A\n")],
                                                     [text("wrote a")]])
    child = _spawn(cli, "chat", "--model", f"script:{script}", "--workspace", str(workspace))
    child.expect(CHAT_SESSION)
    session_id = child.match.group(1)
    child.expect("strata>")
    child.sendline("write a")
    asked(child, "write_file")
    for sequence in ("\x1b[31m", "\x1b[31mred", "\x1b[Mxyz"):
        child.sendline(sequence)
        child.expect(r"answer y, n or a \(Enter alone is not an answer\)")
        child.expect(r"approve\? \[y/n/a\]")
    assert "Press ENTER" not in child.before and "Traceback" not in child.before
    child.sendline("y")
    child.expect("assistant: wrote a")
    leave_chat(child, session_id)
    assert (workspace / "a.txt").read_text() == "A\n"
