"""Resource locks: sorted acquisition, bounded waits with a clear `resource busy`, and exclusion across
processes through file locks."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from core.processes import ProcessGroup
from tool_executor.locks import HeldCommand, LockTimeout, OrphanHolds, ResourceLocks

REPO = str(Path(__file__).resolve().parents[2])


async def test_second_holder_waits_for_the_first(tmp_path: Path) -> None:
    """Within one process a key is held by one call at a time; the second starts after the first releases."""
    locks = ResourceLocks(tmp_path / "locks", timeout_s=5)
    order: list[str] = []

    async def hold(name: str, delay: float) -> None:
        await anyio.sleep(delay)
        async with locks.hold(["fs:/x"]):
            order.append(f"{name}+")
            await anyio.sleep(0.1)
            order.append(f"{name}-")

    async with anyio.create_task_group() as tg:
        tg.start_soon(hold, "a", 0)
        tg.start_soon(hold, "b", 0.02)
    assert order == ["a+", "a-", "b+", "b-"]


async def test_opposite_key_orders_do_not_deadlock(tmp_path: Path) -> None:
    """Keys are taken in sorted order, so [a, b] and [b, a] cannot wait on each other in a cycle."""
    locks = ResourceLocks(tmp_path / "locks", timeout_s=5)
    done: list[str] = []

    async def hold(keys: list[str]) -> None:
        for _ in range(20):
            async with locks.hold(keys):
                await anyio.lowlevel.checkpoint()
        done.append(",".join(keys))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(hold, ["a", "b"])
            tg.start_soon(hold, ["b", "a"])
    assert sorted(done) == ["a,b", "b,a"]


async def test_timeout_names_the_busy_key(tmp_path: Path) -> None:
    """A wait past the timeout raises LockTimeout saying `resource busy` and naming the key."""
    locks = ResourceLocks(tmp_path / "locks", timeout_s=0.2)
    held, release = anyio.Event(), anyio.Event()

    async def holder() -> None:
        async with locks.hold(["shell:/ws"]):
            held.set()
            await release.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(holder)
        await held.wait()
        with pytest.raises(LockTimeout) as caught:
            async with locks.hold(["fs:/a", "shell:/ws"]):
                pass
        release.set()
    assert "resource busy" in str(caught.value) and "shell:/ws" in str(caught.value)
    async with locks.hold(["fs:/a", "shell:/ws"]):  # released again: free for the next holder
        pass


async def test_another_process_holding_the_key_blocks_until_it_exits(tmp_path: Path) -> None:
    """The lock is a file lock: a key held by another process is busy here until that process lets go."""
    lock_dir = tmp_path / "locks"
    ready = anyio.Path(tmp_path / "ready")
    holder = textwrap.dedent(f"""
        import anyio, pathlib
        from tool_executor.locks import ResourceLocks
        async def main():
            async with ResourceLocks(pathlib.Path({str(lock_dir)!r})).hold(["fs:/shared"]):
                pathlib.Path({str(ready)!r}).write_text("held")
                await anyio.sleep(1.0)
        anyio.run(main)
    """)
    async with await anyio.open_process([sys.executable, "-c", holder], cwd=REPO) as proc:
        with anyio.fail_after(20):
            while not await ready.exists():
                assert proc.returncode is None
                await anyio.sleep(0.01)
        locks = ResourceLocks(lock_dir, timeout_s=0.2)
        with pytest.raises(LockTimeout):
            async with locks.hold(["fs:/shared"]):
                pass
        async with locks.hold(["fs:/shared"], timeout_s=20):
            pass  # granted once the other process let go
        assert await proc.wait() == 0


_ORPHANING_HOLDER = """
import anyio, pathlib, subprocess, sys
from core.processes import ProcessGroup
from tool_executor.locks import HeldCommand, ResourceLocks
async def main():
    async with ResourceLocks(pathlib.Path(sys.argv[1])).hold(["shell:/ws"]) as held:
        sleeper = subprocess.Popen(["sleep", "30"], start_new_session=True)
        await held.adopt(HeldCommand(group=ProcessGroup.of_leader(sleeper.pid), session_id="s-dead", call_id="c1",
                                     receipt_id="r1"))
        ready = pathlib.Path(sys.argv[2])
        ready.with_suffix(".tmp").write_text(str(sleeper.pid))
        ready.with_suffix(".tmp").rename(ready)  # whole: the test reads it as soon as it exists
        await anyio.sleep(60)
anyio.run(main)
"""


async def test_a_command_left_by_a_killed_holder_keeps_its_key_until_it_ends(tmp_path: Path) -> None:
    """A process holding `shell:/ws` starts a command in its own session, records it, and is SIGKILLed: its flock
    goes, but the key stays held by the still-running command (OrphanHolds names it and how to end it); once the
    command's group is gone the key is free at once, and the record is cleared."""
    lock_dir, ready = tmp_path / "locks", anyio.Path(tmp_path / "ready")
    locks = ResourceLocks(lock_dir, timeout_s=0.3)
    async with await anyio.open_process([sys.executable, "-c", _ORPHANING_HOLDER, str(lock_dir), str(ready)],
                                        cwd=REPO) as proc:
        with anyio.fail_after(20):
            while not await ready.exists():
                assert proc.returncode is None
                await anyio.sleep(0.01)
        proc.kill()
        await proc.wait()
    pgid = int(await ready.read_text())
    try:
        with pytest.raises(OrphanHolds) as caught:
            async with locks.hold(["shell:/ws"]):
                pass
        message = str(caught.value)
        assert "resource busy" in message and "s-dead" in message and "--kill-orphans" in message, message
        found = locks.command_for("r1", ["shell:/ws"])
        assert found is not None and found.group.pgid == pgid and found.group.state() == "running"
        assert locks.command_for("r-other", ["shell:/ws"]) is None
    finally:
        os.killpg(pgid, signal.SIGKILL)
    async with locks.hold(["shell:/ws"], timeout_s=5):  # waits only for the group's last process to go
        pass
    assert locks.command_for("r1", ["shell:/ws"]) is None  # whoever took the key after it ended overwrote it


async def test_a_held_command_that_ended_leaves_no_record(tmp_path: Path) -> None:
    """A command recorded under a lock and ended before the lock is let go (the usual case) holds nothing after."""
    locks = ResourceLocks(tmp_path / "locks", timeout_s=0.3)
    proc = await anyio.open_process(["sleep", "30"], start_new_session=True)
    async with locks.hold(["shell:/ws"]) as held:
        await held.adopt(HeldCommand(group=ProcessGroup.of_leader(proc.pid), session_id="s", call_id="c",
                                     receipt_id="r"))
        assert locks.command_for("r", ["shell:/ws"]) is not None
        proc.kill()
        await proc.wait()
    assert locks.command_for("r", ["shell:/ws"]) is None
    async with locks.hold(["shell:/ws"]):  # and the next holder does not wait
        pass
