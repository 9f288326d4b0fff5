"""`strata chat --resume PARENT` in a real pseudo-terminal while the child its delegate call waits on is driven by
another process (`strata resume CHILD`): a prompt typed then would finish the open batch first, park again on the
busy child and never be heard. It is refused in one line naming the child and its process, the chat goes on, and
once the child is done the same prompt runs: the child's result is taken, the prompt heard, the child's effect
ran once. Before, the turn parked again and the prompt was dropped."""

from __future__ import annotations

from pathlib import Path

import pexpect
import pytest

from tests._in_process_cli import show_in_process
from tests._terminal import leave_chat
from tests.cli._helpers import EFFECTS_LOG
from tests.cli.test_delegation import CHILD_ANSWER, _busy_child, _finish, _waits_for_its_child
from tests.conftest import StrataCLI

pytestmark = pytest.mark.slow


def test_a_prompt_in_chat_for_a_parent_whose_child_another_process_drives_is_refused_not_lost(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    parent, child, driver = _busy_child(cli, tmp_path, workspace)
    chat: pexpect.spawn | None = None
    try:
        chat = cli.spawn_pty("chat", "--resume", parent["id"])
        chat.expect("strata>", timeout=60)
        chat.sendline("and then say hi")
        chat.expect(f"waiting for child session {child['id']}, which another process runs \\(pid {driver.pid}",
                    timeout=60)
        chat.expect("strata>")
        assert driver.poll() is None  # the other process still drives the child, untouched
        _finish(driver, workspace)
        chat.sendline("and then say hi")
        chat.expect(CHILD_ANSWER, timeout=60)
        chat.expect("parent done", timeout=60)
        leave_chat(chat, parent["id"])
    finally:
        if chat is not None and chat.isalive():
            chat.terminate(force=True)
        if driver.poll() is None:
            _finish(driver, workspace)
    view = show_in_process(cli, parent["id"])
    said = [b["text"] for m in view["messages"] if m["role"] == "user" for b in m["content"] if b["type"] == "text"]
    assert "and then say hi" in said, said
    assert (workspace / EFFECTS_LOG).read_text() == "once\n"


def test_leaving_chat_while_the_parent_waits_for_a_busy_child_leaves_it_waiting_for_its_child(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """Ctrl-D while the delegate call still waits on the child another process drives: the parent is left
    `awaiting_approval` (listed as waiting_for_child), as `strata resume PARENT` leaves it, so that a later
    `strata resume PARENT PROMPT` is refused rather than losing its prompt. Before, chat left every session
    `idle`, and the parent looked as if nothing waited."""
    parent, _child, driver = _busy_child(cli, tmp_path, workspace)
    chat: pexpect.spawn | None = None
    try:
        chat = cli.spawn_pty("chat", "--resume", parent["id"])
        leave_chat(chat, parent["id"])
        _waits_for_its_child(cli, parent["id"])
    finally:
        if chat is not None and chat.isalive():
            chat.terminate(force=True)
        _finish(driver, workspace)
    resumed = cli.run("resume", parent["id"], "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert (workspace / EFFECTS_LOG).read_text() == "once\n"
