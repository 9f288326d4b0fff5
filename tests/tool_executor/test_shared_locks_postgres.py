"""Resource locks across machines: with a PostgreSQL store, a key held by a call of one worker (another home, as
another machine has) keeps a second worker's call on that key waiting, and then `resource busy`, until the first
gives it back or its process dies."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest

from memory.postgres._advisory import AdvisoryLocks
from tests._postgres import Cluster
from tool_executor.locks import LockTimeout, ResourceLocks

REPO = str(Path(__file__).resolve().parents[2])


async def test_a_key_one_worker_holds_keeps_another_workers_call_waiting(postgres_cluster: Cluster,
                                                                          tmp_path: Path) -> None:
    url = postgres_cluster.url()
    near, far = AdvisoryLocks(url, "db"), AdvisoryLocks(url, "db")  # two connections: two machines' daemons
    first = ResourceLocks(tmp_path / "home-a" / "locks", timeout_s=0.3, shared=near)
    second = ResourceLocks(tmp_path / "home-b" / "locks", timeout_s=0.3, shared=far)
    try:
        async with first.hold(["fs:/shared/report.md", "shell:/shared"]):
            with pytest.raises(LockTimeout, match="held by a call of another worker on this database"):
                async with second.hold(["fs:/shared/report.md"]):
                    pass
            async with second.hold(["fs:/shared/other.md"]):  # another key is free
                pass
        async with second.hold(["fs:/shared/report.md"]):  # given back
            pass
    finally:
        await near.close()
        await far.close()


def _start_holder(script: str, url: str) -> subprocess.Popen[str]:
    """A worker in its own process that takes a key and keeps it; returns once it holds the key."""
    proc = subprocess.Popen([sys.executable, "-c", script, url], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


async def test_a_key_held_by_a_worker_that_is_killed_is_free_again(postgres_cluster: Cluster,
                                                                   tmp_path: Path) -> None:
    url = postgres_cluster.url()
    holder = textwrap.dedent(f"""
        import sys, time, anyio
        sys.path.insert(0, {REPO!r})
        from memory.postgres._advisory import AdvisoryLocks
        async def main():
            locks = AdvisoryLocks(sys.argv[1], "db")
            assert await locks.try_take("fs:/shared/report.md")
            print("held", flush=True)
            time.sleep(600)
        anyio.run(main)
    """)
    proc = _start_holder(holder, url)
    try:
        far = AdvisoryLocks(url, "db")
        locks = ResourceLocks(tmp_path / "locks", timeout_s=0.3, shared=far)
        with pytest.raises(LockTimeout):
            async with locks.hold(["fs:/shared/report.md"]):
                pass
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        started = time.monotonic()
        locks = ResourceLocks(tmp_path / "locks", timeout_s=10, shared=far)
        async with locks.hold(["fs:/shared/report.md"]):
            freed_after = time.monotonic() - started
        assert freed_after < 5, freed_after  # the server saw the connection end with the process
        await far.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()


async def test_an_unreachable_lock_service_is_a_clear_resource_busy(tmp_path: Path) -> None:
    dead = AdvisoryLocks("postgresql://strata@127.0.0.1:1/none", "postgresql://strata@127.0.0.1:1/none")
    locks = ResourceLocks(tmp_path / "locks", timeout_s=0.3, shared=dead)
    with pytest.raises(LockTimeout, match="resource busy: the resource lock fs:/x cannot be taken on"):
        async with locks.hold(["fs:/x"]):
            pass
    await anyio.lowlevel.checkpoint()
