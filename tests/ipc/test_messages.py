"""The protocol's message models: every message reads back as itself, the event push is `run --json`'s object,
and every kind of malformed line earns its stable error code (never an exception)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.cli.views import event_view
from agent.ipc import (
    ApprovalRequest,
    Approve,
    Attach,
    Deny,
    Detach,
    ErrorReply,
    EventPush,
    Hello,
    HelloOk,
    Interrupt,
    NewSession,
    Notice,
    OkReply,
    ParkedView,
    Prompt,
    ResultPush,
    ServerMessageAdapter,
    SessionInfo,
    Shutdown,
    Status,
    WaitingCall,
)
from agent.ipc._codec import read_request
from agent.ipc._messages import encode
from core.events import CallResult, SessionEnded, SessionStarted, StoredEvent, UserMessage

ids = st.text(min_size=1, max_size=128)
session_ids = ids.filter(lambda t: "\x00" not in t)  # no store can hold a NUL in an id
texts = st.text(max_size=200)
short = st.text(max_size=50)
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                         max_size=3), max_leaves=10)
inputs = st.dictionaries(st.text(max_size=10), json_values, max_size=4)

requests = st.one_of(
    st.builds(Hello, id=ids, v=st.just(1), client=short),
    st.builds(NewSession, id=ids, workspace=texts.filter(lambda t: "\x00" not in t),  # no path holds a NUL
              model=short.filter(lambda t: "\x00" not in t)),
    st.builds(Attach, id=ids, session_id=session_ids, role=st.sampled_from(["drive", "watch"])),
    st.builds(Prompt, id=ids, session_id=session_ids, text=texts),
    st.builds(Approve, id=ids, session_id=session_ids, call_id=short, args_sha256=short, plan_digest=short,
              scope=st.sampled_from(["once", "session"])),
    st.builds(Deny, id=ids, session_id=session_ids, call_id=short, reason=short),
    st.builds(Interrupt, id=ids, session_id=session_ids, v=st.just(1) | st.none()),
    st.builds(Detach, id=ids, session_id=session_ids),
    st.builds(Status, id=ids),
    st.builds(Shutdown, id=ids),
)

sessions = st.builds(SessionInfo, session_id=short, status=short, phase=st.none() | short, drivers=st.integers(0, 3),
                     watchers=st.integers(0, 3),
                     waiting=st.lists(st.builds(WaitingCall, call_id=short, tool=short), max_size=2).map(tuple))
server_messages = st.one_of(
    st.builds(HelloOk, id=ids, v=st.just(1), pid=st.integers(1, 2**22), server=short),
    st.builds(OkReply, id=ids, session_id=st.none() | short, role=st.none() | st.sampled_from(["drive", "watch"]),
              sessions=st.none() | st.lists(sessions, max_size=3).map(tuple)),
    st.builds(ErrorReply, id=st.none() | ids, code=st.sampled_from(["bad_json", "unknown_session", "internal"]),
              message=texts, fatal=st.booleans()),
    st.builds(ApprovalRequest, session_id=short, call_id=short, tool=short, input=inputs, args_sha256=short,
              asked_by=short, reasons=st.lists(short, max_size=3).map(tuple),
              safety=st.sampled_from(["read", "write", "execute", "network", "admin"]),
              effect=st.sampled_from(["read_only", "idempotent", "effectful"]), plan_digest=short),
    st.builds(ResultPush, session_id=short, status=st.sampled_from(["completed", "awaiting_approval", "interrupted"]),
              exit_code=st.integers(0, 255), reason=short, unknown_receipts=st.integers(0, 5),
              parked=st.lists(st.builds(ParkedView, call_id=short, tool=short, input=inputs,
                                        reasons=st.lists(short, max_size=2).map(tuple), asked_by=short),
                              max_size=2).map(tuple)),
    st.builds(Notice, session_id=st.none() | short, level=st.sampled_from(["info", "warning"]), text=texts),
)


@settings(max_examples=300, deadline=None)
@given(requests)
def test_every_request_reads_back_as_itself(request: Any) -> None:
    """A request a client encodes is what the daemon reads, field for field (hello first, the rest after)."""
    line = encode(request)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert read_request(line[:-1], greeted=request.type != "hello") == request


@settings(max_examples=300, deadline=None)
@given(server_messages)
def test_every_reply_and_push_reads_back_as_itself(message: Any) -> None:
    """What the daemon sends, a client reads back unchanged."""
    line = encode(message)
    assert line.count(b"\n") == 1
    assert ServerMessageAdapter.validate_json(line) == message


AT = datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)
STORED = [
    StoredEvent(session_id="sess-1", seq=1, turn=0, at=AT, event=SessionStarted(
        session_id="sess-1", mode="ipc", workspace="/w", model="script:x", max_turns=5, plan_digest="d" * 64)),
    StoredEvent(session_id="sess-1", seq=2, turn=1, at=AT, event=UserMessage(text="hello\nthere")),
    StoredEvent(session_id="sess-1", seq=3, turn=1, at=AT, event=CallResult(
        batch_id="b1", call_id="toolu_1", tool="read_file", status="ok", content="x", is_error=False)),
    StoredEvent(session_id="sess-1", seq=4, turn=1, at=AT, event=SessionEnded(status="completed")),
]


@pytest.mark.parametrize("item", STORED, ids=lambda i: i.event.kind)
def test_event_push_is_the_run_json_object_plus_its_session(item: StoredEvent) -> None:
    """An `event` push is exactly what `strata run --json` prints for that event, with `session_id` added, and
    reads back as the same stored event."""
    wire = json.loads(encode(EventPush.of(item)))
    assert {k: v for k, v in wire.items() if k != "session_id"} == {
        k: v for k, v in event_view(item).items() if k != "session_id"}
    assert wire["session_id"] == item.session_id
    back = ServerMessageAdapter.validate_json(json.dumps(wire))
    assert isinstance(back, EventPush)
    assert (back.session_id, back.seq, back.turn, back.at, back.event) == (
        item.session_id, item.seq, item.turn, item.at, item.event)


HELLO_DONE = [
    (b"{not json", "bad_json", None),
    (b'{"type": "status", "id": "x\xff"}', "bad_json", None),
    (b'{"type": "prompt", "id": "a", "session_id": "s", "text": "\\ud800"}', "bad_json", None),
    (b"[" * 5000 + b"]" * 5000, "bad_json", None),
    (b'{"type": "status", "id": "n", "x": NaN}', "bad_json", None),
    (b"[1, 2]", "not_object", None),
    (b'"status"', "not_object", None),
    (b"null", "not_object", None),
    (b'{"type": "launch_missiles", "id": "k1"}', "unknown_type", "k1"),
    (b'{"id": "k2"}', "unknown_type", "k2"),
    (b'{"type": 7, "id": "k3"}', "unknown_type", "k3"),
    (b'{"type": "prompt", "id": "k4", "session_id": "s"}', "invalid", "k4"),
    (b'{"type": "prompt", "id": "k5", "session_id": 5, "text": "t"}', "invalid", "k5"),
    (b'{"type": "status", "id": "k6", "extra": 1}', "invalid", "k6"),
    (b'{"type": "attach", "id": "k7", "session_id": "s", "role": "own"}', "invalid", "k7"),
    (b'{"type": "status"}', "invalid", None),
    (b'{"type": "status", "id": 12}', "invalid", None),
    (b'{"type": "status", "id": "' + b"i" * 129 + b'"}', "invalid", None),
    (b'{"type": "status", "id": "k8", "v": 2}', "bad_version", "k8"),
    (b'{"type": "status", "id": "k9", "v": "1"}', "bad_version", "k9"),
    (b'{"type": "hello", "id": "k10", "v": 1}', "invalid", "k10"),
]


@pytest.mark.parametrize(("line", "code", "echoed_id"), HELLO_DONE)
def test_a_malformed_line_earns_its_error_code(line: bytes, code: str, echoed_id: str | None) -> None:
    """After the hello, each kind of bad line gets its stable code, the request's id when one can be read, and
    the connection stays open (the reply is not fatal)."""
    reply = read_request(line, greeted=True)
    assert isinstance(reply, ErrorReply), reply
    assert (reply.code, reply.id, reply.fatal) == (code, echoed_id, False)
    assert reply.message and "\n" not in reply.message


@pytest.mark.parametrize(("line", "code"), [
    (b'{"type": "status", "id": "a"}', "hello_required"),
    (b"garbage", "bad_json"),
    (b'{"type": "hello", "id": "a"}', "bad_version"),
    (b'{"type": "hello", "id": "a", "v": 2}', "bad_version"),
    (b'{"type": "hello", "id": "a", "v": true}', "bad_version"),
    (b'{"type": "hello", "id": "a", "v": 1, "client": 3}', "invalid"),
])
def test_before_the_hello_every_error_is_fatal(line: bytes, code: str) -> None:
    """Until the hello is done, a bad line closes the connection; a wrong version names the versions spoken."""
    reply = read_request(line, greeted=False)
    assert isinstance(reply, ErrorReply)
    assert (reply.code, reply.fatal) == (code, True)
    if code == "bad_version":
        assert reply.versions == (1,) and "speaks 1" in reply.message


def test_an_error_message_does_not_repeat_what_the_client_sent() -> None:
    """Validation errors name the field and the problem, never the value (it may be a secret the client sent)."""
    secret = "sk-ant-api03-" + "Q" * 40
    reply = read_request(json.dumps({"type": "prompt", "id": "p", "session_id": "s", "text": 5,
                                     "token": secret}).encode(), greeted=True)
    assert isinstance(reply, ErrorReply) and reply.code == "invalid"
    assert secret not in reply.message and "text" in reply.message


@pytest.mark.parametrize("phase", ["elsewhere", "a_phase_of_a_later_daemon"])
def test_a_status_row_with_a_phase_the_client_does_not_know_is_read_as_it_is(phase: str) -> None:
    """Phases may be added within version 1 (`elsewhere` was): a client reads a row with one it does not know."""
    line = json.dumps({"type": "ok", "id": "s", "session_id": None, "role": None, "store": None, "sessions": [
        {"session_id": "s1", "status": "active", "phase": phase, "workspace": "/w", "model": "script:x",
         "turn_running": False, "drivers": 0, "watchers": 1, "waiting": []}]})
    reply = ServerMessageAdapter.validate_json(line)
    assert isinstance(reply, OkReply) and reply.sessions is not None
    assert reply.sessions[0].phase == phase
