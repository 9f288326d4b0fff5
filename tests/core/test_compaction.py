"""Compaction: the cut never separates a tool_use from its tool_result (a property over generated conversations
compacted the way the loop does it), the summary is bounded and deterministic, and fold refuses a cut that would
break a pair."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from core.compaction import (
    CHARS_PER_TOKEN,
    SUMMARY_HEADER,
    SUMMARY_MAX_CHARS,
    digest,
    messages_chars,
    plan_compaction,
)
from core.events import (
    AssistantMessage,
    BatchCompleted,
    BatchProposed,
    CallResult,
    Compacted,
    Event,
    PlannedCall,
    RepairRequested,
    SessionStarted,
    StoredEvent,
    UserMessage,
)
from core.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from core.state import FoldError, SessionState, apply, fold
from tests.core.test_fold import PROPERTY, assert_request_valid, valid_logs

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Session:
    """Writes a log the way the loop would, folding as it goes."""

    def __init__(self) -> None:
        self.log: list[StoredEvent] = []
        self.state = SessionState()
        self.calls = 0

    def emit(self, event: Event) -> None:
        seq = len(self.log) + 1
        self.log.append(StoredEvent(session_id="s1", seq=seq, at=T0 + timedelta(seconds=seq), turn=0, event=event))
        apply(self.state, self.log[-1])

    def round(self, n_calls: int, size: int, error: bool) -> None:
        ids = []
        for _ in range(n_calls):
            self.calls += 1
            ids.append(f"c{self.calls}")
        calls = tuple(PlannedCall(call_id=c, tool="read_file", input={"path": c}, input_sha256="x") for c in ids)
        self.emit(BatchProposed(batch_id=f"b{self.calls}", calls=calls,
                                content=tuple(ToolUseBlock(id=c.call_id, name=c.tool, input=c.input) for c in calls)))
        for c in ids:
            self.emit(CallResult(batch_id=f"b{self.calls}", call_id=c, tool="read_file",
                                 status="error" if error else "ok", content="r" * size, is_error=error))
        self.emit(BatchCompleted(batch_id=f"b{self.calls}"))


MOVES = st.tuples(st.sampled_from(["prompt", "round", "round", "round", "answer", "note", "repair"]),
                  st.integers(1, 3), st.integers(0, 600), st.booleans())


@PROPERTY
@given(st.lists(MOVES, min_size=1, max_size=40), st.integers(20, 600), st.integers(0, 400))
# Fewer characters after the cut, but as many tokens once rounded up: no Compacted may record no gain.
@example([("prompt", 1, 149, False), ("round", 1, 0, False), ("round", 1, 0, False)], 20, 1)
def test_compaction_never_separates_a_tool_use_from_its_result(moves: list[tuple[str, int, int, bool]],
                                                              budget: int, overhead: int) -> None:
    """Compacting before every model turn, as the loop does, always leaves a valid request: the summary first,
    then an assistant message, every tool_use answered first in the next user message, no orphan tool_result;
    and the log with its Compacted events folds to exactly the live conversation."""
    s = Session()
    s.emit(SessionStarted(session_id="s1", mode="headless", workspace="/ws", model="m", max_turns=99,
                          plan_digest="p"))
    s.emit(UserMessage(text="start"))
    for kind, n, size, flag in moves:
        if kind in ("round", "answer"):  # a model turn: compact first if the request would not fit
            before = list(s.state.messages)
            event = plan_compaction(s.state.messages, s.state.context_chars, overhead_chars=overhead,
                                    budget_tokens=budget)
            if event is not None:
                s.emit(event)
                messages = s.state.messages
                assert messages[0] == Message(role="user", content=(TextBlock(text=event.summary),))
                assert event.summary.startswith(SUMMARY_HEADER)
                assert messages[1].role == "assistant"
                assert messages[1:] == before[event.upto_message:]
                assert len(event.summary) <= SUMMARY_MAX_CHARS
                assert event.tokens_after < event.tokens_before
                assert event.tokens_before > budget
                assert_request_valid(messages)
        match kind:
            case "prompt":
                s.emit(UserMessage(text="p" * size))
            case "note":
                s.emit(UserMessage(text="n" * size, source="runtime"))
            case "repair":
                s.emit(RepairRequested(reason="r", instruction="fix" * (size // 3), by="builtin:test"))
            case "round":
                s.round(n, size, flag)
            case "answer":
                s.emit(AssistantMessage(content=(TextBlock(text="a" * size),)))
        assert s.state.context_chars == messages_chars(s.state.messages)
        assert_request_valid(s.state.messages)
    assert fold(s.log) == s.state


@PROPERTY
@given(valid_logs())
def test_context_size_is_kept_current_by_apply(log: list[StoredEvent]) -> None:
    """The state's conversation size always equals a count over its messages (it is what the budget reads)."""
    state = fold(log)
    assert state.context_chars == messages_chars(state.messages)


