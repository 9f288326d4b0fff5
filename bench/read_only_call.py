"""What one read-only tool call costs: the bytes it adds to the database, and where its Python time goes.

Drives the real loop (scripted model, a no-op read-only tool, the SQLite store in WAL with synchronous=FULL, the
timeline on; bench/loop_overhead.py's parts) through a session of N read-only calls, K per batch (a model turn
per batch; K=1 by default), then:

  - storage: the database file's growth per call (pages after a full checkpoint, tables and indexes included;
    the calls' outputs are two bytes, so no blob is stored), and per call the bytes of the rows themselves
    (event payloads and timeline rows, with their hashes), by table;
  - profile: a second session of the same shape under cProfile, the functions with the most own time, per call.

Ends with one line:

    bytes_per_read_only_call=<float> row_bytes_per_call=<float>

Usage: python bench/read_only_call.py [--calls N] [--k K] [--top T] [--no-profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sqlite3
import sys
import tempfile
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loop_overhead import Bench

from observability import configure_logging


def _file_bytes(conn: sqlite3.Connection) -> int:
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    return int((pages - free) * conn.execute("PRAGMA page_size").fetchone()[0])


def _size(column: str) -> str:
    """The bytes a stored value takes (an integer as 8, the most it can; text and blobs by their bytes)."""
    return (f"(CASE typeof({column}) WHEN 'integer' THEN 8 WHEN 'real' THEN 8 WHEN 'null' THEN 0 "
            f"ELSE length(CAST({column} AS BLOB)) END)")


def _row_bytes(conn: sqlite3.Connection) -> dict[str, int]:
    """Bytes of the stored values (not the b-tree overhead) of every event and timeline row, by table."""
    event_columns = ("payload", "kind", "at", "hash")
    events = conn.execute(f"SELECT coalesce(sum({' + '.join(_size(c) for c in event_columns)} + 24), 0) "
                          "FROM events").fetchone()[0]
    timeline_columns = ("kind", "at", "tool", "decision", "call_id", "check_name", "outcome", "prev_hash", "hash",
                        "summary", "data")
    timeline = conn.execute(f"SELECT coalesce(sum({' + '.join(_size(c) for c in timeline_columns)} + 24), 0) "
                            "FROM timeline").fetchone()[0]
    receipts = conn.execute("SELECT count(*) FROM receipts").fetchone()[0]
    blobs = conn.execute("SELECT coalesce(sum(size), 0) FROM blobs").fetchone()[0]
    return {"events": int(events), "timeline": int(timeline), "receipts (rows)": int(receipts),
            "blobs": int(blobs)}


def _varint(value: int) -> int:
    """The bytes of SQLite's varint of a non-negative integer."""
    n = 1
    while value > 0x7F and n < 9:
        value >>= 7
        n += 1
    return n


def _value_bytes(value: object) -> tuple[int, int]:
    """A value's serial type and the bytes its body takes in a record (SQLite's file format: the integers 0 and 1
    take none, other integers 1 to 8 bytes by magnitude)."""
    if value is None:
        return 0, 0
    if isinstance(value, int):
        if value in (0, 1):
            return 8 + value, 0
        for size, limit in ((1, 1 << 7), (2, 1 << 15), (3, 1 << 23), (4, 1 << 31), (6, 1 << 47)):
            if -limit <= value < limit:
                return 1, size
        return 6, 8
    if isinstance(value, float):
        return 7, 8
    body = value.encode() if isinstance(value, str) else bytes(value)  # type: ignore[arg-type]
    return len(body) * 2 + (13 if isinstance(value, str) else 12), len(body)


def _record(values: list[object]) -> tuple[int, list[int]]:
    """A record's header bytes and each value's body bytes."""
    types = [_value_bytes(v) for v in values]
    header = sum(_varint(t) for t, _ in types)
    return header + _varint(header + 1), [size for _, size in types]


