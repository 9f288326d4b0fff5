"""The counted log's timing (the IPC server's tally of connections, the host's of sessions replaced at the cap): the
first of a kind after a quiet interval is logged at once with its details, the rest of the interval is one line with
counts at its end, and a stop writes what is counted."""

from __future__ import annotations

import anyio
from structlog.testing import capture_logs

from observability.counted_log import CountedLog


def test_the_first_is_logged_at_once_the_rest_as_one_count_per_interval_and_a_stop_writes_the_remainder() -> None:
    async def main() -> list[dict[str, object]]:
        tally = CountedLog("strata.ipc", interval_s=0.3)
        with capture_logs() as logs:
            async with anyio.create_task_group() as tg:
                tg.start_soon(tally.run)
                tally.note("ipc connection refused", "too_many_connections", peer_pid=7)
                for _ in range(5):
                    tally.note("ipc connection refused", "too_many_connections", peer_pid=8)
                tally.note("ipc connection refused", "peer_refused", peer_uid=1001, peer_pid=9)
                tally.note("ipc client disconnected", "too many protocol errors", connection=3)
                await anyio.sleep(0.5)  # the first interval ended: its counts are written
                snapshot = len(logs)
                await anyio.sleep(0.5)  # a quiet interval: the next one is logged at once again
                tally.note("ipc connection refused", "shutting_down")
                tally.note("ipc connection refused", "shutting_down")
                tally.stop()
        return [*logs[:snapshot], {"event": "-- after the quiet interval --"}, *logs[snapshot:]]

    logs = anyio.run(main)
    shown = [{k: v for k, v in r.items() if k not in ("log_level", "interval_s")} for r in logs]
    assert shown == [
        {"event": "ipc connection refused", "code": "too_many_connections", "peer_pid": 7},
        {"event": "ipc client disconnected", "code": "too many protocol errors", "connection": 3},
        {"event": "ipc connection refused", "count": 6, "codes": {"peer_refused": 1, "too_many_connections": 5},
         "peer_uids": [1001]},
        {"event": "-- after the quiet interval --"},
        {"event": "ipc connection refused", "code": "shutting_down"},
        {"event": "ipc connection refused", "count": 1, "codes": {"shutting_down": 1}},
    ], shown