def conversation(rounds: int, size: int = 100) -> SessionState:
    s = Session()
    s.emit(SessionStarted(session_id="s1", mode="headless", workspace="/ws", model="m", max_turns=99,
                          plan_digest="p"))
    s.emit(UserMessage(text="Find the bug."))
    for i in range(rounds):
        s.round(1, size, error=i % 3 == 2)
    s.emit(AssistantMessage(content=(TextBlock(text="Found it."),)))
    s.emit(UserMessage(text="Now fix it."))
    return s.state


def test_no_compaction_under_the_budget() -> None:
    """A request that fits is left alone."""
    state = conversation(5)
    assert plan_compaction(state.messages, state.context_chars, overhead_chars=0, budget_tokens=10_000) is None


def test_no_compaction_without_a_cut_point() -> None:
    """One long user message cannot be compacted: there is no assistant message to cut before."""
    messages = [Message(role="user", content=(TextBlock(text="x" * 10_000),))]
    assert plan_compaction(messages, 10_000, overhead_chars=0, budget_tokens=10) is None


def test_compaction_keeps_the_recent_turns_within_half_the_budget() -> None:
    """The kept tail fits the target (half the budget), and the tail starts with an assistant message."""
    state = conversation(200, size=400)
    budget = 8_000
    event = plan_compaction(state.messages, state.context_chars, overhead_chars=1_000, budget_tokens=budget)
    assert event is not None
    assert state.messages[event.upto_message].role == "assistant"
    kept = messages_chars(state.messages[event.upto_message:])
    assert kept <= budget * CHARS_PER_TOKEN // 2
    assert event.tokens_after <= budget // 2 + 100


def test_digest_is_bounded_deterministic_and_keeps_both_ends() -> None:
    """A huge conversation digests within the bound, the same way twice, with its first prompt and latest
    calls; the middle is counted, not silently dropped."""
    state = conversation(2_000)
    first, second = digest(state.messages), digest(list(state.messages))
    assert first == second
    assert len(first) <= SUMMARY_MAX_CHARS
    assert "- user: Find the bug." in first
    assert "entries left out)" in first
    assert first.splitlines()[-1].startswith("- user: Now fix it.")
    assert "-> error:" in first and "-> ok:" in first


def test_a_second_compaction_carries_the_first_summary_forward() -> None:
    """Compacting again summarizes the earlier summary's entries too, still within the bound."""
    s = Session()
    s.emit(SessionStarted(session_id="s1", mode="headless", workspace="/ws", model="m", max_turns=99,
                          plan_digest="p"))
    s.emit(UserMessage(text="The very first request."))
    for _ in range(3):
        for _ in range(30):
            s.round(1, 300, error=False)
        event = plan_compaction(s.state.messages, s.state.context_chars, overhead_chars=0, budget_tokens=2_000)
        assert event is not None
        s.emit(event)
    assert s.state.compactions == 3
    summary = s.state.messages[0].content[0]
    assert isinstance(summary, TextBlock)
    assert "- user: The very first request." in summary.text
    assert summary.text.count(SUMMARY_HEADER) == 1
    assert len(summary.text) <= SUMMARY_MAX_CHARS
    lines = summary.text.splitlines()
    left_out = [i for i, line in enumerate(lines) if line.endswith("entries left out)")]
    assert len(left_out) == 1, "counts of left-out entries merge into one line"
    assert int(lines[left_out[0]].split("(")[1].split()[0]) > 60  # most of the 90 calls, counted


def test_tool_result_excerpt_in_summary_is_clipped() -> None:
    """A long tool result appears in the summary clipped to one short line."""
    messages = [Message(role="user", content=(TextBlock(text="go"),)),
                Message(role="assistant", content=(ToolUseBlock(id="c1", name="bash", input={"command": "ls"}),)),
                Message(role="user", content=(ToolResultBlock(tool_use_id="c1", content="line\n" * 5_000),))]
    (line,) = [entry for entry in digest(messages).splitlines() if entry.startswith("- called")]
    assert line.startswith('- called bash {"command":"ls"} -> ok: line line')
    assert len(line) < 250


@pytest.mark.parametrize("upto", [0, 2, 4, 99])
def test_fold_refuses_a_cut_that_could_break_a_pair(upto: int) -> None:
    """A Compacted event must cut just before an assistant message: elsewhere it is a FoldError."""
    s = Session()
    s.emit(SessionStarted(session_id="s1", mode="headless", workspace="/ws", model="m", max_turns=9, plan_digest="p"))
    s.emit(UserMessage(text="go"))
    s.round(1, 10, error=False)
    s.round(1, 10, error=False)
    # messages: user, assistant(tool_use), user(tool_result), assistant(tool_use), user(tool_result)
    bad = StoredEvent(session_id="s1", seq=len(s.log) + 1, at=T0, turn=0,
                      event=Compacted(upto_message=upto, summary="s", tokens_before=2, tokens_after=1))
    with pytest.raises(FoldError, match="cannot compact"):
        fold([*s.log, bad])
    good = bad.model_copy(update={"event": Compacted(upto_message=3, summary="s", tokens_before=2, tokens_after=1)})
    assert [m.role for m in fold([*s.log, good]).messages] == ["user", "assistant", "user"]
