"""Ordered, named schema migrations, recorded in the database (`schema_migrations`, `PRAGMA user_version`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from core.errors import StoreError
from memory._encoding import (
    CHECKS,
    EVENT_KINDS,
    GENESIS_HASH,
    OUTCOMES,
    TIMELINE_KINDS,
    WORD_LISTS,
    data_sql,
    hash_sql,
    pack_hash,
    pack_time,
    payload_sql,
    summary_sql,
    summary_sql_10,
    time_sql,
)


def _statements(script: str) -> list[str]:
    """Split a script into statements (sqlite3.complete_statement keeps trigger bodies whole), so a migration
    runs inside our transaction; `executescript` would commit first."""
    out, buf = [], ""
    for line in script.splitlines(keepends=True):
        if line.strip().startswith("--"):
            continue
        buf += line
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    return out


def _m001_initial(conn: sqlite3.Connection) -> None:
    for statement in _statements(
        """
        CREATE TABLE sessions (
            num INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            mode TEXT NOT NULL,
            workspace TEXT NOT NULL,
            model TEXT NOT NULL,
            title TEXT NOT NULL DEFAULT '',
            parent_id TEXT,
            fork_seq INTEGER,
            status TEXT NOT NULL,
            lease_token TEXT,
            lease_pid INTEGER,
            lease_host TEXT,
            lease_proc_start TEXT,
            lease_expires TEXT
        );
        -- The state log. `key` is (session num << 40) | seq: one b-tree, clustered by session then seq, whose
        -- primary key is the (session, seq) uniqueness guard, so an append dirties one leaf page and no index.
        CREATE TABLE events (
            key INTEGER PRIMARY KEY,
            seq INTEGER NOT NULL,
            kind TEXT NOT NULL,
            at TEXT NOT NULL,
            turn INTEGER NOT NULL,
            payload TEXT NOT NULL,
            schema_version INTEGER NOT NULL
        );
        CREATE VIEW session_events AS
            SELECT s.id AS session_id, e.seq, e.kind, e.at, e.turn, e.payload, e.schema_version
            FROM events e JOIN sessions s ON e.key >> 40 = s.num;
        CREATE TABLE receipts (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            call_id TEXT NOT NULL,
            tool TEXT NOT NULL,
            status TEXT NOT NULL,
            idempotency_key TEXT NOT NULL UNIQUE,
            args_sha256 TEXT NOT NULL,
            resource_keys TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            outcome_sha256 TEXT,
            note TEXT,
            reconciled_by TEXT
        ) WITHOUT ROWID;
        -- Every b-tree a commit touches is another page in the WAL, so there are no more indexes than the
        -- guarantees need, and their keys are time-ordered (receipt ids are uuid7; idempotency keys start with
        -- the uuid7 session id and the call id) so that inserts land on the rightmost pages instead of dirtying
        -- random ones. One receipt per call follows from the key: it is derived from session, call and
        -- arguments, and a call's arguments never change.
        -- The state log is append-only: the database itself refuses edits and deletes.
        CREATE TRIGGER events_no_update BEFORE UPDATE ON events
            BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
        CREATE TRIGGER events_no_delete BEFORE DELETE ON events
            BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
        """
    ):
        conn.execute(statement)


def _m002_timeline(conn: sqlite3.Connection) -> None:
    for statement in _statements(
        """
        -- The observation log, keyed like `events`: (session num << 40) | seq, so a session's rows are one
        -- contiguous key range and an append dirties the rightmost leaf only. There is no secondary index: every
        -- query is per session, so it is a range scan of that session's rows with the filter evaluated on the
        -- small columns, which come first in the record (a scan stops reading a row at the last column it
        -- needs; summary and data may be long). A commit stays one b-tree page or so heavier, not one per index.
        CREATE TABLE timeline (
            key INTEGER PRIMARY KEY,
            kind TEXT NOT NULL,
            turn INTEGER NOT NULL,
            tool TEXT,
            decision TEXT,
            at TEXT NOT NULL,
            call_id TEXT,
            check_name TEXT,
            outcome TEXT,
            duration_ms REAL,
            prev_hash TEXT NOT NULL,
            hash TEXT NOT NULL,
            summary TEXT NOT NULL,
            data TEXT NOT NULL
        );
        CREATE VIEW session_timeline AS
            SELECT s.id AS session_id, t.key & 1099511627775 AS seq, t.at, t.turn, t.kind, t.call_id, t.tool,
                   t.decision, t.check_name, t.outcome, t.duration_ms, t.summary, t.data, t.prev_hash, t.hash
            FROM timeline t JOIN sessions s ON t.key >> 40 = s.num;
        CREATE TRIGGER timeline_no_update BEFORE UPDATE ON timeline
            BEGIN SELECT RAISE(ABORT, 'the timeline is append-only'); END;
        CREATE TRIGGER timeline_no_delete BEFORE DELETE ON timeline
            BEGIN SELECT RAISE(ABORT, 'the timeline is append-only'); END;
        """
    ):
        conn.execute(statement)


def _m003_blobs_snapshots(conn: sqlite3.Connection) -> None:
    for statement in _statements(
        """
        -- Tool outputs too large for the state log, stored once by the sha256 of their bytes (INSERT OR IGNORE)
        -- in the same commit as the result event that names them. A rowid table: rows are large, so they stay
        -- out of the key b-tree's pages. Written only when a large output comes along, never on other commits.
        CREATE TABLE blobs (
            sha256 TEXT PRIMARY KEY,
            size INTEGER NOT NULL,
            data BLOB NOT NULL
        );
        CREATE TRIGGER blobs_no_update BEFORE UPDATE ON blobs
            BEGIN SELECT RAISE(ABORT, 'blobs are immutable'); END;
        -- Folded state at a seq, keyed like `events`: (session num << 40) | seq. A cache of fold, not part of
        -- the log: a session keeps only its latest snapshot (written in the same commit as later events), and
        -- one that cannot be trusted is ignored in favour of the log.
        CREATE TABLE snapshots (
            key INTEGER PRIMARY KEY,
            version TEXT NOT NULL,
            at TEXT NOT NULL,
            data BLOB NOT NULL
        );
        CREATE VIEW session_snapshots AS
            SELECT s.id AS session_id, n.key & 1099511627775 AS seq, n.version, n.at, length(n.data) AS size
            FROM snapshots n JOIN sessions s ON n.key >> 40 = s.num;
        """
    ):
        conn.execute(statement)


def _m004_append_order(conn: sqlite3.Connection) -> None:
    """Events and timeline rows move to tables in append order (rowid), with `key` as a unique index.

    Clustered by `key` = (session num << 40) | seq, a session's appends land at the end of its own key range,
    which is the end of the b-tree only for the newest session: every other session inserts in the middle of a
    full leaf, and SQLite then rebalances it with its neighbours, so a commit of a session that is not the
    newest wrote nearly twice the pages (measured: 2.8 WAL frames per commit against 1.6; bench/loop_overhead.py
    showed it as a long session's calls costing ~10% more than a new session's). In append order every append
    is at the end of the table, and the index entry it adds is small (a leaf holds hundreds), so a commit costs
    the same whichever session makes it. Reads still go by `key` (the index) and keep their order; the views
    now join on the session's key range, so a view query for one session searches the index too."""
    copies = (
        ("events", "seq INTEGER NOT NULL, kind TEXT NOT NULL, at TEXT NOT NULL, turn INTEGER NOT NULL, "
                   "payload TEXT NOT NULL, schema_version INTEGER NOT NULL",
         "seq, kind, at, turn, payload, schema_version"),
        ("timeline", "kind TEXT NOT NULL, turn INTEGER NOT NULL, tool TEXT, decision TEXT, at TEXT NOT NULL, "
                     "call_id TEXT, check_name TEXT, outcome TEXT, duration_ms REAL, prev_hash TEXT NOT NULL, "
                     "hash TEXT NOT NULL, summary TEXT NOT NULL, data TEXT NOT NULL",
         "kind, turn, tool, decision, at, call_id, check_name, outcome, duration_ms, prev_hash, hash, summary, data"),
    )
    for statement in ("DROP VIEW session_events", "DROP VIEW session_timeline", "DROP TRIGGER events_no_update",
                      "DROP TRIGGER events_no_delete", "DROP TRIGGER timeline_no_update",
                      "DROP TRIGGER timeline_no_delete"):
        conn.execute(statement)
    for table, columns, names in copies:
        conn.execute(f"CREATE TABLE {table}_new (pos INTEGER PRIMARY KEY, key INTEGER NOT NULL UNIQUE, {columns})")
        conn.execute(f"INSERT INTO {table}_new(key, {names}) SELECT key, {names} FROM {table} ORDER BY key")
        conn.execute(f"DROP TABLE {table}")
        conn.execute(f"ALTER TABLE {table}_new RENAME TO {table}")
    for statement in _statements(
        """
        CREATE VIEW session_events AS
            SELECT s.id AS session_id, e.seq, e.kind, e.at, e.turn, e.payload, e.schema_version
            FROM events e JOIN sessions s ON e.key BETWEEN s.num << 40 AND (s.num << 40) | 1099511627775;
        CREATE VIEW session_timeline AS
            SELECT s.id AS session_id, t.key & 1099511627775 AS seq, t.at, t.turn, t.kind, t.call_id, t.tool,
                   t.decision, t.check_name, t.outcome, t.duration_ms, t.summary, t.data, t.prev_hash, t.hash
            FROM timeline t JOIN sessions s ON t.key BETWEEN s.num << 40 AND (s.num << 40) | 1099511627775;
        CREATE TRIGGER events_no_update BEFORE UPDATE ON events
            BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
        CREATE TRIGGER events_no_delete BEFORE DELETE ON events
            BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
        CREATE TRIGGER timeline_no_update BEFORE UPDATE ON timeline
            BEGIN SELECT RAISE(ABORT, 'the timeline is append-only'); END;
        CREATE TRIGGER timeline_no_delete BEFORE DELETE ON timeline
            BEGIN SELECT RAISE(ABORT, 'the timeline is append-only'); END;
        """
    ):
        conn.execute(statement)


