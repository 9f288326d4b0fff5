"""A plain, blocking, read-only look at the SQLite store for the command line's quick way (agent/cli/
quick_timeline.py): a session found by its id or a prefix, and its timeline rows picked by the same filter the
store uses (memory.read_sql.py), read with the standard library alone. No models, no event loop, no chain
binding: it answers only when the database is current and everything it reads is as the store writes it, and
says None otherwise, so that the caller takes the full way (the store, which reports what is wrong)."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Collection
from datetime import datetime
from pathlib import Path
from typing import Any, get_args

from config.quick import QuickConfig, quick_config
from core.clock import canonical_time
from core.delegate_keys import DELEGATE, child_of
from core.record import record
from core.snapshot_version import SNAPSHOT_VERSION
from core.vocabulary import EVENT_SCHEMA_VERSION, RECEIPT_STATUSES, TIMELINE_DECISIONS, Mode, SessionStatus
from memory import _read_only
from memory._encoding import (
    EVENT_KINDS,
    TIMELINE_KINDS,
    stored_data,
    stored_datetime,
    timeline_words,
    unpack_hash,
    unpack_snapshot,
    unpack_summary,
)
from memory.migrations import read_as_is
from memory.read_sql import (
    SEQ_BITS,
    SEQ_MASK,
    SESSION_SELECT,
    TIMELINE_COLS,
    receipts_filter,
    timeline_filter,
    with_prev_hash,
)

QUICK_BUSY_S = 0.1
"""How long the quick way waits for a lock held elsewhere (a transaction of a process in exclusive locking mode, a
database in rollback-journal mode) before it leaves the command to the full way. Readers of a WAL database are
not blocked by its writers, so this is rare; the full way then waits out the store's busy timeout once and
reports the lock. Waiting that long here as well would double the wait before the one error line."""


class ShownRow:
    """A timeline row's fields a table shows (core/timeline.py TimelineRow has them all, and its hashes). A plain
    class, not a record: a long session's table makes one per row, and a record's `__init__` sets each of its eleven
    fields through `object.__setattr__` (callgrind of a 1,062-row table: 12M of ~440M instructions)."""

    __slots__ = ("at", "check", "data", "decision", "duration_ms", "kind", "outcome", "seq", "summary", "tool", "turn")

    def __init__(self, seq: int, at: datetime, turn: int, kind: str, tool: str | None, decision: str | None,
                 check: str | None, outcome: str | None, duration_ms: float | None, summary: str,
                 data: Any) -> None:
        self.seq = seq
        self.at = at
        self.turn = turn
        self.kind = kind
        self.tool = tool
        self.decision = decision
        self.check = check
        self.outcome = outcome
        self.duration_ms = duration_ms
        self.summary = summary
        self.data = data


@record(slots=True)
class Holder:
    """A lease's holder as the session row records it (memory/rows.py LeaseHolder)."""

    pid: int
    host: str
    proc_start: str
    boot_id: str
    pid_ns: str
    expires_at: datetime


@record(slots=True)
class SessionRow:
    """A session's row as memory/rows.py `session_from_row` reads it."""

    id: str
    created_at: datetime
    updated_at: datetime
    mode: str
    workspace: str
    model: str
    title: str
    parent_id: str | None
    fork_seq: int | None
    status: str
    lease: Holder | None


@record(slots=True)
class Counts:
    """What `strata sessions` counts of a session (core/state.py Counters has these among its guards)."""

    assistant_turns: int
    tool_calls: int
    denials: int


def _words(kind: Any) -> tuple[str, ...]:
    """The strings a Literal (or a union of them) allows."""
    return tuple(w for arg in get_args(kind) for w in ((arg,) if isinstance(arg, str) else _words(arg)))


def _listed(words: tuple[str, ...]) -> str:
    return ", ".join("'" + w + "'" for w in words)


