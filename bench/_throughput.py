"""What the two throughput benches share: bench/concurrent_sessions.py (many sessions in one process, no socket)
and bench/daemon_throughput.py (the same through a real `strata serve` over its socket).

Both play scripted sessions of read-only calls, one call per batch, and report each size the same way: durable
calls per second, commits per fsync, wall and CPU time per call, and the speed-up over the smallest size, ending
with one line `sessions_1=<calls/s> ... speedup_32=<float>`."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def script(tag: str, batches: int, call: Callable[[int], tuple[str, dict[str, Any]]], *, k: int = 1,
           segments: int = 1) -> list[list[dict[str, Any]]]:
    """A `script:` model's turns (the JSON a script file holds, core/model/scripted.py): `segments` times,
    `batches` batches of k calls, call j of a batch being `call(j)` (tool name, input), then a final text. Each
    prompt to a session plays the next segment (the scripted model answers turn n with entry n). Call ids carry
    `tag`, so every session's are its own."""
    turns: list[list[dict[str, Any]]] = []
    for s in range(segments):
        for b in range(batches):
            turns.append([{"type": "tool_use", "id": f"toolu_{tag}_{s:02d}_{b:05d}_{j:02d}", "name": name,
                           "input": args} for j, (name, args) in enumerate(call(j) for j in range(k))])
        turns.append([{"type": "text", "text": "done"}])
    return turns


@dataclass(frozen=True)
class Figures:
    """One round of one size: `sessions` sessions together, `calls` calls in all."""

    sessions: int
    calls: int
    seconds: float
    commits: int
    fsyncs: int
    cpu: float
    """CPU seconds (user + system, every thread) of the process running the sessions."""
    client_cpu: float | None = None
    """CPU seconds of the clients driving them, when they are another process."""

    @property
    def rate(self) -> float:
        return self.calls / self.seconds

    def per_call_us(self, seconds: float) -> float:
        return seconds / self.calls * 1e6

    def line(self, median_rate: float) -> str:
        per_fsync = self.commits / self.fsyncs if self.fsyncs else float("nan")
        client = f", client {self.per_call_us(self.client_cpu):.0f} us CPU" if self.client_cpu is not None else ""
        return (f"{self.sessions:>3} sessions: {self.rate:8.0f} calls/s (median {median_rate:.0f}), "
                f"{self.commits} commits in {self.fsyncs} fsyncs ({per_fsync:.2f} commits per fsync, "
                f"{self.fsyncs / self.calls:.2f} fsyncs per call), {self.seconds:.2f} s; per call "
                f"{self.per_call_us(self.seconds):.0f} us wall, {self.per_call_us(self.cpu):.0f} us CPU{client}")

    def as_json(self, median_rate: float) -> dict[str, Any]:
        return {"sessions": self.sessions, "calls": self.calls, "seconds": round(self.seconds, 4),
                "calls_per_s": round(self.rate, 1), "median_calls_per_s": round(median_rate, 1),
                "commits": self.commits, "fsyncs": self.fsyncs,
                "commits_per_fsync": round(self.commits / self.fsyncs, 3) if self.fsyncs else None,
                "fsyncs_per_call": round(self.fsyncs / self.calls, 3),
                "wall_us_per_call": round(self.per_call_us(self.seconds), 1),
                "cpu_us_per_call": round(self.per_call_us(self.cpu), 1),
                "client_cpu_us_per_call": (round(self.per_call_us(self.client_cpu), 1)
                                           if self.client_cpu is not None else None)}


def best(rounds: list[Figures]) -> tuple[Figures, float]:
    """The fastest round and the median rate of all of them."""
    return min(rounds, key=lambda f: f.seconds), statistics.median(f.rate for f in rounds)


def speedups(results: dict[int, Figures]) -> dict[int, float]:
    """Each size's best calls/s over the smallest size's."""
    sizes = sorted(results)
    base = results[sizes[0]].rate
    return {size: results[size].rate / base for size in sizes}


def summary(results: dict[int, Figures]) -> list[str]:
    """The speed-up lines and the closing `name=value` line."""
    sizes = sorted(results)
    ups = speedups(results)
    lines = [f"speed-up of {size} sessions over {sizes[0]}: {ups[size]:.2f}x" for size in sizes[1:]]
    lines.append(" ".join(f"sessions_{s}={results[s].rate:.0f}" for s in sizes)
                 + f" speedup_{sizes[-1]}={ups[sizes[-1]]:.2f}")
    return lines
