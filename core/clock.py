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


def iso(t: datetime) -> str:
    return t.isoformat(timespec="microseconds")


def canonical_time(at: datetime) -> str:
    """The one text form of a time in the chain (and in the SQLite store): UTC, microseconds, explicit offset."""
    return at.astimezone(UTC).isoformat(timespec="microseconds")
