"""The timeline's hash chain (core/timeline.py), pure: an untouched chain verifies; any edited field, removed,
repeated or reordered row is named; the hash is exactly HMAC-SHA256(key, prev_hash || canonical JSON of the row),
so a chain recomputed without the key (with plain sha256, or under another key) does not verify."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.chain import ChainKey
from core.hashing import canonical_json
from core.timeline import (
    GENESIS_HASH,
    TIMELINE_DECISIONS,
    TimelineEntry,
    TimelineRow,
    canonical_time,
    legacy_row_hash,
    row_hash,
    seal,
    verify_chain,
)
from observability.session_timeline import timeline_record

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SECRET = bytes(range(32))
KEY = ChainKey(SECRET)


def chain(entries: list[TimelineEntry], session_id: str = "s1") -> list[TimelineRow]:
    """Rows as a store writes them: seq 1..n, one time per row, each sealed after the one before."""
    rows, prev = [], GENESIS_HASH
    for seq, e in enumerate(entries, start=1):
        at = T0 + timedelta(milliseconds=seq)
        stored, data, digest = seal(KEY, session_id, seq, canonical_time(at), prev, e)
        rows.append(TimelineRow(session_id=session_id, seq=seq, at=at, prev_hash=prev, hash=digest,
                                **{**stored.model_dump(), "data": json.loads(data)}))
        prev = digest
    return rows


def sample(n: int = 6) -> list[TimelineRow]:
    return chain([TimelineEntry(kind="call", turn=k // 2, call_id=f"c{k}", tool="bash", decision="allowed",
                                check="policy", outcome="ok", duration_ms=1.0 + k, summary=f"row {k}",
                                data={"k": k}) for k in range(n)])


def edited(row: TimelineRow, **update: Any) -> TimelineRow:
    return row.model_copy(update=update)


EDITS: dict[str, Any] = {
    "session_id": "s2", "at": T0 + timedelta(days=1), "kind": "phase", "turn": 99, "call_id": "cX", "tool": "rm",
    "decision": "denied", "check": "hook", "outcome": "error", "duration_ms": 0.5, "summary": "nothing to see",
    "data": {"k": -1}, "prev_hash": "f" * 64, "hash": "e" * 64,
}


def test_untouched_chain_verifies() -> None:
    """A chain as written verifies; the result counts its rows and gives the last hash as the head."""
    rows = sample()
    result = verify_chain(rows, KEY)
    assert (result.ok, result.first_bad_seq, result.reason, result.rows, result.head) == (
        True, None, None, 6, rows[-1].hash)


def test_empty_chain_verifies_with_the_genesis_head() -> None:
    """No rows is a valid (empty) chain."""
    assert verify_chain([], KEY) == verify_chain([], KEY).__class__(ok=True, rows=0, head=GENESIS_HASH)


@pytest.mark.parametrize("field", sorted(EDITS))
@pytest.mark.parametrize("index", [0, 3, 5])
def test_edit_of_any_field_names_that_row(field: str, index: int) -> None:
    """Changing any stored field of a row is reported as that row changed (hash mismatch)."""
    rows = sample()
    rows[index] = edited(rows[index], **{field: EDITS[field]})
    result = verify_chain(rows, KEY)
    assert not result.ok
    assert result.first_bad_seq == index + 1
    assert result.reason == f"row {index + 1} was changed (hash mismatch)"
    assert result.head == (GENESIS_HASH if index == 0 else rows[index - 1].hash)


def test_edited_seq_is_caught() -> None:
    """Renumbering a row (its seq is hashed) is caught at that position."""
    rows = sample()
    rows[2] = edited(rows[2], seq=2)
    assert verify_chain(rows, KEY).reason == "row 2 appears twice"
    rows = sample()
    rows[2] = edited(rows[2], seq=4)
    assert verify_chain(rows, KEY).reason == "row 4 was changed (hash mismatch)"


@pytest.mark.parametrize(("removed", "reason"), [([0], "row 1 is missing"), ([2], "row 3 is missing"),
                                                  ([2, 3], "rows 3-4 are missing")])
def test_removed_rows_are_named(removed: list[int], reason: str) -> None:
    """Deleting rows leaves a gap in seq, reported with the first missing seq."""
    rows = [r for k, r in enumerate(sample()) if k not in removed]
    result = verify_chain(rows, KEY)
    assert (result.ok, result.first_bad_seq, result.reason) == (False, removed[0] + 1, reason)


def test_removed_row_with_renumbered_successors_is_caught() -> None:
    """Deleting a row and renumbering the rest (without re-hashing) breaks the next row's hash."""
    rows = sample()
    del rows[2]
    rows = rows[:2] + [edited(r, seq=r.seq - 1) for r in rows[2:]]
    assert verify_chain(rows, KEY).reason == "row 3 was changed (hash mismatch)"