@record(slots=True)
class QuickReceipt:
    """A receipt's row as memory/rows.py `receipt_from_row` reads it into a Receipt, its process group as the JSON
    object that Receipt's `process.model_dump(mode="json")` gives."""

    id: str
    session_id: str
    call_id: str
    tool: str
    status: str
    idempotency_key: str
    args_sha256: str
    resource_keys: tuple[str, ...]
    created_at: datetime
    updated_at: datetime
    outcome_sha256: str | None
    note: str | None
    reconciled_by: str | None
    process: dict[str, Any] | None


_NOT_AS_STORED = (
    "SELECT count(*) FROM sessions WHERE typeof(id) <> 'text' OR typeof(created_at) <> 'text' "
    "OR typeof(updated_at) <> 'text' OR typeof(workspace) <> 'text' OR typeof(model) <> 'text' "
    "OR typeof(title) <> 'text' OR typeof(parent_id) NOT IN ('text', 'null') "
    "OR typeof(fork_seq) NOT IN ('integer', 'null') "
    f"OR COALESCE(mode, '') NOT IN ({_listed(_words(Mode))}) "
    f"OR COALESCE(status, '') NOT IN ({_listed(_words(SessionStatus))}) "
    "OR (lease_token IS NOT NULL AND lease_token <> '' AND (typeof(lease_token) <> 'text' "
    "OR typeof(lease_pid) <> 'integer' OR typeof(lease_host) <> 'text' OR typeof(lease_expires) <> 'text' "
    "OR typeof(lease_proc_start) NOT IN ('text', 'null') OR typeof(lease_boot) NOT IN ('text', 'null') "
    "OR typeof(lease_pid_ns) NOT IN ('text', 'null')))"
)
"""Session rows the store would not read back (memory/rows.py `session_from_row` validates each into a
SessionRecord, and a row edited into something else fails every full listing and look-up): any of them, and the
quick way leaves the command to the full way, which reports it."""

"""A stored word as its text (memory/_encoding.py `Words`)."""
_TURNS = ("assistant_message", "batch_proposed")
"""The events the fold counts as a model turn (core/state.py `apply`); a `call_result` is a tool call, a denial
when its status is `denied`."""
_RESULT = tuple(EVENT_KINDS.matching(("call_result",)))
"""A call result's kind as the table may hold it: its number (memory/_encoding.py `Words`) or its text."""


