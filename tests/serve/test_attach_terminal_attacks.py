"""`strata attach` in a real pseudo-terminal against a real daemon, attacked where a person can reach it: the keys at
the `strata>` prompt and at the approval question (Ctrl-C, Ctrl-D, garbage, escape sequences typed or pasted), the
terminal hung up, resized or interrupted while a call is asked, the daemon killed under it, and a tool and a model
whose output is made of control sequences. Whatever happens: no traceback, one clear line, the call runs at most
once (after a yes), and the daemon keeps the session."""

from __future__ import annotations

import io
import re
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pexpect
import pytest

from tests._terminal import APPROVE, keys_read_as_keys
from tests.cli._helpers import text, tool_use
from tests.cli.test_terminal_escapes import HOSTILE
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, allow_in_user_config, script, serving, status, status_in_process, wait_until

pytestmark = pytest.mark.slow

SESSION = r"attached to session ([0-9a-f-]{36}) \(driving\)"
WRITE_A = [tool_use("w1", "write_file", path="a.txt", content="A\n")]


def _attached(cli: StrataCLI, ws: Path, model: str, seen: io.StringIO | None = None) -> tuple[pexpect.spawn, str]:
    child: pexpect.spawn = cli.spawn_pty("attach", "--new", "--workspace", str(ws), "--model", model)
    if seen is not None:
        child.logfile_read = seen
    child.expect(SESSION)
    sid = str(child.match.group(1))
    child.expect("strata>")
    return child, sid


def _ended(child: pexpect.spawn) -> str:
    """Everything the client printed until it ended (escape sequences removed), and it is closed."""
    child.expect(pexpect.EOF, timeout=30)
    out = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", child.before)
    child.close()
    assert "Traceback" not in out and "internal error" not in out and "Press ENTER" not in out, out
    return out


def _detach(child: pexpect.spawn, sid: str) -> None:
    child.sendcontrol("d")
    out = _ended(child)
    assert f"detached from session {sid}" in out, out
    assert child.exitstatus == 0, out


def _approve_and_detach(child: pexpect.spawn, sid: str) -> None:
    """A yes to the question on the screen, the turn's answer, back at the prompt, detached."""
    child.sendline("y")
    child.expect("assistant: ")
    child.expect("strata>")
    _detach(child, sid)


@contextmanager
def _serving(cli: StrataCLI, tmp_path: Path) -> Iterator[Path]:
    """A workspace, with a daemon serving the home while the block runs; it stopped cleanly (SIGTERM, exit 0)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    with serving(cli):
        yield ws


def _row(cli: StrataCLI, sid: str) -> dict[str, object]:
    (row,) = [r for r in status(cli) if r["session_id"] == sid]
    return row


PARKED_W1 = [{"call_id": "w1", "tool": "write_file", "how": "parked"}]
"""The daemon's status of a session whose write_file call w1 is parked."""


def _polled_row(cli: StrataCLI, sid: str) -> dict[str, object]:
    """`_row` read in this process, for the polls of a wait (the rows the test checks are read by `_row`)."""
    (row,) = [r for r in status_in_process(cli) if r["session_id"] == sid]
    return row


def _approvals(cli: StrataCLI, sid: str) -> list[tuple[str, str]]:
    return [(r["call_id"], r["decision"]) for r in cli.json_lines("timeline", sid, "--json") if r["kind"] == "approval"]


@pytest.mark.parametrize("key", ["d", "c"])
def test_ctrl_d_or_ctrl_c_at_the_prompt_detaches_and_the_session_stays_in_the_daemon(
        cli: StrataCLI, tmp_path: Path, key: str) -> None:
    """What the greeting promises ("/exit or Ctrl-D detaches"). Before, Ctrl-D ended the client with "strata: internal
    error: ExceptionGroup" (exit 1) and Ctrl-C with a traceback: the key's exception, raised inside a task group,
    reached the prompt loop wrapped in an exception group, which it did not catch."""
    with _serving(cli, tmp_path) as ws:
        child, sid = _attached(cli, ws, script(tmp_path / "s.json", [text("hi")]))
        child.sendline("say hi")
        child.expect("assistant: ")
        child.expect("strata>")
        keys_read_as_keys(child)
        child.sendcontrol(key)
        out = _ended(child)
        assert f"detached from session {sid}. attach again: strata attach {sid}" in out, out
        assert child.exitstatus == 0, out
        assert (_row(cli, sid)["drivers"], _row(cli, sid)["status"]) == (0, "completed")