def _m005_keyed_chains(conn: sqlite3.Connection) -> None:
    """The state log gets a hash chain like the timeline's, both chains become keyed (an HMAC under the home's
    `chain.key`, which never enters the database), and the session row records where both logs end (the head),
    rewritten in every commit, so that a truncated tail shows.

    Schema only: the key is not known here. The rows of a database that has none recorded are chained under the
    key by memory/chain_binding.py, in the transaction that records the key's id in `chain_key`, when a process
    with a key first opens it; what that found is kept per session in `chain_note`."""
    for statement in _statements(
        """
        ALTER TABLE events ADD COLUMN hash TEXT NOT NULL DEFAULT '';
        ALTER TABLE sessions ADD COLUMN head_events_seq INTEGER;
        ALTER TABLE sessions ADD COLUMN head_events_hash TEXT;
        ALTER TABLE sessions ADD COLUMN head_timeline_seq INTEGER;
        ALTER TABLE sessions ADD COLUMN head_timeline_hash TEXT;
        -- JSON, set only for a session chained under the key after it was written (an older database).
        ALTER TABLE sessions ADD COLUMN chain_note TEXT;
        -- The id (a digest, not the key) of the key the chains were made with: a home whose chain.key is missing
        -- or another can neither verify nor extend them, and says so.
        CREATE TABLE chain_key (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            key_id TEXT NOT NULL,
            bound_at TEXT NOT NULL
        );
        """
    ):
        conn.execute(statement)


