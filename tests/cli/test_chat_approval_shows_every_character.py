"""`strata chat` in a real pseudo-terminal: the controls rich drops on its own (backspace, BEL, vertical tab, form
feed, carriage return) in a call's path or command are shown in the approval as their escapes, as every other
control is. Before, `path: keep\\b\\b\\b\\bsafe.txt` was shown as `path: keepsafe.txt` and `echo a\\bb\\ac` as
`echo abc`: the approval showed a call other than the one that runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._terminal import APPROVE, CHAT_SESSION, leave_chat
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI, write_script

pytestmark = pytest.mark.slow

PATH = "keep\b\b\b\bsafe\a\v\f\r.txt"
COMMAND = "echo a\bb\ac"


def test_an_approval_shows_backspaces_and_bells_in_a_path_and_a_command_as_escapes(
        cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "turns.json", [
        [tool_use("toolu_w", "write_file", path=PATH, content="x\n")],
        [tool_use("toolu_b", "bash", command=COMMAND)],
        [text("done")],
    ])
    child = cli.spawn_pty("chat", "--model", f"script:{script}", "--workspace", str(workspace))
    child.expect(CHAT_SESSION)
    session_id = child.match.group(1)
    child.expect("strata>")
    child.sendline("go")
    child.expect("approval needed: write_file")
    child.expect(APPROVE)
    shown = child.before
    assert r"path: keep\x08\x08\x08\x08safe\x07\x0b\x0c\x0d.txt" in shown, shown
    child.sendline("n")
    child.expect("reason for the model")
    child.sendline("")
    child.expect("approval needed: bash")
    child.expect(APPROVE)
    shown = child.before
    assert r"echo a\x08b\x07c" in shown, shown
    child.sendline("n")
    child.expect("reason for the model")
    child.sendline("")
    child.expect("assistant: done")
    leave_chat(child, session_id)


def test_a_result_shows_a_bell_in_its_text_as_an_escape(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """A result's line (and its preview lines) showed ESC as its escape but dropped BEL (rich drops it on its own):
    'cannot read f\\x1b]52;c;eA==.txt' for a path holding both."""
    script = write_script(tmp_path / "turns.json", [
        [tool_use("toolu_r", "read_file", path="f\x1b]52;c;eA==\a.txt")],
        [text("done")],
    ])
    child = cli.spawn_pty("chat", "--model", f"script:{script}", "--workspace", str(workspace))
    child.expect(CHAT_SESSION)
    session_id = child.match.group(1)
    child.expect("strata>")
    child.sendline("go")
    child.expect("read_file error")
    child.expect("assistant: done")
    assert r"cannot read f\x1b]52;c;eA==\x07.txt" in child.before, child.before
    leave_chat(child, session_id)
