"""What a tool handler knows about the call it serves."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core.events import Mode


@dataclass(frozen=True)
class ToolContext:
    session_id: str
    mode: Mode
    model: str
    turn: int
    call_id: str
    workspace: Path
    idempotency_key: str
    deadline_s: float