GARBAGE = ("maybe", "yy", "\x1b[31m", "\x1b[31mred", "\x1b[Mxyz", "\x1b[<99;1;1M", "\x1b[200~y\x1b[201~x",
           "\x1b]52;c;cHduZWQ=\x07")
"""Not an answer: words, a doubled key, an SGR colour (which prompt_toolkit parses as a mouse report without
coordinates, and whose handler raised: a traceback and "Press ENTER to continue" on the screen), the other mouse
report shapes, a bracketed paste, an OSC 52."""


def test_garbage_and_escape_sequences_at_the_approval_question_ask_again_and_nothing_runs(
        cli: StrataCLI, tmp_path: Path) -> None:
    with _serving(cli, tmp_path) as ws:
        child, sid = _attached(cli, ws, script(tmp_path / "s.json", WRITE_A, [text("wrote a")]))
        child.sendline("\x1b[31m")  # at `strata>`: nothing but a sequence, an empty line: no turn
        child.sendline("write a")
        child.expect(APPROVE)
        for garbage in GARBAGE:
            child.sendline(garbage)
            child.expect(r"answer y, n or a \(Enter alone is not an answer\)")
            child.expect(APPROVE)
            assert not (ws / "a.txt").exists()
        assert "Press ENTER" not in child.before and "Traceback" not in child.before
        _approve_and_detach(child, sid)
    assert (ws / "a.txt").read_text() == "A\n"
    assert _approvals(cli, sid) == [("w1", "approved")]
    attempts = [r for r in cli.json_lines("timeline", sid, "--json") if r["kind"] == "model_attempt"]
    assert len(attempts) == 2, attempts  # "write a" and its answer: the sequence alone started no turn


@pytest.mark.parametrize("key", ["c", "d"])
def test_ctrl_c_or_ctrl_d_at_the_approval_question_denies_stops_the_turn_and_the_prompt_comes_back(
        cli: StrataCLI, tmp_path: Path, key: str) -> None:
    """The denial and the stop are one request (`deny` with `interrupt`): the model, which answers at once, is not
    asked again. Before, they were two, and the turn could end in between: the model's answer to the denial
    committed, the turn `completed`, and the interrupt then refused (nothing ran any more)."""
    with _serving(cli, tmp_path) as ws:
        child, sid = _attached(cli, ws, script(tmp_path / "s.json", WRITE_A, [text("after the denial")]))
        child.sendline("write a")
        child.expect(APPROVE)
        keys_read_as_keys(child)
        child.sendcontrol(key)
        child.expect("interrupted: ")
        shown = child.before
        child.expect("strata>")
        assert "refused" not in shown + child.before and "after the denial" not in shown + child.before, shown
        assert "thinking" not in child.before, child.before  # the stopped turn's status line is not drawn again
        _detach(child, sid)
    assert not (ws / "a.txt").exists()
    assert _approvals(cli, sid) == [("w1", "rejected")]
    rows = cli.json_lines("timeline", sid, "--json")
    assert [r["turn"] for r in rows if r["kind"] == "model_attempt"] == [1], rows  # none after the denial
    lifecycle = [r["summary"] for r in rows if r["kind"] == "lifecycle"]
    assert "the person interrupted the turn" in lifecycle, lifecycle
    assert not any("completed" in line for line in lifecycle), lifecycle