def _m006_process_identity(conn: sqlite3.Connection) -> None:
    """Who holds a lease, and what a receipt's handler started, as core/processes.py identifies processes.

    A lease owner's pid is checked only in the boot and PID namespace it was recorded in (`lease_boot`,
    `lease_pid_ns`; elsewhere the lease lives until it expires unrenewed). A receipt's `process` (JSON: pid, process
    group, leader start time, boot, PID namespace, host) is the command a `bash` call started, written when the
    receipt is settled. Plain added columns, NULL in older rows, no index: nothing queries by them."""
    for statement in ("ALTER TABLE sessions ADD COLUMN lease_boot TEXT",
                      "ALTER TABLE sessions ADD COLUMN lease_pid_ns TEXT",
                      "ALTER TABLE receipts ADD COLUMN process TEXT"):
        conn.execute(statement)


def _m007_rare_decisions(conn: sqlite3.Connection) -> None:
    """An index of the timeline rows whose decision is not `allowed` (denied, approved, rejected, parked: a few
    percent of a session's rows), by decision and key. `strata timeline ID --decision denied` reads those rows
    through it instead of scanning every row of the session (a 100,000-row session: ~95 ms to ~15 ms). Partial, so
    the usual rows (allowed calls, phases, model attempts, receipts) cost a commit no index write; the store's query
    names `decision <> 'allowed'` whenever `allowed` is not asked for, which is what lets SQLite use it."""
    conn.execute("CREATE INDEX timeline_rare_decision ON timeline(decision, key) WHERE decision <> 'allowed'")


