"""Resource locks across machines when PostgreSQL restarts (`pg_ctl restart`, a failover) while a worker holds a
key: the server ends every connection, and with it the session-level advisory locks of the holder. A call of
another worker on that key must still wait while the first worker's call runs (README: "two workers never run
calls on one key at once")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from memory.postgres._advisory import RESTART_GRACE_S, AdvisoryLocks
from tests._postgres import Cluster, start_cluster
from tool_executor.locks import LockTimeout, ResourceLocks

pytestmark = pytest.mark.slow


@pytest.fixture
def own_cluster() -> Iterator[Cluster]:
    """A cluster of this test's own: it is restarted."""
    yield from start_cluster()


async def test_a_key_held_across_a_server_restart_still_keeps_another_workers_call_waiting(
        own_cluster: Cluster, tmp_path: Path) -> None:
    url = own_cluster.url()
    near, far = AdvisoryLocks(url, "db"), AdvisoryLocks(url, "db")  # two connections: two machines' daemons
    first = ResourceLocks(tmp_path / "home-a" / "locks", timeout_s=0.5, shared=near)
    second = ResourceLocks(tmp_path / "home-b" / "locks", timeout_s=0.5, shared=far)
    try:
        async with second.hold(["shell:/elsewhere"]):  # worker B has been at work on the server too
            pass
        async with first.hold(["shell:/shared"]):  # worker A's call runs
            own_cluster.restart()
            with pytest.raises(LockTimeout, match="held by a call of another worker on this database"):
                async with second.hold(["shell:/shared"]):
                    pass
            await anyio.sleep(RESTART_GRACE_S)  # past the grace after the restart: A took its key back
            with pytest.raises(LockTimeout, match="held by a call of another worker on this database"):
                async with second.hold(["shell:/shared"]):
                    pass
        async with second.hold(["shell:/shared"]):  # given back once A's call ended
            pass
    finally:
        await near.close()
        await far.close()