def test_ctrl_c_at_the_reason_question_denies_without_a_reason_and_stops_the_turn(
        cli: StrataCLI, tmp_path: Path) -> None:
    """As in chat: the "no" stands, without a reason, and the turn stops. Before, attach only sent the denial: the
    turn went on (here into a 30 s command) as if the person had pressed Enter."""
    allow_in_user_config(cli, "bash")
    slow = tool_use("s1", "bash", command="touch started; sleep 30; touch late")
    with _serving(cli, tmp_path) as ws:
        child, sid = _attached(cli, ws, script(tmp_path / "s.json", WRITE_A, [slow], [text("end")]))
        child.sendline("write a")
        child.expect(APPROVE)
        child.sendline("n")
        child.expect("reason for the model")
        keys_read_as_keys(child)
        child.sendcontrol("c")
        child.expect(r"interrupted: ")
        child.expect("strata>")
        assert "thinking" not in child.before, child.before  # the stopped turn's status line is not drawn again
        _detach(child, sid)
    assert not (ws / "a.txt").exists() and not (ws / "late").exists()
    assert _approvals(cli, sid) == [("w1", "rejected")]
    lifecycle = [r["summary"] for r in cli.json_lines("timeline", sid, "--json") if r["kind"] == "lifecycle"]
    assert "the person interrupted the turn" in lifecycle, lifecycle


def test_an_interrupt_while_asked_closes_the_question_instead_of_leaving_it_open(cli: StrataCLI,
                                                                                  tmp_path: Path) -> None:
    """SIGINT reaches the client while its approval question is on the screen (`kill -INT`, or a terminal whose
    Ctrl-C is a signal): the daemon interrupts the turn and withdraws the question. Before, the question stayed on
    the screen, and the answer typed into it was refused: the call was no longer waiting."""
    with _serving(cli, tmp_path) as ws:
        child, sid = _attached(cli, ws, script(tmp_path / "s.json", WRITE_A, [text("end")]))
        child.sendline("write a")
        child.expect(APPROVE)
        child.kill(signal.SIGINT)
        child.expect("interrupted: ")
        child.expect("not answered: the turn ended while call w1 was asked; nothing waits for this answer")
        child.expect("strata>")
        assert "refused" not in child.before
        assert "thinking" not in child.before, child.before  # the ended turn's status line is not drawn again
        _detach(child, sid)
    assert not (ws / "a.txt").exists() and _approvals(cli, sid) == []


def test_a_hung_up_terminal_parks_the_call_and_the_next_terminal_is_asked_and_runs_it_once(
        cli: StrataCLI, tmp_path: Path) -> None:
    """The terminal closes while a call is asked (its window closed: the pty hangs up): the call parks, undecided;
    attached again (and hung up again), the next terminal is asked again, and a yes runs it once."""
    with _serving(cli, tmp_path) as ws:
        child, sid = _attached(cli, ws, script(tmp_path / "s.json", WRITE_A, [text("wrote a")]))
        child.sendline("write a")
        child.expect(APPROVE)
        for again in range(2):
            child.close(force=False)  # the master closes: SIGHUP
            wait_until(lambda: _polled_row(cli, sid)["waiting"] == PARKED_W1, what="the call to park")
            assert _approvals(cli, sid) == [("w1", "parked")] * (again + 1) and not (ws / "a.txt").exists()
            child = cli.spawn_pty("attach", sid)
            child.expect(r"\(driving\)")
            child.expect(APPROVE)
        _approve_and_detach(child, sid)
    assert (ws / "a.txt").read_text() == "A\n"
    assert _approvals(cli, sid) == [("w1", "parked"), ("w1", "parked"), ("w1", "approved")]