_VIEWS_AND_TRIGGERS_8 = f"""
        CREATE VIEW session_events AS
            SELECT s.id AS session_id, e.seq, e.kind, {time_sql("e.at")} AS at, e.turn,
                   {payload_sql("e.kind", "e.payload")} AS payload, e.schema_version,
                   {hash_sql("e.hash")} AS hash
            FROM events e JOIN sessions s ON e.key BETWEEN s.num << 40 AND (s.num << 40) | 1099511627775;
        CREATE VIEW session_timeline AS
            SELECT s.id AS session_id, t.key & 1099511627775 AS seq, {time_sql("t.at")} AS at, t.turn, t.kind,
                   t.call_id, t.tool, t.decision, t.check_name, t.outcome, t.duration_ms, t.summary, t.data,
                   COALESCE({hash_sql("t.prev_hash")}, CASE WHEN t.key & 1099511627775 = 1 THEN '{GENESIS_HASH}'
                            ELSE (SELECT {hash_sql("p.hash")} FROM timeline p WHERE p.key = t.key - 1) END)
                       AS prev_hash,
                   {hash_sql("t.hash")} AS hash
            FROM timeline t JOIN sessions s ON t.key BETWEEN s.num << 40 AND (s.num << 40) | 1099511627775;
        CREATE TRIGGER events_no_update BEFORE UPDATE ON events
            BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
        CREATE TRIGGER events_no_delete BEFORE DELETE ON events
            BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
        CREATE TRIGGER timeline_no_update BEFORE UPDATE ON timeline
            BEGIN SELECT RAISE(ABORT, 'the timeline is append-only'); END;
        CREATE TRIGGER timeline_no_delete BEFORE DELETE ON timeline
            BEGIN SELECT RAISE(ABORT, 'the timeline is append-only'); END;
        CREATE INDEX timeline_rare_decision ON timeline(decision, key) WHERE decision <> 'allowed';
        """


