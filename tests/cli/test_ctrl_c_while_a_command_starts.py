"""Ctrl-C while a command is still starting (importing its modules, before its body takes over the interrupt) ends
it as Ctrl-C ends it later: `strata: interrupted` on stderr, exit 130, no traceback. Before, click's own handling
printed "Aborted!" and exited 1 (an interrupt during the command's import), and an interrupt while the command line
itself was imported ended in Python's KeyboardInterrupt traceback.

The moment is made exact, not hoped for on a slow machine: the real entry point runs in a real process, under an
import hook that, when the named module is about to be imported, writes a file and sleeps; the test sends SIGINT
once the file is there."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import StrataCLI

_HELD_AT = textwrap.dedent("""
    import importlib.abc, pathlib, sys, time

    class HoldAt(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == {module!r}:
                pathlib.Path({ready!r}).write_text("held")
                time.sleep(60)
            return None

    sys.meta_path.insert(0, HoldAt())
    sys.argv = ["strata", *{args!r}]
    from agent.cli.entry import main
    main()
""")


@pytest.mark.parametrize("module", ["agent.cli.main", "agent.cli._session_run"])
def test_ctrl_c_while_the_command_is_imported_exits_130_saying_interrupted(
        cli: StrataCLI, tmp_path: Path, module: str) -> None:
    """agent.cli.main: the command line's own import (the console script's first step); agent.cli._session_run:
    the run command's body, imported once its arguments are parsed. Nothing is recorded: no session exists."""
    script = tmp_path / "turns.json"
    script.write_text('[[{"type": "text", "text": "done"}]]', encoding="utf-8")
    ready = tmp_path / "held"
    program = _HELD_AT.format(module=module, ready=str(ready),
                              args=["run", "--model", f"script:{script}", "hello"])
    proc = subprocess.Popen([sys.executable, "-c", program], cwd=cli.cwd, env=cli.env(None),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the import hook was never reached"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130, out + err
    assert err.splitlines() == ["strata: interrupted"], err
    assert out == ""
    assert not (cli.home / "strata.db").exists()  # interrupted before any session was opened