def test_the_daemon_killed_while_asked_ends_the_client_in_one_line_and_the_terminal_is_restored(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    seen = io.StringIO()
    daemon = Daemon(cli)
    try:
        child, sid = _attached(cli, ws, script(tmp_path / "s.json", WRITE_A, [text("wrote a")]), seen)
        child.sendline("write a")
        child.expect(APPROVE)
        daemon.signal(signal.SIGKILL)
        assert daemon.wait() == -signal.SIGKILL
        out = _ended(child)
    finally:
        daemon.stop()
    assert child.exitstatus == 1, out
    assert (f"the connection to the daemon ended (it stopped, or was killed); session {sid} is kept: attach again "
            f"once `strata serve` runs, or `strata resume {sid}`") in " ".join(out.split()), out
    raw = seen.getvalue()  # bracketed paste and the cursor as the prompt found them
    assert raw.rfind("\x1b[?2004h") < raw.rfind("\x1b[?2004l") and raw.rfind("\x1b[?25l") < raw.rfind("\x1b[?25h")
    assert not (ws / "a.txt").exists()

    restarted = Daemon(cli)
    try:
        child = cli.spawn_pty("attach", sid)
        child.expect(r"\(driving\)")
        child.expect(APPROVE)
        _approve_and_detach(child, sid)
    finally:
        restarted.stop()
    assert (ws / "a.txt").read_text() == "A\n"


def test_a_resized_terminal_keeps_the_question_and_its_answer(cli: StrataCLI, tmp_path: Path) -> None:
    with _serving(cli, tmp_path) as ws:
        child, sid = _attached(cli, ws, script(tmp_path / "s.json", WRITE_A, [text("wrote a")]))
        child.sendline("write a")
        child.expect(APPROVE)
        for rows, cols in ((10, 20), (3, 8), (1, 1), (200, 500), (60, 250)):
            child.setwinsize(rows, cols)  # SIGWINCH each time
            time.sleep(0.2)
        _approve_and_detach(child, sid)
    assert (ws / "a.txt").read_text() == "A\n" and _approvals(cli, sid) == [("w1", "approved")]


def test_hostile_model_text_arguments_and_tool_output_reach_the_attached_terminal_only_as_text(
        cli: StrataCLI, tmp_path: Path) -> None:
    """The model's streamed text, a write_file argument, a command's stdout and stderr, /timeline and /receipts carry
    OSC 52, OSC 8, DCS, BEL, backspace, CR, C1 controls and bidi overrides: every one is shown as text, none reaches
    the terminal (the terminal's own sequences, which prompt_toolkit and rich write, are CSI only)."""
    allow_in_user_config(cli, "bash")
    printed = ("printf 'x\\033]52;c;cHduZWQ=\\007y\\033P1$r0m\\033\\\\z\\302\\233w\\010v\\rq\\n'; "
               "printf 'e\\033]0;title\\007f\\n' >&2")
    seen = io.StringIO()
    with _serving(cli, tmp_path) as ws:
        child, sid = _attached(cli, ws, script(
            tmp_path / "s.json",
            [text(f"look: {HOSTILE}"), tool_use("w1", "write_file", path="evil.txt", content=HOSTILE),
             tool_use("b1", "bash", command=printed)],
            [text(f"done {HOSTILE}")]), seen)
        child.sendline("go")
        child.expect(APPROVE)
        child.sendline("y")
        child.expect("<- bash ok")
        child.expect("done a")
        child.expect("strata>")
        child.sendline("/timeline")
        child.expect(f"timeline of {sid}")
        child.expect("strata>")
        child.sendline("/receipts")
        child.expect("write_file")
        child.expect("strata>")
        _detach(child, sid)
    out = seen.getvalue()
    assert "52;c;cHduZWQ=" in out  # shown, as text
    for intro in ("\x1b]", "\x1bP", "\x1b_", "\x1b^", "\x1bX", "\x07", "\x08"):
        assert intro not in out, (intro, out[max(0, out.find(intro) - 80):out.find(intro) + 80])
    c1 = re.search(r"[\x80-\x9f\u202a-\u202e\u2066-\u2069]", out)
    assert c1 is None, repr(out[max(0, c1.start() - 80):c1.start() + 80])
    assert "g\rh" not in out and "v\rq" not in out
    assert re.findall(r"\x1b(?!\[)", out) == []
    assert (ws / "evil.txt").read_bytes() == HOSTILE.encode()  # the bytes themselves are kept
