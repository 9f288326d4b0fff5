"""DamagedEvent and DamagedRow, the two damaged records of a session, say the same things in the same shape: one
line naming the session, the record's seq and what is wrong, a hint naming the command that shows it, and the same
fields; both are StoreErrors (exit 1), neither is the other."""

from __future__ import annotations

import pytest

from core.errors import DamagedEvent, DamagedRecord, DamagedRow, StoreError


def test_a_damaged_event_names_the_session_the_event_and_the_reason_on_one_line() -> None:
    err = DamagedEvent("s1", 2, "Expecting value:\n  line 1\tcolumn 1", path="/tmp/x.db")
    assert err.message == ("session s1 has a damaged log: event 2 does not load (Expecting value: line 1 column 1); "
                           "it was left untouched")
    assert err.hint == ("the database was changed outside Strata; restore it from a backup, or "
                        "`strata timeline s1` to see what happened")
    assert (err.session_id, err.seq, err.reason, err.path, err.exit_code) == (
        "s1", 2, "Expecting value: line 1 column 1", "/tmp/x.db", 1)


def test_a_damaged_row_names_the_session_the_row_and_the_reason_on_one_line() -> None:
    err = DamagedRow("s2", 7, "bad\nkind")
    assert err.message == ("session s2 has a damaged timeline: row 7 does not read back (bad kind); "
                           "it was left untouched")
    assert err.hint == ("the database was changed outside Strata; restore it from a backup, or "
                        "`strata timeline s2 --verify` to name every changed row")
    assert (err.session_id, err.seq, err.reason, err.path, err.exit_code) == ("s2", 7, "bad kind", None, 1)


@pytest.mark.parametrize("kind", [DamagedEvent, DamagedRow])
def test_both_damaged_records_are_store_errors_and_neither_is_caught_as_the_other(kind: type[DamagedRecord]) -> None:
    err = kind("s", 1, "r")
    assert isinstance(err, StoreError) and isinstance(err, DamagedRecord)
    other = DamagedRow if kind is DamagedEvent else DamagedEvent
    assert not isinstance(err, other)
    assert str(err) == err.message
