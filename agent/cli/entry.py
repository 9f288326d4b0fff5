"""The `strata` program's entry, for the console script and `python -m agent`: the cyclic collector is paused
before the command line's own modules are imported (agent/cli/startup_gc.py), not only once they are. Importing
agent/cli/main.py (click, dataclasses and inspect, the command table) made enough objects for the collector to
run about 11M instructions, ~1.2% of a `strata resume` (callgrind). Strata used as a library, importing
agent.cli.main as the tests do, leaves the collector alone."""

from __future__ import annotations

import sys

from agent.cli.startup_gc import startup_gc


def main() -> None:
    startup_gc.pause()
    try:
        from agent.cli.main import main as run_command_line
    except KeyboardInterrupt:  # Ctrl-C while the command line is imported: as later, no traceback (exit 130)
        sys.stderr.write("strata: interrupted\n")
        raise SystemExit(130) from None
    run_command_line()
