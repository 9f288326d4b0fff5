"""`strata attach` draws chat's screen (tmux, against a real daemon): the model's Markdown styled, a spinner with
the elapsed time while a 3 s command runs, and a write_file approval with its content as text."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._system import TMUX
from tests._tmux import style_of, tmux_pane
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script

pytestmark = pytest.mark.slow

SPINNER = "[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]"


def test_attach_shows_markdown_a_spinner_and_readable_approvals(cli: StrataCLI, tmp_path: Path) -> None:
    tmux = TMUX.require()
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json",
                   [text("Checking, **carefully**:\n\n```sh\nsleep 3\n```"),
                    tool_use("b1", "bash", command="sleep 3; echo slept")],
                   [tool_use("w1", "write_file", path="notes.txt", content="one\ntwo\n")],
                   [text("Wrote `notes.txt`.")])
    daemon = Daemon(cli)
    try:
        env = {**cli.env(), "TERM": "xterm-256color"}
        argv = cli.argv(["attach", "--new", "--workspace", str(ws), "--model", model])
        with tmux_pane(tmux, argv, cwd=cli.cwd, env=env, width=110, height=40) as pane:
            pane.wait_for(r"attached to session [0-9a-f-]{36} \(driving\)")
            pane.wait_for(r"^strata>")
            pane.type("take notes")
            pane.wait_for(r"assistant: Checking, carefully:")
            assert style_of(pane.screen(colours=True), "carefully").bold
            assert "**" not in pane.screen() and "```" not in pane.screen()
            pane.wait_for(r"approval needed: bash[\s\S]*command:\s*\n\s+sleep 3; echo slept")
            pane.wait_for(r"approve\? \[y/n/a\]")  # a compound command: no narrower "always" (and none over IPC)
            pane.type("y")
            first = pane.wait_for(rf"{SPINNER} running \[bash\] sleep 3; echo slept  ([0-9]) s", timeout=10)
            later = pane.wait_for(rf"{SPINNER} running \[bash\] sleep 3; echo slept  ([2-9]) s", timeout=10)
            assert int(later.group(1)) > int(first.group(1))
            pane.wait_for(r"approval needed: write_file[\s\S]*path: notes.txt[\s\S]*content \(2 lines, 8 bytes\):"
                          r"\s*\n\s*│ one\s*\n\s*│ two")
            pane.wait_for(r"approve\? \[y/n/a\]")
            pane.type("y")
            pane.wait_for(r"assistant: Wrote notes.txt\.")
            assert "running [bash]" not in pane.screen() and "thinking" not in pane.screen()  # the area is gone
            pane.wait_for(r"^strata>\s*$")
            pane.type("/exit")
            pane.wait_for(r"detached from session")
        assert (ws / "notes.txt").read_text() == "one\ntwo\n"
    finally:
        daemon.stop()
