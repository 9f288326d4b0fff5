"""Whether a session `run_agent` cannot take is busy in this very server (another `run_agent` call of it) or in
another process is decided by who holds the lease, by its pid and start time, host, boot and PID namespace
(memory/liveness.py held_here), not by comparing the words "pid N on HOST". A lease left by a process of an
earlier boot of the same container (same host name, same small pid, the lease not yet expired) is another
process's, and the refusal says so. A real SQLite store raises the refusal; the other half (a second call of the
same real server) is tests/mcp/test_mcp_serve_plain_answers.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.mcp_serve._agent import _busy_here
from core.clock import SystemClock
from core.errors import SessionActive, UsageError
from core.events import SessionStarted
from memory import LeaseHolder, SqliteEventStore, Write
from memory.leases import describe, make_liveness, new_holder
from tests.memory._sqlite import record


async def _refusal(tmp_path: Path, holder: LeaseHolder) -> SessionActive:
    """What a real store says to this process (the second call) about a session `holder` took the lease of."""
    clock = SystemClock()
    store = await SqliteEventStore.open(tmp_path / "strata.db")
    try:
        start = SessionStarted(session_id="s1", mode="mcp", workspace="/ws", model="script:test", max_turns=5,
                               plan_digest="p")
        await store.create_session(record("s1"), Write(events=[(start, 0)]))
        await store.acquire_lease("s1", holder, make_liveness(clock), clock.now())
        with pytest.raises(SessionActive) as busy:
            await store.acquire_lease("s1", new_holder("second-call", clock), make_liveness(clock), clock.now())
        return busy.value
    finally:
        await store.close()


async def test_a_lease_held_by_this_process_is_said_to_be_this_servers_other_call(tmp_path: Path) -> None:
    busy = await _refusal(tmp_path, new_holder("first-call", SystemClock()))
    said = _busy_here(busy)
    assert isinstance(said, UsageError) and "another run_agent call of this server" in said.message, said


@pytest.mark.parametrize("other", ["boot_id", "pid_ns"])
async def test_a_lease_of_another_process_with_this_pid_and_host_is_another_process(tmp_path: Path,
                                                                                   other: str) -> None:
    """Same pid and host name, another boot (a restarted container) or another PID namespace recorded."""
    mine = new_holder("first-call", SystemClock())
    busy = await _refusal(tmp_path, mine.model_copy(update={other: "something-else"}))
    assert _busy_here(busy) is busy
    assert "active in another process" in busy.message


def test_a_holder_with_this_pid_but_another_start_time_is_not_this_process() -> None:
    """A recycled pid: the store's liveness check already calls such a lease dead, so a refusal naming it is made
    here by hand; it is another process's all the same."""
    mine = new_holder("first-call", SystemClock())
    other = mine.model_copy(update={"proc_start": "1"})
    busy = SessionActive("s1", describe(other), other)
    assert _busy_here(busy) is busy
    assert isinstance(_busy_here(SessionActive("s1", describe(mine), mine)), UsageError)
