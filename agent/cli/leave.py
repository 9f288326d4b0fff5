"""A command exits without tearing the interpreter down.

Python's exit does, in order: wait for the threads that are not daemons, run the `atexit` functions (logging's
shutdown flushes and closes the log file; weakref finalizers), flush the standard streams, and then take the
interpreter apart, freeing every object and module one by one. A command's modules hold some hundreds of
thousands of objects (its models and their validators), and that last step alone was about 9 ms of CPU of every
`strata resume` (bench/cli_startup.py) and frees nothing the system would not take back anyway. Everything a
command writes it closes itself before its body returns (the store, the ledger files, the MCP servers, the
processes it started); `leave` does the first three steps as Python does (a thread that is not a daemon is waited
for, as Python waits), then ends the process."""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn

FLUSH_FAILED = 120
"""Python's own status when the standard streams cannot be flushed at exit."""


def leave(code: int) -> NoReturn:
    """Exit with status `code`, as `sys.exit(code)` would, without the interpreter's teardown."""
    shutdown = getattr(threading, "_shutdown", None)  # what Python's exit calls first (3.11 to 3.13)
    if not callable(shutdown) or sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)  # a profiler or tracer (`python -m cProfile -m agent ...`) writes its report after this
    # Wait for the threads that are not daemons, after the hooks that tell them to stop (an executor's workers), as
    # Python's exit does: a worker thread the event loop told to stop may still be on its way out (anyio's idle
    # workers are not daemons), and was the case where this used to fall back to the whole teardown.
    shutdown()
    atexit._run_exitfuncs()
    status = code
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None and not stream.closed:
                stream.flush()
        except (OSError, ValueError):
            status = FLUSH_FAILED
    os._exit(status & 0xFF)
