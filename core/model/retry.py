"""The model path's one retry policy: typed, bounded, and the same for every adapter (the SDK's own retries are
off). Only transient faults are retried: connection errors, timeouts, 429 (honouring `retry-after-ms` and
`retry-after`), 5xx and 529 overloaded. A request the API refused as such (400, 401, 403, 404, 413, 422) is sent
once. Attempts and total time are both bounded, and every attempt is reported to the listener.

Adapters describe a failed attempt as an `AttemptFailure` (kind, what failed, what to do); this module decides
whether to try again, when, and how the final `ModelError` reads."""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import field
from datetime import UTC, datetime
from typing import Literal

import anyio

from core.errors import ModelError
from core.model.base import ModelAttempt, ModelErrorKind, ModelListener, ModelResponse
from core.record import record

TRANSIENT: frozenset[ModelErrorKind] = frozenset({"overloaded", "rate_limited", "server_error", "connection",
                                                  "timeout"})

_STATUS_KINDS: dict[int, ModelErrorKind] = {
    400: "bad_request", 401: "authentication", 403: "permission", 404: "not_found", 408: "timeout",
    413: "too_large", 422: "unprocessable", 429: "rate_limited", 529: "overloaded",
}

_ERROR_TYPE_KINDS: dict[str, ModelErrorKind] = {
    "invalid_request_error": "bad_request", "authentication_error": "authentication",
    "permission_error": "permission", "not_found_error": "not_found", "request_too_large": "too_large",
    "rate_limit_error": "rate_limited", "api_error": "server_error", "overloaded_error": "overloaded",
    "timeout_error": "timeout",
}


def kind_for_status(status: int) -> ModelErrorKind:
    """The kind of an HTTP error status: 5xx is a server error unless it is 529 (overloaded)."""
    if status in _STATUS_KINDS:
        return _STATUS_KINDS[status]
    return "server_error" if status >= 500 else "other"


def kind_for_error_type(error_type: str | None) -> ModelErrorKind | None:
    """The kind of an API `error.type` (used for an `error` event inside a stream, which arrives after a 200)."""
    return _ERROR_TYPE_KINDS.get(error_type) if error_type else None


def parse_retry_after(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """Seconds the server asked us to wait: `retry-after-ms` first, then `retry-after` (seconds or an HTTP date).
    None when absent, unparsable, negative or not finite (`inf`, which `float` reads, would be recorded as a number
    JSON has not)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        try:
            ms = float(raw_ms)
        except ValueError:
            ms = -1.0
        if 0 <= ms < _FOREVER:  # `inf` and `nan` are floats, not waits
            return ms / 1000
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        from email.utils import parsedate_to_datetime  # an HTTP date is rare; `email` costs start-up

        try:
            when = parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    return seconds if 0 <= seconds < _FOREVER else None


_FOREVER = float("inf")


@record
class AttemptFailure:
    """One failed attempt in Strata's terms. `what` names what failed and the request id; `action` says what the
    user can do. Both are short phrases on one line."""

    kind: ModelErrorKind
    what: str
    action: str
    status_code: int | None = None
    request_id: str | None = None
    retry_after_s: float | None = None

    @property
    def retryable(self) -> bool:
        return self.kind in TRANSIENT


@record
class RetryPolicy:
    """Exponential backoff with jitter, bounded by `max_attempts` (requests sent, including the first) and by
    `max_total_s`, the time spent recovering: no retry is scheduled whose wait would end more than that after the
    first failure (counting from the first failure, not the first request, keeps a long answer that broke off late
    retryable). `sleep`, `random` and `clock` are injectable so tests run instantly and deterministically."""

    max_attempts: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    max_total_s: float = 60.0
    jitter: float = 0.5  # a delay d becomes d * (1 - jitter * U[0, 1)), so retrying clients spread out
    sleep: Callable[[float], Awaitable[None]] = field(default=anyio.sleep, repr=False, compare=False)
    random: Callable[[], float] = field(default=random.random, repr=False, compare=False)
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if min(self.base_delay_s, self.max_delay_s, self.max_total_s) < 0:
            raise ValueError("delays and the total budget must not be negative")
        if not 0 <= self.jitter <= 1:
            raise ValueError("jitter must be between 0 and 1")

    def backoff(self, attempt: int) -> float:
        """The wait after failed attempt number `attempt` (1-based) when the server asked for nothing."""
        delay = min(self.max_delay_s, self.base_delay_s * 2.0 ** (attempt - 1))
        return delay * (1 - self.jitter * self.random())

    def next_delay(self, attempt: int, failure: AttemptFailure, elapsed_s: float) -> float | None:
        """How long to wait before another attempt, or None to give up. `elapsed_s` is the time since the first
        failure. A server's retry-after is a floor under the backoff."""
        if not failure.retryable or attempt >= self.max_attempts:
            return None
        delay = self.backoff(attempt)
        if failure.retry_after_s is not None:
            delay = max(delay, failure.retry_after_s)
        if elapsed_s + delay > self.max_total_s:
            return None
        return delay

    async def run(self, attempt: Callable[[], Awaitable[ModelResponse]],
                  classify: Callable[[Exception], AttemptFailure | None], listener: ModelListener) -> ModelResponse:
        """Call `attempt` until it succeeds or the policy gives up. `classify` maps an adapter's exception to a
        `AttemptFailure`; an exception it does not know (None) is a bug and propagates untouched."""
        first_failure: float | None = None
        number = 0
        while True:
            number += 1
            began = self.clock()
            try:
                response = await attempt()
            except Exception as exc:
                failure = classify(exc)
                if failure is None:
                    raise
                now = self.clock()
                if first_failure is None:
                    first_failure = now
                delay = self.next_delay(number, failure, now - first_failure)
                duration_ms = (now - began) * 1000
                if delay is None:
                    error = self._give_up(failure, number, now - first_failure)
                    listener.on_attempt(_attempt(number, "error", duration_ms, error.message, failure))
                    raise error from exc
                listener.on_attempt(_attempt(number, "retry", duration_ms, f"{failure.what}; retrying in {delay:.2f}s",
                                             failure, delay_s=delay))
                await self.sleep(delay)
                continue
            listener.on_attempt(ModelAttempt(number=number, outcome="ok", duration_ms=(self.clock() - began) * 1000,
                                             message="ok", request_id=response.request_id, usage=response.usage))
            return response

    def _give_up(self, failure: AttemptFailure, attempts: int, elapsed_s: float) -> ModelError:
        tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        if not failure.retryable:
            why = ""
        elif attempts >= self.max_attempts:
            why = f"; gave up after {tries}"
        elif failure.retry_after_s is not None and elapsed_s + failure.retry_after_s > self.max_total_s:
            why = (f"; gave up after {tries} (the server asked to wait {failure.retry_after_s:g}s, "
                   f"beyond the retry budget of {self.max_total_s:g}s)")
        else:
            why = f"; gave up after {tries} in {elapsed_s:.1f}s (retry budget {self.max_total_s:g}s)"
        return ModelError(f"{failure.what}{why}: {failure.action}", retryable=failure.retryable,
                          request_id=failure.request_id, status_code=failure.status_code, error_kind=failure.kind,
                          attempts=attempts)


def _attempt(number: int, outcome: Literal["retry", "error"], duration_ms: float, message: str,
             failure: AttemptFailure, delay_s: float | None = None) -> ModelAttempt:
    return ModelAttempt(number=number, outcome=outcome, duration_ms=duration_ms, message=message,
                        error_kind=failure.kind, status_code=failure.status_code,
                        request_id=failure.request_id, retry_after_s=failure.retry_after_s, delay_s=delay_s)
