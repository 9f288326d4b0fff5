"""The in-process runner of reading commands (tests/_in_process_cli.py) that many tests read back through: it prints
what a `strata` process prints, and leaves the worker as it found it for the tests after it."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import structlog

from tests._in_process_cli import run_in_process
from tests.cli._helpers import scripted_session
from tests.conftest import StrataCLI


def test_a_reading_in_this_process_prints_what_the_process_prints_and_leaves_the_worker_as_it_was(
        cli: StrataCLI, tmp_path: Path) -> None:
    sid = scripted_session(cli, tmp_path)
    root = logging.getLogger()
    before = (dict(os.environ), Path.cwd(), list(root.handlers), root.level, structlog.get_config(),
              sys.dont_write_bytecode)
    for args in (["--verbose", "timeline", sid, "--json"], ["timeline", sid], ["show", sid], ["sessions", "--json"],
                 ["--verbose", "receipts"], ["export", sid], ["show", "no-such-session"], ["timeline", sid[:4]]):
        inside, outside = run_in_process(cli, *args), cli.run(*args)
        assert (inside.returncode, inside.stdout, inside.stderr) == (outside.returncode, outside.stdout,
                                                                     outside.stderr), args
        assert (dict(os.environ), Path.cwd(), list(root.handlers), root.level, structlog.get_config(),
                sys.dont_write_bytecode) == before, args
    assert run_in_process(cli, "show", "no-such-session").returncode == 1
    assert run_in_process(cli, "timeline", sid[:4]).returncode == 2