def _m008_packed_rows(conn: sqlite3.Connection) -> None:
    """Hashes as their 32 bytes, times as integer microseconds, and a timeline row's `prev_hash` only where it is
    not the previous row's hash (memory/_encoding.py): about 150 bytes less per timeline row and 55 per event.
    The views show every value as before (hex, ISO text, prev_hash filled in).

    Both tables are rebuilt in append order (the rows keep their `pos`), the append-only triggers, the views and
    the partial index set aside and made again. A value that would not come back exactly is copied as the text it
    is, and a `prev_hash` that is not the hash of the row right before it (a gap, a chain edited behind the
    store's back, one made before the chain was keyed) is kept, so verify finds in a migrated database what it
    found before."""
    conn.create_function("pack_hash", 1, pack_hash, deterministic=True)
    conn.create_function("pack_time", 1, pack_time, deterministic=True)
    for statement in ("DROP VIEW IF EXISTS session_events", "DROP VIEW IF EXISTS session_timeline",
                      "DROP TRIGGER IF EXISTS events_no_update", "DROP TRIGGER IF EXISTS events_no_delete",
                      "DROP TRIGGER IF EXISTS timeline_no_update", "DROP TRIGGER IF EXISTS timeline_no_delete",
                      "DROP INDEX IF EXISTS timeline_rare_decision"):
        conn.execute(statement)
    # `at`, `hash` and `prev_hash` are declared without a type: no affinity, so each value is stored as given.
    conn.execute("CREATE TABLE events_new (pos INTEGER PRIMARY KEY, key INTEGER NOT NULL UNIQUE, "
                 "seq INTEGER NOT NULL, kind TEXT NOT NULL, at NOT NULL, turn INTEGER NOT NULL, payload TEXT NOT NULL, "
                 "schema_version INTEGER NOT NULL, hash NOT NULL DEFAULT '')")
    conn.execute("INSERT INTO events_new(pos, key, seq, kind, at, turn, payload, schema_version, hash) "
                 "SELECT pos, key, seq, kind, pack_time(at), turn, payload, schema_version, pack_hash(hash) "
                 "FROM events ORDER BY pos")
    conn.execute("CREATE TABLE timeline_new (pos INTEGER PRIMARY KEY, key INTEGER NOT NULL UNIQUE, "
                 "kind TEXT NOT NULL, turn INTEGER NOT NULL, tool TEXT, decision TEXT, at NOT NULL, call_id TEXT, "
                 "check_name TEXT, outcome TEXT, duration_ms REAL, prev_hash, hash NOT NULL, summary TEXT NOT NULL, "
                 "data TEXT NOT NULL)")
    conn.execute(
        "INSERT INTO timeline_new(pos, key, kind, turn, tool, decision, at, call_id, check_name, outcome, "
        "duration_ms, prev_hash, hash, summary, data) "
        "SELECT pos, key, kind, turn, tool, decision, pack_time(at), call_id, check_name, outcome, duration_ms, "
        f"CASE WHEN (key & {(1 << 40) - 1} = 1 AND prev_hash IS '{GENESIS_HASH}') "
        "OR (before_key = key - 1 AND prev_hash IS before_hash AND length(prev_hash) = 64) THEN NULL "
        "ELSE pack_hash(prev_hash) END, pack_hash(hash), summary, data "
        "FROM (SELECT *, lag(key) OVER (ORDER BY key) AS before_key, lag(hash) OVER (ORDER BY key) AS before_hash "
        "FROM timeline) ORDER BY pos")
    for table in ("events", "timeline"):
        conn.execute(f"DROP TABLE {table}")
        conn.execute(f"ALTER TABLE {table}_new RENAME TO {table}")
    for statement in _statements(_VIEWS_AND_TRIGGERS_8):
        conn.execute(statement)


