"""Typed model request and response, the adapter protocol every model path implements, and the listener through
which a model call reports live text and each attempt (so the terminal streams and the timeline has a row per
attempt) without the adapter knowing who listens."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Literal, Protocol

from core.messages import ContentBlock, Message, ToolUseBlock
from core.record import record

StopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "pause_turn"]

ModelErrorKind = Literal[
    # transient: retried within the policy's bounds
    "overloaded", "rate_limited", "server_error", "connection", "timeout",
    # permanent: sent once, never retried
    "bad_request", "authentication", "permission", "not_found", "too_large", "unprocessable", "bad_response",
    "other",
]
"""Why one attempt failed, in Strata's terms (not the SDK's exception classes)."""

AttemptOutcome = Literal["ok", "retry", "error"]


@record
class Usage:
    """The tokens a model turn used, as the provider reported them (0 where it reported none)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@record
class ModelRequest:
    """Built by the perceive phase from folded state: a snapshot of the conversation; `turn` is the number of
    assistant messages already in it."""

    system: str
    messages: Sequence[Message]
    tools: Sequence[Mapping[str, object]]
    turn: int


@record
class ModelResponse:
    """One model turn's answer: its content blocks (text and tool calls), why it stopped, and its usage."""

    content: tuple[ContentBlock, ...]
    stop_reason: StopReason
    usage: Usage = field(default_factory=Usage)
    request_id: str | None = None

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        return [b for b in self.content if isinstance(b, ToolUseBlock)]


@record
class ModelAttempt:
    """One request sent to the model. `outcome` is "ok" (the response is returned), "retry" (a transient fault; the
    next attempt starts after `delay_s`) or "error" (the call fails with a `ModelError`)."""

    number: int  # 1-based
    outcome: AttemptOutcome
    duration_ms: float
    message: str  # one line: what happened
    error_kind: ModelErrorKind | None = None
    status_code: int | None = None
    request_id: str | None = None
    retry_after_s: float | None = None  # what the server asked for, if it did
    delay_s: float | None = None  # the backoff chosen before the next attempt (outcome "retry" only)
    usage: Usage | None = None


class ModelListener(Protocol):
    """Receives a model call's progress. Called in the calling task, so it must not block.

    Text deltas of an attempt that ends with outcome "retry" are void: the next attempt starts the answer over,
    and a renderer should discard what it showed for the failed attempt."""

    def on_text(self, delta: str) -> None: ...

    def on_attempt(self, attempt: ModelAttempt) -> None: ...


class NullListener:
    """A listener that ignores everything (the default when the caller passes none)."""

    def on_text(self, delta: str) -> None:
        pass

    def on_attempt(self, attempt: ModelAttempt) -> None:
        pass


class ModelAdapter(Protocol):
    @property
    def name(self) -> str:
        """The model's identity as recorded in the session (e.g. `script:demo.json`, `anthropic:claude-...`)."""
        ...

    async def complete(self, request: ModelRequest, listener: ModelListener | None = None) -> ModelResponse:
        """Answer one turn. Raises `core.errors.ModelError` when the model path fails (after any retries)."""
        ...
