"""The event store on PostgreSQL (psycopg 3 with psycopg-pool): the same `EventStore` contract as the SQLite store,
for several machines over one database. Importing this package imports psycopg; nothing else in Strata does."""

from memory.postgres._nul_text import use_nul_safe_text
from memory.postgres._store import PostgresEventStore, redact

__all__ = ["PostgresEventStore", "redact", "use_nul_safe_text"]
