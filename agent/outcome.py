"""How a run ended, and the documented exit codes."""

from __future__ import annotations

from typing import Literal

from core.record import record
from core.vocabulary import RunStatus

TurnStatus = RunStatus | Literal["interrupted"]
"""How one turn a daemon ran for an attachment ended: a run's status, or stopped by an interrupt."""

EXIT_COMPLETED = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INCOMPLETE = 3
EXIT_AWAITING_APPROVAL = 4
EXIT_UNKNOWN_PENDING = 5
EXIT_ORPHAN_RUNNING = 6
"""`strata resume`: a command of the open batch outlived the process that started it and still runs
(core.errors.OrphanRunning). Stopped by a signal: 128 + its number (core.errors.Stopped)."""


@record
class RunOutcome:
    """How a run ended: its status and why, and the effects whose outcome is unknown."""

    session_id: str
    status: RunStatus
    reason: str
    unknown_receipts: int

    @property
    def exit_code(self) -> int:
        if self.status == "failed":
            return EXIT_ERROR
        if self.status == "incomplete":
            return EXIT_INCOMPLETE
        if self.status == "awaiting_approval":
            return EXIT_AWAITING_APPROVAL
        if self.unknown_receipts:
            return EXIT_UNKNOWN_PENDING
        return EXIT_COMPLETED