def _m009_packed_summaries(conn: sqlite3.Connection) -> None:
    """A timeline row's `summary` may be packed: a BLOB in which one byte stands for what the row's other values
    repeat (memory/_encoding.py `pack_summary`: a phase row's leading `<outcome>: `, a call row's leading `<tool> `,
    the batch id its `data` holds), about 100 bytes less per read-only call; and a model attempt's token usage is
    stored as the list of its four counts (`pack_data`). Rows already stored stay as they are (read as they always
    were). Only the view changes: `session_timeline` shows a packed summary and a packed usage written out.
    The version step also keeps an older Strata, which would read a packed summary as a damaged row, out of a
    database that holds them ("newer than this Strata knows")."""
    conn.execute("DROP VIEW IF EXISTS session_timeline")
    conn.execute(f"""
        CREATE VIEW session_timeline AS
            SELECT s.id AS session_id, t.key & 1099511627775 AS seq, {time_sql("t.at")} AS at, t.turn, t.kind,
                   t.call_id, t.tool, t.decision, t.check_name, t.outcome, t.duration_ms,
                   {summary_sql("t.summary", "t.outcome", "t.tool", "t.data")} AS summary,
                   {data_sql("t.kind", "t.data")} AS data,
                   COALESCE({hash_sql("t.prev_hash")}, CASE WHEN t.key & 1099511627775 = 1 THEN '{GENESIS_HASH}'
                            ELSE (SELECT {hash_sql("p.hash")} FROM timeline p WHERE p.key = t.key - 1) END)
                       AS prev_hash,
                   {hash_sql("t.hash")} AS hash
            FROM timeline t JOIN sessions s ON t.key BETWEEN s.num << 40 AND (s.num << 40) | 1099511627775""")


def _m010_coded_words(conn: sqlite3.Connection) -> None:
    """An event's and a timeline row's kind, a timeline row's outcome and a call row's default check are stored as
    the number of the word in a fixed list (memory/_encoding.py `Words`: 0 or 1 byte instead of 4 to 50), a
    timeline row's empty `data` (`{}`) as NULL, and a batch's commit and observe phase summaries, which the loop
    makes from the row's data, as NULL (`derived_summary`): about 200 bytes less per read-only call. The views show
    every value as before, and the hashes are of the same values (the words, `{}`, the summary's text). Summaries
    already stored stay as they are (read as they always were).

    Both tables are rebuilt in append order (the rows keep their `pos`), their columns declared without a type
    for the coded values (no affinity: a number stays a number, a text that is no word of the list stays text),
    the append-only triggers, the views and the partial index set aside and made again. A value that is no word
    of its list (an older Strata's, or one edited behind the store's back) is copied as it is, so verify finds in
    a migrated database what it found before."""
    for name, words in (("pack_event_kind", EVENT_KINDS), ("pack_timeline_kind", TIMELINE_KINDS),
                        ("pack_outcome", OUTCOMES), ("pack_check", CHECKS)):
        conn.create_function(name, 1, words.pack, deterministic=True)
    for statement in ("DROP VIEW IF EXISTS session_events", "DROP VIEW IF EXISTS session_timeline",
                      "DROP TRIGGER IF EXISTS events_no_update", "DROP TRIGGER IF EXISTS events_no_delete",
                      "DROP TRIGGER IF EXISTS timeline_no_update", "DROP TRIGGER IF EXISTS timeline_no_delete",
                      "DROP INDEX IF EXISTS timeline_rare_decision"):
        conn.execute(statement)
    conn.execute("CREATE TABLE events_new (pos INTEGER PRIMARY KEY, key INTEGER NOT NULL UNIQUE, "
                 "seq INTEGER NOT NULL, kind NOT NULL, at NOT NULL, turn INTEGER NOT NULL, payload TEXT NOT NULL, "
                 "schema_version INTEGER NOT NULL, hash NOT NULL DEFAULT '')")
    conn.execute("INSERT INTO events_new(pos, key, seq, kind, at, turn, payload, schema_version, hash) "
                 "SELECT pos, key, seq, pack_event_kind(kind), at, turn, payload, schema_version, hash "
                 "FROM events ORDER BY pos")
    conn.execute("CREATE TABLE timeline_new (pos INTEGER PRIMARY KEY, key INTEGER NOT NULL UNIQUE, "
                 "kind NOT NULL, turn INTEGER NOT NULL, tool TEXT, decision TEXT, at NOT NULL, call_id TEXT, "
                 "check_name, outcome, duration_ms REAL, prev_hash, hash NOT NULL, summary TEXT, data TEXT)")
    conn.execute(
        "INSERT INTO timeline_new(pos, key, kind, turn, tool, decision, at, call_id, check_name, outcome, "
        "duration_ms, prev_hash, hash, summary, data) "
        "SELECT pos, key, pack_timeline_kind(kind), turn, tool, decision, at, call_id, pack_check(check_name), "
        "pack_outcome(outcome), duration_ms, prev_hash, hash, summary, "
        "CASE WHEN typeof(data) = 'text' AND data = '{}' THEN NULL ELSE data END FROM timeline ORDER BY pos")
    for table in ("events", "timeline"):
        conn.execute(f"DROP TABLE {table}")
        conn.execute(f"ALTER TABLE {table}_new RENAME TO {table}")
    # The words the numbers stand for, for the views (and anyone reading the tables with plain SQL).
    conn.execute("CREATE TABLE words (list TEXT NOT NULL, n INTEGER NOT NULL, word TEXT NOT NULL, "
                 "PRIMARY KEY (list, n)) WITHOUT ROWID")
    conn.executemany("INSERT INTO words(list, n, word) VALUES (?, ?, ?)",
                     [(words.name, n, word) for words in WORD_LISTS for n, word in enumerate(words.words)])
    for statement in _statements(_VIEWS_AND_TRIGGERS_10):
        conn.execute(statement)


