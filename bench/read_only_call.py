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


async def main(args: argparse.Namespace) -> None:
    configure_logging()
    tmp = Path(tempfile.mkdtemp(prefix="strata-bench-read-only-"))
    print(f"one read-only call: storage and profile, in {tmp}")
    async with Bench(tmp) as bench:
        await bench.session(20, 1, "noop_read")  # warm: the schema, the first session's rows
        before = await bench.store._run(_file_bytes)
        rows_before = await bench.store._run(_row_bytes)
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
