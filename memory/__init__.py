"""The event store: SQLite (durable) and in-memory (tests), one protocol, effect receipts, leases, blobs,
snapshots and restore."""

from core.vocabulary import SessionStatus
from memory._leased import Lease, leased
from memory._read_only import connect as connect_read_only
from memory.memory_store import InMemoryEventStore
from memory.restore import Restored, restore
from memory.rows import (
    LeaseHolder,
    NewReceipt,
    Receipt,
    ReceiptStatus,
    ReceiptUpdate,
    SessionRecord,
    Snapshot,
    Write,
)
from memory.sqlite_store import SqliteEventStore
from memory.store import EventStore

__all__ = [
    "EventStore",
    "InMemoryEventStore",
    "Lease",
    "LeaseHolder",
    "NewReceipt",
    "Receipt",
    "ReceiptStatus",
    "ReceiptUpdate",
    "Restored",
    "SessionRecord",
    "SessionStatus",
    "Snapshot",
    "SqliteEventStore",
    "Write",
    "connect_read_only",
    "leased",
    "restore",
]
