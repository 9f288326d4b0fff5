"""Which event store a process opens: PostgreSQL when the settings name a URL (`STRATA_DB`, or `db` in the user's
config), SQLite in the home otherwise. The PostgreSQL driver is imported only when one is named."""

from __future__ import annotations

from config import Settings
from core.clock import Clock
from memory.sqlite_store import SqliteEventStore
from memory.store import EventStore


async def open_store(settings: Settings, *, clock: Clock | None = None, read_only: bool = False) -> EventStore:
    """The settings' store, opened (and migrated). `read_only`: SQLite opens its file read-only (a home that
    cannot be written still reads); PostgreSQL is not migrated unless empty, and its store refuses to write (a
    server also decides by its own grants)."""
    if settings.db is not None:
        from memory.postgres import PostgresEventStore

        return await PostgresEventStore.open(settings.db, home=settings.home, clock=clock, read_only=read_only)
    return await SqliteEventStore.open(settings.db_path, durability=settings.durability, clock=clock,
                                       read_only=read_only)
