"""The store conformance suite (agent/testing) against both stores Strata ships: the SQLite store on a real file,
and the in-memory store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.testing import T0, StoreConformance
from core.clock import SteppingClock
from memory import InMemoryEventStore, SqliteEventStore
from memory.store import EventStore


class TestSqliteStore(StoreConformance):
    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[EventStore]:
        s = await SqliteEventStore.open(tmp_path / "strata.db", clock=SteppingClock(start=T0))
        try:
            yield s
        finally:
            await s.close()


class TestInMemoryStore(StoreConformance):
    @pytest.fixture
    async def store(self) -> AsyncIterator[EventStore]:
        s = InMemoryEventStore(clock=SteppingClock(start=T0))
        try:
            yield s
        finally:
            await s.close()
