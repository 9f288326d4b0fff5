"""Schema 9 (memory/migrations.py `_m009_packed_summaries`, memory/_encoding.py `pack_summary`, `pack_data`) with
real files: a timeline row's summary that repeats its outcome, its tool or its data's batch id is stored as a
shorter BLOB, and a model attempt's token usage as the list of its counts, each read back as exactly what it was; a
schema-8 database (every summary text, every usage by name) opens, upgrades and reads and verifies the same; the
view shows them written out; and an edit to a packed value, or to one it is written out from, is named by verify."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from core.clock import SteppingClock
from core.events import SessionStarted, UserMessage
from core.timeline import TimelineEntry, TimelineRow, canonical_time
from memory import SqliteEventStore, Write, migrations
from memory._encoding import TIMELINE_KINDS, pack_summary, unpack_summary
from memory.quick_read import QuickRead
from observability.chain_verify import verify_chains
from tests.memory._sqlite import T0, raw, record

SEQ = "key & 1099511627775"
BATCH = "01a24974-5574-7000-bd84-4444fbcf42b1"
USAGE = {"number": 1, "usage": {"input_tokens": 1200, "output_tokens": 85, "cache_read_tokens": 0,
                                "cache_write_tokens": 7}}
ODD_USAGE = {"number": 2, "usage": {"input_tokens": 1, "output_tokens": True}}  # not packed: kept as it is


def _writes(session_id: str) -> list[Write]:
    started = SessionStarted(session_id=session_id, mode="headless", workspace="/ws", model="script:test",
                             max_turns=5, plan_digest="p")
    turn = [TimelineEntry(kind="phase", turn=1, outcome="perceive", summary="perceive: 3 messages, 2 tools"),
            TimelineEntry(kind="phase", turn=1, outcome="commit", summary=f"commit: batch {BATCH} with 1 call(s)",
                          data={"batch_id": BATCH, "calls": ["toolu_1"]}),
            TimelineEntry(kind="phase", turn=1, outcome="act", summary="act: read"),
            TimelineEntry(kind="call", turn=1, tool="read", call_id="toolu_1", outcome="ok", decision="allowed",
                          check="default: read tools are allowed", duration_ms=0.5,
                          summary='read {"path": "ä"} -> ok: fine', data={"n": 1}),
            TimelineEntry(kind="phase", turn=1, outcome="observe", summary=f"observe: batch {BATCH} closed",
                          data={"batch_id": BATCH}),
            # Not packed: nothing repeated, a mark character of its own, an outcome that is only a word in it.
            TimelineEntry(kind="model_attempt", turn=1, outcome="ok", summary="scripted turn 1", data=USAGE),
            TimelineEntry(kind="model_attempt", turn=1, outcome="ok", summary="x", data=ODD_USAGE),
            TimelineEntry(kind="phase", turn=1, outcome="reflect", summary="reflect:\x01complete"),
            TimelineEntry(kind="lifecycle", turn=1, outcome="ended", summary="session ended")]
    return [Write(events=[(started, 0), (UserMessage(text="hello"), 0)], timeline=turn[:3]),
            Write(events=[(UserMessage(text="more"), 1)], timeline=turn[3:])]


async def _made(db_path: Path) -> list[TimelineRow]:
    store = await SqliteEventStore.open(db_path, clock=SteppingClock(start=T0))
    try:
        first, rest = _writes("s1")
        await store.create_session(record("s1"), first)
        await store.commit("s1", rest)
        report = await verify_chains(store, "s1", None)
        assert report.ok, report.problems
        return list(await store.read_timeline("s1"))
    finally:
        await store.close()


def test_a_summary_the_loop_makes_from_the_row_is_stored_as_null_and_read_back_as_that_text() -> None:
    made = [("commit: batch b-1 with 2 call(s)", "commit", {"batch_id": "b-1", "calls": ["c1", "c2"]}),
            ("observe: batch b-1 closed", "observe", {"batch_id": "b-1"})]
    for summary, outcome, data in made:
        assert pack_summary(summary, outcome, None, data) is None
        assert unpack_summary(None, outcome, None, data) == summary
    not_made = [("commit: batch b-1 with 1 call(s)", "commit", None, {"batch_id": "b-1", "calls": ["c1", "c2"]}),
                ("commit: batch b-1 with 1 call(s)", "commit", None, {"batch_id": "b-1", "calls": ["c"], "x": 1}),
                ("observe: batch b-1 closed", "observe", "read", {"batch_id": "b-1"}),
                ("observe: batch b-1 closed", "observe", None, {"batch_id": "b-1", "calls": []}),
                ("observe: batch b-1 closed", "act", None, {"batch_id": "b-1"}),
                ("observe: batch 7 closed", "observe", None, {"batch_id": 7})]
    for summary, outcome, tool, data in not_made:
        assert pack_summary(summary, outcome, tool, data) is not None
        assert unpack_summary(pack_summary(summary, outcome, tool, data), outcome, tool, data) == summary
    # NULL where the row makes no summary (edited behind the store's back): None, so the row reads as damaged.
    assert unpack_summary(None, "act", None, {"batch_id": "b-1"}) is None
    assert unpack_summary(None, "observe", None, {}) is None


def test_a_summary_packs_only_what_comes_back_exactly() -> None:
    cases = [("commit: batch b-1 with 1 call(s)", "commit", None, {"batch_id": "b-1"},
              b"\x01batch \x03 with 1 call(s)"),
             ('read {"n": 1} -> ok: ok', "ok", "read", {}, b'\x02{"n": 1} -> ok: ok'),
             ("b-1 and b-1 again", None, None, {"batch_id": "b-1"}, b"\x03 and \x03 again"),
             ("ok", "ok", None, {}, "ok"),  # no room to save: kept as text
             ("a\x03b: c", "a\x03b", None, {}, "a\x03b: c"),  # holds a mark: kept as text
             ("plain words", "done", "read", {"batch_id": 7}, "plain words")]
    for summary, outcome, tool, data, stored in cases:
        assert pack_summary(summary, outcome, tool, data) == stored
        assert unpack_summary(stored, outcome, tool, data) == summary
    # A BLOB that is no packed summary comes back as it is (the row then reads as damaged).
    assert unpack_summary(b"\xff\x01x", "ok", None, {}) == b"\xff\x01x"
    assert unpack_summary(b"\x03 x", "ok", None, {}) == b"\x03 x"
    assert unpack_summary(b"\x02 x", "ok", None, {}) == b"\x02 x"


async def test_new_rows_store_packed_summaries_and_read_and_verify_as_written(tmp_path: Path) -> None:
    db = tmp_path / "strata.db"
    rows = await _made(db)
    first, rest = _writes("s1")
    assert [r.summary for r in rows] == [e.summary for e in [*first.timeline, *rest.timeline]]
    with raw(db) as conn:
        stored = conn.execute(f"SELECT typeof(summary), length(summary) FROM timeline ORDER BY {SEQ}").fetchall()
        # The commit and observe summaries are what the loop makes from their data: NULL (schema 10).
        assert [kind for kind, _ in stored] == ["blob", "null", "blob", "blob", "null"] + ["text"] * 4
        assert stored[0] == ("blob", len("\x013 messages, 2 tools"))
        shown = [s for (s,) in conn.execute("SELECT summary FROM session_timeline ORDER BY seq")]
        assert shown == [r.summary for r in rows]
        data = [d for (d,) in conn.execute(f"SELECT data FROM timeline WHERE kind = ? ORDER BY {SEQ}",
                                           (TIMELINE_KINDS.pack("model_attempt"),))]
        assert data == ['{"number":1,"usage":[0,7,1200,85]}',
                        '{"number":2,"usage":{"input_tokens":1,"output_tokens":true}}']
        shown = [json.loads(d) for (d,) in conn.execute(
            "SELECT data FROM session_timeline WHERE kind = 'model_attempt' ORDER BY seq")]
        assert shown == [USAGE, ODD_USAGE]
    assert [r.data for r in rows if r.kind == "model_attempt"] == [USAGE, ODD_USAGE]
    quick = QuickRead.open(db)
    assert quick is not None
    try:
        ((_, num),) = quick.session_rows(exact="s1")
        shown_rows = quick.timeline(num)
        assert shown_rows is not None
        assert [r.summary for r in shown_rows] == [r.summary for r in rows]
    finally:
        quick.close()


def _as_schema_8(new: Path, old: Path) -> None:
    """The same database as schema 8 wrote it: the first eight migrations, then every row as it is, its summary
    as text, its data with any usage by name and its words (kind, outcome, check) as text (taken from the views,
    which write packed ones out)."""
    with closing(sqlite3.connect(old, isolation_level=None)) as conn, closing(sqlite3.connect(new)) as src:
        conn.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
        for name, migration in migrations.MIGRATIONS[:8]:
            migration(conn)
            conn.execute("INSERT INTO schema_migrations(name, applied_at) VALUES (?, ?)", (name, canonical_time(T0)))
        conn.execute("PRAGMA user_version = 8")
        for table in ("sessions", "chain_key"):
            names = [r[1] for r in src.execute(f"PRAGMA table_info({table})")]
            for row in src.execute(f"SELECT {', '.join(names)} FROM {table}"):
                conn.execute(f"INSERT INTO {table}({', '.join(names)}) VALUES ({', '.join('?' * len(names))})", row)
        names = [r[1] for r in src.execute("PRAGMA table_info(events)")]
        picked = ", ".join("v.kind" if n == "kind" else f"e.{n}" for n in names)
        for row in src.execute(f"SELECT {picked} FROM events e JOIN session_events v ON v.seq = e.seq"):
            conn.execute(f"INSERT INTO events({', '.join(names)}) VALUES ({', '.join('?' * len(names))})", row)
        names = [r[1] for r in src.execute("PRAGMA table_info(timeline)")]
        picked = ", ".join(f"v.{n}" if n in ("summary", "data", "kind", "outcome", "check_name") else f"t.{n}"
                           for n in names)
        for row in src.execute(f"SELECT {picked} FROM timeline t JOIN session_timeline v "
                               f"ON v.seq = t.{SEQ} ORDER BY t.pos"):
            conn.execute(f"INSERT INTO timeline({', '.join(names)}) VALUES ({', '.join('?' * len(names))})", row)
    (new.parent / "chain.key").rename(old.parent / "chain.key")


async def test_a_schema_8_database_reads_and_verifies_the_same_after_the_upgrade(tmp_path: Path) -> None:
    (tmp_path / "new").mkdir()
    (tmp_path / "old").mkdir()
    made = await _made(tmp_path / "new" / "strata.db")
    old = tmp_path / "old" / "strata.db"
    _as_schema_8(tmp_path / "new" / "strata.db", old)
    with raw(old) as conn:
        assert conn.execute("SELECT DISTINCT typeof(summary) FROM timeline").fetchall() == [("text",)]
        assert conn.execute("SELECT data FROM timeline WHERE kind = 'model_attempt' LIMIT 1").fetchone() == (
            json.dumps(USAGE, sort_keys=True, separators=(",", ":")),)
    store = await SqliteEventStore.open(old, clock=SteppingClock(start=T0))
    try:
        report = await verify_chains(store, "s1", None)
        assert report.ok, report.problems
        assert list(await store.read_timeline("s1")) == made
        # New rows of the upgraded database are packed, and the whole chain still verifies.
        await store.commit("s1", Write(timeline=[TimelineEntry(kind="phase", turn=2, outcome="act",
                                                               summary="act: read, write")]))
        report = await verify_chains(store, "s1", None)
        assert report.ok, report.problems
    finally:
        await store.close()
    with raw(old) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (len(migrations.MIGRATIONS),)
        assert conn.execute(f"SELECT typeof(summary) FROM timeline ORDER BY {SEQ}").fetchall() == \
            [("text",)] * 9 + [("blob",)]
        assert conn.execute("SELECT summary FROM session_timeline WHERE seq = 10").fetchone() == ("act: read, write",)


async def _problems(db: Path) -> list[str]:
    store = await SqliteEventStore.open(db, clock=SteppingClock(start=T0))
    try:
        return list((await verify_chains(store, "s1", None)).problems)
    finally:
        await store.close()


async def test_an_edit_to_a_packed_summary_or_what_it_is_written_out_from_is_named_by_verify(tmp_path: Path) -> None:
    edits = {  # seq: the edit, behind the store's back
        1: "UPDATE timeline SET summary = CAST(replace(CAST(summary AS TEXT), '3 messages', '9 messages') AS BLOB)",
        2: "UPDATE timeline SET data = replace(data, 'toolu_1', 'toolu_9')",  # a summary made from the data
        5: "UPDATE timeline SET data = '{\"batch_id\":\"01a24974-0000-0000-0000-000000000000\"}'",
        3: "UPDATE timeline SET outcome = 'acted'",
        4: "UPDATE timeline SET summary = X'FF02'",
        6: "UPDATE timeline SET data = replace(data, '1200', '1201')",
        7: "UPDATE timeline SET summary = NULL",  # no summary is made from this row's values
    }
    for seq, edit in edits.items():
        db = tmp_path / f"edit{seq}" / "strata.db"
        db.parent.mkdir()
        await _made(db)
        with raw(db) as conn:
            conn.execute("DROP TRIGGER timeline_no_update")
            conn.execute(f"{edit} WHERE {SEQ} = ?", (seq,))
        problems = await _problems(db)
        assert problems and f"row {seq} was changed (hash mismatch)" in problems[0], (seq, problems)


async def test_a_summary_holding_a_nul_reads_the_same_through_the_view_as_through_the_store(tmp_path: Path) -> None:
    # A call's summary carries the first characters of its output, which may hold a NUL (a binary file read);
    # SQLite's text functions stop at a NUL, so the view would cut such a summary if it were packed.
    db_path = tmp_path / "nul.db"
    store = await SqliteEventStore.open(db_path, clock=SteppingClock(start=T0))
    started = SessionStarted(session_id="s1", mode="headless", workspace="/ws", model="script:test",
                             max_turns=5, plan_digest="p")
    rows = [TimelineEntry(kind="call", turn=1, tool="read", call_id="toolu_1", outcome="ok", decision="allowed",
                          summary='read {"path": "a.bin"} -> ok: PK\x00\x05\x06 after the nul'),
            TimelineEntry(kind="phase", turn=1, outcome="observe", summary=f"observe: batch {BATCH} \x00 closed",
                          data={"batch_id": BATCH})]
    try:
        await store.create_session(record("s1"), Write(events=[(started, 0)], timeline=rows))
        read = [r.summary for r in await store.read_timeline("s1")]
    finally:
        await store.close()
    assert read == [r.summary for r in rows]
    with closing(sqlite3.connect(db_path)) as conn:
        shown = [s for (s,) in conn.execute("SELECT summary FROM session_timeline ORDER BY seq")]
    assert shown == [r.summary for r in rows]


async def test_a_usage_that_only_looks_packed_reads_back_as_written_and_verifies(tmp_path: Path) -> None:
    # The loop writes usage as the counts by name; any other caller of the store (a copy from PostgreSQL, another
    # writer) may have a list there. Four integers, or a list holding a list, must not be read as a packed usage.
    db_path = tmp_path / "usage.db"
    store = await SqliteEventStore.open(db_path, clock=SteppingClock(start=T0))
    started = SessionStarted(session_id="s1", mode="headless", workspace="/ws", model="script:test",
                             max_turns=5, plan_digest="p")
    usages: list[object] = [[1, 2, 3, 4], [[1, 2, 3, 4]], [[[1, 2, 3, 4]]], ["a", "b", "c", "d"], [1.5, 2, 3, 4],
                            USAGE["usage"]]
    rows = [TimelineEntry(kind="model_attempt", turn=1, outcome="ok", summary=f"attempt {n}",
                          data={"number": n, "usage": usage}) for n, usage in enumerate(usages, 1)]
    try:
        await store.create_session(record("s1"), Write(events=[(started, 0)], timeline=rows))
        read = [r.data for r in await store.read_timeline("s1")]
        report = await verify_chains(store, "s1", None)
    finally:
        await store.close()
    assert read == [r.data for r in rows]
    assert report.ok, report.problems
    with closing(sqlite3.connect(db_path)) as conn:
        shown = [json.loads(d) for (d,) in conn.execute("SELECT data FROM session_timeline ORDER BY seq")]
    assert shown == [r.data for r in rows]


class _Text(str):
    """A str subclass: `unpack_summary` writes a mark out only from an exact str."""


class _Data(dict):  # type: ignore[type-arg]
    """A dict subclass: `unpack_summary` writes the batch mark out only from an exact dict."""


_word = st.sampled_from(["ok", "read", "b-1", "commit", ": ", " ", "\x01", "\x03", "\x00", "é", "x"])
_piece = _word | st.just("\ud800")  # a lone surrogate only in the text after the outcome or tool (the store seals
_words = st.lists(_word, max_size=6).map("".join)  # a row into valid text first: core/timeline.py `seal`)


@settings(max_examples=600, deadline=None)
@given(parts=st.lists(_piece, max_size=6), outcome=st.none() | _words, tool=st.none() | _words,
       batch=st.none() | st.integers() | _words, prefix=st.sampled_from(["", "outcome", "tool"]),
       subclass=st.sampled_from(["", "outcome", "tool", "data"]))
def test_a_packed_summary_is_what_decoding_it_gives_back(parts: list[str], outcome: str | None, tool: str | None,
                                                         batch: object, prefix: str, subclass: str) -> None:
    """pack_summary no longer decodes the BLOB it makes to check it: what it stores is what the old check let
    through, for generated rows (summaries starting with the outcome or tool, holding the batch id, marks, NUL,
    lone surrogates; outcome, tool or data of a subclass)."""
    data: dict[str, object] = {} if batch is None else {"batch_id": batch}
    body = "".join(p if p != "b-1" or type(batch) is not str else batch for p in parts)
    summary = (f"{outcome}: {body}" if prefix == "outcome" and outcome else f"{tool} {body}" if prefix == "tool"
               and tool else body)
    if subclass == "outcome" and outcome is not None:
        outcome = _Text(outcome)
    if subclass == "tool" and tool is not None:
        tool = _Text(tool)
    if subclass == "data":
        data = _Data(data)
    stored = pack_summary(summary, outcome, tool, data)
    # The old function: the BLOB kept only if decoding it gives the summary back.
    if type(stored) is bytes:
        assert unpack_summary(stored, outcome, tool, data) == summary
