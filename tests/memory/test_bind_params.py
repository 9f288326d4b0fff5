"""The SQLite store binds None and bytes without sqlite3's adaptation look-up (memory/_bind_params.py): each
used to cost a failed attribute look-up whose AttributeError was formatted and thrown away, ~44 a read-only turn on
the store's connection thread. What is bound is unchanged: NULL for None, the very BLOB for bytes."""

from __future__ import annotations

import sqlite3
import types
from pathlib import Path

import memory.sqlite_store  # noqa: F401  # registers the adapters, as opening the store does
from tests.memory._sqlite import raw


def test_none_and_bytes_are_bound_without_sqlites_adaptation_lookup() -> None:
    for value in (None, b"\x00\xffhash"):
        adapter = sqlite3.adapters.get((type(value), sqlite3.PrepareProtocol))
        assert adapter is not None, f"{type(value).__name__} goes through the adaptation look-up"
        assert adapter(value) is value


def test_none_is_stored_as_null_and_bytes_as_the_same_blob(tmp_path: Path) -> None:
    blob = bytes(range(256))
    with raw(tmp_path / "t.db") as conn:
        conn.execute("CREATE TABLE t (a, b, c)")
        conn.execute("INSERT INTO t VALUES (?, ?, ?)", (None, blob, bytearray(b"x")))
        assert conn.execute("SELECT typeof(a), typeof(b), b, typeof(c) FROM t").fetchone() == (
            "null", "blob", blob, "blob")


def test_the_adapters_are_c_callables_that_give_the_value_back() -> None:
    for value in (None, b"\x01" * 32):
        adapter = sqlite3.adapters[(type(value), sqlite3.PrepareProtocol)]
        assert isinstance(adapter, types.BuiltinFunctionType | type), adapter  # no Python frame per parameter
        assert adapter(value) is value


def test_a_hash_bound_as_a_bytearray_is_stored_as_the_blob_of_its_bytes(tmp_path: Path) -> None:
    digest = "ab" * 32
    with raw(tmp_path / "t.db") as conn:
        conn.execute("CREATE TABLE t (h)")
        conn.execute("INSERT INTO t VALUES (?)", (bytearray.fromhex(digest),))
        conn.execute("INSERT INTO t VALUES (?)", (bytes.fromhex(digest),))
        rows = conn.execute("SELECT typeof(h), h FROM t").fetchall()
    assert rows == [("blob", bytes.fromhex(digest))] * 2
