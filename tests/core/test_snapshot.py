"""Snapshots: a loaded snapshot plus `apply` of the tail equals fold of the whole log (generated logs and the
golden logs, cut at every seq), and a snapshot that cannot be trusted is refused rather than believed."""

from __future__ import annotations

import pytest
from hypothesis import given

from core.events import StoredEvent
from core.snapshot import (
    SNAPSHOT_VERSION,
    STATE_SCHEMA_DIGEST,
    SnapshotError,
    StateEncoder,
    dump_state,
    load_state,
    state_schema_digest,
)
from core.state import SessionState, apply, fold
from tests.core.test_fold import GOLDEN_CASES, PROPERTY, read_log, valid_logs


def restore_at(log: list[StoredEvent], i: int) -> object:
    """Snapshot the fold of log[:i], load it back, apply the rest: what resume does."""
    snapshot = dump_state(fold(log[:i]))
    state = load_state(snapshot, SNAPSHOT_VERSION, log[i - 1].seq)
    for item in log[i:]:
        apply(state, item)
    return state


def test_schema_digest_is_pinned_to_the_code() -> None:
    """STATE_SCHEMA_DIGEST is the digest of the state's current shape: a change to the state (or a model it
    holds) fails here until the constant is updated, which retires every older snapshot."""
    assert state_schema_digest() == STATE_SCHEMA_DIGEST, (
        "the shape of SessionState changed: set STATE_SCHEMA_DIGEST in core/snapshot_version.py to "
        f"{state_schema_digest()!r} (and bump SNAPSHOT_FORMAT if apply changed meaning)")


@PROPERTY
@given(valid_logs())
def test_snapshot_then_tail_equals_fold(log: list[StoredEvent]) -> None:
    """Cut anywhere: the snapshot round-trips exactly, and snapshot plus tail equals fold of the whole log."""
    whole = fold(log)
    for i in range(1, len(log) + 1):
        prefix = fold(log[:i])
        assert load_state(dump_state(prefix), SNAPSHOT_VERSION, log[i - 1].seq) == prefix
        assert restore_at(log, i) == whole


@PROPERTY
@given(valid_logs())
def test_encoder_reusing_messages_writes_what_a_fresh_encoding_writes(log: list[StoredEvent]) -> None:
    """The writer's encoder, fed the live state after every event (messages appended, merged, compacted), gives
    the same bytes as encoding that state from scratch."""
    encoder, state = StateEncoder(), SessionState()
    for item in log:
        apply(state, item)
        assert encoder.dump(state) == dump_state(state)


@pytest.mark.parametrize("name", GOLDEN_CASES)
def test_golden_logs_restore_from_a_snapshot_at_every_seq(name: str) -> None:
    """Every golden log, snapshotted after each event, restores to the same state as its full fold."""
    log = read_log(name)
    whole = fold(log)
    for i in range(1, len(log) + 1):
        assert restore_at(log, i) == whole, f"snapshot after seq {log[i - 1].seq}"


def test_unknown_version_is_refused() -> None:
    """A snapshot of another version is not loaded, even if its data would parse."""
    log = read_log("simple_completed")
    data = dump_state(fold(log))
    with pytest.raises(SnapshotError, match="version"):
        load_state(data, "0:0000000000000000", log[-1].seq)


@pytest.mark.parametrize("data", [b"", b"not json", b"{}", b'{"session_id": 3}', b"[1, 2]"])
def test_unreadable_data_is_refused(data: bytes) -> None:
    """Data that does not load as a state is a SnapshotError, never a half-built state."""
    with pytest.raises(SnapshotError):
        load_state(data, SNAPSHOT_VERSION, 1)


def test_truncated_snapshot_is_refused() -> None:
    """A snapshot cut short (a torn write) does not load."""
    log = read_log("resumed_unknown")
    data = dump_state(fold(log))
    with pytest.raises(SnapshotError):
        load_state(data[: len(data) // 2], SNAPSHOT_VERSION, log[-1].seq)


def test_snapshot_of_another_seq_is_refused() -> None:
    """The state inside must be the one at the seq the snapshot is stored under."""
    log = read_log("resumed_unknown")
    data = dump_state(fold(log[:4]))
    with pytest.raises(SnapshotError, match="seq"):
        load_state(data, SNAPSHOT_VERSION, log[5].seq)
