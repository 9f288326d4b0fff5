"""fold: golden logs replayed against committed expectations, the state machine's refusals, and properties of
fold over generated valid logs (incremental apply equals fold, requests valid by construction, determinism)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.events import (
    AssistantMessage,
    BatchCompleted,
    BatchProposed,
    BlobRef,
    CallResult,
    CallStatus,
    Compacted,
    Event,
    KnowledgeChanged,
    PlannedCall,
    RulesAdded,
    SessionEnded,
    SessionResumed,
    SessionStarted,
    StoredEvent,
    TurnVerified,
    UserMessage,
)
from core.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from core.policy import PermissionRule
from core.state import FoldError, SessionState, apply, fold
from tests.golden import make_golden
from tests.golden.make_golden import summarize

GOLDEN = Path(make_golden.__file__).resolve().parent
GOLDEN_CASES = ["simple_completed", "mixed_batch", "crash_after_receipt", "resumed_unknown",
                "reconciled_after_resume", "rules_added_on_resume", "user_merge_after_batch", "compacted_with_blob"]
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def read_log(name: str) -> list[StoredEvent]:
    text = (GOLDEN / f"{name}.events.jsonl").read_text(encoding="utf-8")
    return [StoredEvent.model_validate_json(line) for line in text.splitlines() if line.strip()]


def expected(name: str) -> dict[str, Any]:
    return json.loads((GOLDEN / f"{name}.expected.json").read_text(encoding="utf-8"))


# -- golden logs ----------------------------------------------------------------------------------------------


def test_golden_directory_holds_exactly_the_known_cases() -> None:
    """Every golden case has both files, and no stray log is left unreplayed."""
    logs = sorted(p.name.removesuffix(".events.jsonl") for p in GOLDEN.glob("*.events.jsonl"))
    expectations = sorted(p.name.removesuffix(".expected.json") for p in GOLDEN.glob("*.expected.json"))
    assert logs == sorted(GOLDEN_CASES)
    assert expectations == sorted(GOLDEN_CASES)


@pytest.mark.parametrize("name", GOLDEN_CASES)
def test_golden_log_folds_to_committed_expectation(name: str) -> None:
    """Replaying a committed log gives exactly the committed folded summary."""
    assert summarize(fold(read_log(name))) == expected(name)


PROJECT_HOOK_FIELDS = ("project_hooks_digest", "project_hooks_waived_by")


def _without_project_hook_fields(line: str) -> str:
    """A stored event as Strata wrote it before sessions recorded their trusted project hooks."""
    stored = json.loads(line)
    for key in PROJECT_HOOK_FIELDS:
        stored["event"].pop(key, None)
    return json.dumps(stored, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize("name", GOLDEN_CASES)
def test_a_log_written_before_project_hook_digests_folds_the_same(name: str) -> None:
    """Logs stored before `session_started`/`session_resumed` carried the project hooks digest still load and
    fold to the same state, with no project hooks recorded (so their resume is never refused for them)."""
    lines = (GOLDEN / f"{name}.events.jsonl").read_text(encoding="utf-8").splitlines()
    old = [StoredEvent.model_validate_json(_without_project_hook_fields(line)) for line in lines if line.strip()]
    state = fold(old)
    assert summarize(state) == expected(name)
    assert state.project_hooks_digest is None


def test_the_project_hooks_digest_follows_the_latest_run() -> None:
    """The digest a session started with holds until a resume records the one it continues with (None when a
    person chose to go on without the project's hooks)."""
    started = SessionStarted(session_id="s", mode="headless", workspace="/w", model="m", max_turns=5,
                             plan_digest="p", project_hooks_digest="d1")
    log = [StoredEvent(session_id="s", seq=1, at=T0, turn=0, event=started)]
    assert fold(log).project_hooks_digest == "d1"
    waived = SessionResumed(plan_digest="p", project_hooks_waived_by="person:someone")
    log.append(StoredEvent(session_id="s", seq=2, at=T0, turn=0, event=waived))
    assert fold(log).project_hooks_digest is None
    log.append(StoredEvent(session_id="s", seq=3, at=T0, turn=0,
                           event=SessionResumed(plan_digest="p", project_hooks_digest="d2")))
    assert fold(log).project_hooks_digest == "d2"


def test_a_session_without_knowledge_stores_its_start_and_resume_as_before() -> None:
    """No manifest, no field: the stored JSON of `session_started`/`session_resumed` is what it was before
    sessions recorded a knowledge manifest (so the golden logs and their chains are unchanged)."""
    started = SessionStarted(session_id="s", mode="headless", workspace="/w", model="m", max_turns=5, plan_digest="p")
    assert "knowledge_digest" not in started.model_dump_json()
    assert "knowledge_digest" not in SessionResumed(plan_digest="p").model_dump_json()
    recorded = started.model_copy(update={"knowledge_digest": "kn_1"})
    assert json.loads(recorded.model_dump_json())["knowledge_digest"] == "kn_1"


def test_a_changed_knowledge_manifest_is_pending_until_the_model_is_told() -> None:
    """The resume records the manifest it reads; the model has heard of it only once `knowledge_changed` put
    its notice in the conversation (as runtime text in the next user message)."""
    started = SessionStarted(session_id="s", mode="headless", workspace="/w", model="m", max_turns=5,
                             plan_digest="p", knowledge_digest="kn_1")
    log = [StoredEvent(session_id="s", seq=1, at=T0, turn=0, event=started),
           StoredEvent(session_id="s", seq=2, at=T0, turn=0, event=UserMessage(text="go"))]
    state = fold(log)
    assert (state.knowledge_digest, state.knowledge_told) == ("kn_1", "kn_1")
    log.append(StoredEvent(session_id="s", seq=3, at=T0, turn=0,
                           event=SessionResumed(plan_digest="p2", knowledge_digest="kn_2")))
    state = fold(log)
    assert (state.knowledge_digest, state.knowledge_told) == ("kn_2", "kn_1")
    told = KnowledgeChanged(previous_digest="kn_1", digest="kn_2", changed=("sops/restart",),
                            notice="The knowledge corpus changed: sops/restart was edited.")
    log.append(StoredEvent(session_id="s", seq=4, at=T0, turn=0, event=told))
    state = fold(log)
    assert (state.knowledge_digest, state.knowledge_told) == ("kn_2", "kn_2")
    assert state.messages[-1] == Message(role="user", content=(
        TextBlock(text="go"), TextBlock(text="The knowledge corpus changed: sops/restart was edited.")))


def test_a_knowledge_notice_while_a_batch_is_open_is_refused() -> None:
    """The notice is conversation text: like any user text it cannot land between a proposal and its results."""
    started = SessionStarted(session_id="s", mode="headless", workspace="/w", model="m", max_turns=5, plan_digest="p")
    batch = BatchProposed(batch_id="b", content=(ToolUseBlock(id="c", name="read_file", input={}),),
                          calls=(PlannedCall(call_id="c", tool="read_file", input={}, input_sha256="x"),))
    log = [StoredEvent(session_id="s", seq=1, at=T0, turn=0, event=started),
           StoredEvent(session_id="s", seq=2, at=T0, turn=1, event=batch),
           StoredEvent(session_id="s", seq=3, at=T0, turn=1,
                       event=KnowledgeChanged(previous_digest=None, digest="kn_1", notice="n"))]
    with pytest.raises(FoldError, match="knowledge_changed while batch b is open"):
        fold(log)


@pytest.mark.parametrize("name", GOLDEN_CASES)
def test_golden_log_is_well_formed(name: str) -> None:
    """A golden log is one session, seq 1..n without gaps, starting with session_started."""
    log = read_log(name)
    assert [e.seq for e in log] == list(range(1, len(log) + 1))
    assert len({e.session_id for e in log}) == 1
    assert isinstance(log[0].event, SessionStarted)


def test_golden_files_are_what_the_generator_writes() -> None:
    """make_golden reproduces the committed files byte for byte (logs are built from typed events)."""
    rendered = make_golden.render()
    assert sorted(rendered) == sorted(f"{n}{s}" for n in GOLDEN_CASES for s in (".events.jsonl", ".expected.json"))
    for file_name, text in rendered.items():
        assert (GOLDEN / file_name).read_text(encoding="utf-8") == text, file_name


def test_golden_simple_completed_means_a_finished_conversation() -> None:
    """A completed session folds to user, assistant(tool_use), user(tool_result), assistant(text) and ended."""
    exp = expected("simple_completed")
    assert [m["role"] for m in exp["messages"]] == ["user", "assistant", "user", "assistant"]
    assert exp["messages"][2]["content"] == [{"type": "tool_result", "tool_use_id": "toolu_0001",
                                              "content": "a.txt\nb.txt", "is_error": False}]
    assert (exp["ended"], exp["open_batch"]) == ("completed", None)
    assert exp["counters"]["verified_turns"] == 1


def test_golden_mixed_batch_answers_in_proposal_order() -> None:
    """Results that arrived out of order are answered in proposal order, with is_error on denial and error."""
    exp = expected("mixed_batch")
    results = exp["messages"][2]["content"]
    assert [(r["tool_use_id"], r["is_error"]) for r in results] == [
        ("toolu_0001", False), ("toolu_0002", True), ("toolu_0003", True)]
    assert exp["counters"] == {"assistant_turns": 2, "tool_calls": 3, "denials": 1, "unknown_outcomes": 0,
                                    "verified_turns": 0, "resumes": 0, "repairs": 0, "input_tokens": 0,
                                    "output_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0}
    assert (exp["ended"], exp["end_reason"]) == ("incomplete", "verification failed after 2 repairs")


def test_golden_crash_mid_batch_keeps_partial_results_out_of_messages() -> None:
    """A batch open at the crash is the open_batch with its finished result; messages exclude the whole batch."""
    exp = expected("crash_after_receipt")
    batch = exp["open_batch"]
    assert batch["batch_id"] == "batch_0001"
    assert [r["call_id"] for r in batch["results"]] == ["toolu_0001"]
    assert batch["pending"] == ["toolu_0002", "toolu_0003"]
    assert [m["role"] for m in exp["messages"]] == ["user"]
    assert all(b["type"] == "text" for m in exp["messages"] for b in m["content"])


def test_golden_resumed_unknown_outcome_is_remembered() -> None:
    """After resume, the unknown outcome is answered to the model and its receipt stays awaiting reconciliation."""
    exp = expected("resumed_unknown")
    assert exp["unknown_receipts"] == {"rcpt_0001": "toolu_0002"}
    assert exp["counters"]["unknown_outcomes"] == 1
    assert exp["counters"]["resumes"] == 1
    assert exp["session"]["plan_digest"] == "plan-v2"
    results = exp["messages"][2]["content"]
    assert results[1] == {"type": "tool_result", "tool_use_id": "toolu_0002", "content": make_golden.UNKNOWN_NOTICE,
                          "is_error": True}


def test_golden_reconciliation_notice_clears_the_unknown_receipt() -> None:
    """A runtime notice naming the reconciled receipt clears it and merges with the user's text; counters stay."""
    exp = expected("reconciled_after_resume")
    assert exp["unknown_receipts"] == {}
    assert exp["counters"]["unknown_outcomes"] == 1
    assert exp["counters"]["resumes"] == 2
    assert [b["text"] for b in exp["messages"][4]["content"]] == [
        "Receipt rcpt_0001 (write_file toolu_0002) was reconciled: applied.", "Good, please finish."]
    assert exp["ended"] == "completed"


def test_golden_rules_added_on_resume_extend_the_session_rules() -> None:
    """Rules given on resume come after the session's own rules, in order."""
    exp = expected("rules_added_on_resume")
    assert [(r["action"], r["tool"], r["pattern"]) for r in exp["rules"]] == [
        ("allow", "read_file", None), ("allow", "bash", "git status*"), ("deny", "bash", "rm *")]
    assert (exp["ended"], exp["counters"]["resumes"]) == ("completed", 1)


def test_golden_user_text_after_a_batch_merges_behind_the_results() -> None:
    """User text after a batch joins the tool_result message, after the results, never before them."""
    exp = expected("user_merge_after_batch")
    assert [m["role"] for m in exp["messages"]] == ["user", "assistant", "user", "assistant"]
    assert [b["type"] for b in exp["messages"][0]["content"]] == ["text", "text"]
    assert [b["type"] for b in exp["messages"][2]["content"]] == ["tool_result", "tool_result", "text", "text"]
    assert exp["session"]["parent_id"] == "01950000-0000-7000-8000-0000000000aa"
    assert exp["ended"] is None


# -- refusals -------------------------------------------------------------------------------------------------


def started(session_id: str = "s1") -> SessionStarted:
    return SessionStarted(session_id=session_id, mode="headless", workspace="/ws", model="m", max_turns=5,
                          plan_digest="p")


def planned(*call_ids: str) -> tuple[PlannedCall, ...]:
    return tuple(PlannedCall(call_id=c, tool="read_file", input={"path": c}, input_sha256="x") for c in call_ids)


def proposed(batch_id: str, *call_ids: str) -> BatchProposed:
    calls = planned(*call_ids)
    return BatchProposed(batch_id=batch_id, calls=calls,
                         content=tuple(ToolUseBlock(id=c.call_id, name=c.tool, input=c.input) for c in calls))


def ok(batch_id: str, call_id: str) -> CallResult:
    return CallResult(batch_id=batch_id, call_id=call_id, tool="read_file", status="ok", content="ok", is_error=False)


def stored(*events: Event, seqs: list[int] | None = None) -> list[StoredEvent]:
    seqs = seqs or list(range(1, len(events) + 1))
    return [StoredEvent(session_id="s1", seq=s, at=T0 + timedelta(seconds=s), turn=0, event=e)
            for s, e in zip(seqs, events, strict=True)]


REFUSALS: dict[str, tuple[Callable[[], list[StoredEvent]], str]] = {
    "result_without_open_batch": (lambda: stored(started(), ok("b1", "c1")), "b1, which is not open"),
    "result_for_another_batch": (lambda: stored(started(), proposed("b1", "c1"), ok("b2", "c1")),
                                 "b2, which is not open"),
    "result_for_unproposed_call": (lambda: stored(started(), proposed("b1", "c1"), ok("b1", "c9")),
                                   "did not propose"),
    "second_result_for_a_call": (lambda: stored(started(), proposed("b1", "c1"), ok("b1", "c1"), ok("b1", "c1")),
                                 "second call_result"),
    "second_session_started": (lambda: stored(started(), started()), "second session_started"),
    "batch_completed_with_missing_results": (
        lambda: stored(started(), proposed("b1", "c1", "c2", "c3"), ok("b1", "c2"), BatchCompleted(batch_id="b1")),
        "without results for c1, c3"),
    "batch_completed_not_open": (lambda: stored(started(), BatchCompleted(batch_id="b1")), "b1, which is not open"),
    "batch_without_calls": (lambda: stored(started(), BatchProposed(batch_id="b1", content=(), calls=())),
                            "has no calls"),
    "seq_repeated": (lambda: stored(started(), UserMessage(text="a"), UserMessage(text="b"), seqs=[1, 2, 2]),
                     "seq 2 does not follow 2"),
    "seq_going_back": (lambda: stored(started(), UserMessage(text="a"), UserMessage(text="b"), seqs=[1, 5, 3]),
                       "seq 3 does not follow 5"),
    "log_not_starting_with_session_started": (lambda: stored(UserMessage(text="hi"), started()),
                                              "starts with user_message"),
    "user_message_while_batch_open": (lambda: stored(started(), proposed("b1", "c1"), UserMessage(text="x")),
                                      "user_message while batch b1 is open"),
    "assistant_message_while_batch_open": (
        lambda: stored(started(), proposed("b1", "c1"), AssistantMessage(content=(TextBlock(text="x"),))),
        "assistant_message while batch b1 is open"),
    "batch_while_batch_open": (lambda: stored(started(), proposed("b1", "c1"), proposed("b2", "c2")),
                               "batch_proposed while batch b1 is open"),
    "session_ended_while_batch_open": (
        lambda: stored(started(), proposed("b1", "c1"), SessionEnded(status="completed")),
        "session_ended while batch b1 is open"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_fold_refuses_an_impossible_log(case: str) -> None:
    """A log that breaks the state machine is a FoldError naming what is wrong."""
    build, message = REFUSALS[case]
    with pytest.raises(FoldError, match=message):
        fold(build())


def test_fold_of_an_empty_log_is_an_error() -> None:
    """There is no state without a session_started."""
    with pytest.raises(FoldError, match="empty log"):
        fold([])


def test_fold_accepts_gaps_in_seq() -> None:
    """Seq must increase, not be contiguous: last_seq is the highest seen."""
    state = fold(stored(started(), UserMessage(text="a"), seqs=[3, 10]))
    assert state.last_seq == 10
    assert [m.role for m in state.messages] == ["user"]


def test_fold_builds_a_fresh_state_each_time() -> None:
    """fold is pure: two folds of one log are equal but independent objects."""
    log = read_log("resumed_unknown")
    first, second = fold(log), fold(log)
    assert first == second
    first.messages.clear()
    first.counters.tool_calls = 99
    assert second == fold(log)


# -- properties over generated valid logs ---------------------------------------------------------------------

STATUSES: tuple[CallStatus, ...] = ("ok", "error", "denied", "timeout", "unknown")
RULE_CHOICES = (PermissionRule(action="allow", tool="read_file"), PermissionRule(action="deny", tool="bash"),
                PermissionRule(action="allow", tool="bash", pattern="git *", source="resume"))


class Digits:
    """Reads small choices out of one drawn integer, so a whole step costs hypothesis one draw (and shrinks to
    the simplest choice, 0)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def take(self, n: int) -> int:
        self.value, choice = divmod(self.value, n)
        return choice

    def pick(self, options: list[Any] | tuple[Any, ...]) -> Any:
        return options[self.take(len(options))]

    def rules(self) -> tuple[PermissionRule, ...]:
        return tuple(r for r in RULE_CHOICES if self.take(2))

    def text(self) -> str:
        return "ab "[: self.take(4)]


@st.composite
def valid_logs(draw: st.DrawFn) -> list[StoredEvent]:
    """A random log the runtime could have written: a small state machine that only emits legal next events
    (it folds as it goes, to know where a compaction may cut)."""
    log: list[StoredEvent] = []
    state = SessionState()
    seq, turn = 0, 0
    open_batch: str | None = None
    pending: list[str] = []
    batches, calls = 0, 0
    unknown: list[str] = []

    def emit(event: Event, gap: int) -> None:
        nonlocal seq, turn
        if isinstance(event, AssistantMessage | BatchProposed):
            turn += 1
        seq += 1 + gap
        log.append(StoredEvent(session_id="s1", seq=seq, at=T0 + timedelta(seconds=seq), turn=turn, event=event))
        apply(state, log[-1])

    first, *moves = draw(st.lists(st.integers(0, 2**40), min_size=1, max_size=40))
    emit(SessionStarted(session_id="s1", mode="headless", workspace="/ws", model="m", max_turns=9,
                        plan_digest="p0", rules=Digits(first).rules()), 0)
    for move in moves:
        d = Digits(move)
        gap = d.take(3) // 2
        if open_batch is not None:  # mostly move the batch on; a crash is simply the log ending here
            options = ["result" if pending else "complete"] * 6 + ["rules", "resumed", "verified"]
        else:
            options = ["user", "runtime", "runtime", "assistant", "batch", "batch", "rules", "resumed", "verified",
                       "ended", "compact", "compact", "compact"]
        match d.pick(options):
            case "user":
                emit(UserMessage(text=d.text()), gap)
            case "runtime":
                cleared = tuple(r for r in [*unknown, "rcpt_never"] if d.take(2))
                emit(UserMessage(text=d.text(), source="runtime", reconciled_receipts=cleared), gap)
            case "assistant":
                emit(AssistantMessage(content=(TextBlock(text=d.text()),)), gap)
            case "batch":
                batches += 1
                open_batch = f"b{batches}"
                pending = []
                for _ in range(1 + d.take(3)):
                    calls += 1
                    pending.append(f"c{calls}")
                proposal = proposed(open_batch, *pending)
                if d.take(2):
                    proposal = proposal.model_copy(update={"content": (TextBlock(text="plan"), *proposal.content)})
                emit(proposal, gap)
            case "result":
                assert open_batch is not None
                call_id = pending.pop(d.take(len(pending)))
                status = d.pick(STATUSES)
                receipt = f"rcpt_{call_id}" if status == "unknown" and d.take(2) else None
                if receipt:
                    unknown.append(receipt)
                blob = BlobRef(sha256=f"{call_id:0>64}", size=20_000) if d.take(4) == 0 else None
                emit(CallResult(batch_id=open_batch, call_id=call_id, tool="read_file", status=status,
                                content=d.text(), is_error=status != "ok", receipt_id=receipt, blob=blob), gap)
            case "complete":
                assert open_batch is not None
                emit(BatchCompleted(batch_id=open_batch), gap)
                open_batch = None
            case "rules":
                emit(RulesAdded(rules=d.rules()), gap)
            case "resumed":
                emit(SessionResumed(plan_digest=f"p{seq}", open_batch_id=open_batch), gap)
            case "verified":
                emit(TurnVerified(), gap)
            case "ended":
                emit(SessionEnded(status=d.pick(("completed", "incomplete", "failed"))), gap)
            case "compact":
                cuts = [i for i, m in enumerate(state.messages) if i and m.role == "assistant"]
                if cuts:
                    emit(Compacted(upto_message=d.pick(cuts), summary=f"summary {d.text()}", tokens_before=9,
                                   tokens_after=3), gap)
                else:
                    emit(UserMessage(text=d.text()), gap)
    return log


PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(valid_logs())
def test_fold_of_a_prefix_then_apply_equals_fold(log: list[StoredEvent]) -> None:
    """Restoring from any prefix and applying the rest live gives the same state as folding the whole log."""
    whole = fold(log)
    for i in range(1, len(log) + 1):
        state = fold(log[:i])
        for event in log[i:]:
            apply(state, event)
        assert state == whole


def assert_request_valid(messages: list[Message]) -> None:
    """Every tool_use has exactly one tool_result, together and first in the next user message, in order;
    no tool_result answers anything else."""
    answered = 0
    for k, message in enumerate(messages):
        uses = [b.id for b in message.content if isinstance(b, ToolUseBlock)]
        results = [b for b in message.content if isinstance(b, ToolResultBlock)]
        if message.role == "assistant":
            assert results == []
            if uses:
                assert k + 1 < len(messages), "a tool_use with no next message"
                reply = messages[k + 1]
                assert reply.role == "user"
                head = reply.content[:len(uses)]
                assert all(isinstance(b, ToolResultBlock) for b in head)
                assert [b.tool_use_id for b in head if isinstance(b, ToolResultBlock)] == uses
                answered += len(uses)
        else:
            assert uses == []
            previous = messages[k - 1] if k else None
            expected_ids = [] if previous is None else [b.id for b in previous.content if isinstance(b, ToolUseBlock)]
            assert [b.tool_use_id for b in results] == expected_ids
    assert answered == sum(isinstance(b, ToolResultBlock) for m in messages for b in m.content)


@PROPERTY
@given(valid_logs())
def test_folded_messages_are_a_valid_request(log: list[StoredEvent]) -> None:
    """The folded conversation pairs every tool_use with one tool_result and leaves the open batch out."""
    state = fold(log)
    assert_request_valid(state.messages)
    if state.open_batch is not None:
        open_ids = {c.call_id for c in state.open_batch.calls}
        in_messages = {b.id for m in state.messages for b in m.content if isinstance(b, ToolUseBlock)}
        assert not open_ids & in_messages


@PROPERTY
@given(valid_logs())
def test_fold_is_deterministic_and_survives_a_json_round_trip(log: list[StoredEvent]) -> None:
    """The same log folds to equal states, whether passed as a list, an iterator, or re-read from JSON lines."""
    first = fold(log)
    assert fold(log) == first
    assert fold(iter(log)) == first
    reread = [StoredEvent.model_validate_json(e.model_dump_json()) for e in log]
    assert fold(reread) == first
    assert summarize(fold(reread)) == summarize(first)


@PROPERTY
@given(valid_logs())
def test_counters_agree_with_the_log(log: list[StoredEvent]) -> None:
    """Guard counters are counts of the events that drive them, so limits hold across resume."""
    state = fold(log)
    kinds = [e.event.kind for e in log]
    results = [e.event for e in log if isinstance(e.event, CallResult)]
    assert state.counters.assistant_turns == kinds.count("assistant_message") + kinds.count("batch_proposed")
    assert state.counters.tool_calls == len(results)
    assert state.counters.denials == sum(r.status == "denied" for r in results)
    assert state.counters.unknown_outcomes == sum(r.status == "unknown" for r in results)
    assert state.counters.resumes == kinds.count("session_resumed")
    assert state.counters.verified_turns == kinds.count("turn_verified")
    assert state.last_seq == log[-1].seq


def test_session_resumed_written_before_max_turns_existed_still_folds() -> None:
    """A session_resumed payload without `max_turns` (schema before it was added) parses, with no new limit."""
    from core.events import EventAdapter

    event = EventAdapter.validate_json('{"kind":"session_resumed","plan_digest":"p","open_batch_id":null}')
    assert event.kind == "session_resumed" and event.max_turns is None
