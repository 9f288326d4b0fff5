"""What a tool handler knows about the call it serves."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from core.events import Mode
from core.processes import ProcessGroup
from core.record import record
from core.tools.path_filter import PathFilter

SpawnListener = Callable[[ProcessGroup], Awaitable[None]]
InterruptVerdict = Callable[[str], None]


@record
class ToolContext:
    """What a handler is told of the call it runs: the session, the call, its workspace and deadline."""

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
    on_spawn: SpawnListener | None = None
    """A handler that starts a process group which can outlive Strata (a `bash` command in its own session) calls
    this with the group before the group does any work, and lets it start only if the call returns: the executor
    records the group where a later process finds it if this one dies (tool_executor/locks.py)."""
    on_interrupt: InterruptVerdict | None = None
    """A handler cancelled mid-work (Ctrl-C, a termination signal) may call this, before it re-raises, with what
    it can say for certain of what it did: its interrupt verdict (`bash`: whether the command had started, what
    it had printed, whether its whole process group is gone). The outcome stays unknown, never guessed; the
    verdict is said with it (the call's result, its receipt's note, the hint after the interrupt)."""