_EVENT_KIND = EVENT_KINDS.sql("kind")
_KIND, _OUTCOME, _CHECK = TIMELINE_KINDS.sql("kind"), OUTCOMES.sql("outcome"), CHECKS.sql("check_name")
# The views decode each coded column once, in a subquery (which SQLite flattens into the outer query), so that the
# outer expressions, which name a column several times, stay short: SQLite parses every view whenever a
# connection first reads the schema, so a view's length is paid by every process.
_VIEWS_AND_TRIGGERS_10 = f"""
        CREATE VIEW session_events AS
            SELECT s.id AS session_id, e.seq, e.kind, {time_sql("e.at")} AS at, e.turn,
                   {payload_sql("e.kind", "e.payload")} AS payload, e.schema_version, {hash_sql("e.hash")} AS hash
            FROM (SELECT key, seq, {_EVENT_KIND} AS kind, at, turn, payload, schema_version, hash FROM events) e
            JOIN sessions s ON e.key BETWEEN s.num << 40 AND (s.num << 40) | 1099511627775;
        CREATE VIEW session_timeline AS
            SELECT s.id AS session_id, t.key & 1099511627775 AS seq, {time_sql("t.at")} AS at, t.turn, t.kind,
                   t.call_id, t.tool, t.decision, t.check_name, t.outcome, t.duration_ms,
                   {summary_sql_10("t.summary", "t.outcome", "t.tool", "t.data")} AS summary,
                   {data_sql("t.kind", "t.data")} AS data,
                   COALESCE({hash_sql("t.prev_hash")}, CASE WHEN t.key & 1099511627775 = 1 THEN '{GENESIS_HASH}'
                            ELSE (SELECT {hash_sql("p.hash")} FROM timeline p WHERE p.key = t.key - 1) END)
                       AS prev_hash,
                   {hash_sql("t.hash")} AS hash
            FROM (SELECT key, at, turn, {_KIND} AS kind, call_id, tool, decision, {_CHECK} AS check_name,
                         {_OUTCOME} AS outcome, duration_ms, summary, COALESCE(data, '{{}}') AS data, prev_hash, hash
                  FROM timeline) t
            JOIN sessions s ON t.key BETWEEN s.num << 40 AND (s.num << 40) | 1099511627775;
        CREATE TRIGGER events_no_update BEFORE UPDATE ON events
            BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
        CREATE TRIGGER events_no_delete BEFORE DELETE ON events
            BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
        CREATE TRIGGER timeline_no_update BEFORE UPDATE ON timeline
            BEGIN SELECT RAISE(ABORT, 'the timeline is append-only'); END;
        CREATE TRIGGER timeline_no_delete BEFORE DELETE ON timeline
            BEGIN SELECT RAISE(ABORT, 'the timeline is append-only'); END;
        CREATE INDEX timeline_rare_decision ON timeline(decision, key) WHERE decision <> 'allowed';
        """


