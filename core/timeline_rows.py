"""Typed timeline rows: one frozen model per kind of observation (phase, model attempt, call, hook, approval,
receipt, lifecycle), in one discriminated union on a `kind` tag written by hand, like the events.

The store keeps every row in one generic, hash-chained shape (`TimelineEntry`: kind, turn, call_id, tool,
decision, check, outcome, duration_ms, summary, data; core/timeline.py), and that shape is what the chain covers,
so it never changes: `entry()` projects a typed row onto it (fields that are absent are left out of `data`, as
the emitters always did), and `observation(row)` reads a stored row back as its typed kind (the exporters read
these fields, never `data` keys). A stored row that does not fit its kind (an older or edited row) is read as
`OtherRow`, so reading never fails on history.

Text here arrives masked: the emitters mask before they build a row."""

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from core.timeline import TimelineDecision, TimelineEntry, entry_of


class _Row(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    turn: int = 0
    summary: str = ""


_PHASE_GIVEN = frozenset({"kind", "turn", "outcome", "summary", "data"})
_ATTEMPT_GIVEN = _PHASE_GIVEN | {"check", "duration_ms"}
_CALL_GIVEN = _ATTEMPT_GIVEN | {"call_id", "tool", "decision"}
_RECEIPT_GIVEN = _PHASE_GIVEN | {"call_id", "tool", "check"}
"""The fields each row builder gives its entry (`entry_of`): the fields set of the entry it always built."""


def _present(**fields: Any) -> dict[str, Any]:
    """`data` as the emitters wrote it: only the fields that are there."""
    return {k: v for k, v in fields.items() if v is not None}


class PhaseRow(_Row):
    """A phase transition of the loop (perceive, plan, commit, act, observe, reflect)."""

    kind: Literal["phase"] = "phase"
    name: str
    batch_id: str | None = None
    calls: tuple[str, ...] | None = None
    notes: tuple[str, ...] | None = None
    """What the plan phase's review of an answer repaired or refused."""

    def entry(self) -> TimelineEntry:
        return phase_entry(self.turn, self.name, self.summary, batch_id=self.batch_id, calls=self.calls,
                           notes=self.notes)

    @classmethod
    def read(cls, e: TimelineEntry) -> "PhaseRow":
        return cls(turn=e.turn, summary=e.summary, name=e.outcome or "", **e.data)


def phase_entry(turn: int, name: str, summary: str, *, batch_id: str | None = None,
                calls: tuple[str, ...] | None = None, notes: tuple[str, ...] | None = None) -> TimelineEntry:
    """`PhaseRow(...).entry()` without building the typed row first: one pydantic validation instead of two (the
    loop stages four phase rows a turn). The same entry, field for field (tests/core/test_timeline_rows.py);
    `TimelineEntry` validates what the stored row holds."""
    data: dict[str, Any] = {}
    if batch_id is not None:
        data["batch_id"] = batch_id
    if calls is not None:
        data["calls"] = list(calls)
    if notes is not None:
        data["notes"] = list(notes)
    return entry_of(_PHASE_GIVEN, "phase", turn, summary, data, outcome=name)


class Usage(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


class ModelAttemptRow(_Row):
    """One attempt of the model path, retries included, with its reason."""

    kind: Literal["model_attempt"] = "model_attempt"
    number: int
    outcome: str
    duration_ms: float | None = None
    error_kind: str | None = None
    status_code: int | None = None
    request_id: str | None = None
    retry_after_s: float | None = None
    delay_s: float | None = None
    usage: Usage | None = None

    def entry(self) -> TimelineEntry:
        return attempt_entry(self.turn, self.number, self.outcome, self.summary, duration_ms=self.duration_ms,
                             error_kind=self.error_kind, status_code=self.status_code, request_id=self.request_id,
                             retry_after_s=self.retry_after_s, delay_s=self.delay_s,
                             usage=None if self.usage is None else self.usage.model_dump())

    @classmethod
    def read(cls, e: TimelineEntry) -> "ModelAttemptRow":
        return cls(turn=e.turn, summary=e.summary, outcome=e.outcome or "", duration_ms=e.duration_ms, **e.data)


def attempt_entry(turn: int, number: int, outcome: str, summary: str, *, duration_ms: float | None = None,
                  error_kind: str | None = None, status_code: int | None = None, request_id: str | None = None,
                  retry_after_s: float | None = None, delay_s: float | None = None,
                  usage: dict[str, int] | None = None) -> TimelineEntry:
    """`ModelAttemptRow(...).entry()` without building the typed row (and its Usage) first, for fields that already
    have the types the row keeps (agent/timeline_rows.py checks that); `usage` as `Usage.model_dump()` gives it."""
    data: dict[str, Any] = {"number": number, **_present(error_kind=error_kind, status_code=status_code,
                                                         request_id=request_id, retry_after_s=retry_after_s,
                                                         delay_s=delay_s)}
    if usage is not None:
        data["usage"] = usage
    return entry_of(_ATTEMPT_GIVEN, "model_attempt", turn, summary, data, outcome=outcome, check=error_kind,
                    duration_ms=duration_ms)


StepEntry = tuple[str, str, str]
"""A decision-path step as the call row stores it: check, outcome, detail (masked)."""


class CallRow(_Row):
    """A call: its decision, what decided it (`by`: a check, rule, hook or person), its outcome and its path."""

    kind: Literal["call"] = "call"
    call_id: str
    tool: str
    decision: TimelineDecision | None = None
    by: str | None = None
    outcome: str | None = None
    duration_ms: float | None = None
    steps: tuple[StepEntry, ...] | None = None
    input_sha256: str | None = None
    plan_digest: str | None = None
    proposed_tool: str | None = None
    receipt_id: str | None = None
    lock: str | None = None
    settled_on_resume: bool | None = None
    """The call was settled from its receipt by a resume, not run (its decision path is the earlier process's)."""
    settled_by: str | None = None
    """Why an open batch was closed around this call (an interrupt, a signal), when it was."""

    def entry(self) -> TimelineEntry:
        return call_entry(turn=self.turn, call_id=self.call_id, tool=self.tool, decision=self.decision, by=self.by,
                          outcome=self.outcome, duration_ms=self.duration_ms, summary=self.summary, steps=self.steps,
                          input_sha256=self.input_sha256, plan_digest=self.plan_digest,
                          proposed_tool=self.proposed_tool, receipt_id=self.receipt_id, lock=self.lock,
                          settled_on_resume=self.settled_on_resume, settled_by=self.settled_by)

    @classmethod
    def read(cls, e: TimelineEntry) -> "CallRow":
        return cls(turn=e.turn, summary=e.summary, call_id=e.call_id or "", tool=e.tool or "", decision=e.decision,
                   by=e.check, outcome=e.outcome, duration_ms=e.duration_ms, **e.data)


def call_entry(*, turn: int, call_id: str, tool: str, summary: str = "", decision: TimelineDecision | None = None,
               by: str | None = None, outcome: str | None = None, duration_ms: float | None = None,
               steps: tuple[StepEntry, ...] | None = None, input_sha256: str | None = None,
               plan_digest: str | None = None, proposed_tool: str | None = None, receipt_id: str | None = None,
               lock: str | None = None, settled_on_resume: bool | None = None,
               settled_by: str | None = None) -> TimelineEntry:
    """`CallRow(...).entry()` without building the typed row first: one pydantic validation instead of two (the
    executor stages one call row per call). The same entry, field for field; `TimelineEntry` validates what the
    stored row holds."""
    data: dict[str, Any] = {}
    if steps is not None:
        data["steps"] = [list(s) for s in steps]
    for name, value in (("input_sha256", input_sha256), ("plan_digest", plan_digest),
                        ("proposed_tool", proposed_tool), ("receipt_id", receipt_id), ("lock", lock),
                        ("settled_on_resume", settled_on_resume), ("settled_by", settled_by)):
        if value is not None:
            data[name] = value
    return entry_of(_CALL_GIVEN, "call", turn, summary, data, call_id=call_id, tool=tool, decision=decision, check=by,
                    outcome=outcome, duration_ms=duration_ms)


class HookRow(_Row):
    """A PreToolUse or PostToolUse hook's verdict on a call."""

    kind: Literal["hook"] = "hook"
    call_id: str
    tool: str
    hook: str
    verdict: str

    def entry(self) -> TimelineEntry:
        return TimelineEntry(kind="hook", turn=self.turn, call_id=self.call_id, tool=self.tool, check=self.hook,
                             outcome=self.verdict, summary=self.summary)

    @classmethod
    def read(cls, e: TimelineEntry) -> "HookRow":
        if e.data:
            raise ValueError("a hook row carries no data")
        return cls(turn=e.turn, summary=e.summary, call_id=e.call_id or "", tool=e.tool or "", hook=e.check or "",
                   verdict=e.outcome or "")


class Asker(BaseModel):
    """Who asked, and who answered (None: nobody yet), on an approval row the pipeline wrote."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    approver: str | None
    asked_by: str


class ApprovalRow(_Row):
    """A decision on a call that asked: who decided (or that it waits), on which argument hash and plan."""

    kind: Literal["approval"] = "approval"
    call_id: str
    tool: str
    decision: TimelineDecision
    by: str
    outcome: str
    args_sha256: str
    plan_digest: str
    asker: Asker | None = None
    """Written by the pipeline; a decision recorded by `strata approve|deny` has none."""

    def entry(self) -> TimelineEntry:
        data: dict[str, Any] = {"args_sha256": self.args_sha256, "plan_digest": self.plan_digest}
        if self.asker is not None:
            data |= self.asker.model_dump()
        return TimelineEntry(kind="approval", turn=self.turn, call_id=self.call_id, tool=self.tool,
                             decision=self.decision, check=self.by, outcome=self.outcome, summary=self.summary,
                             data=data)

    @classmethod
    def read(cls, e: TimelineEntry) -> "ApprovalRow":
        data = dict(e.data)
        asker = None
        if "asked_by" in data:
            asker = Asker(approver=data.pop("approver", None), asked_by=data.pop("asked_by"))
        return cls(turn=e.turn, summary=e.summary, call_id=e.call_id or "", tool=e.tool or "",
                   decision=e.decision or "denied", by=e.check or "", outcome=e.outcome or "", asker=asker, **data)


ReceiptTransition = Literal["dispatched", "done", "failed", "unknown", "reconciled"]
_TRANSITION: TypeAdapter[ReceiptTransition] = TypeAdapter(ReceiptTransition, config=ConfigDict(defer_build=True))


class ReceiptRow(_Row):
    """A transition of an effect receipt (tool_executor/_receipts.py): `dispatched` in the commit that made it
    durable before the handler started, then `done`, `failed` or `unknown`, and `reconciled` when a person or a
    probe decided an uncertain one (`status` then says which way)."""

    kind: Literal["receipt"] = "receipt"
    call_id: str
    tool: str
    receipt_id: str
    transition: ReceiptTransition
    status: str | None = None
    by: str | None = None

    def entry(self) -> TimelineEntry:
        return receipt_entry(turn=self.turn, call_id=self.call_id, tool=self.tool, receipt_id=self.receipt_id,
                             transition=self.transition, status=self.status, by=self.by, summary=self.summary)

    @classmethod
    def read(cls, e: TimelineEntry) -> "ReceiptRow":
        return cls(turn=e.turn, summary=e.summary, call_id=e.call_id or "", tool=e.tool or "",
                   receipt_id=e.check or "", transition=_TRANSITION.validate_python(e.outcome), **e.data)


_TRANSITIONS = frozenset(get_args(ReceiptTransition))


def receipt_entry(*, turn: int, call_id: str, tool: str, receipt_id: str, transition: ReceiptTransition,
                  status: str | None = None, by: str | None = None, summary: str = "") -> TimelineEntry:
    """`ReceiptRow(...).entry()` without building the typed row first: one pydantic validation instead of two (an
    effectful call stages two receipt rows). The same entry, field for field; a transition the row would refuse
    is refused here too."""
    if transition not in _TRANSITIONS:
        raise ValueError(f"not a receipt transition: {transition!r}")
    data: dict[str, Any] = {}
    if status is not None:
        data["status"] = status
    if by is not None:
        data["by"] = by
    return entry_of(_RECEIPT_GIVEN, "receipt", turn, summary, data, call_id=call_id, tool=tool, check=receipt_id,
                    outcome=transition)


class LifecycleRow(_Row):
    """A lifecycle event: started, resumed, forked, compacted, parked, interrupted, ended, ... `details` differ per
    event (digests, counts, call ids) and are kept as they were given, masked."""

    kind: Literal["lifecycle"] = "lifecycle"
    what: str
    details: dict[str, Any] = Field(default_factory=dict)

    def entry(self) -> TimelineEntry:
        return TimelineEntry(kind="lifecycle", turn=self.turn, outcome=self.what, summary=self.summary,
                             data=dict(self.details))

    @classmethod
    def read(cls, e: TimelineEntry) -> "LifecycleRow":
        return cls(turn=e.turn, summary=e.summary, what=e.outcome or "", details=dict(e.data))


class OtherRow(_Row):
    """A stored row that fits none of the kinds above (written by an older Strata, or edited): kept as it is."""

    kind: Literal["other"] = "other"
    entry_: TimelineEntry

    def entry(self) -> TimelineEntry:
        return self.entry_


Observation = Annotated[PhaseRow | ModelAttemptRow | CallRow | HookRow | ApprovalRow | ReceiptRow | LifecycleRow,
                        Field(discriminator="kind")]
"""One typed timeline row, as an emitter builds it."""

OBSERVATION: TypeAdapter[Observation] = TypeAdapter(Observation, config=ConfigDict(defer_build=True))

_READERS: dict[str, Any] = {"phase": PhaseRow, "model_attempt": ModelAttemptRow, "call": CallRow, "hook": HookRow,
                            "approval": ApprovalRow, "receipt": ReceiptRow, "lifecycle": LifecycleRow}
ROW_KINDS: tuple[str, ...] = tuple(_READERS)
"""The kinds of row Strata writes."""


def observation(entry: TimelineEntry) -> Observation | OtherRow:
    """A stored row (or entry) read back as its typed kind; `OtherRow` when it does not fit one."""
    plain = _plain_entry(entry)
    reader = _READERS.get(entry.kind)
    if reader is not None:
        try:
            typed = reader.read(plain)
            if typed.entry() == plain:
                return typed  # type: ignore[no-any-return]
        except (ValidationError, TypeError, ValueError):
            pass
    return OtherRow(turn=entry.turn, summary=entry.summary, entry_=plain)


def _plain_entry(entry: TimelineEntry) -> TimelineEntry:
    """The entry part of a stored row (a TimelineRow also carries its envelope and chain)."""
    if type(entry) is TimelineEntry:
        return entry
    return TimelineEntry.model_construct(**{k: getattr(entry, k) for k in TimelineEntry.model_fields})


def _list(values: tuple[str, ...] | None) -> list[str] | None:
    return None if values is None else list(values)
