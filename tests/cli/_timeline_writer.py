"""A process that writes to one session for as long as a test wants, as a running session commits: it adds
FILLER timeline rows at once (a long timeline, so reading it takes a while), prints `ready`, then commits one row
every PERIOD seconds until its stdin ends.

Run: python -m tests.cli._timeline_writer SESSION_ID FILLER PERIOD, with STRATA_HOME (and PYTHONPATH) set."""

from __future__ import annotations

import sys

import anyio

from agent.session import Runtime
from config import load_config
from core.timeline import TimelineEntry
from memory import Write
from observability import configure_logging

BATCH = 1_000


async def main(session_id: str, filler: int, period: float) -> None:
    configure_logging(False)
    rt = await Runtime.open(load_config(workspace=None))
    try:
        for start in range(0, filler, BATCH):
            end = min(filler, start + BATCH)
            rows = [TimelineEntry(kind="phase", summary=f"filler {n}") for n in range(start, end)]
            await rt.store.commit(session_id, Write(timeline=rows))
        sys.stdout.write("ready\n")
        sys.stdout.flush()

        async def write() -> None:
            n = 0
            while True:
                await rt.store.commit(session_id, Write(timeline=[TimelineEntry(kind="phase", summary=f"live {n}")]))
                n += 1
                await anyio.sleep(period)

        async with anyio.create_task_group() as tg:
            tg.start_soon(write)
            await anyio.to_thread.run_sync(sys.stdin.read)
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await rt.close()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))
