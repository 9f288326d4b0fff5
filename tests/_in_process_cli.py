"""A reading command (`strata timeline`, `show`, `sessions`, `receipts`, `export`) run in the test's process: the
real `strata` command group (agent/cli/main.py) through click's test runner, with the environment and working
directory a `StrataCLI` would give a `strata` process. For checks of what a command prints and its exit status when
being a process of its own is not what is tested: each such process costs 0.15-0.30 s of CPU, most of it importing
the command, which a worker does once. Every command keeps whole-process tests elsewhere (its exit codes, stderr,
what the quick way imports, signals). Likewise a command that only makes the state a test reads back (a set-up
`strata run`, `resume`, `approve`, `fork`: `set_up_in_process`), with the real runtime and store.

What a command leaves behind in the process is undone after it, so the tests after it on the same worker see the
worker as it was: the environment and the working directory, the logging set up (the full setup, the one deferred
to the first record, the home's log file), and the command line's logging mode (agent/cli/logging_setup.py). Nor
does it save the code this worker compiled as a `strata` start's (agent/cli/startup_code.py): that file is loaded by
every `strata` process the tests start, and the worker's own dataclasses have no place in it."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from tests.conftest import ENVIRON_LOCK, StrataCLI


def run_in_process(cli: StrataCLI, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`cli.run(*args)` for a reading command, in this process: its exit status, stdout and stderr, as the command
    line gives them (agent/cli/main.py `command_status`: what `main` does between start-up and exit)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # no event loop runs in this thread: the command runs its own here
        return _one_at_a_time(list(args), cli, env)
    # From an async test: the command runs its own event loop, so in a thread of its own, the test's loop waiting
    # for it as it waits for a `strata` process that `cli.run` starts.
    done: list[subprocess.CompletedProcess[str]] = []
    thread = threading.Thread(target=lambda: done.append(_one_at_a_time(list(args), cli, env)))
    thread.start()
    thread.join()
    assert done, f"strata {' '.join(args)} raised in its thread (its traceback is above)"
    return done[0]


def _one_at_a_time(args: list[str], cli: StrataCLI, env: dict[str, str] | None) -> subprocess.CompletedProcess[str]:
    with ENVIRON_LOCK:  # the environment, the working directory and sys.stdout are the process's: one at a time
        return _run(args, cli, env)


def _run(args: list[str], cli: StrataCLI, env: dict[str, str] | None) -> subprocess.CompletedProcess[str]:
    from agent.cli import logging_setup
    from agent.cli.main import command_status
    from observability import deferred_logging
    from observability.logging import reset_logging

    wanted = cli.env(env)
    changes: dict[str, str | None] = {k: None for k in os.environ if k not in wanted}
    changes.update(wanted)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    cwd, no_bytecode = Path.cwd(), sys.dont_write_bytecode
    os.chdir(cli.cwd)
    sys.dont_write_bytecode = True  # startup_code.save() keeps nothing
    runner = CliRunner()
    asyncio_log = logging.getLogger("asyncio")
    asyncio_log.addFilter(_no_slow_callback_lines)
    try:
        with runner.isolation(env=changes) as (out, err, _):
            code = command_status(args)
            stdout, stderr = out.getvalue(), err.getvalue()
    finally:
        asyncio_log.removeFilter(_no_slow_callback_lines)
        os.chdir(cwd)
        sys.dont_write_bytecode = no_bytecode
        reset_logging()
        deferred_logging._waiting = None
        for handler in root.handlers:
            if handler not in handlers:
                handler.close()
        root.handlers, root.level = handlers, level
        logging_setup.full_way.verbose = logging_setup.full_way.deferred = False
    return subprocess.CompletedProcess(["strata", *args], code, stdout.decode(), stderr.decode())


_SLOW_CALLBACK = "Executing %s took %.3f seconds"
"""asyncio's line, in debug mode, for a step of the event loop that took longer than 0.1 s (base_events.py)."""


def _no_slow_callback_lines(record: logging.LogRecord) -> bool:
    """Under `python -X dev` the event loop of a command run here is in asyncio's debug mode (a `strata` process's
    never is: it inherits no dev mode), which logs a warning for every step that took over 0.1 s; the command's
    logging prints warnings to its stderr, so on a loaded machine the command's stderr held a line about the test
    machine's timing that the command itself never prints (tests/cli/test_quick_json.py compares it byte for byte
    with a `strata` process's). Only that line is left out."""
    return record.msg != _SLOW_CALLBACK


def set_up_in_process(cli: StrataCLI, *args: str,
                      env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`cli.run(*args)` in this process for a command that makes the state a test then checks (`run`, `resume`,
    `approve`, `deny`, `fork`, `reconcile`), where that state is what the test is about and the command being a
    process of its own is not: the real command group and runtime, the same store, the same rows (guarded by
    tests/cli/test_in_process_setup.py), without the ~0.3-0.45 s of CPU a `strata run` process costs, most of it
    importing the command, which a worker does once. Only for a command that ends by itself: one a test kills,
    interrupts or signals, or watches as it runs, is a process of its own (`cli.run`, `cli.popen`). One on the
    Anthropic API model closes the SDK's HTTP client as its session is released (tests/wire/
    test_cli_closes_the_model.py); it takes the API key out of the environment and keeps it for the process
    (core/env_block.py), so a test running one keeps that for itself. Held under ENVIRON_LOCK as a reading is, so a
    thread of the test that starts a `strata` meanwhile waits for it."""
    return run_in_process(cli, *args, env=env)


def json_lines_in_process(cli: StrataCLI, *args: str) -> list[dict[str, Any]]:
    """`cli.json_lines(*args)` in this process: the command succeeded with no traceback or internal error on stderr,
    and each line of its output as JSON."""
    done = run_in_process(cli, *args)
    assert done.returncode == 0, (args, done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, (args, done.stderr)
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def show_in_process(cli: StrataCLI, session_id: str) -> dict[str, Any]:
    """`cli.show(session_id)` in this process: `strata show SESSION_ID --json`."""
    (view,) = json_lines_in_process(cli, "show", session_id, "--json")
    return view
