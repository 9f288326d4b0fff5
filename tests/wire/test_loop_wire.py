"""The real loop (agent.session start/resume, a real SQLite store) through the real `anthropic` SDK against the
loopback Messages API server: parallel tool calls over several turns, a turn interrupted in a slow tool or in the
middle of the model's stream and then continued, retries recorded as `model_attempt` timeline rows, and refusals
sent once. Every request the server saw must pass its validation (a tool_use without its tool_result is a 400)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent.outcome import RunOutcome
from agent.session import Asking, LiveSession, Runtime, resume_session, start_session
from core.clock import SystemClock
from core.events import BatchProposed
from core.ids import IdFactory
from core.model import RetryPolicy
from core.policy import PermissionRule, parse_rule
from core.state import fold
from core.tools import ToolContext, ToolOutput, ToolSpec
from memory import SqliteEventStore, Write
from tests.wire.conftest import FakeTime, MakeModel, RecordingListener
from tests.wire.messages_server import DROP, Fault, MessagesServer, Reply, StreamFault
from tests.wire.wire_helpers import (
    assert_all_valid,
    messages_of,
    result_text,
    results_after,
    text,
    tool_use_ids,
    use,
    user_texts,
)
from tool_executor import ApprovalAnswer, ApprovalRequest, builtin_tools


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteEventStore]:
    sqlite = await SqliteEventStore.open(tmp_path / "strata.db")
    try:
        yield sqlite
    finally:
        await sqlite.close()


def allow(*specs: str) -> list[PermissionRule]:
    return [parse_rule("allow", s) for s in specs]


def make_runtime(store: SqliteEventStore, *extra: ToolSpec) -> Runtime:
    return Runtime(store=store, clock=SystemClock(), ids=IdFactory(), tools=[*builtin_tools(), *extra])


async def start(rt: Runtime, model: Any, workspace: Path, rules: list[PermissionRule] | None = None,
                prompt: str = "do the task", listener: Any = None, asking: Asking | None = None) -> LiveSession:
    return await start_session(rt, model=model, workspace=workspace, mode="interactive" if asking else "headless",
                               rules=rules or [], prompt=prompt, max_turns=10, listener=listener, asking=asking)


class SlowTool:
    """An effectful tool that signals when its handler starts, then runs until cancelled."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.finished = False

    def spec(self) -> ToolSpec:
        async def handler(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
            self.started.set()
            await anyio.sleep(60)
            self.finished = True
            return ToolOutput("slow finished")

        return ToolSpec("slow", "works for a long time", {"type": "object", "properties": {}}, handler,
                        safety="write", effect="effectful", timeout_s=120)


async def run_until(live: LiveSession, ready: anyio.Event | threading.Event, prompt: str | None = None) -> None:
    """Run the session and cancel the run (what Ctrl-C does in the terminal) once `ready` is set."""
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            scope = anyio.CancelScope()

            async def drive() -> None:
                with scope:
                    await live.run(prompt)
                if not scope.cancelled_caught:
                    raise AssertionError("the run finished before it was interrupted")

            tg.start_soon(drive)
            if isinstance(ready, threading.Event):
                await anyio.to_thread.run_sync(ready.wait, 15)
            else:
                await ready.wait()
            scope.cancel()


# -- a session over several turns ------------------------------------------------------------------------------


async def test_parallel_tool_calls_over_turns_send_only_valid_requests(
        messages_server: MessagesServer, make_model: MakeModel, store: SqliteEventStore, workspace: Path) -> None:
    """Three calls in one reply (two reads and a denied bash), an allowed write, then a final answer: each
    next request answers every tool_use first, in proposal order, and the session completes."""
    (workspace / "a.txt").write_text("alpha\n")
    (workspace / "sub").mkdir()
    (workspace / "sub" / "x.py").write_text("")
    messages_server.script(
        Reply([text("Looking around."), use("read_file", "toolu_r1", path="a.txt"),
               use("list_dir", "toolu_l1", path="sub"), use("bash", "toolu_b1", command="echo hi")]),
        Reply([use("write_file", "toolu_w1", path="out/b.txt", content="beta\n")]),
        Reply([text("Done: wrote out/b.txt.")]),
    )
    rt = make_runtime(store)
    live = await start(rt, make_model(), workspace, allow("write_file"))
    outcome = await live.run()
    assert (outcome.status, outcome.unknown_receipts) == ("completed", 0), outcome
    assert_all_valid(messages_server)
    assert [r.outcome for r in messages_server.requests] == ["reply"] * 3
    assert messages_server.pending == 0

    first, second, third = (messages_of(r) for r in messages_server.requests)
    assert [m["role"] for m in first] == ["user"] and user_texts(first[0]) == ["do the task"]
    read, listing, denied = results_after(second, 1)
    assert result_text(read) == "alpha\n" and not read.get("is_error")
    assert "x.py" in result_text(listing) and not listing.get("is_error")
    assert denied["is_error"] is True and "no effect started" in result_text(denied)
    (written,) = results_after(third, 3)
    assert not written.get("is_error")
    assert tool_use_ids(third) == ["toolu_r1", "toolu_l1", "toolu_b1", "toolu_w1"]
    assert (workspace / "out" / "b.txt").read_text() == "beta\n"
    assert [(r.call_id, r.status) for r in await store.list_receipts(live.id)] == [("toolu_w1", "done")]
    # The request carries the tools of the session's plan and the prompt-cache breakpoints on every turn.
    for request in messages_server.requests:
        names = [t["name"] for t in request.body["tools"]]
        assert {"read_file", "list_dir", "write_file", "bash"} <= set(names)
        assert request.body["tools"][-1]["cache_control"] == {"type": "ephemeral"}

    attempts = await store.read_timeline(live.id, kinds=["model_attempt"])
    assert [(a.turn, a.outcome) for a in attempts] == [(1, "ok"), (2, "ok"), (3, "ok")]
    assert [a.data["request_id"] for a in attempts] == [r.request_id for r in messages_server.requests]
    assert attempts[0].data["usage"]["input_tokens"] == 10
    await live.release(None)


async def test_server_chosen_tool_ids_round_trip(messages_server: MessagesServer, make_model: MakeModel,
                                                 store: SqliteEventStore, workspace: Path) -> None:
    """Tool ids the API picks (not the test) are the ids the next request answers."""
    (workspace / "a.txt").write_text("alpha")
    messages_server.script(Reply([{"type": "tool_use", "name": "read_file", "input": {"path": "a.txt"}},
                                  {"type": "tool_use", "name": "glob", "input": {"pattern": "*.txt"}}]),
                           Reply([text("ok")]))
    live = await start(make_runtime(store), make_model(), workspace)
    assert (await live.run()).status == "completed"
    assert_all_valid(messages_server)
    results = results_after(messages_of(messages_server.requests[1]), 1)
    assert [r["tool_use_id"] for r in results] == ["toolu_srv000001", "toolu_srv000002"]
    await live.release(None)


async def test_usage_is_summed_in_state_and_survives_resume(messages_server: MessagesServer, make_model: MakeModel,
                                                             store: SqliteEventStore, workspace: Path) -> None:
    """Token usage (input, output, cache read, cache write) of every response is summed in the folded state."""
    (workspace / "a.txt").write_text("alpha")
    messages_server.script(
        Reply([{"type": "tool_use", "name": "read_file", "input": {"path": "a.txt"}}],
              usage={"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 7,
                     "cache_creation_input_tokens": 3}),
        Reply([text("done")], usage={"input_tokens": 150, "output_tokens": 5}))
    live = await start(make_runtime(store), make_model(), workspace)
    assert (await live.run()).status == "completed"
    await live.release(None)
    counters = fold(await store.read_events(live.id)).counters
    assert (counters.input_tokens, counters.output_tokens, counters.cache_read_tokens,
            counters.cache_write_tokens) == (250, 25, 7, 3)


# -- interrupted turns -----------------------------------------------------------------------------------------


async def test_interrupt_in_a_slow_tool_then_continue(messages_server: MessagesServer, make_model: MakeModel,
                                                      store: SqliteEventStore, workspace: Path) -> None:
    """Cancelled while an effectful call runs (Ctrl-C): the finished read keeps its result, the running call is
    unknown, the call not started is "not run"; the next prompt sends a valid request answering all three,
    first and in order, followed by the new prompt."""
    (workspace / "a.txt").write_text("alpha")
    slow = SlowTool()
    messages_server.script(
        Reply([use("read_file", "toolu_r", path="a.txt"), use("slow", "toolu_s"),
               use("write_file", "toolu_w", path="never.txt", content="x")]),
        Reply([text("Understood, stopping there.")]),
    )
    live = await start(make_runtime(store, slow.spec()), make_model(), workspace, allow("slow", "write_file"))
    await run_until(live, slow.started)
    assert live.state.open_batch is None, "the interrupted batch was left open"
    outcome = await live.run("never mind, what happened?")
    assert outcome.status == "completed"
    assert_all_valid(messages_server)
    assert len(messages_server.requests) == 2 and messages_server.pending == 0
    messages = messages_of(messages_server.requests[1])
    read, running, not_started = results_after(messages, 1)
    assert result_text(read) == "alpha" and not read.get("is_error")
    assert running["is_error"] and "Outcome unknown" in result_text(running)
    assert not_started["is_error"] and "Not run" in result_text(not_started)
    assert user_texts(messages[2]) == ["never mind, what happened?"]
    assert not slow.finished and not (workspace / "never.txt").exists()
    receipts = {r.call_id: r.status for r in await store.list_receipts(live.id)}
    assert receipts == {"toolu_s": "unknown"}
    assert outcome.unknown_receipts == 1
    await assert_live_state_matches_log(live, store)
    await live.release(None)


async def test_interrupt_while_the_model_streams_then_continue(messages_server: MessagesServer,
                                                               make_model: MakeModel, store: SqliteEventStore,
                                                               workspace: Path) -> None:
    """Cancelled in the middle of the model's streamed answer: nothing of it is kept, and the next prompt joins
    the unanswered one in a single user message (roles still alternate)."""
    gate = threading.Event()
    first_text = threading.Event()
    messages_server.script(Reply([text("This answer will never finish streaming.")], chunk=4, gate=gate),
                           Reply([text("Fresh answer.")]))
    live = await start(make_runtime(store), make_model(), workspace,
                       listener=RecordingListener(on_first_text=first_text.set))
    try:
        await run_until(live, first_text)
    finally:
        gate.set()
    outcome = await live.run("second thoughts")
    assert outcome.status == "completed"
    assert_all_valid(messages_server)
    messages = messages_of(messages_server.requests[1])
    assert [m["role"] for m in messages] == ["user"]
    assert user_texts(messages[0]) == ["do the task", "second thoughts"]
    assert [m.role for m in live.state.messages] == ["user", "assistant"]
    await assert_live_state_matches_log(live, store)
    await live.release(None)


async def test_resume_after_an_interrupt_sends_a_valid_request(messages_server: MessagesServer,
                                                               make_model: MakeModel, store: SqliteEventStore,
                                                               workspace: Path) -> None:
    """An interrupted session, released and resumed by id with a new prompt (a new process in real life): the
    request rebuilt from the log answers the interrupted call."""
    slow = SlowTool()
    messages_server.script(Reply([text("Working."), use("slow", "toolu_s")]), Reply([text("Resumed fine.")]))
    rt = make_runtime(store, slow.spec())
    live = await start(rt, make_model(), workspace, allow("slow"))
    await run_until(live, slow.started)
    await live.release("idle")
    resumed = await resume_session(rt, live.id, rules=[], model=make_model())
    outcome = await resumed.run("carry on")
    assert outcome.status == "completed"
    assert_all_valid(messages_server)
    messages = messages_of(messages_server.requests[1])
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    (result,) = results_after(messages, 1)
    assert result["is_error"] and "interrupted" in result_text(result)
    assert user_texts(messages[2]) == ["carry on"]
    await resumed.release(None)


async def test_interrupt_during_a_retry_wait_then_continue(messages_server: MessagesServer, make_model: MakeModel,
                                                          store: SqliteEventStore, workspace: Path) -> None:
    """Cancelled while the retry policy waits after a 529: the failed attempt is still recorded, and the next
    prompt is sent at once as a valid request."""
    waiting = threading.Event()

    class AttemptSignal(RecordingListener):
        def on_attempt(self, attempt: Any) -> None:
            super().on_attempt(attempt)
            waiting.set()

    messages_server.script(Fault(529), Reply([text("Answered.")]))
    policy = RetryPolicy(base_delay_s=30.0, max_total_s=120.0, random=lambda: 0.0)
    live = await start(make_runtime(store), make_model(retry=policy), workspace, listener=AttemptSignal())
    await run_until(live, waiting)
    with anyio.fail_after(10):
        outcome = await live.run("still there?")
    assert outcome.status == "completed"
    assert_all_valid(messages_server)
    assert user_texts(messages_of(messages_server.requests[1])[0]) == ["do the task", "still there?"]
    rows = await store.read_timeline(live.id, kinds=["model_attempt"])
    assert [(r.outcome, r.data.get("status_code")) for r in rows] == [("retry", 529), ("ok", None)]
    await assert_live_state_matches_log(live, store)
    await live.release(None)


# -- retries and refusals through the loop ---------------------------------------------------------------------


async def test_transient_faults_are_retried_and_recorded(messages_server: MessagesServer, make_model: MakeModel,
                                                         fake_time: FakeTime, store: SqliteEventStore,
                                                         workspace: Path) -> None:
    """529, 429 with retry-after-ms, 500, a dropped connection and a broken stream are retried; each attempt is a
    `model_attempt` row with its kind, status and request id, and the session completes."""
    (workspace / "a.txt").write_text("alpha")
    messages_server.script(
        Fault(529), Fault(429, headers={"retry-after-ms": "100"}),
        Reply([use("read_file", "toolu_r", path="a.txt")]),
        Fault(500), DROP, StreamFault("partial ", "overloaded_error"),
        Reply([text("Recovered.")]),
    )
    live = await start(make_runtime(store), make_model(retry=fake_time.policy(max_attempts=4)), workspace)
    outcome = await live.run()
    assert outcome.status == "completed", outcome
    assert_all_valid(messages_server)
    sent = messages_server.requests
    assert [r.outcome for r in sent] == ["fault", "fault", "reply", "fault", "drop", "stream_fault", "reply"]
    rows = await store.read_timeline(live.id, kinds=["model_attempt"])
    got = [(r.turn, r.data["number"], r.outcome, r.check, r.data.get("status_code")) for r in rows]
    assert got == [(1, 1, "retry", "overloaded", 529), (1, 2, "retry", "rate_limited", 429), (1, 3, "ok", None, None),
                   (2, 1, "retry", "server_error", 500), (2, 2, "retry", "connection", None),
                   (2, 3, "retry", "overloaded", None), (2, 4, "ok", None, None)]
    # A dropped connection never got an answer, so it has no request id; every other attempt names its own.
    assert [r.data.get("request_id") for r in rows] == [None if r.outcome == "drop" else r.request_id for r in sent]
    assert [r.data.get("error_kind") for r in rows if r.outcome == "retry"] == [
        "overloaded", "rate_limited", "server_error", "connection", "overloaded"]
    assert rows[1].data["retry_after_s"] == 0.1
    assert all(r.data["delay_s"] > 0 for r in rows if r.outcome == "retry")
    assert fake_time.sleeps == [0.5, 1.0, 0.5, 1.0, 2.0]
    # The retried turn's request is the same conversation each time (nothing of a failed attempt leaks in).
    assert messages_of(sent[3]) == messages_of(sent[4]) == messages_of(sent[5]) == messages_of(sent[6])
    await live.release(None)


@pytest.mark.parametrize(("status", "kind"), [(400, "bad_request"), (401, "authentication")])
async def test_refusal_is_sent_once_and_fails_the_session(messages_server: MessagesServer, make_model: MakeModel,
                                                          fake_time: FakeTime, store: SqliteEventStore,
                                                          workspace: Path, status: int, kind: str) -> None:
    """A 400 or 401 is sent once: the session fails with one line naming the status and the request id, and the
    one attempt is recorded as an error."""
    messages_server.script(Fault(status, message="scripted refusal"), Reply([text("never sent")]))
    live = await start(make_runtime(store), make_model(), workspace)
    outcome: RunOutcome = await live.run()
    (sent,) = messages_server.requests
    assert messages_server.pending == 1 and fake_time.sleeps == []
    assert outcome.status == "failed" and outcome.exit_code == 1
    assert sent.request_id in outcome.reason and f"{status} " in outcome.reason and "\n" not in outcome.reason
    (row,) = await store.read_timeline(live.id, kinds=["model_attempt"])
    assert (row.outcome, row.check, row.data["status_code"], row.data["request_id"]) == (
        "error", kind, status, sent.request_id)
    assert live.state.ended == "failed"
    await live.release(None)


async def test_wrong_key_through_the_loop_is_sent_once(messages_server: MessagesServer, make_model: MakeModel,
                                                       store: SqliteEventStore, workspace: Path) -> None:
    """The server's own 401 for a wrong key: one request, the session fails saying to check ANTHROPIC_API_KEY."""
    live = await start(make_runtime(store), make_model(api_key="sk-ant-test-wrong-key"), workspace)
    outcome = await live.run()
    (sent,) = messages_server.requests
    assert sent.outcome == "unauthorized"
    assert outcome.status == "failed"
    assert sent.request_id in outcome.reason and "check ANTHROPIC_API_KEY" in outcome.reason
    await live.release(None)


async def test_attempt_bound_holds_through_the_loop(messages_server: MessagesServer, make_model: MakeModel,
                                                    fake_time: FakeTime, store: SqliteEventStore,
                                                    workspace: Path) -> None:
    """Overloaded on every attempt: exactly max_attempts requests, rows retry x3 then error, session failed."""
    messages_server.script(*[Fault(529)] * 6)
    live = await start(make_runtime(store), make_model(retry=fake_time.policy(max_attempts=4)), workspace)
    outcome = await live.run()
    assert len(messages_server.requests) == 4 and messages_server.pending == 2
    assert outcome.status == "failed" and "gave up after 4 attempts" in outcome.reason
    rows = await store.read_timeline(live.id, kinds=["model_attempt"])
    assert [r.outcome for r in rows] == ["retry", "retry", "retry", "error"]
    assert rows[-1].data["request_id"] == messages_server.requests[-1].request_id
    await live.release(None)


async def test_a_failed_session_resumes_with_a_valid_request(messages_server: MessagesServer, make_model: MakeModel,
                                                             fake_time: FakeTime, store: SqliteEventStore,
                                                             workspace: Path) -> None:
    """After the model path gave up mid-session (a batch closed before), resuming with a prompt sends a valid
    request: the earlier results are there and the two user texts share one message."""
    (workspace / "a.txt").write_text("alpha")
    messages_server.script(Reply([use("read_file", "toolu_r", path="a.txt")]), *[Fault(503)] * 2,
                           Reply([text("back again")]))
    rt = make_runtime(store)
    live = await start(rt, make_model(retry=fake_time.policy(max_attempts=2)), workspace)
    assert (await live.run()).status == "failed"
    await live.release(None)
    resumed = await resume_session(rt, live.id, rules=[], model=make_model())
    assert (await resumed.run("try again")).status == "completed"
    assert_all_valid(messages_server)
    messages = messages_of(messages_server.requests[-1])
    (result,) = results_after(messages, 1)
    assert result_text(result) == "alpha"
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert user_texts(messages[2]) == ["try again"]
    await resumed.release(None)


# -- an interrupt that lands on a commit -----------------------------------------------------------------------


class InterruptingApprover:
    """What the terminal approver does on Ctrl-C at its prompt: cancel the running turn, answer no."""

    def __init__(self) -> None:
        self.scope: anyio.CancelScope | None = None
        self.asked: list[str] = []

    async def ask(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.asked.append(request.call_id)
        assert self.scope is not None
        self.scope.cancel()
        return ApprovalAnswer("no", "person:test via test", "the person interrupted the approval prompt")


class CommitWatch(SqliteEventStore):
    """A SQLite store that signals when a commit carrying a BatchProposed starts (the window a Ctrl-C may hit)."""

    proposing: anyio.Event

    async def commit(self, session_id: str, write: Write) -> list[Any]:
        if any(isinstance(e, BatchProposed) for e, _ in write.events):
            self.proposing.set()
        return await super().commit(session_id, write)


async def assert_live_state_matches_log(live: LiveSession, store: SqliteEventStore) -> None:
    logged = fold(await store.read_events(live.id))
    assert logged.open_batch is None
    assert live.state.open_batch is None
    assert live.state.messages == logged.messages, "the live session's conversation differs from its log"


async def test_ctrl_c_at_the_approval_prompt_keeps_the_batch_in_the_conversation(
        messages_server: MessagesServer, make_model: MakeModel, store: SqliteEventStore, workspace: Path) -> None:
    """Ctrl-C at an approval prompt (the approver cancels the turn and answers no): the denied call's batch is
    committed, and the next request must carry it (tool_use, then its tool_result) like the log does."""
    approver = InterruptingApprover()
    messages_server.script(Reply([text("Writing."), use("write_file", "toolu_w", path="b.txt", content="B")]),
                           Reply([text("No file then.")]))
    live = await start(make_runtime(store), make_model(), workspace, asking=Asking(approver=approver))
    with anyio.fail_after(20):
        with anyio.CancelScope() as scope:
            approver.scope = scope
            await live.run()
    assert scope.cancelled_caught and approver.asked == ["toolu_w"]
    outcome = await live.run("ok then")
    assert outcome.status == "completed"
    assert_all_valid(messages_server)
    messages = messages_of(messages_server.requests[1])
    assert [m["role"] for m in messages] == ["user", "assistant", "user"], messages
    (denied,) = results_after(messages, 1)
    assert denied["is_error"] is True
    await assert_live_state_matches_log(live, store)
    await live.release(None)


async def test_interrupt_during_the_batch_commit_leaves_a_resumable_log(
        messages_server: MessagesServer, make_model: MakeModel, tmp_path: Path, workspace: Path) -> None:
    """Ctrl-C exactly while the batch is being committed: the batch is closed (its calls answered) in the log
    and in the live state, the next prompt sends a valid request, and the session still resumes."""
    store = await CommitWatch.open(tmp_path / "watch.db")
    store.proposing = anyio.Event()
    try:
        (workspace / "a.txt").write_text("alpha")
        messages_server.script(Reply([use("read_file", "toolu_r", path="a.txt")]), Reply([text("Next.")]),
                               Reply([text("Resumed.")]))
        rt = make_runtime(store)
        live = await start(rt, make_model(), workspace)
        await run_until(live, store.proposing)
        logged = fold(await store.read_events(live.id))
        assert (live.state.open_batch is None) == (logged.open_batch is None), (
            "the batch is open in the log but not in the live state (or the other way round)")
        await live.run("next prompt")
        await live.release("idle")
        assert_all_valid(messages_server)
        resumed = await resume_session(rt, live.id, rules=[], model=make_model())
        assert (await resumed.run("again")).status == "completed"
        await resumed.release(None)
    finally:
        await store.close()


async def test_a_blank_follow_up_prompt_is_never_sent(messages_server: MessagesServer, make_model: MakeModel,
                                                      store: SqliteEventStore, workspace: Path) -> None:
    """A follow-up prompt of only whitespace (e.g. `strata resume ID "  "`) must not produce a request the API
    refuses."""
    messages_server.script(Reply([text("First answer.")]), Reply([text("Second answer.")]))
    live = await start(make_runtime(store), make_model(), workspace)
    assert (await live.run()).status == "completed"
    with contextlib.suppress(Exception):  # refusing the prompt with an error is fine; sending it is not
        await live.run("   ")
    await live.release(None)
    assert_all_valid(messages_server)


@pytest.mark.parametrize("content", [[], [text("\n\n")]], ids=["no-content", "blank-text"])
async def test_an_empty_answer_does_not_poison_the_session(messages_server: MessagesServer, make_model: MakeModel,
                                                           store: SqliteEventStore, workspace: Path,
                                                           content: list[dict[str, Any]]) -> None:
    """The API may end a turn with no content (typically right after tool results). The session goes on: the
    next prompt's request is still valid."""
    (workspace / "a.txt").write_text("alpha")
    messages_server.script(Reply([use("read_file", "toolu_r", path="a.txt")]), Reply(content, stop_reason="end_turn"),
                           Reply([text("Answered.")]))
    live = await start(make_runtime(store), make_model(), workspace)
    await live.run()
    outcome = await live.run("so what is in a.txt?")
    await live.release(None)
    assert_all_valid(messages_server)
    assert outcome.status == "completed", outcome.reason
