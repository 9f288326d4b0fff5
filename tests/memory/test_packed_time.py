"""memory/_encoding.py `packed_time`: what a commit packs its time to, from the time it has already parsed and
written canonically, is exactly `pack_time` of its text, for every time: UTC or another offset, before the epoch,
naive, or written in a form that is not the canonical one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from core.timeline import canonical_time
from memory._encoding import pack_time, packed_time


def _same(at: str) -> None:
    at_dt = datetime.fromisoformat(at)
    assert packed_time(at, at_dt, canonical_time(at_dt)) == pack_time(at), at


def test_canonical_and_other_forms_of_a_time_pack_as_pack_time_packs_them() -> None:
    for at in ("2026-01-01T00:00:00.000000+00:00", "2026-01-01T00:00:00+00:00", "2026-01-01T01:00:00.000000+01:00",
               "1969-12-31T23:59:59.999999+00:00", "1970-01-01T00:00:00.000000+00:00", "2026-01-01T00:00:00.000000",
               "2026-01-01T00:00:00.000000Z", "0999-01-01T00:00:00.000000+00:00", "9999-12-31T23:59:59.999999+00:00",
               "2026-06-01 12:00:00.5+00:00"):
        _same(at)


@settings(max_examples=1000, deadline=None)
@given(when=st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
       offset=st.sampled_from([None, 0, 60, -330, 14 * 60]))
def test_generated_times_pack_as_pack_time_packs_them(when: datetime, offset: int | None) -> None:
    if offset is None:
        _same(when.isoformat())
        return
    tz = UTC if offset == 0 else timezone(timedelta(minutes=offset))
    moment = when.replace(tzinfo=tz)
    _same(moment.isoformat(timespec="microseconds"))
    _same(moment.isoformat())