def _breakdown(conn: sqlite3.Connection, after_pos: dict[str, int]) -> dict[str, dict[str, int]]:
    """The bytes the rows appended after `after_pos` (their rowid: the tables are in append order) take in the
    b-tree leaves, exactly as SQLite lays them out: each column's value, the record header, the cell's length and
    rowid varints with its 2-byte pointer, and the cell of the `key` index. Interior pages and free space in the
    leaves are what the file's growth holds beyond these."""
    out: dict[str, dict[str, int]] = {}
    for table in ("events", "timeline"):
        columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        parts = dict.fromkeys(["header", *columns[1:], "cell", "key index"], 0)
        for row in conn.execute(f"SELECT * FROM {table} WHERE pos > ?", (after_pos[table],)):
            pos, values = row[0], [None, *row[1:]]  # pos is the rowid: the record holds NULL for it
            header, sizes = _record(values)
            parts["header"] += header
            for name, size in zip(columns[1:], sizes[1:], strict=True):
                parts[name] += size
            parts["cell"] += _varint(header + sum(sizes)) + _varint(pos) + 2
            index_header, index_sizes = _record([row[1], pos])
            parts["key index"] += index_header + sum(index_sizes) + _varint(index_header + sum(index_sizes)) + 2
        out[table] = parts
    return out


def _last_pos(conn: sqlite3.Connection) -> dict[str, int]:
    return {t: conn.execute(f"SELECT coalesce(max(pos), 0) FROM {t}").fetchone()[0] for t in ("events", "timeline")}


async def main(args: argparse.Namespace) -> None:
    configure_logging()
    tmp = Path(tempfile.mkdtemp(prefix="strata-bench-read-only-"))
    print(f"one read-only call: storage and profile, in {tmp}")
    async with Bench(tmp) as bench:
        await bench.session(20, 1, "noop_read")  # warm: the schema, the first session's rows
        before = await bench.store._run(_file_bytes)
        rows_before = await bench.store._run(_row_bytes)
        pos_before = await bench.store._run(_last_pos)
        batches = args.calls // args.k
        seconds, commits = await bench.session(batches, args.k, "noop_read")
        after = await bench.store._run(_file_bytes)
        rows_after = await bench.store._run(_row_bytes)
        per_call = (after - before) / args.calls
        rows = {name: (rows_after[name] - rows_before[name]) / args.calls for name in rows_after}
        row_bytes = rows["events"] + rows["timeline"]
        print(f"{args.calls} read-only calls ({args.k} per batch): {commits / args.calls:.2f} commits per call, "
              f"{seconds / args.calls * 1e3:.3f} ms per call")
        print(f"database growth: {per_call:.0f} bytes per call (pages after a full checkpoint, indexes included)")
        print(f"stored values per call: events {rows['events']:.0f} B, timeline rows {rows['timeline']:.0f} B, "
              f"receipts {rows['receipts (rows)']:.2f} rows, blobs {rows['blobs']:.0f} B")
        laid_out = await bench.store._run(lambda conn: _breakdown(conn, pos_before))
        in_cells = 0.0
        for table, parts in laid_out.items():
            total = sum(parts.values()) / args.calls
            in_cells += total
            print(f"  {table} on disk per call: {total:.0f} B in leaf cells = "
                  + ", ".join(f"{name} {n / args.calls:.0f}" for name, n in parts.items() if n))
        print(f"  b-tree pages beyond the cells (interior pages, free space in leaves): {per_call - in_cells:.0f} B")

        if args.no_profile:
            print(f"bytes_per_read_only_call={per_call:.1f} row_bytes_per_call={row_bytes:.1f}")
            return
        profile = cProfile.Profile()
        profile.enable()
        await bench.session(batches, args.k, "noop_read")
        profile.disable()
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    stats.sort_stats("tottime").print_stats(args.top)
    total = stats.total_tt  # type: ignore[attr-defined]
    print(f"profile of {args.calls} more read-only calls: {total / args.calls * 1e3:.3f} ms of profiled time per call "
          f"(all threads' Python as cProfile sees the event loop's; the profiler's own overhead included)")
    print("\n".join(line for line in out.getvalue().splitlines()[6:] if line.strip()))
    print(f"bytes_per_read_only_call={per_call:.1f} row_bytes_per_call={row_bytes:.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--k", type=int, default=1, help="read-only calls per batch (per model turn)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--no-profile", action="store_true", help="the storage figures only")
    anyio.run(main, parser.parse_args())
