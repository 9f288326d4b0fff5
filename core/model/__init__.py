"""The one model path: adapter protocol, typed request/response, the listener for live text and attempts, and the
retry policy. Adapters map wire shapes into these; the Anthropic adapter lives in `core.model.anthropic` (imported
on its own so that only it pulls in the SDK)."""

from core.model.base import (
    AttemptOutcome,
    ModelAdapter,
    ModelAttempt,
    ModelErrorKind,
    ModelListener,
    ModelRequest,
    ModelResponse,
    NullListener,
    StopReason,
    Usage,
)
from core.model.retry import AttemptFailure, RetryPolicy

__all__ = [
    "AttemptFailure",
    "AttemptOutcome",
    "ModelAdapter",
    "ModelAttempt",
    "ModelErrorKind",
    "ModelListener",
    "ModelRequest",
    "ModelResponse",
    "NullListener",
    "RetryPolicy",
    "StopReason",
    "Usage",
]