def _m011_unknown_receipts(conn: sqlite3.Connection) -> None:
    """An index of the receipts whose outcome is `unknown`, by session. Every run, resume and channel turn asks for
    its session's unknown receipts at its end (agent/loop.py `_outcome`), as do the daemon and a delegate call:
    before, that walked every receipt of the session (the idempotency key's range; ~5,150 receipts in a 10,000-turn
    session). A receipt becomes `unknown` only when its call's outcome cannot be known (a deadline passed, an
    interrupt, a crash: tool_executor/_receipts.py), so it is partial: a receipt written `dispatched` and then
    `done` or `failed` costs a commit no index write. The store's query names `status = 'unknown'` as a literal
    (memory/read_sql.py `receipts_filter`), which SQLite sees the index's condition in when it plans the query."""
    conn.execute("CREATE INDEX receipts_unknown ON receipts(session_id) WHERE status = 'unknown'")


Migration = tuple[str, Callable[[sqlite3.Connection], None]]

MIGRATIONS: tuple[Migration, ...] = (("001_initial", _m001_initial), ("002_timeline", _m002_timeline),
                                     ("003_blobs_snapshots", _m003_blobs_snapshots),
                                     ("004_append_order", _m004_append_order),
                                     ("005_keyed_chains", _m005_keyed_chains),
                                     ("006_process_identity", _m006_process_identity),
                                     ("007_rare_decisions", _m007_rare_decisions),
                                     ("008_packed_rows", _m008_packed_rows),
                                     ("009_packed_summaries", _m009_packed_summaries),
                                     ("010_coded_words", _m010_coded_words),
                                     ("011_unknown_receipts", _m011_unknown_receipts))

READ_AS_IS_SINCE = 10
"""The oldest schema a reading command reads as it stands, without migrating it: the migrations after it only add
indexes (011), which every query is right without (only slower), so a home at schema 10 that cannot be written
(a read-only mount, a backup) is still read. A writer's open migrates it."""


def read_as_is(version: int) -> bool:
    """Whether a database at `version` is read without migrating it (READ_AS_IS_SINCE up to the current one)."""
    return READ_AS_IS_SINCE <= version <= len(MIGRATIONS)


def migrate(conn: sqlite3.Connection, path: str, now: str) -> int:
    """Bring the event store's schema up to date (`apply_in_order`). Returns the resulting version."""
    return apply_in_order(conn, MIGRATIONS, path, now)


def apply_in_order(conn: sqlite3.Connection, migrations: tuple[Migration, ...], path: str, now: str) -> int:
    """Apply `migrations` not applied yet, one transaction each, recorded in `schema_migrations` and `PRAGMA
    user_version`. Returns the resulting version.

    A database already current takes no write lock. Otherwise each step takes the write lock, reads the version
    again (another process may have migrated while this one waited) and applies the next migration, or stops:
    a process that finds the work done by another waits for the lock once, not once per migration (ten processes
    opening a new home at once queued ~100 lock acquisitions, and one of them could starve past the busy
    timeout on a loaded machine)."""
    version = _version(conn, migrations, path)
    while version < len(migrations):
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = _version(conn, migrations, path)
            if version < len(migrations):
                name, step = migrations[version]
                conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations "
                             "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
                step(conn)
                conn.execute("INSERT INTO schema_migrations(name, applied_at) VALUES (?, ?)", (name, now))
                version += 1
                conn.execute(f"PRAGMA user_version = {version}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return version


def _version(conn: sqlite3.Connection, migrations: tuple[Migration, ...], path: str) -> int:
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > len(migrations):
        raise StoreError(f"{path} has schema version {version}, newer than this Strata knows "
                         f"({len(migrations)})", path=path, hint="upgrade Strata to open this database")
    return version
