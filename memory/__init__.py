"""The event store: SQLite (durable) and in-memory (tests), one protocol, effect receipts, leases, blobs,
snapshots and restore."""

from typing import TYPE_CHECKING

from core.lazy_exports import lazy_exports as _lazy_exports

if TYPE_CHECKING:  # imported when first used (core/lazy_exports.py)
    from core.vocabulary import SessionStatus
    from memory._leased import Lease, leased
    from memory._read_only import connect as connect_read_only
    from memory.memory_store import InMemoryEventStore
    from memory.restore import Restored
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

_EXPORTS: dict[str, tuple[str, str]] = {
    "SessionStatus": ("core.vocabulary", "SessionStatus"),
    "Lease": ("memory._leased", "Lease"),
    "leased": ("memory._leased", "leased"),
    "connect_read_only": ("memory._read_only", "connect"),
    "InMemoryEventStore": ("memory.memory_store", "InMemoryEventStore"),
    "Restored": ("memory.restore", "Restored"),
    "LeaseHolder": ("memory.rows", "LeaseHolder"),
    "NewReceipt": ("memory.rows", "NewReceipt"),
    "Receipt": ("memory.rows", "Receipt"),
    "ReceiptStatus": ("memory.rows", "ReceiptStatus"),
    "ReceiptUpdate": ("memory.rows", "ReceiptUpdate"),
    "SessionRecord": ("memory.rows", "SessionRecord"),
    "Snapshot": ("memory.rows", "Snapshot"),
    "Write": ("memory.rows", "Write"),
    "SqliteEventStore": ("memory.sqlite_store", "SqliteEventStore"),
    "EventStore": ("memory.store", "EventStore"),
}
"""Each public name: the module that defines it, and its name there."""

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
]


__getattr__ = _lazy_exports(__name__, _EXPORTS, globals())