def test_rewritten_row_is_caught_at_the_next_link() -> None:
    """A row edited and re-hashed on its own still breaks the link from the row after it."""
    rows = sample()
    forged = edited(rows[2], summary="forged")
    rows[2] = edited(forged, hash=row_hash(KEY, forged.prev_hash, forged))
    result = verify_chain(rows, KEY)
    assert result.first_bad_seq == 4
    assert result.reason is not None and result.reason.startswith("row 4 does not follow row 3 (prev_hash mismatch")


def test_reordered_rows_are_caught() -> None:
    """Two rows swapped in the stored order fail at the first position out of place."""
    rows = sample()
    rows[2], rows[3] = rows[3], rows[2]
    result = verify_chain(rows, KEY)
    assert (result.ok, result.first_bad_seq) == (False, 3)


def test_repeated_row_is_caught() -> None:
    """A row that appears twice is named."""
    rows = sample()
    rows.insert(3, rows[2])
    assert verify_chain(rows, KEY).reason == "row 3 appears twice"


def test_row_from_another_session_is_caught() -> None:
    """A row copied from another session's chain does not verify in this one."""
    rows = sample()
    rows[1] = chain([TimelineEntry(kind="call")] * 2, session_id="s2")[1]
    assert verify_chain(rows, KEY).first_bad_seq == 2


def test_removing_the_newest_rows_changes_only_the_head() -> None:
    """The chain alone cannot see that its newest rows were removed; the head it reports then differs from the
    head recorded before, which is what an anchor kept elsewhere compares."""
    rows = sample()
    result = verify_chain(rows[:-2], KEY)
    assert result.ok and result.rows == 4
    assert result.head != verify_chain(rows, KEY).head


# -- the hash format -----------------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
entries = st.builds(
    TimelineEntry,
    kind=st.sampled_from(["phase", "model_attempt", "call", "hook", "approval", "receipt", "lifecycle"]),
    turn=st.integers(0, 500),
    call_id=st.none() | st.text(max_size=10),
    tool=st.none() | st.text(max_size=10),
    decision=st.none() | st.sampled_from(TIMELINE_DECISIONS),
    check=st.none() | st.text(max_size=10),
    outcome=st.none() | st.text(max_size=10),
    duration_ms=st.none() | st.floats(min_value=0, max_value=1e7) | st.integers(0, 10**6),
    summary=st.text(max_size=40),
    data=st.dictionaries(st.text(max_size=6), json_values, max_size=4),
)


@settings(max_examples=60, deadline=None)
@given(entries, st.text(alphabet="0123456789abcdef", min_size=64, max_size=64))
def test_hash_is_the_hmac_of_prev_hash_and_the_canonical_json_line(entry: TimelineEntry, prev: str) -> None:
    """The stored hash is HMAC-SHA256(key, prev_hash || canonical JSON of the `--json` object without "hash"),
    so whoever holds the key can re-check a row from the CLI output; the store's fast path and row_hash agree."""
    (row,) = chain([entry])
    row = edited(row, prev_hash=prev, hash=seal(KEY, "s1", 1, canonical_time(row.at), prev, entry)[2])
    record = timeline_record(row)
    del record["hash"]
    expected = hmac.new(SECRET, (prev + canonical_json(record)).encode("utf-8"), hashlib.sha256).hexdigest()
    assert row.hash == row_hash(KEY, prev, row) == expected


field_edits = st.sampled_from(sorted(set(EDITS) - {"hash", "prev_hash"})).flatmap(
    lambda name: st.tuples(st.just(name), {
        "session_id": st.text(min_size=1, max_size=6), "at": st.datetimes(timezones=st.just(UTC)),
        "kind": st.text(max_size=8), "turn": st.integers(0, 10**6), "call_id": st.none() | st.text(max_size=6),
        "tool": st.none() | st.text(max_size=6), "decision": st.none() | st.sampled_from(TIMELINE_DECISIONS),
        "check": st.none() | st.text(max_size=6), "outcome": st.none() | st.text(max_size=6),
        "duration_ms": st.none() | st.floats(allow_nan=False, allow_infinity=False),
        "summary": st.text(max_size=20), "data": st.dictionaries(st.text(max_size=4), json_values, max_size=3),
    }[name]))


