"""A process that holds one session's lease for as long as a test wants, as `strata approve` holds it for a
moment while it records a decision: it prints `held` once it has the lease, and releases it when its stdin ends.

Run: python -m tests.serve._hold_lease SESSION_ID, with STRATA_HOME (and PYTHONPATH) set."""

from __future__ import annotations

import sys

import anyio

from agent.session import Runtime
from config import load_config
from memory import leased
from observability import configure_logging


async def main(session_id: str) -> None:
    configure_logging(False)
    rt = await Runtime.open(load_config(workspace=None))
    try:
        async with leased(rt, session_id):
            sys.stdout.write("held\n")
            sys.stdout.flush()
            await anyio.to_thread.run_sync(sys.stdin.read)
    finally:
        with anyio.CancelScope(shield=True):
            await rt.close()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
