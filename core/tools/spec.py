"""A tool's declaration: handler, input schema, safety level, PII class, effect class, resource keys."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import field
from typing import Any, Literal

from core.record import record
from core.tools.context import ToolContext

SafetyLevel = Literal["read", "write", "execute", "network", "admin"]
PiiClass = Literal["none", "internal", "personal", "sensitive"]
EffectClass = Literal["read_only", "idempotent", "effectful"]

SAFETY_ORDER: tuple[SafetyLevel, ...] = ("read", "write", "execute", "network", "admin")
PII_ORDER: tuple[PiiClass, ...] = ("none", "internal", "personal", "sensitive")


class ToolError(Exception):
    """A handler's clean failure: reported to the model as an error result, no traceback."""


class ToolTimeout(ToolError):
    """A handler's own deadline passed (e.g. bash's timeout_s). Treated like the dispatch deadline: an
    effectful call that timed out has an unknown outcome."""


class ToolWaits(Exception):
    """Raised by a handler of a tool that `resumes` whose work waits for a person elsewhere (a delegated child
    parked for approval): the call's receipt stays `dispatched`, nothing of the call is recorded as finished, and
    its session parks (`awaiting_approval`) saying `reason`; `strata resume` enters the handler again, which finds
    the same work and goes on with it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@record
class ToolOutput:
    """What a tool's handler returns: its text for the model, and whether that text reports an error."""

    text: str
    is_error: bool = False


ProbeVerdict = Literal["applied", "not_applied", "undecided"]


@record
class ProbeResult:
    """What a reconciliation probe read from the world about an effect whose outcome is unknown."""

    verdict: ProbeVerdict
    note: str

Handler = Callable[[Mapping[str, Any], ToolContext], Awaitable[ToolOutput]]
ResourceKeys = Callable[[Mapping[str, Any], ToolContext], list[str]]
Probe = Callable[[Mapping[str, Any], ToolContext], Awaitable[ProbeResult]]


@record
class ToolSpec:
    """A tool as the executor knows it: its schema and handler, and what running it may do (safety, effect, PII)."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    handler: Handler
    safety: SafetyLevel
    effect: EffectClass
    pii: PiiClass = "none"
    timeout_s: float = 30.0
    path_args: tuple[str, ...] = ()
    """Arguments that name workspace paths; the scope check confines them."""
    primary_arg: str | None = None
    """The argument a rule pattern such as `bash(git status*)` is matched against."""
    primary_kind: Literal["text", "path", "command"] = "text"
    """How rule patterns read the primary argument: a path is matched in its resolved forms (so no spelling
    slips past a rule); a shell command with control operators never matches an allow pattern."""
    resource_keys: ResourceKeys | None = None
    probe: Probe | None = field(default=None, compare=False)
    resumes: bool = False
    """A call whose handler may be entered again after its process stopped while it ran, with the same context
    (idempotency key included), and finishes the same work exactly once: a resume re-enters it instead of calling
    its outcome unknown (delegate: its child session, by the id its receipt records)."""
    passed_down: bool = True
    """Whether a delegated child may get this tool. False for a tool only the process hosting its session has
    (a channel's `reply`, which answers the message the parent's turn handles): a child given it could not be
    resumed with the same plan by another process (`strata resume CHILD`), and an approval is bound to the plan."""
    declared: Mapping[str, Any] | None = None
    """What else a tool's declaration says that the digest must cover (an MCP tool: its server and its policy's
    resource-key templates); None for the built-in tools, whose identity stays as it was."""

    def identity(self) -> dict[str, Any]:
        """What the plan digest covers: everything that decides how a call is checked and run."""
        if self.declared is not None:
            return {**self._identity(), "declared": dict(self.declared)}
        return self._identity()

    def _identity(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "schema": self.input_schema,
            "safety": self.safety,
            "effect": self.effect,
            "pii": self.pii,
            "timeout_s": self.timeout_s,
            "path_args": list(self.path_args),
        }