class QuickRead:
    """An open read-only connection to a current database (see `open`)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    @classmethod
    def open(cls, path: Path) -> QuickRead | None:
        """The database read-only, or None when the full way must open it: no file, a schema this Strata must
        migrate before it reads it (memory/migrations.py `read_as_is`) or does not know, or any error opening it."""
        if not path.is_file():
            return None
        try:
            conn = _read_only.connect(str(path), timeout_s=QUICK_BUSY_S)
        except sqlite3.Error:
            return None
        try:
            if read_as_is(int(conn.execute("PRAGMA user_version").fetchone()[0])):
                return cls(conn)
        except sqlite3.Error:
            pass
        conn.close()
        return None

    def close(self) -> None:
        self._conn.close()

    def kinds_held(self, num: int, kinds: Collection[str]) -> set[str]:
        where, params = timeline_filter(num << SEQ_BITS, kinds=kinds)
        return {TIMELINE_KINDS.unpack(row[0])
                for row in self._conn.execute(f"SELECT DISTINCT kind FROM timeline WHERE {where}", params)}

    def timeline(self, num: int, *, kinds: Collection[str] | None = None,
                 tools: Collection[str] | None = None, decisions: Collection[str] | None = None,
                 turn: int | None = None, since_seq: int | None = None,
                 since_at: datetime | None = None) -> list[ShownRow] | None:
        """The session's rows in seq order, filtered as the store filters them; None when a row is not as the
        store writes it (the full way reads such a row unvalidated, for `--verify` to name)."""
        where, params = timeline_filter(num << SEQ_BITS, kinds=kinds, tools=tools, decisions=decisions,
                                        turn=turn, since_seq=since_seq,
                                        since_at=None if since_at is None else canonical_time(since_at))
        cursor = self._conn.execute(
            "SELECT key, at, turn, kind, tool, decision, check_name, outcome, duration_ms, summary, data, call_id "
            f"FROM timeline WHERE {where} ORDER BY key", params)
        rows = []
        try:
            for key, at, turn_, kind, tool, decision, check, outcome, duration, summary, data, call_id in cursor:
                kind, check, outcome, data = timeline_words(kind, check, outcome, data)
                values = stored_data(kind, check, data)
                row = ShownRow(key & SEQ_MASK, stored_datetime(at), turn_, kind, tool, decision, check, outcome,
                               duration, unpack_summary(summary, outcome, tool, values), values)
                if not _as_written(row, call_id):
                    return None
                rows.append(row)
        except (TypeError, ValueError, OverflowError):
            return None
        return rows

    def timeline_records(self, session_id: str, num: int, *, kinds: Collection[str] | None = None,
                         tools: Collection[str] | None = None, decisions: Collection[str] | None = None,
                         turn: int | None = None, since_seq: int | None = None,
                         since_at: datetime | None = None) -> list[dict[str, Any]] | None:
        """The session's rows as `strata timeline --json` prints them before masking (observability/
        session_timeline.py `timeline_record` of the store's TimelineRow): the same rows, each field as the row's
        model holds it (a whole-number duration is a float there), the `prev_hash` the table leaves out filled in
        as the store fills it. None when a row is not as the store writes it (the full way reports it)."""
        where, params = timeline_filter(num << SEQ_BITS, kinds=kinds, tools=tools, decisions=decisions, turn=turn,
                                        since_seq=since_seq,
                                        since_at=None if since_at is None else canonical_time(since_at))
        stored = self._conn.execute(f"SELECT {TIMELINE_COLS} FROM timeline WHERE {where} ORDER BY key",
                                    params).fetchall()
        records = []
        try:
            for (key, kind, turn_, tool, decision, at, call_id, check, outcome, duration, prev_hash, digest,
                 summary, data) in with_prev_hash(self._conn, stored):
                kind, check, outcome, data = timeline_words(kind, check, outcome, data)
                values = stored_data(kind, check, data)
                stamp = stored_datetime(at)
                row = ShownRow(key & SEQ_MASK, stamp, turn_, kind, tool, decision, check, outcome, duration,
                               unpack_summary(summary, outcome, tool, values), values)
                if not _as_written(row, call_id):
                    return None
                records.append({
                    "session_id": session_id, "seq": row.seq, "at": canonical_time(stamp), "turn": turn_,
                    "kind": kind, "call_id": call_id, "tool": tool, "decision": decision, "check": check,
                    "outcome": outcome, "duration_ms": None if duration is None else float(duration),
                    "summary": row.summary, "data": values, "prev_hash": unpack_hash(prev_hash),
                    "hash": unpack_hash(digest)})
        except (TypeError, ValueError, OverflowError):
            return None
        return records

    def check_sessions(self) -> None:
        """ValueError when a session row is not as the store writes it (`_NOT_AS_STORED`, a time that is not ISO
        text): the full way reads every row (to list them, or to resolve an id) and fails on such a one."""
        if self._conn.execute(_NOT_AS_STORED).fetchone()[0]:
            raise ValueError("a session row is not as the store writes it")
        for created, updated, token, expires in self._conn.execute(
                "SELECT created_at, updated_at, lease_token, lease_expires FROM sessions"):
            datetime.fromisoformat(created), datetime.fromisoformat(updated)
            if token:
                datetime.fromisoformat(expires)

    def session_rows(self, *, exact: str | None = None, prefix: str | None = None) -> list[tuple[SessionRow, int]]:
        """Every session as the store lists them (oldest first), each with its number in the tables' keys; or the
        one with id `exact`, or those whose id starts with `prefix`. Raises ValueError when any session row is not
        as the store writes it (`check_sessions`)."""
        self.check_sessions()
        where: tuple[str, tuple[Any, ...]] = ("", ())
        if exact is not None:
            where = ("WHERE id = ?", (exact,))
        elif prefix is not None:
            where = ("WHERE substr(id, 1, ?) = ?", (len(prefix), prefix))
        rows = self._conn.execute(f"SELECT {SESSION_SELECT}, num FROM sessions {where[0]} ORDER BY created_at, id",
                                  where[1]).fetchall()
        out = []
        for (sid, created, updated, mode, workspace, model, title, parent, fork_seq, status,
             token, pid, host, proc_start, expires, boot, pid_ns, num) in rows:
            lease = (Holder(pid, host, proc_start or "", boot or "", pid_ns or "", datetime.fromisoformat(expires))
                     if token else None)
            out.append((SessionRow(sid, datetime.fromisoformat(created), datetime.fromisoformat(updated), mode,
                                   workspace, model, title, parent, fork_seq, status, lease), num))
        return out

    def unknown_receipts(self) -> dict[str, int]:
        """Receipts whose outcome is unknown, per session. Raises ValueError when one is not as the store writes
        it (`_receipt_as_stored`): the full way reads each into a Receipt and fails there."""
        found: dict[str, int] = {}
        for row in self._conn.execute(
                "SELECT session_id, id, call_id, tool, idempotency_key, args_sha256, created_at, updated_at, "
                "resource_keys, outcome_sha256, note, reconciled_by, process FROM receipts WHERE status = 'unknown'"):
            _receipt_as_stored(row)
            found[row[0]] = found.get(row[0], 0) + 1
        return found

    def receipts(self, session_id: str | None = None, status: str | None = None) -> list[QuickReceipt]:
        """The receipts the store lists (memory/sqlite_store.py `list_receipts`: the same filter and order). Raises
        ValueError when one is not as the store writes it: the full way reads each into a Receipt and fails
        there."""
        where, params = receipts_filter(session_id, status)
        found = []
        for row in self._conn.execute(
                "SELECT session_id, id, call_id, tool, idempotency_key, args_sha256, created_at, updated_at, "
                f"resource_keys, outcome_sha256, note, reconciled_by, process, status FROM receipts {where} "
                "ORDER BY created_at, id", params):
            *stored, status_ = row
            _receipt_as_stored(tuple(stored))
            if status_ not in RECEIPT_STATUSES:
                raise ValueError("a receipt's status is not one the store writes")
            (sid, rid, call_id, tool, key, args_sha, created, updated, keys, outcome, note, by, process) = stored
            group = None if process is None else json.loads(process)
            if group is not None:
                json.dumps(group, ensure_ascii=False).encode("utf-8")  # a lone surrogate: UnicodeEncodeError
            found.append(QuickReceipt(rid, sid, call_id, tool, status_, key, args_sha, tuple(json.loads(keys)),
                                      datetime.fromisoformat(created), datetime.fromisoformat(updated), outcome,
                                      note, by, group))
        return found

    def awaited_children(self) -> dict[str, str]:
        """The child each session's `dispatched` delegate receipt names (the child its open batch waits on), as the
        full way finds it (agent/cli/inspect_cmds.py). Raises ValueError when a receipt is not as the store writes
        it."""
        found: dict[str, str] = {}
        for row in self._conn.execute(
                "SELECT session_id, id, call_id, tool, idempotency_key, args_sha256, created_at, updated_at, "
                "resource_keys, outcome_sha256, note, reconciled_by, process FROM receipts WHERE status = 'dispatched' "
                "AND tool = ? ORDER BY created_at, id", (DELEGATE,)):
            _receipt_as_stored(row)
            keys = json.loads(row[8])
            if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
                raise ValueError("a receipt's resource keys are not as the store writes them")
            if (child := child_of(keys)) is not None:
                found.setdefault(row[0], child)
        return found

    def counts(self, num: int) -> Counts | None:
        """The session's turns, calls and denials as restoring its state counts them: the latest snapshot's
        counters (when it is current and at the seq it claims, else none, as restore ignores it) plus the events
        after it. None when an event there is not JSON (restore fails on it: the listing shows '?'). Raises
        ValueError for an event of another schema version (the full way knows how to read it)."""
        base = num << SEQ_BITS
        start, turns, calls, denials = 0, 0, 0, 0
        snap = self._conn.execute("SELECT key, version, data FROM snapshots WHERE key BETWEEN ? AND ? "
                                  "ORDER BY key DESC LIMIT 1", (base, base | SEQ_MASK)).fetchone()
        if snap is not None and snap[1] == SNAPSHOT_VERSION:
            try:
                head = json.loads(unpack_snapshot(bytes(snap[2])).partition(b"\n")[0])
                counters = head["counters"]
                counted = (counters["assistant_turns"], counters["tool_calls"], counters["denials"])
                if (head.get("started") is True and head.get("last_seq") == snap[0] & SEQ_MASK
                        and all(type(n) is int for n in counted)):  # as core/snapshot_head.py reads them
                    start = snap[0] & SEQ_MASK
                    turns, calls, denials = counted
            except (ValueError, TypeError, KeyError, AttributeError, RecursionError):  # restore folds the log
                pass
        (more_turns, more_calls, more_denials, damaged, other_version) = self._conn.execute(
            "SELECT count(*) FILTER (WHERE kind IN (?, ?, ?, ?)), count(*) FILTER (WHERE kind IN (?, ?)), "
            "count(*) FILTER (WHERE kind IN (?, ?) AND json_valid(payload) "
            "AND json_extract(payload, '$.status') = 'denied'), count(*) FILTER (WHERE NOT json_valid(payload)), "
            "count(*) FILTER (WHERE schema_version <> ?) FROM events WHERE key > ? AND key <= ?",
            (*EVENT_KINDS.matching(_TURNS), *_RESULT, *_RESULT, EVENT_SCHEMA_VERSION, base | start,
             base | SEQ_MASK)).fetchone()
        if other_version:
            raise ValueError("an event of another schema version")
        if damaged:
            return None
        return Counts(turns + more_turns, calls + more_calls, denials + more_denials)


def _as_written(row: ShownRow, call_id: object) -> bool:
    """Whether a row holds what core/timeline.py TimelineRow allows, as the store writes it (the full way reports
    any other row as damaged: memory/timeline_rows.py)."""
    duration = row.duration_ms
    return (type(row.turn) is int and type(row.kind) is str and type(row.summary) is str
            and type(row.data) is dict and (row.decision is None or row.decision in TIMELINE_DECISIONS)
            and (row.tool is None or type(row.tool) is str) and (row.check is None or type(row.check) is str)
            and (row.outcome is None or type(row.outcome) is str) and (call_id is None or type(call_id) is str)
            and (duration is None or (type(duration) in (int, float) and math.isfinite(duration))))


_PROCESS_FIELDS = {"pid": int, "pgid": int, "start": str, "boot_id": str, "pid_ns": str, "host": str}
"""A receipt's recorded process group as core/processes.py ProcessGroup has it."""


