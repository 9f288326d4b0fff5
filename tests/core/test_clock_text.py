"""A time's text (core/clock.py `iso`, `canonical_time`) written from its fields for a time in UTC is exactly what
`isoformat(timespec="microseconds")` writes; any other time is written by isoformat itself, as before."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from core.clock import canonical_time, iso

_UTC_TIMES = st.datetimes(timezones=st.just(UTC), allow_imaginary=True)
_OTHER_ZONES = st.sampled_from([None, timezone(timedelta(0)), timezone(timedelta(hours=5, minutes=30)),
                                timezone(-timedelta(hours=11, seconds=1, microseconds=5))])


class _Later(datetime):
    """A datetime subclass (as a frozen clock's may be) whose own isoformat must be the one used."""

    def isoformat(self, sep: str = "T", timespec: str = "auto") -> str:
        return "later:" + super().isoformat(sep, timespec)


@given(_UTC_TIMES, st.sampled_from([0, 1]))
def test_a_utc_time_is_written_as_isoformat_writes_it(t: datetime, fold: int) -> None:
    t = t.replace(fold=fold)
    assert iso(t) == t.isoformat(timespec="microseconds")
    assert canonical_time(t) == t.astimezone(UTC).isoformat(timespec="microseconds")


@given(st.datetimes(), _OTHER_ZONES)
def test_any_other_time_is_written_by_isoformat(naive: datetime, zone: timezone | None) -> None:
    t = naive.replace(tzinfo=zone)
    assert iso(t) == t.isoformat(timespec="microseconds")
    if zone is not None:
        assert canonical_time(t) == t.astimezone(UTC).isoformat(timespec="microseconds")


def test_a_subclass_keeps_its_own_isoformat() -> None:
    t = _Later(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
    assert iso(t) == "later:2026-01-02T03:04:05.000006+00:00"


def test_early_years_and_edges() -> None:
    for t in (datetime(1, 1, 1, tzinfo=UTC), datetime(999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
              datetime(1000, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
              datetime(2026, 1, 1, 0, 0, 0, 1000, tzinfo=UTC)):
        assert iso(t) == t.isoformat(timespec="microseconds") == canonical_time(t)