@settings(max_examples=100, deadline=None)
@given(st.lists(entries, min_size=1, max_size=12), st.data())
def test_any_random_edit_names_the_edited_row(items: list[TimelineEntry], data: st.DataObject) -> None:
    """Whatever field of whichever row is changed to whatever other value, that row is the first bad one."""
    rows = chain(items)
    index = data.draw(st.integers(0, len(rows) - 1))
    name, value = data.draw(field_edits)
    original = rows[index]
    changed = edited(original, **{name: value})
    if timeline_record(changed) == timeline_record(original):
        return  # the drawn value equals the stored one (after normalisation): not an edit
    rows[index] = changed
    result = verify_chain(rows, KEY)
    assert (result.ok, result.first_bad_seq) == (False, index + 1), (name, value, result)


@settings(max_examples=60, deadline=None)
@given(st.lists(entries, min_size=2, max_size=12), st.data())
def test_any_removed_row_but_the_newest_is_named(items: list[TimelineEntry], data: st.DataObject) -> None:
    """Removing any row that has a successor is reported as that seq missing."""
    rows = chain(items)
    index = data.draw(st.integers(0, len(rows) - 2))
    del rows[index]
    result = verify_chain(rows, KEY)
    assert (result.ok, result.first_bad_seq, result.reason) == (False, index + 1, f"row {index + 1} is missing")


@settings(max_examples=60, deadline=None)
@given(st.fixed_dictionaries({name: json_values for name in
                              ("turn", "call_id", "tool", "decision", "check", "outcome", "duration_ms", "summary",
                               "kind")}),
       st.integers(1, 2**40))
def test_hash_of_a_row_with_any_stored_types_is_still_canonical(values: dict[str, Any], seq: int) -> None:
    """A row read back unvalidated (edited into other types in the database) is keyed over canonical_json of its
    values too, so such an edit is reported as a mismatch rather than crashing or hiding."""
    row = TimelineRow.model_construct(session_id="s1", seq=seq, at=T0, data={"x": 1}, prev_hash=GENESIS_HASH,
                                      hash="", **values)
    record = timeline_record(row)
    del record["hash"]
    if isinstance(record["duration_ms"], int) and not isinstance(record["duration_ms"], bool):
        record["duration_ms"] = float(record["duration_ms"])  # the chain hashes a duration as a float
    expected = hmac.new(SECRET, (GENESIS_HASH + canonical_json(record)).encode("utf-8"), hashlib.sha256).hexdigest()
    assert row_hash(KEY, GENESIS_HASH, row) == expected


# -- without the key -----------------------------------------------------------------------------------------------


def test_a_chain_recomputed_with_plain_sha256_does_not_verify() -> None:
    """An edited row, and every later row, re-hashed with the old unkeyed rule: the first of them is named."""
    rows = sample()
    prev = rows[1].hash
    for k in range(2, len(rows)):
        changed = edited(rows[k], prev_hash=prev, summary="forged" if k == 2 else rows[k].summary)
        rows[k] = edited(changed, hash=legacy_row_hash(prev, changed))
        prev = rows[k].hash
    result = verify_chain(rows, KEY)
    assert (result.ok, result.first_bad_seq, result.reason) == (False, 3, "row 3 was changed (hash mismatch)")


def test_a_chain_made_under_another_key_does_not_verify() -> None:
    """The same rows chained under another key fail at the first row."""
    other = ChainKey(bytes(32))
    rows, prev = [], GENESIS_HASH
    for row in sample():
        row = edited(row, prev_hash=prev)
        row = edited(row, hash=row_hash(other, prev, row))
        rows.append(row)
        prev = row.hash
    assert verify_chain(rows, other).ok
    assert verify_chain(rows, KEY).first_bad_seq == 1


def test_a_row_an_older_strata_stored_with_infinity_is_damaged_to_show_but_verifies_as_written() -> None:
    """Before `retry-after: inf` was refused, a model attempt row could hold `Infinity` (seal wrote it as Python
    does). Read back, it is damaged for the surfaces that print rows (no JSON reader takes it) and still hashed
    exactly as written, so `--verify` does not call an untouched row changed."""
    from core.timeline import DamagedTimelineRow
    from memory.timeline_rows import timeline_row

    old = TimelineRow.model_construct(session_id="s1", seq=1, at=T0, kind="model_attempt", turn=1, call_id=None,
                                      tool=None, decision=None, check=None, outcome="error", duration_ms=2.0,
                                      summary="gave up", data={"retry_after_s": float("inf")},
                                      prev_hash=GENESIS_HASH, hash="")
    digest = row_hash(KEY, GENESIS_HASH, old)
    stored = (1, "model_attempt", 1, None, None, canonical_time(T0), None, None, "error", 2.0, GENESIS_HASH, digest,
              "gave up", '{"retry_after_s":Infinity}')
    row = timeline_row("s1", stored)
    assert isinstance(row, DamagedTimelineRow) and row.damage.startswith("data: not JSON"), row
    assert verify_chain([row], KEY).ok
