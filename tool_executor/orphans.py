"""Commands that outlived their Strata process. A `bash` command runs in its own session, so when Strata is killed
with SIGKILL the command goes on: an orphan, recorded in its lock files (tool_executor/locks.py). Before a resume
settles such a call (its receipt still `dispatched`) as `unknown`, it looks for the orphan: one that has ended
changes nothing; one that still runs is waited for (up to the lock timeout) or, when the person asked for it
(`--kill-orphans`), killed with its whole process group. If it still runs after that, the resume stops before
anything runs beside it."""

from __future__ import annotations

import time

import anyio

from core.processes import ProcessGroup
from core.record import record
from memory.rows import Receipt
from tool_executor.locks import ResourceLocks

POLL_S = 0.05
KILL_WAIT_S = 5.0
"""How long a killed group may take to be gone (SIGKILL cannot be caught; this only covers the kernel's pace)."""


@record
class Orphan:
    """What became of the command a stopped process left: the group (if one was recorded), whether it still
    runs, and a note for the receipt."""

    process: ProcessGroup | None
    still_running: bool = False
    note: str | None = None

    def describe(self) -> str:
        return self.process.describe() if self.process is not None else "no process recorded"


async def _state(group: ProcessGroup) -> str:
    return await anyio.to_thread.run_sync(group.state)


async def wait_gone(group: ProcessGroup, timeout_s: float) -> bool:
    """Whether the group is gone (or cannot be checked from here) within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while await _state(group) == "running":
        if time.monotonic() >= deadline:
            return False
        await anyio.sleep(POLL_S)
    return True


async def end_group(group: ProcessGroup, timeout_s: float = KILL_WAIT_S) -> bool:
    """Kill the group if it still runs; whether it is gone within `timeout_s`."""
    await anyio.to_thread.run_sync(group.kill)
    return await wait_gone(group, timeout_s)


async def settle_orphan(locks: ResourceLocks, receipt: Receipt, *, kill: bool) -> Orphan:
    """Find the command `receipt`'s call started, and wait for it or kill it (see the module docstring)."""
    command = await anyio.to_thread.run_sync(locks.command_for, receipt.id, receipt.resource_keys)
    if command is None:  # nothing was started, or it ended and another call has held the key since
        return Orphan(None)
    group = command.group
    state = await _state(group)
    if state == "unseen":
        return Orphan(group, note=f"its command ({group.describe()}) ran where it cannot be checked from here "
                                  "(another host or PID namespace)")
    if state == "gone":
        return Orphan(group)
    if kill:
        if await end_group(group):
            return Orphan(group, note=f"its command was still running after the process stopped; {group.describe()} "
                                      "was killed on resume (--kill-orphans)")
        return Orphan(group, still_running=True)
    if await wait_gone(group, locks.timeout_s):
        return Orphan(group, note="its command ran on after the process stopped and ended before the resume went on")
    return Orphan(group, still_running=True)
