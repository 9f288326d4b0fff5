"""What a check decides: pass, ask a person, or deny, with the deciding check and every reason; and `Parked`, where
the approval step leaves a call that waits for a person (`--on-ask park`)."""

from __future__ import annotations

from core.record import record
from core.vocabulary import DecisionCheck


@record
class Pass:
    """A check's verdict: the call may go on."""

    rule: str | None = None
    """The rule that allowed the call, where one did."""


@record
class Ask:
    """The call needs a person's approval. `asked_by` names the policy rule or hook that asked; a grant for the
    session is scoped to it."""

    check: DecisionCheck
    asked_by: str
    reasons: tuple[str, ...]


@record
class Deny:
    """A check's verdict: the call is denied, with every reason for the model."""

    check: DecisionCheck
    reasons: tuple[str, ...]


@record
class Parked:
    """The call waits for a recorded decision (`strata approve` / `strata deny`); `note` says why a record that
    exists did not apply."""

    note: str = ""


Verdict = Pass | Deny
PolicyVerdict = Pass | Ask | Deny
