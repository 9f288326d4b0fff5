"""The live area (agent/terminal/live_area.py) in a real terminal (tmux)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests._system import TMUX
from tests._tmux import tmux_pane
from tests.conftest import REPO

SCRIPT = Path(__file__).with_name("_live_area_race.py")


def test_a_print_and_a_status_change_leave_no_status_line_behind(tmp_path: Path) -> None:
    """A status changed right after a print (the failed attempt, then its countdown) is drawn in place of the
    old one, never before or after it on the same row, however the threads are scheduled: the area is drawn only
    by the thread that prints (_live_area_race.py gives another thread the time to draw it mid-print). Under load,
    rich's auto-refresh thread once drew the countdown on the row of "thinking", and "thinking" stayed."""
    tmux = TMUX.require()
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO), "TERM": "xterm-256color", "LANG": "C.UTF-8"}
    # 60 columns: two status lines on one row are wider than that, so one drawn after another wraps and stays
    with tmux_pane(tmux, [sys.executable, str(SCRIPT)], cwd=tmp_path, env=env, width=60, height=20) as pane:
        pane.wait_for(r"^DONE", timeout=10)
        screen = pane.final_screen(timeout=10)
    assert "thinking" not in screen, screen
    assert "retrying in" not in screen, screen
    said = " ".join(line.strip() for line in screen.splitlines() if line.strip())
    assert said == ("model attempt 1 failed: Anthropic API is overloaded (529 overloaded_error, request "
                    "req_test0000000000000001) DONE"), screen
