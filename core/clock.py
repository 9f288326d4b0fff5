"""Injected time. Times are UTC-aware; tests pass a fixed or stepping clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class SteppingClock:
    """Deterministic clock for tests: starts at `start` and advances `step` on every read."""

    def __init__(self, start: datetime | None = None, step: timedelta = timedelta(milliseconds=1)) -> None:
        self._t = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._step = step

    def now(self) -> datetime:
        t = self._t
        self._t = t + self._step
        return t


_TWO = tuple(f"{n:02d}" for n in range(100))
_THREE = tuple(f"{n:03d}" for n in range(1000))


def iso(t: datetime) -> str:
    """`t.isoformat(timespec="microseconds")`. A time in UTC (every clock's, and every stored time read back) is
    written from its fields (`_utc_text`): the same text, without the C method's formatting of each number through
    a printf-style template (about 14K instructions a time; a turn writes about ten)."""
    if type(t) is datetime and t.tzinfo is UTC and t.year >= 1000:
        return _utc_text(t)
    return t.isoformat(timespec="microseconds")


def canonical_time(at: datetime) -> str:
    """The one text form of a time in the chain (and in the SQLite store): UTC, microseconds, explicit offset."""
    if type(at) is datetime and at.tzinfo is UTC and at.year >= 1000:  # already UTC: astimezone changes nothing
        return _utc_text(at)
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def _utc_text(t: datetime) -> str:
    """`YYYY-MM-DDTHH:MM:SS.ffffff+00:00` of a datetime in UTC whose year has four digits."""
    us = t.microsecond
    return (f"{t.year}-{_TWO[t.month]}-{_TWO[t.day]}T{_TWO[t.hour]}:{_TWO[t.minute]}:{_TWO[t.second]}"
            f".{_THREE[us // 1000]}{_THREE[us % 1000]}+00:00")
