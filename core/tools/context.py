"""What a tool handler knows about the call it serves."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core.events import Mode
from core.tools.path_filter import PathFilter


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
    path_filter: PathFilter | None = None
    """Paths the policy rules keep from this call beyond those it names (None: none); a handler that walks the
    workspace consults it before it opens or names an entry."""
