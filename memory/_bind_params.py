"""sqlite3 binds `None` and `bytes` parameters without its adaptation lookup.

Python 3.11's sqlite3 binds a str, int, float or bytearray as it is, but sends every other parameter, `None` and
`bytes` included, through its adaptation protocol first: a look-up in its adapter registry, then `__adapt__` asked
of its PrepareProtocol type (a failed attribute look-up on a type object, whose AttributeError message is formatted
and thrown away), then `__conform__` asked of the value; only then is it bound as it is. A commit binds dozens of
them (every row's hash, a packed summary, a phase row's empty tool, decision, call and check, its NULL prev_hash):
~44 a read-only turn, about 1.2 us each on the store's connection thread (callgrind: 7% of that thread's work).

An adapter registered for the exact type is found by the first look-up and the rest is skipped. The adapters here
give the value back as it is (`bytes(b)` is `b` for a bytes object), so what is bound, and stored, is exactly what
it was: NULL for None, the same BLOB for bytes. The registry is sqlite3's, for the whole process: registering
these changes no binding anywhere, only what it costs."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable


def register() -> None:
    """Idempotent; called when the SQLite store is imported. Both adapters are C callables, so adapting costs no
    Python frame: `bytes(b)` is `b`, and an empty dict's `get` gives None back for None (the dict is this call's
    own, never written). A new row's hash, the most frequent BLOB, is bound as a bytearray, which sqlite3 binds
    without any look-up (memory/sqlite_store.py)."""
    empty: dict[object, None] = {}
    none_as_is: Callable[[None], None] = empty.get
    sqlite3.register_adapter(type(None), none_as_is)
    sqlite3.register_adapter(bytes, bytes)
