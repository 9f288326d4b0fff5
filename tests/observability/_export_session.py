"""A hand-built session for the exporter tests, committed through the in-memory store the way the runtime commits
(events and their timeline rows together), on a clock the test moves. It holds every kind of call the exporters
draw: allowed, denied, approved, rejected, an unknown outcome, parked and not yet run; a retried model attempt;
a three-hour idle gap before a resume; planted secrets in arguments, results, the prompt and the title."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from core.events import (
    ApprovalGranted,
    ApprovalRejected,
    AssistantMessage,
    BatchCompleted,
    BatchProposed,
    CallResult,
    CallsParked,
    ParkedCall,
    PlannedCall,
    SessionEnded,
    SessionResumed,
    SessionStarted,
    TurnVerified,
    UserMessage,
)
from core.hashing import sha256_json
from core.masking import Masker
from core.messages import TextBlock, ToolUseBlock
from core.timeline import TimelineEntry
from memory import InMemoryEventStore, NewReceipt, ReceiptUpdate, SessionRecord, Write
from observability.export import SessionSnapshot, load_snapshot

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
SID = "01900000-0000-7000-8000-00000000e7e7"
MODEL = "anthropic:claude-test-1"
AWS_KEY = "AKIAZ7QX3MPLE4TESTK9"
GH_TOKEN = "ghp_Zq8Lw3Rt5Yu7Io9Pa1Sd3Fg5Hj7Kl9Xc2Vb4"
EMAIL = "ops.lead@example.org"
URL_PASSWORD = "Hunter2Rosebud77x"
HOSTILE = "</script><img src=x onerror=alert(1)>"
SECRETS = (AWS_KEY, GH_TOKEN, EMAIL, URL_PASSWORD)
MASKER_KEY = b"export-tests-key-0123456789abcdef"


class ManualClock:
    def __init__(self, start: datetime) -> None:
        self.t = start

    def now(self) -> datetime:
        return self.t

    def advance(self, **delta: float) -> None:
        self.t += timedelta(**delta)


def masker() -> Masker:
    return Masker(MASKER_KEY)


def planned(call_id: str, tool: str, **args: Any) -> PlannedCall:
    return PlannedCall(call_id=call_id, tool=tool, input=args, input_sha256=sha256_json(args))


def batch(batch_id: str, text: str, *calls: PlannedCall) -> BatchProposed:
    content = (TextBlock(text=text), *(ToolUseBlock(id=c.call_id, name=c.tool, input=c.input) for c in calls))
    return BatchProposed(batch_id=batch_id, content=content, calls=calls)


def result(batch_id: str, call: PlannedCall, status: str, content: str, *, ms: float | None = None,
           receipt: str | None = None, check: str | None = None) -> CallResult:
    return CallResult(batch_id=batch_id, call_id=call.call_id, tool=call.tool, status=status,  # type: ignore[arg-type]
                      content=content, is_error=status != "ok", duration_ms=ms, receipt_id=receipt, check=check)


def call_row(turn: int, call: PlannedCall, decision: str, outcome: str | None, *, ms: float | None = None,
             check: str = "policy", steps: list[list[str]] | None = None, receipt: str | None = None) -> TimelineEntry:
    data: dict[str, Any] = {"steps": steps or [["policy", "allow" if decision == "allowed" else "deny", check]],
                            "input_sha256": call.input_sha256, "plan_digest": "plan_t"}
    if receipt:
        data["receipt_id"] = receipt
    return TimelineEntry(kind="call", turn=turn, call_id=call.call_id, tool=call.tool, decision=decision,  # type: ignore[arg-type]
                         check=check, outcome=outcome, duration_ms=ms, summary=f"{call.tool} -> {outcome}", data=data)


def attempt(turn: int, outcome: str, ms: float, *, number: int = 1, usage: tuple[int, int] | None = None,
            **extra: Any) -> TimelineEntry:
    data: dict[str, Any] = {"number": number, **extra}
    if usage:
        data["usage"] = {"input_tokens": usage[0], "output_tokens": usage[1], "cache_read_tokens": 0,
                         "cache_write_tokens": 0}
    return TimelineEntry(kind="model_attempt", turn=turn, outcome=outcome, duration_ms=ms,
                         check=extra.get("error_kind"), summary=f"attempt {number}: {outcome}", data=data)


def lifecycle(turn: int, what: str, summary: str) -> TimelineEntry:
    return TimelineEntry(kind="lifecycle", turn=turn, outcome=what, summary=summary)


@dataclass
class Built:
    store: InMemoryEventStore
    clock: ManualClock
    calls: dict[str, PlannedCall]
    boundary_seqs: list[int]
    """Seqs of the batch_completed events."""


async def build_session() -> Built:
    clock = ManualClock(T0)
    store = InMemoryEventStore(clock=clock)
    c1 = planned("c1", "read_file", path="notes.txt")
    c2 = planned("c2", "bash", command=f"psql postgres://admin:{URL_PASSWORD}@db.internal/app")
    c3 = planned("c3", "write_file", path="creds.env", content=f"AWS_ACCESS_KEY_ID={AWS_KEY}\n")
    c4 = planned("c4", "bash", command="make deploy")
    c5 = planned("c5", "bash", command="sleep 600")
    c6 = planned("c6", "bash", command=f"echo '{HOSTILE}'")
    c7 = planned("c7", "bash", command="rm -rf build")
    c8 = planned("c8", "read_file", path="after.txt")
    started = SessionStarted(session_id=SID, mode="headless", workspace="/ws", model=MODEL, max_turns=10,
                             plan_digest="plan_t")
    record = SessionRecord(id=SID, created_at=T0, updated_at=T0, mode="headless", workspace="/ws", model=MODEL,
                           title=f"deploy and mail {EMAIL}", status="active")
    await store.create_session(record, Write(events=[(started, 0), (UserMessage(text=f"deploy; mail {EMAIL}"), 0)],
                                             timeline=[lifecycle(0, "started", "session started")]))
    boundaries: list[int] = []

    # Turn 1: a retried model call, then a read, a denial and an effect with a receipt.
    clock.advance(seconds=1.5)
    await store.commit(SID, Write(events=[(batch("b1", "Reading first.", c1, c2, c3), 1)], timeline=[
        attempt(1, "retry", 300, number=1, error_kind="overloaded", status_code=529, delay_s=0.5),
        attempt(1, "ok", 400, number=2, usage=(1200, 80))]))
    clock.advance(milliseconds=10)
    await store.commit(SID, Write(
        events=[(result("b1", c1, "ok", f"token={GH_TOKEN}\nhello", ms=4), 1),
                (result("b1", c2, "denied", "denied by rule deny bash(psql*)", check="policy"), 1)],
        new_receipts=[NewReceipt(id="r3", call_id="c3", tool="write_file", idempotency_key=f"{SID}:c3:x",
                                 args_sha256=c3.input_sha256)],
        timeline=[call_row(1, c1, "allowed", "ok", ms=4),
                  call_row(1, c2, "denied", "denied", check="rule deny bash(psql*)")]))
    clock.advance(milliseconds=30)
    stored = await store.commit(SID, Write(
        events=[(result("b1", c3, "ok", "wrote 38 bytes", ms=25, receipt="r3"), 1), (BatchCompleted(batch_id="b1"), 1)],
        receipt_updates=[ReceiptUpdate(id="r3", status="done")],
        timeline=[call_row(1, c3, "allowed", "ok", ms=25, receipt="r3")]))
    boundaries.append(stored[-1].seq)

    # Turn 2: one call approved by a person, one rejected, one effect whose outcome is unknown (it timed out).
    clock.advance(seconds=2)
    await store.commit(SID, Write(events=[(batch("b2", "Deploying.", c4, c5, c7), 2)],
                                  timeline=[attempt(2, "ok", 900, usage=(1500, 120))]))
    clock.advance(milliseconds=60)
    await store.commit(SID, Write(
        events=[(ApprovalGranted(call_id="c4", tool="bash", args_sha256=c4.input_sha256, plan_digest="plan_t",
                                 approver="alice"), 2),
                (result("b2", c4, "ok", "deployed", ms=50), 2),
                (ApprovalRejected(call_id="c7", tool="bash", args_sha256=c7.input_sha256, approver="alice",
                                  reason="not now"), 2),
                (result("b2", c7, "denied", "rejected by alice: not now", check="approval"), 2)],
        new_receipts=[NewReceipt(id="r5", call_id="c5", tool="bash", idempotency_key=f"{SID}:c5:x",
                                 args_sha256=c5.input_sha256)],
        timeline=[
            TimelineEntry(kind="approval", turn=2, call_id="c4", tool="bash", decision="approved", check="alice",
                          outcome="approved", summary="asked by rule ask bash"),
            call_row(2, c4, "approved", "ok", ms=50, check="alice",
                     steps=[["policy", "ask", "rule ask bash"], ["approval", "approved", "alice (terminal)"]]),
            call_row(2, c7, "rejected", "denied", check="alice",
                     steps=[["policy", "ask", "rule ask bash"], ["approval", "rejected", "alice (terminal)"]])]))
    clock.advance(seconds=1)
    stored = await store.commit(SID, Write(
        events=[(result("b2", c5, "unknown", "timed out after 1 s; outcome unknown; not re-run", ms=1000,
                        receipt="r5"), 2), (BatchCompleted(batch_id="b2"), 2)],
        receipt_updates=[ReceiptUpdate(id="r5", status="unknown")],
        timeline=[call_row(2, c5, "allowed", "unknown", ms=1000, receipt="r5")]))
    boundaries.append(stored[-1].seq)

    # Three idle hours, a resume, and turn 3: one call parked for approval, one not run yet (the batch is open).
    clock.advance(hours=3)
    await store.commit(SID, Write(events=[(SessionResumed(plan_digest="plan_t"), 2)],
                                  timeline=[lifecycle(2, "resumed", "session resumed")]))
    clock.advance(seconds=1)
    await store.commit(SID, Write(events=[(batch("b3", f"Cleaning up {HOSTILE}", c6, c8), 3)],
                                  timeline=[attempt(3, "ok", 700, usage=(1800, 60))]))
    clock.advance(milliseconds=5)
    parked = ParkedCall(call_id="c6", tool="bash", input=c6.input, input_sha256=c6.input_sha256, plan_digest="plan_t",
                        reasons=("rule ask bash",), asked_by="rule ask bash")
    await store.commit(SID, Write(events=[(CallsParked(batch_id="b3", calls=(parked,)), 3)], status="awaiting_approval",
                                  timeline=[call_row(3, c6, "parked", None, check="rule ask bash",
                                                     steps=[["policy", "ask", "rule ask bash"],
                                                            ["approval", "parked", "waiting"]]),
                                            lifecycle(3, "parked", "waiting for approval of c6")]))
    calls = {c.call_id: c for c in (c1, c2, c3, c4, c5, c6, c7, c8)}
    return Built(store, clock, calls, boundaries)


async def finished_session() -> InMemoryEventStore:
    """A small completed session: one turn with a call, then an answer."""
    clock = ManualClock(T0)
    store = InMemoryEventStore(clock=clock)
    c1 = planned("c1", "read_file", path="a.txt")
    started = SessionStarted(session_id="s-done", mode="headless", workspace="/ws", model="script:/x/turns.json",
                             max_turns=5, plan_digest="p")
    record = SessionRecord(id="s-done", created_at=T0, updated_at=T0, mode="headless", workspace="/ws",
                           model="script:/x/turns.json", title="read a", status="active")
    await store.create_session(record, Write(events=[(started, 0), (UserMessage(text="read a"), 0)]))
    clock.advance(milliseconds=20)
    await store.commit("s-done", Write(events=[(batch("b1", "", c1), 1)], timeline=[attempt(1, "ok", 0.0)]))
    clock.advance(milliseconds=3)
    await store.commit("s-done", Write(
        events=[(result("b1", c1, "ok", "A", ms=1.5), 1), (BatchCompleted(batch_id="b1"), 1)],
        timeline=[call_row(1, c1, "allowed", "ok", ms=1.5)]))
    clock.advance(milliseconds=2)
    await store.commit("s-done", Write(
        events=[(AssistantMessage(content=(TextBlock(text="A it is."),)), 2), (TurnVerified(), 2),
                (SessionEnded(status="completed"), 2)],
        status="completed", timeline=[attempt(2, "ok", 0.0), lifecycle(2, "ended", "session completed")]))
    return store


async def snapshot_of(store: InMemoryEventStore, session_id: str = SID) -> SessionSnapshot:
    return await load_snapshot(store, session_id)
