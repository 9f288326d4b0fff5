"""Build the golden event logs from typed events, and the folded summary each one is expected to give.

Run from the repository root: `python -m tests.golden.make_golden`. It rewrites `NAME.events.jsonl` (one
`StoredEvent.model_dump_json()` per line) and `NAME.expected.json` (`summarize(fold(events))`) for every case.
tests/core/test_fold.py replays the committed files, so regenerate only when a change to fold is intended,
and review the diff of the expected files: it is the behaviour change."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from core.events import (
    AssistantMessage,
    BatchCompleted,
    BatchProposed,
    BlobRef,
    CallResult,
    CallStatus,
    Compacted,
    Event,
    PlannedCall,
    RulesAdded,
    SessionEnded,
    SessionResumed,
    SessionStarted,
    StoredEvent,
    TurnVerified,
    UserMessage,
)
from core.hashing import sha256_json
from core.messages import ContentBlock, TextBlock, ToolUseBlock
from core.policy import PermissionRule
from core.state import SessionState, fold

GOLDEN = Path(__file__).resolve().parent
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
SESSION = "01950000-0000-7000-8000-00000000a11e"


def summarize(state: SessionState) -> dict[str, Any]:
    """The folded state as plain JSON: what a golden file pins down."""
    batch = state.open_batch
    return {
        "session": {"session_id": state.session_id, "mode": state.mode, "workspace": state.workspace,
                    "model": state.model, "max_turns": state.max_turns, "plan_digest": state.plan_digest,
                    "parent_id": state.parent_id},
        "last_seq": state.last_seq,
        "turn": state.turn,
        "messages": [m.to_api() for m in state.messages],
        "open_batch": None if batch is None else {
            "batch_id": batch.batch_id,
            "proposed_seq": batch.proposed_seq,
            "content": [b.model_dump(mode="json") for b in batch.content],
            "calls": [c.model_dump(mode="json") for c in batch.calls],
            "results": [r.model_dump(mode="json") for r in batch.results.values()],
            "pending": [c.call_id for c in batch.pending()],
        },
        "counters": asdict(state.counters),
        "rules": [r.model_dump(mode="json") for r in state.rules],
        "unknown_receipts": dict(state.unknown_receipts),
        "ended": state.ended,
        "end_reason": state.end_reason,
        "context_chars": state.context_chars,
        "compactions": state.compactions,
    }


def dump_summary(summary: dict[str, Any]) -> str:
    return json.dumps(summary, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def dump_events(events: list[StoredEvent]) -> str:
    return "".join(e.model_dump_json() + "\n" for e in events)


class Log:
    """Appends events with the envelope a store would give them: seq 1.., one second apart, the current turn."""

    def __init__(self, session_id: str = SESSION) -> None:
        self.session_id = session_id
        self.events: list[StoredEvent] = []
        self.turn = 0

    def add(self, *events: Event) -> Log:
        for event in events:
            if isinstance(event, AssistantMessage | BatchProposed):
                self.turn += 1
            seq = len(self.events) + 1
            self.events.append(StoredEvent(session_id=self.session_id, seq=seq, at=T0 + timedelta(seconds=seq),
                                           turn=self.turn, event=event))
        return self


def started(*rules: PermissionRule, parent_id: str | None = None) -> SessionStarted:
    return SessionStarted(session_id=SESSION, mode="headless", workspace="/home/dev/project",
                          model="script:golden.json", rules=rules, max_turns=20, plan_digest="plan-v1",
                          parent_id=parent_id)


def call(call_id: str, tool: str, **args: Any) -> PlannedCall:
    return PlannedCall(call_id=call_id, tool=tool, input=args, input_sha256=sha256_json(args))


def batch(batch_id: str, text: str | None, *calls: PlannedCall) -> BatchProposed:
    content: list[ContentBlock] = [TextBlock(text=text)] if text else []
    content += [ToolUseBlock(id=c.call_id, name=c.tool, input=c.input) for c in calls]
    return BatchProposed(batch_id=batch_id, content=tuple(content), calls=calls)


def result(batch_id: str, call_id: str, tool: str, status: CallStatus, content: str, **extra: Any) -> CallResult:
    return CallResult(batch_id=batch_id, call_id=call_id, tool=tool, status=status, content=content,
                      is_error=status != "ok", **extra)


def say(text: str) -> AssistantMessage:
    return AssistantMessage(content=(TextBlock(text=text),))


def rule(action: str, tool: str, pattern: str | None = None, source: str = "flag") -> PermissionRule:
    return PermissionRule(action=action, tool=tool, pattern=pattern, source=source)  # type: ignore[arg-type]


UNKNOWN_NOTICE = "outcome unknown; not re-run; awaiting reconciliation (receipt rcpt_0001)"


def simple_completed() -> Log:
    return Log().add(
        started(),
        UserMessage(text="List the files in the workspace."),
        batch("batch_0001", "I'll look.", call("toolu_0001", "list_dir", path=".")),
        result("batch_0001", "toolu_0001", "list_dir", "ok", "a.txt\nb.txt", duration_ms=3.5),
        BatchCompleted(batch_id="batch_0001"),
        say("There are two files: a.txt and b.txt."),
        TurnVerified(),
        SessionEnded(status="completed"),
    )


def mixed_batch() -> Log:
    calls = (call("toolu_0001", "read_file", path="a.txt"), call("toolu_0002", "bash", command="rm -rf build"),
             call("toolu_0003", "write_file", path="/etc/passwd", content="x"))
    return Log().add(
        started(rule("deny", "bash", "rm *")),
        UserMessage(text="Clean up and fix a.txt."),
        batch("batch_0001", None, *calls),
        # Results arrive out of proposal order (a denial is decided before anything runs); fold answers the
        # tool_uses in proposal order regardless.
        result("batch_0001", "toolu_0002", "bash", "denied", "denied by rule bash(rm *); no effect started",
               check="policy", reasons=("rule deny bash(rm *)",)),
        result("batch_0001", "toolu_0001", "read_file", "ok", "hello", duration_ms=1.25),
        result("batch_0001", "toolu_0003", "write_file", "error", "path /etc/passwd is outside the workspace",
               check="scope", reasons=("outside workspace roots",)),
        BatchCompleted(batch_id="batch_0001"),
        say("I could read a.txt but was not allowed to clean up."),
        SessionEnded(status="incomplete", reason="verification failed after 2 repairs"),
    )


def crash_after_receipt() -> Log:
    calls = (call("toolu_0001", "read_file", path="a.txt"), call("toolu_0002", "write_file", path="a.txt",
                                                                  content="new"),
             call("toolu_0003", "read_file", path="b.txt"))
    return Log().add(
        started(),
        UserMessage(text="Rewrite a.txt."),
        batch("batch_0001", "Reading, then writing.", *calls),
        result("batch_0001", "toolu_0001", "read_file", "ok", "old", duration_ms=2.0),
        # The write_file receipt was committed as dispatched and the process died: no further events.
    )


def resumed_unknown() -> Log:
    return crash_after_receipt().add(
        SessionResumed(plan_digest="plan-v2", open_batch_id="batch_0001"),
        result("batch_0001", "toolu_0002", "write_file", "unknown", UNKNOWN_NOTICE, receipt_id="rcpt_0001"),
        result("batch_0001", "toolu_0003", "read_file", "ok", "bee", duration_ms=1.0),
        BatchCompleted(batch_id="batch_0001"),
        say("The write may or may not have happened; I'll wait."),
        SessionEnded(status="incomplete", reason="1 effect awaits reconciliation"),
    )


def reconciled_after_resume() -> Log:
    return resumed_unknown().add(
        SessionResumed(plan_digest="plan-v2"),
        UserMessage(text="Receipt rcpt_0001 (write_file toolu_0002) was reconciled: applied.", source="runtime",
                    reconciled_receipts=("rcpt_0001",)),
        UserMessage(text="Good, please finish."),
        say("a.txt now holds the new text."),
        TurnVerified(),
        SessionEnded(status="completed"),
    )


def rules_added_on_resume() -> Log:
    return Log().add(
        started(rule("allow", "read_file")),
        UserMessage(text="What is the git status?"),
        say("I need permission to run bash."),
        SessionEnded(status="incomplete", reason="bash is not allowed in headless mode"),
        SessionResumed(plan_digest="plan-v2"),
        RulesAdded(rules=(rule("allow", "bash", "git status*"), rule("deny", "bash", "rm *"))),
        UserMessage(text="You may run git status now."),
        batch("batch_0001", None, call("toolu_0001", "bash", command="git status")),
        result("batch_0001", "toolu_0001", "bash", "ok", "nothing to commit", duration_ms=40.0),
        BatchCompleted(batch_id="batch_0001"),
        say("The working tree is clean."),
        TurnVerified(),
        SessionEnded(status="completed"),
    )


def user_merge_after_batch() -> Log:
    return Log().add(
        started(parent_id="01950000-0000-7000-8000-0000000000aa"),
        UserMessage(text="First, count the lines."),
        UserMessage(text="Then tell me the longest one."),
        batch("batch_0001", "Counting.", call("toolu_0001", "bash", command="wc -l a.txt"),
              call("toolu_0002", "read_file", path="a.txt")),
        result("batch_0001", "toolu_0001", "bash", "timeout", "timed out after 30s", duration_ms=30000.0),
        result("batch_0001", "toolu_0002", "read_file", "ok", "one\nthree"),
        BatchCompleted(batch_id="batch_0001"),
        UserMessage(text="Also ignore blank lines."),
        UserMessage(text="Repair: your answer must name the longest line.", source="runtime"),
        say("The longest line is 'three'."),
    )


BUILD_LOG_BLOB = BlobRef(sha256="5d" * 32, size=100_000)
BUILD_LOG_EXCERPT = ("line 1: compiling\n[... 99000 characters not shown ...]\nBUILD OK (3 warnings)\n"
                     f"[full output (100000 bytes) kept as blob sha256:{'5d' * 32}]")
COMPACTION_SUMMARY = ("[Summary of the earlier conversation, compacted by Strata without a model call: 3 earlier "
                      "messages; the full record stays in the session log.]\n"
                      "- user: Summarize the build log.\n"
                      "- assistant: Reading the log.\n"
                      '- called read_file {"path":"build.log"} -> ok: line 1: compiling [... 99000 characters not '
                      "shown ...]")


def compacted_with_blob() -> Log:
    """A large output kept as a blob (the event holds the excerpt), then a compaction before the next turn: the
    summary replaces the first three messages; the answer after them and everything later stay."""
    return Log().add(
        started(),
        UserMessage(text="Summarize the build log."),
        batch("batch_0001", "Reading the log.", call("toolu_0001", "read_file", path="build.log")),
        result("batch_0001", "toolu_0001", "read_file", "ok", BUILD_LOG_EXCERPT, blob=BUILD_LOG_BLOB,
               duration_ms=4.0),
        BatchCompleted(batch_id="batch_0001"),
        say("The build passed with 3 warnings."),
        TurnVerified(),
        SessionEnded(status="completed"),
        SessionResumed(plan_digest="plan-v1"),
        UserMessage(text="Now list the warnings."),
        Compacted(upto_message=3, summary=COMPACTION_SUMMARY, tokens_before=2100, tokens_after=120),
        batch("batch_0002", None, call("toolu_0002", "bash", command="grep warning build.log")),
        result("batch_0002", "toolu_0002", "bash", "ok", "w1\nw2\nw3", duration_ms=12.0),
        BatchCompleted(batch_id="batch_0002"),
        say("The warnings are w1, w2 and w3."),
        TurnVerified(),
        SessionEnded(status="completed"),
    )


CASES: dict[str, Callable[[], Log]] = {
    "simple_completed": simple_completed,
    "mixed_batch": mixed_batch,
    "crash_after_receipt": crash_after_receipt,
    "resumed_unknown": resumed_unknown,
    "reconciled_after_resume": reconciled_after_resume,
    "rules_added_on_resume": rules_added_on_resume,
    "user_merge_after_batch": user_merge_after_batch,
    "compacted_with_blob": compacted_with_blob,
}


def render() -> dict[str, str]:
    """File name -> content for every golden file."""
    files: dict[str, str] = {}
    for name, build in CASES.items():
        events = build().events
        files[f"{name}.events.jsonl"] = dump_events(events)
        files[f"{name}.expected.json"] = dump_summary(summarize(fold(events)))
    return files


def main() -> None:
    for name, text in render().items():
        (GOLDEN / name).write_text(text, encoding="utf-8")
        print(f"wrote tests/golden/{name}")


if __name__ == "__main__":
    main()
