"""Fixtures of the SQLite-only tests: a database path and a store on it with a stepping clock. Test modules that
need another `store` (the conformance suite runs both stores) define their own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.clock import SteppingClock
from memory import SqliteEventStore
from tests.memory._sqlite import T0


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "strata.db"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[SqliteEventStore]:
    s = await SqliteEventStore.open(db_path, clock=SteppingClock(start=T0))
    try:
        yield s
    finally:
        await s.close()
