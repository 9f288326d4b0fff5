"""Typed model request and response, and the adapter protocol every model path implements."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from core.messages import ContentBlock, Message, ToolUseBlock

StopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "pause_turn"]


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True)
class ModelRequest:
    """Built by the perceive phase from folded state: a snapshot of the conversation; `turn` is the number of
    assistant messages already in it."""

    system: str
    messages: Sequence[Message]
    tools: Sequence[Mapping[str, object]]
    turn: int


@dataclass(frozen=True)
class ModelResponse:
    content: tuple[ContentBlock, ...]
    stop_reason: StopReason
    usage: Usage = field(default_factory=Usage)

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        return [b for b in self.content if isinstance(b, ToolUseBlock)]


class ModelAdapter(Protocol):
    @property
    def name(self) -> str:
        """The model's identity as recorded in the session (e.g. `script:demo.json`)."""
        ...

    async def complete(self, request: ModelRequest) -> ModelResponse: ...
