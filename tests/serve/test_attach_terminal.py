"""`strata attach` in a real pseudo-terminal against a real daemon: chat's look over IPC. The approval shows the
whole call and takes an explicit answer, Ctrl-C interrupts a running turn safely and gives the prompt back,
/timeline and /receipts read the session, and /exit detaches while the session stays in the daemon."""

from __future__ import annotations

import signal
from pathlib import Path

import pexpect
import pytest

from tests._in_process_cli import json_lines_in_process
from tests._terminal import APPROVE, answer, asked, enter_alone_is_refused
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, parked_session, script, status, wait_until

pytestmark = pytest.mark.slow


def said(words: str) -> str:
    """The assistant's line as the terminal shows it: its text streams in pieces, and the prompt's redraws may put
    control sequences between the label and the text."""
    return r"assistant: (?:\x1b\[[0-9;?]*[A-Za-z])*" + words


def test_attach_in_a_terminal_approves_inline_interrupts_with_ctrl_c_and_detaches_with_exit(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json",
                   [text("writing"), tool_use("w1", "write_file", path="a.txt", content="A\n")],
                   [text("wrote a")],
                   [tool_use("slow", "bash", command="echo started > started.txt; sleep 30; echo late > late.txt")],
                   [text("after the interrupt")])
    daemon = Daemon(cli)
    try:
        child: pexpect.spawn = cli.spawn_pty("attach", "--new", "--workspace", str(ws), "--model", model)
        child.expect(r"attached to session ([0-9a-f-]{36}) \(driving\)")
        sid = child.match.group(1)
        child.expect("strata>")
        child.sendline("write a")
        asked(child, "write_file", r"path: a.txt", r"content \(1 line, 2 bytes\):", r"│ A")
        enter_alone_is_refused(child)
        child.sendline("y")
        child.expect("<- write_file ok")
        child.expect(said("wrote a"))
        child.expect("strata>")
        assert (ws / "a.txt").read_text() == "A\n"

        child.sendline("run the slow one")
        answer(child, "bash", "y")
        wait_until(lambda: (ws / "started.txt").exists(), what="the command started")
        child.kill(signal.SIGINT)
        child.expect("interrupting the turn")
        child.expect("interrupted")
        child.expect("strata>")
        child.sendline("/receipts")
        child.expect(r"unknown\s+bash")
        child.sendline("/timeline")
        child.expect(f"timeline of {sid}")
        child.expect("strata>")
        child.sendline("/exit")
        child.expect(f"detached from session {sid}")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0
        (row,) = status(cli)
        assert row["session_id"] == sid and row["drivers"] == 0  # still hosted
    finally:
        daemon.stop()
    assert not (ws / "late.txt").exists()


def test_attach_in_a_terminal_to_a_parked_session_shows_the_waiting_approval_at_once(
        cli: StrataCLI, tmp_path: Path) -> None:
    """A call parked (its driver left); a driver attaching in a terminal is asked about it at once, at the
    `strata>` prompt, without starting a turn of its own (a prompt would be refused: the re-asked turn runs)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [tool_use("w1", "write_file", path="a.txt", content="A\n")],
                   [text("wrote a")])
    daemon = Daemon(cli)
    try:
        # stdin ends while the call waits: the driver detaches, the call parks.
        sid = parked_session(cli, ws, model, asked="w1", prompt="write a", leave="detach")

        child: pexpect.spawn = cli.spawn_pty("attach", sid)
        child.expect(r"\(driving\)")
        answer(child, "write_file", "y")
        child.expect("<- write_file ok")
        child.expect(said("wrote a"))
        child.expect("strata>")
        child.sendline("/exit")
        child.expect(f"detached from session {sid}")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0
    finally:
        daemon.stop()
    assert (ws / "a.txt").read_text() == "A\n"


def test_a_denial_reason_longer_than_the_protocol_allows_is_cut_and_the_call_is_denied(
        cli: StrataCLI, tmp_path: Path) -> None:
    """A reason typed at the terminal over the protocol's 1,000 characters is cut to them (and the person is told),
    instead of the denial being refused while the call goes on waiting for an answer nobody is asked for."""
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [tool_use("w1", "write_file", path="a.txt", content="A\n")],
                   [text("understood")])
    daemon = Daemon(cli)
    try:
        child: pexpect.spawn = cli.spawn_pty("attach", "--new", "--workspace", str(ws), "--model", model)
        child.expect(r"attached to session ([0-9a-f-]{36}) \(driving\)")
        sid = child.match.group(1)
        child.expect("strata>")
        child.sendline("write a")
        child.expect(APPROVE)
        child.sendline("n")
        child.expect("reason for the model")
        child.sendline("r" * 1500)
        child.expect("cut to 1000 characters")
        child.expect(said("understood"))
        child.expect("strata>")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
        child.close()
    finally:
        daemon.stop()
    assert not (ws / "a.txt").exists()
    rejected = [r for r in json_lines_in_process(cli, "timeline", sid, "--json") if r["kind"] == "approval"]
    assert [r["decision"] for r in rejected] == ["rejected"], rejected
