"""Sortable ids (UUIDv7 layout) from an injected clock and randomness."""

from __future__ import annotations

import os
from collections.abc import Callable

from core.clock import Clock, SystemClock


class IdFactory:
    def __init__(self, clock: Clock | None = None, randbytes: Callable[[int], bytes] = os.urandom) -> None:
        self._clock = clock or SystemClock()
        self._rand = randbytes
        self._last_ms = -1
        self._seq = 0

    def _hex(self) -> str:
        """The 32 hex digits of the next id."""
        ms = int(self._clock.now().timestamp() * 1000)
        if ms <= self._last_ms:
            ms = self._last_ms
            self._seq += 1
        else:
            self._seq = 0
        self._last_ms = ms
        rand = int.from_bytes(self._rand(8), "big")
        # 48 bits time, 4 bits version, 12 bits counter (monotonic within a millisecond), 2 bits variant, 62 random
        return f"{ms & 0xFFFFFFFFFFFF:012x}7{self._seq & 0xFFF:03x}{(0b10 << 62) | (rand & ((1 << 62) - 1)):016x}"

    def uuid7(self) -> str:
        h = self._hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def session_id(self) -> str:
        return self.uuid7()

    def receipt_id(self) -> str:
        """`"rcpt_"` and a uuid7 without its dashes (one per effectful call: the dashes are never written)."""
        return "rcpt_" + self._hex()
