"""The waterfall's time axis: seconds since the session started -> a fraction of the drawing's width.

A session may sit idle for hours (parked for approval, resumed the next day) around milliseconds of work. A
linear axis would squash the work into a hairline, so an idle gap longer than all the activity around it (and
longer than `min_gap_s`) is drawn as a fixed-width break labelled with the time it skipped. Elsewhere the axis
is linear."""

from __future__ import annotations

import math

from core.record import record

_STEPS = (1, 2, 5)


@record
class Piece:
    t0: float
    t1: float
    x0: float
    x1: float
    compressed: bool


@record
class Tick:
    x: float
    label: str


class TimeScale:
    def __init__(self, intervals: list[tuple[float, float]], total: float, *, min_gap_s: float = 2.0,
                 break_share: float = 0.06) -> None:
        self.total = max(0.0, total)
        merged: list[list[float]] = []
        for a, b in sorted((max(0.0, min(a, b)), min(self.total, max(a, b))) for a, b in intervals):
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        active = sum(b - a for a, b in merged)
        threshold = max(min_gap_s, active)
        raw: list[tuple[float, float, bool]] = []
        pos = 0.0
        for a, b in merged:
            if a > pos:
                raw.append((pos, a, a - pos > threshold))
            raw.append((a, b, False))
            pos = b
        if pos < self.total:
            raw.append((pos, self.total, self.total - pos > threshold))
        if not raw:
            raw = [(0.0, self.total, False)]
        visible = sum(t1 - t0 for t0, t1, c in raw if not c)
        weight_break = break_share * visible if visible > 0 else 1.0
        weights = [weight_break if c else t1 - t0 for t0, t1, c in raw]
        whole = sum(weights)
        pieces: list[Piece] = []
        x = 0.0
        for (t0, t1, c), w in zip(raw, weights, strict=True):
            width = w / whole if whole > 0 else 0.0
            pieces.append(Piece(t0, t1, x, x + width, c))
            x += width
        self.pieces = pieces
        self.visible = visible

    def x(self, t: float) -> float:
        """The fraction (0..1) where time `t` (seconds since the start) is drawn."""
        for p in self.pieces:
            if t <= p.t1 or p is self.pieces[-1]:
                if p.t1 <= p.t0:
                    return p.x0
                f = min(1.0, max(0.0, (t - p.t0) / (p.t1 - p.t0)))
                return p.x0 + f * (p.x1 - p.x0)
        return 0.0

    @property
    def breaks(self) -> list[Piece]:
        return [p for p in self.pieces if p.compressed]

    def ticks(self, target: int = 8) -> list[Tick]:
        """Round offsets ("0 ms", "20 ms", "1.5 s", ...) at a 1-2-5 step, inside the linear parts only."""
        if self.visible <= 0:
            return [Tick(0.0, duration_label(0.0))]
        step = nice_step(self.visible / target)
        out: list[Tick] = []
        seen: set[int] = set()
        for p in self.pieces:
            if p.compressed:
                continue
            k = math.ceil(p.t0 / step - 1e-9)
            while k * step <= p.t1 + 1e-9 and len(out) < 400:
                if k not in seen:  # neighbouring pieces share their edge
                    seen.add(k)
                    out.append(Tick(self.x(k * step), tick_label(k * step, step)))
                k += 1
        return out


def nice_step(raw: float) -> float:
    if raw <= 0:
        return 1.0
    exp = math.floor(math.log10(raw))
    for m in _STEPS:
        if m * 10**exp >= raw:
            return float(m * 10**exp)
    return float(10 ** (exp + 1))


def _resolution(seconds: float) -> float:
    """The smallest difference `duration_label` shows at this size."""
    if seconds < 1:
        return 0.0001
    if seconds < 60:
        return 0.01 if seconds < 10 else 0.1
    return 1.0 if seconds < 3600 else 60.0 if seconds < 86400 else 3600.0


def tick_label(seconds: float, step: float) -> str:
    """`duration_label`, or a clock reading (`3:00:04`, `3:00:04.250`) where that would hide the step (ticks
    after a long break)."""
    if step >= _resolution(seconds):
        return duration_label(seconds)
    whole, ms = divmod(round(seconds * 1000), 1000)
    clock = f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"
    return clock if step >= 1 else f"{clock}.{ms:03d}"


def duration_label(seconds: float) -> str:
    if seconds < 1:
        ms = seconds * 1000
        return f"{ms:.1f} ms" if 0 < ms < 10 and ms != int(ms) else f"{ms:.0f} ms"
    if seconds < 60:
        return f"{seconds:.2f} s".replace(".00 s", " s") if seconds < 10 else f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m {int(seconds % 60):02d}s"
    if seconds < 86400:
        return f"{int(seconds // 3600)}h {int(seconds % 3600 // 60):02d}m"
    return f"{int(seconds // 86400)}d {int(seconds % 86400 // 3600):02d}h"
