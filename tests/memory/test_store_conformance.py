"""The store conformance suite (agent/testing) against every store Strata ships: the SQLite store on a real file,
the in-memory store, and the PostgreSQL store on a real server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.testing import T0, StoreConformance
from core.clock import SteppingClock
from memory import InMemoryEventStore, SqliteEventStore
from memory.store import EventStore
from tests._postgres import Cluster


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


class TestPostgresStore(StoreConformance):
    """The same suite on PostgreSQL: a throwaway cluster (tests/_postgres.py), a fresh database per test."""

    @pytest.fixture
    async def store(self, postgres_cluster: Cluster, tmp_path: Path) -> AsyncIterator[EventStore]:
        from memory.postgres import PostgresEventStore

        with postgres_cluster.database() as url:
            s = await PostgresEventStore.open(url, home=tmp_path / "home", clock=SteppingClock(start=T0))
            try:
                yield s
            finally:
                await s.close()
