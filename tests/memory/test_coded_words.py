"""Schema 10 (memory/_encoding.py `Words`, migration 010): an event's and a timeline row's kind, a timeline row's
outcome and a call row's default check are stored as numbers, a timeline row's empty data as NULL. With a real
file: the stored values are the numbers, the store and the views give the words back, a filter finds a row whether
its word is a number or text, and an edit of a number is named by verify."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from core.events import SessionStarted, UserMessage
from core.timeline import TimelineEntry
from memory import SqliteEventStore, Write
from memory._encoding import CHECKS, EVENT_KINDS, OUTCOMES, TIMELINE_KINDS, WORD_LISTS, Words
from observability.chain_verify import verify_chains
from tests.memory._sqlite import raw, record

CHECK = "default: read tools are allowed in headless mode"
ROWS = [TimelineEntry(kind="phase", turn=1, outcome="act", summary="act: read"),
        TimelineEntry(kind="call", turn=1, tool="read", call_id="c1", decision="allowed", check=CHECK, outcome="ok",
                      summary="read -> ok", data={"n": 1}),
        TimelineEntry(kind="call", turn=1, tool="read", call_id="c2", decision="allowed", check="rule 3: allow read",
                      outcome="ok, cached", summary="read -> ok", data={"n": 2}),
        TimelineEntry(kind="other", turn=1, outcome="a word of no list", summary="other")]


async def _store(db: Path) -> SqliteEventStore:
    store = await SqliteEventStore.open(db)
    started = SessionStarted(session_id="s1", mode="headless", workspace="/ws", model="script:test", max_turns=5,
                             plan_digest="p")
    await store.create_session(record("s1"), Write(events=[(started, 0), (UserMessage(text="hi"), 0)], timeline=ROWS))
    return store


def test_a_word_is_its_number_and_anything_else_stays_as_it_is() -> None:
    words = Words("test", "a", "b")
    assert [words.pack(v) for v in ("a", "b", "c", None, "")] == [0, 1, "c", None, ""]
    assert [words.unpack(v) for v in (0, 1, "c", None, 7, "0")] == ["a", "b", "c", None, 7, "0"]
    assert words.matching(["b", "c"]) == [1, "b", "c"]
    for listed in WORD_LISTS:  # each list's words are distinct (a word has one number) and its name unique
        assert len(set(listed.words)) == len(listed.words)
    assert len({w.name for w in WORD_LISTS}) == len(WORD_LISTS)


async def test_words_are_stored_as_numbers_and_read_back_through_the_store_and_the_views(db_path: Path) -> None:
    store = await _store(db_path)
    try:
        read = await store.read_timeline("s1")
        events = await store.read_event_chain("s1")
        assert (await verify_chains(store, "s1", None)).ok
    finally:
        await store.close()
    assert [(r.kind, r.outcome, r.check, r.data) for r in read] == [(e.kind, e.outcome, e.check, e.data)
                                                                    for e in ROWS]
    assert [e.kind for e in events] == ["session_started", "user_message"]
    with raw(db_path) as conn:
        stored = conn.execute("SELECT kind, outcome, check_name, data FROM timeline ORDER BY key").fetchall()
        assert stored == [(TIMELINE_KINDS.pack("phase"), OUTCOMES.pack("act"), None, None),
                          (TIMELINE_KINDS.pack("call"), OUTCOMES.pack("ok"), CHECKS.pack(CHECK), '{"n":1}'),
                          (TIMELINE_KINDS.pack("call"), "ok, cached", "rule 3: allow read", '{"n":2}'),
                          (TIMELINE_KINDS.pack("other"), "a word of no list", None, None)]
        assert all(type(k) is int for (k,) in conn.execute("SELECT kind FROM events"))
        shown = conn.execute("SELECT kind, outcome, check_name, data FROM session_timeline ORDER BY seq").fetchall()
        assert shown == [(e.kind, e.outcome, e.check, "{}" if not e.data else f'{{"n":{e.data["n"]}}}')
                         for e in ROWS]
        assert [k for (k,) in conn.execute("SELECT kind FROM session_events ORDER BY seq")] == [
            "session_started", "user_message"]


async def test_a_word_kept_as_text_reads_filters_and_verifies_as_its_number_does(db_path: Path) -> None:
    """A row whose word is text (an older database's, or one copied as text) is the same row: a filter by the word
    finds it, and its hash matches."""
    await (await _store(db_path)).close()
    with closing(sqlite3.connect(db_path, isolation_level=None)) as conn:
        conn.execute("DROP TRIGGER timeline_no_update")
        conn.execute("UPDATE timeline SET kind = 'call', outcome = 'ok' WHERE key & 1099511627775 = 2")
    store = await SqliteEventStore.open(db_path)
    try:
        calls = await store.read_timeline("s1", kinds=["call"])
        assert [r.seq for r in calls] == [2, 3]
        assert (await verify_chains(store, "s1", None)).ok
    finally:
        await store.close()


@pytest.mark.parametrize(("edit", "seq"), [("UPDATE timeline SET kind = 1 WHERE key & 1099511627775 = 1", 1),
                                         ("UPDATE timeline SET outcome = 99 WHERE key & 1099511627775 = 2", 2),
                                         ("UPDATE timeline SET check_name = 1 WHERE key & 1099511627775 = 2", 2),
                                         ("UPDATE timeline SET data = NULL WHERE key & 1099511627775 = 3", 3)])
async def test_an_edit_of_a_stored_number_is_named_by_verify(db_path: Path, edit: str, seq: int) -> None:
    await (await _store(db_path)).close()
    with closing(sqlite3.connect(db_path, isolation_level=None)) as conn:
        conn.execute("DROP TRIGGER timeline_no_update")
        conn.execute(edit)
    store = await SqliteEventStore.open(db_path)
    try:
        problems = (await verify_chains(store, "s1", None)).problems
    finally:
        await store.close()
    assert problems and f"row {seq} was changed (hash mismatch)" in problems[0], problems


async def test_an_edit_of_an_event_kind_number_is_named_by_verify(db_path: Path) -> None:
    await (await _store(db_path)).close()
    with closing(sqlite3.connect(db_path, isolation_level=None)) as conn:
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute("UPDATE events SET kind = ? WHERE seq = 2", (EVENT_KINDS.pack("assistant_message"),))
    store = await SqliteEventStore.open(db_path)
    try:
        problems = (await verify_chains(store, "s1", None)).problems
    finally:
        await store.close()
    assert problems and "event 2" in problems[0], problems
