"""Waiting out a session lease held for a moment (memory/short_lease.py), the one wait `strata approve|deny` and
`strata reconcile` share: a real SQLite store, the lease held by another real process (or left by one killed with
SIGKILL)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from config import load_config
from core.clock import SystemClock
from memory.leases import make_liveness
from memory.opening import open_store
from memory.short_lease import wait_for_momentary_lease
from memory.store import EventStore
from tests.cli._helpers import hold_lease, scripted_session
from tests.conftest import StrataCLI


@pytest.fixture
def session_id(cli: StrataCLI, tmp_path: Path) -> str:
    (tmp_path / "scripts").mkdir()
    return scripted_session(cli, tmp_path / "scripts")


@pytest.fixture
async def store(cli: StrataCLI) -> AsyncIterator[EventStore]:
    opened = await open_store(load_config(workspace=None, env=cli.env()).settings, clock=SystemClock(),
                              read_only=True)
    try:
        yield opened
    finally:
        await opened.close()


async def _held(store: EventStore, session_id: str) -> bool:
    lease = (await store.get_session(session_id)).lease
    return lease is not None and make_liveness(SystemClock())(lease)


async def test_a_free_lease_is_free_at_once(store: EventStore, session_id: str) -> None:
    assert await wait_for_momentary_lease(store, session_id, within=0) is True


async def test_a_lease_released_while_waiting_is_waited_for(cli: StrataCLI, store: EventStore,
                                                            session_id: str) -> None:
    holder = hold_lease(cli, session_id, 1.0)
    try:
        assert await _held(store, session_id)
        assert await wait_for_momentary_lease(store, session_id, within=60) is True
        assert (await store.get_session(session_id)).lease is None  # released by its holder, not given up on
    finally:
        holder.communicate(timeout=30)
    assert holder.returncode == 0


async def test_a_lease_a_live_process_keeps_is_not_free_and_is_once_the_process_is_killed(
        cli: StrataCLI, store: EventStore, session_id: str) -> None:
    holder = hold_lease(cli, session_id, 60.0)
    try:
        assert await wait_for_momentary_lease(store, session_id, within=0.3) is False
        assert await _held(store, session_id)
    finally:
        holder.kill()  # SIGKILL: the lease stays in the row, its owner gone
        holder.communicate()
    assert (await store.get_session(session_id)).lease is not None
    assert await wait_for_momentary_lease(store, session_id, within=0) is True
