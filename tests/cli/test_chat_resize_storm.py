"""`strata chat` in a real pseudo-terminal resized thousands of times (a window dragged, a tiling manager), while
a turn streams and runs a command and then at the prompt: no Python message reaches the screen, the prompt comes
back, Ctrl-D leaves with status 0. Before, each SIGWINCH that found asyncio's wakeup socket full printed
'Exception ignored when trying to write to the signal wakeup fd' and a traceback over the chat."""

from __future__ import annotations

import contextlib
import random
import time
from pathlib import Path

import pexpect
import pytest

from tests._terminal import CHAT_SESSION, leave_chat
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI, write_script

pytestmark = pytest.mark.slow


def _storm(child: pexpect.spawn, seconds: float, seen: list[str]) -> None:
    rng = random.Random(29)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        child.setwinsize(rng.randint(1, 60), rng.randint(1, 250))
        with contextlib.suppress(pexpect.TIMEOUT):
            seen.append(child.read_nonblocking(1_000_000, timeout=0.005))
    child.setwinsize(60, 250)


def test_a_resize_storm_prints_no_python_message_and_the_chat_goes_on(cli: StrataCLI, workspace: Path,
                                                                        tmp_path: Path) -> None:
    script = write_script(tmp_path / "turns.json", [
        [text("# Plan\n\n" + "some **bold** words " * 2000), tool_use("toolu_s", "bash", command="sleep 3; seq 1 50")],
        [text("done " * 5000)],
    ])
    child = cli.spawn_pty("chat", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "bash")
    child.expect(CHAT_SESSION)
    session_id = child.match.group(1)
    child.expect("strata>")
    child.sendline("go")
    seen: list[str] = []
    _storm(child, 6, seen)  # the turn: streamed text, the command's spinner, then the prompt
    child.expect("strata>", timeout=60)
    _storm(child, 3, seen)  # at the prompt
    child.sendline("")
    seen.append(child.before or "")
    leave_chat(child, session_id)
    seen.append(child.before or "")
    screen = "".join(seen)
    assert "Exception ignored" not in screen and "Traceback" not in screen, screen[screen.find("Exception"):][:2000]
    assert "seq 1 50" in screen or "toolu_s" in screen
