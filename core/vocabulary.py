"""The words several packages share, each defined once: what `ask` means with no person to ask, how durably the
store commits, the statuses a session, a run and an ended session take, and the names of the checks a call passes.
Other modules import these; none spells the literals again."""

from __future__ import annotations

from typing import Literal, get_args

GENESIS_HASH = "0" * 64
"""The hash a keyed chain's first row links to (core/chain.py): here, so that a reader without the chain's models
(memory/read_sql.py) fills it in from the same definition."""

OnAsk = Literal["deny", "park"]
"""What `ask` means with no person to ask: deny the call, or park it for `strata approve` / `strata deny`."""

Durability = Literal["full", "normal"]
"""SQLite's `synchronous` for the event store: `full` survives a power cut, `normal` a crash of the process."""

EndStatus = Literal["completed", "incomplete", "failed"]
"""How a session ended (`SessionEnded`)."""

RunStatus = EndStatus | Literal["awaiting_approval"]
"""How one run of the loop ended: an end, or parked waiting for a person."""

SessionStatus = RunStatus | Literal["active", "idle"]
"""A session's status in the store's session table: a run's status, running (`active`), or resting (`idle`)."""

ReceiptStatus = Literal["dispatched", "done", "failed", "unknown"]
"""An effect receipt's status (memory/rows.py Receipt)."""
RECEIPT_STATUSES: tuple[ReceiptStatus, ...] = ("dispatched", "done", "failed", "unknown")

Mode = Literal["interactive", "ipc", "headless", "daemon", "mcp"]
"""How a session is driven (core/events.py's session start, the store's session table)."""

DecisionCheck = Literal["plan", "resolve", "scope", "middleware", "policy", "schema", "hook", "approval"]
"""The steps that decide whether a call runs, in their order: the checks, the PreToolUse hooks, the approval."""

CheckName = DecisionCheck | Literal["receipt", "lock", "dispatch", "interrupt"]
"""What stopped a call (`CallResult.check`, a `Deny`'s check): a deciding step, or what came after the decision:
its receipt, its resource lock, its dispatch, or an interrupt (Ctrl-C, a daemon's shutdown, a turn budget)."""

StepCheck = DecisionCheck | Literal["post_hook"]
"""Where in a call's decision path a step was taken: the deciding steps, then the PostToolUse hooks."""

TimelineDecision = Literal["allowed", "denied", "approved", "rejected", "parked"]
"""What the runtime decided about a call, as a timeline row says it (core/timeline.py)."""
TIMELINE_DECISIONS: tuple[TimelineDecision, ...] = get_args(TimelineDecision)

EVENT_SCHEMA_VERSION = 1
"""The schema version stored with each event (core/events.py `SCHEMA_VERSION`)."""
