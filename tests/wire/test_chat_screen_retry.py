"""A retry on the chat screen (tmux, against the loopback Messages API server): the failed attempt is said once,
and while the retry waits a status line counts down ("... retrying in 4 s (attempt 2 of 4)"), then goes away."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests._system import TMUX
from tests._tmux import tmux_pane
from tests.conftest import StrataCLI
from tests.wire.messages_server import Fault, MessagesServer, Reply
from tests.wire.wire_helpers import model_env, text

pytestmark = pytest.mark.slow


def test_a_retry_is_said_once_and_counted_down(cli: StrataCLI, messages_server: MessagesServer,
                                               workspace: Path) -> None:
    tmux = TMUX.require()
    messages_server.script(Fault(529, headers={"retry-after": "4"}), Reply([text("Fine **now**.")]))
    env = {**cli.env(model_env(messages_server)), "TERM": "xterm-256color"}
    argv = cli.argv(["chat", "--model", "anthropic:claude-test", "--workspace", str(workspace)])
    with tmux_pane(tmux, argv, cwd=cli.cwd, env=env, width=110, height=30) as pane:
        pane.wait_for(r"^strata>")
        pane.type("hello")
        pane.wait_for(r"model attempt 1 failed: Anthropic API is overloaded")
        first = pane.wait_for(r"Anthropic API is overloaded.*, retrying in ([1-4]) s \(attempt 2 of 4\)", timeout=5)
        later = pane.wait_for(r"retrying in ([0-3]) s \(attempt 2 of 4\)", timeout=5)
        assert int(later.group(1)) < int(first.group(1))
        pane.wait_for(r"assistant: Fine now\.")
        pane.wait_gone(r"retrying in", timeout=5)  # the answer is printed above the area, then the area goes
        screen = pane.screen()
        assert len(re.findall(r"API is overloaded", screen)) == 1, screen  # said once; the countdown is gone
        assert "retrying in" not in screen, screen
        pane.keys("C-d")
        pane.wait_for(r"left session")