def _receipt_as_stored(row: tuple[Any, ...]) -> None:
    """ValueError unless the row reads back as memory/rows.py `receipt_from_row` reads it: text ids, ISO times,
    a JSON list of texts for the resource keys, no process or one with ProcessGroup's fields."""
    *texts, created, updated, keys, outcome, note, by, process = row
    if not all(type(v) is str for v in (*texts, created, updated, keys)) or any(
            v is not None and type(v) is not str for v in (outcome, note, by, process)):
        raise ValueError("a receipt row is not as the store writes it")
    datetime.fromisoformat(created), datetime.fromisoformat(updated)
    listed = json.loads(keys)
    if type(listed) is not list or not all(type(k) is str for k in listed):
        raise ValueError("a receipt's resource keys are not a list of texts")
    if process is not None:
        group = json.loads(process)
        if type(group) is not dict or set(group) != set(_PROCESS_FIELDS) or not all(
                type(group[name]) is kind for name, kind in _PROCESS_FIELDS.items()):
            raise ValueError("a receipt's process group is not as the store writes it")


def open_home() -> tuple[QuickConfig, QuickRead] | None:
    """The config a quick way may use (config/quick.py) and its home's database opened read-only; None when
    either is for the full way."""
    config = quick_config()
    if config is None:
        return None
    db = QuickRead.open(config.db_path)
    return None if db is None else (config, db)
