"""The server's per-connection behaviour over a real Unix socket: the hello, one reply per request, errors that
leave the connection open and those that close it, and the bounds that keep one client from hurting others."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent.ipc import Limits
from tests.ipc._wire import HELLO, InProcessDaemon, RawClient

Connect = Callable[[], RawClient]


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[InProcessDaemon]:
    d = InProcessDaemon(tmp_path / "home", Limits(hello_timeout_s=1.0, send_timeout_s=2.0,
                                                  outbox_max_bytes=256 * 1024, max_connections=8))
    yield d
    d.close()


@pytest.fixture
def connect(daemon: InProcessDaemon) -> Iterator[Callable[[], RawClient]]:
    made: list[RawClient] = []

    def make() -> RawClient:
        made.append(RawClient(daemon.socket))
        return made[-1]

    yield make
    for client in made:
        client.close()


def test_hello_is_answered_with_version_and_pid(connect: Connect) -> None:
    """A client's hello gets `hello_ok` with the protocol version, the daemon's pid and the versions it speaks."""
    client = connect()
    reply = client.hello()
    assert reply["v"] == 1 and reply["versions"] == [1] and reply["id"] == "h"
    assert reply["pid"] == __import__("os").getpid()


def test_an_unknown_version_is_refused_naming_the_versions_and_closed(connect: Connect) -> None:
    """A hello with a version the daemon does not speak gets `bad_version` naming the ones it does, then EOF."""
    client = connect()
    reply = client.ask({"v": 2, "type": "hello", "id": "h"})
    assert reply["code"] == "bad_version" and reply["versions"] == [1] and reply["fatal"] is True
    assert reply["id"] == "h"
    assert client.closed_after()


def test_a_request_before_the_hello_is_refused_and_closed(connect: Connect) -> None:
    """Nothing is handled before the hello: the first line must be one."""
    client = connect()
    reply = client.ask({"type": "status", "id": "s"})
    assert (reply["code"], reply["id"], reply["fatal"]) == ("hello_required", "s", True)
    assert client.closed_after()


def test_every_request_gets_exactly_one_reply_with_its_id_in_order(connect: Connect) -> None:
    """Pipelined requests, good and bad mixed, each get one reply carrying their id, in the order sent."""
    client = connect()
    client.hello()
    lines, expected = [], []
    for i in range(60):
        if i % 10 == 3:
            lines.append(json.dumps({"type": "prompt", "id": f"q{i}", "session_id": "s"}))  # text missing
            expected.append((f"q{i}", "error", "invalid"))
        elif i % 10 == 7:
            lines.append(json.dumps({"type": "attach", "id": f"q{i}", "session_id": "nope"}))
            expected.append((f"q{i}", "error", "unknown_session"))
        else:
            lines.append(json.dumps({"type": "status", "id": f"q{i}"}))
            expected.append((f"q{i}", "ok", None))
    client.send(("\n".join(lines) + "\n").encode())
    got = []
    for _ in expected:
        reply = client.line()
        assert reply is not None
        got.append((reply["id"], reply["type"], reply.get("code")))
    assert got == expected
    client.sock.settimeout(0.5)
    with pytest.raises(TimeoutError):
        client.line()  # and nothing more


def test_a_client_that_keeps_misbehaving_is_disconnected(connect: Connect) -> None:
    """Each protocol error is answered and the connection stays open, until the eighth: then `too_many_errors`
    and EOF. Refusals by the session side (an unknown session) do not count."""
    client = connect()
    client.hello()
    for i in range(20):
        assert client.ask({"type": "detach", "id": f"u{i}", "session_id": "ghost"})["code"] == "unknown_session"
    for i in range(7):
        reply = client.ask({"type": "nonsense", "id": f"b{i}"})
        assert (reply["code"], reply["fatal"]) == ("unknown_type", False)
    client.send(b"{oops\n")
    assert client.line()["code"] == "bad_json"  # type: ignore[index]
    assert client.line()["code"] == "too_many_errors"  # type: ignore[index]
    assert client.closed_after()
    assert connect().hello()  # the daemon serves on


def test_a_line_over_the_cap_is_answered_and_closed(connect: Connect) -> None:
    """A line longer than 1 MiB gets `too_large` without being read whole, then EOF; others are served."""
    client = connect()
    client.hello()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the daemon may close before taking all
        client.send(b'{"type": "prompt", "id": "big", "text": "' + b"x" * (1024 * 1024 + 10))
    reply = client.line()
    assert reply is not None and (reply["code"], reply["id"], reply["fatal"]) == ("too_large", None, True)
    assert client.closed_after()
    other = connect()
    other.hello()
    assert other.ask({"type": "status", "id": "1"})["type"] == "ok"


def test_a_line_at_the_cap_is_read(connect: Connect) -> None:
    """Exactly 1 MiB (without the newline) is still a line the daemon reads and answers."""
    client = connect()
    client.hello()
    head, tail = b'{"type": "detach", "id": "cap", "session_id": "', b'"}'
    client.send(head + b"s" * (1024 * 1024 - len(head) - len(tail)) + tail + b"\n")
    reply = client.line()
    assert reply is not None and reply["id"] == "cap" and reply["code"] in ("invalid", "unknown_session")


@pytest.mark.parametrize(("outbox", "send_timeout"), [(256 * 1024, 60.0), (64 * 1024 * 1024, 1.0)],
                         ids=["outbox-full", "write-timeout"])
def test_a_client_that_does_not_read_is_disconnected_and_others_are_not_held_up(
        tmp_path: Path, outbox: int, send_timeout: float) -> None:
    """A driving client that never reads while its session pushes 40 MB is disconnected (by the outbox bound, or
    by the write deadline when the outbox is large), and another client is answered promptly throughout."""
    daemon = InProcessDaemon(tmp_path / "home", Limits(outbox_max_bytes=outbox, send_timeout_s=send_timeout))
    driver, other = RawClient(daemon.socket), RawClient(daemon.socket)
    try:
        driver.hello()
        session = driver.ask({"type": "new_session", "id": "n", "workspace": "/w", "model": "m"})["session_id"]
        assert driver.ask({"type": "attach", "id": "a", "session_id": session})["role"] == "drive"
        driver.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        other.hello()
        started = time.monotonic()
        driver.send(json.dumps({"type": "prompt", "id": "p", "session_id": session,
                                "text": "flood:400:100000"}).encode() + b"\n")
        for i in range(20):
            assert other.ask({"type": "status", "id": f"s{i}"})["type"] == "ok"
        assert time.monotonic() - started < 5
        deadline = started + 8  # the outbox fills at once; the write deadline is 1 s where the outbox is large
        while daemon.connections() > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert daemon.connections() == 1, "the client that does not read is still connected"
        assert other.ask({"type": "status", "id": "after"})["type"] == "ok"
    finally:
        driver.close()
        other.close()
        daemon.close()


def test_a_line_over_the_cap_is_refused_even_when_it_arrives_whole(tmp_path: Path) -> None:
    """A line longer than the cap that arrives in one piece with its newline is still `too_large`, not read."""
    daemon = InProcessDaemon(tmp_path / "home", Limits(max_line_bytes=100))
    client = RawClient(daemon.socket)
    try:
        client.hello()
        client.send(json.dumps({"type": "status", "id": "x" * 120}).encode() + b"\n")
        reply = client.line()
        assert reply is not None and (reply["code"], reply["fatal"]) == ("too_large", True)
        assert client.closed_after()
    finally:
        client.close()
        daemon.close()


def test_a_failing_session_side_answers_internal_and_the_connection_goes_on(connect: Connect) -> None:
    """An exception in the Dispatcher is answered `internal` (not a dropped connection, not a crash)."""
    client = connect()
    client.hello()
    session = client.ask({"type": "new_session", "id": "n", "workspace": "/w", "model": "m"})["session_id"]
    client.ask({"type": "attach", "id": "a", "session_id": session})
    reply = client.ask({"type": "prompt", "id": "boom", "session_id": session, "text": "raise"})
    assert (reply["code"], reply["id"], reply["fatal"]) == ("internal", "boom", False)
    assert client.ask({"type": "status", "id": "s"})["type"] == "ok"


def test_a_silent_connection_is_closed_after_the_hello_timeout(connect: Connect) -> None:
    """A connection that sends no hello (or only blank lines) is closed with `hello_timeout`."""
    client = connect()
    client.send(b"\n")
    time.sleep(0.6)
    client.send(b"\n")
    reply = client.line()
    assert reply is not None and reply["code"] == "hello_timeout"
    assert client.closed_after()


def test_connections_past_the_limit_are_refused_when_every_slot_is_attached(
        daemon: InProcessDaemon, connect: Connect) -> None:
    """With 8 connections attached to a session the ninth gets `too_many_connections` and is closed; a freed
    slot is reusable."""
    held = [connect() for _ in range(8)]
    for c in held:
        c.hello()
    session = held[0].ask({"type": "new_session", "id": "n", "workspace": "/w", "model": "m"})["session_id"]
    for c in held:
        assert c.ask({"type": "attach", "id": "a", "session_id": session, "role": "watch"})["type"] == "ok"
    extra = connect()
    reply = extra.line()
    assert reply is not None and reply["code"] == "too_many_connections"
    held.pop().close()
    deadline = time.monotonic() + 5
    while daemon.connections() > 7 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert connect().hello()


def test_a_new_connection_past_the_limit_closes_the_longest_idle_one_that_holds_nothing(
        daemon: InProcessDaemon, connect: Connect) -> None:
    """With 8 connections open, 3 of them attached, a ninth is let in: the one idle longest among the five that
    hold nothing is closed (`idle_timeout`), never an attached one nor one that spoke more recently."""
    clients = [connect() for _ in range(8)]
    for c in clients:
        c.hello()
    session = clients[0].ask({"type": "new_session", "id": "n", "workspace": "/w", "model": "m"})["session_id"]
    for c in clients[:3]:
        assert c.ask({"type": "attach", "id": "a", "session_id": session, "role": "watch"})["type"] == "ok"
    for c in clients[4:]:
        time.sleep(0.02)
        assert c.ask({"type": "status", "id": "s"})["type"] == "ok"
    newcomer = connect()
    assert newcomer.hello()["type"] == "hello_ok"
    reply = clients[3].line()
    assert reply is not None and (reply["code"], reply["fatal"]) == ("idle_timeout", True), reply
    assert clients[3].closed_after()
    for c in (*clients[:3], *clients[4:], newcomer):
        assert c.ask({"type": "status", "id": "after"})["type"] == "ok"


def test_an_idle_connection_attached_to_nothing_is_closed_and_an_attached_one_is_not(tmp_path: Path) -> None:
    """Past its hello, a connection attached to no session that sends no line for `idle_timeout_s` is closed
    with `idle_timeout`; a silent one attached to a session stays, and is answered when it speaks again."""
    daemon = InProcessDaemon(tmp_path / "home", Limits(idle_timeout_s=0.5))
    idle, attached = RawClient(daemon.socket), RawClient(daemon.socket)
    try:
        idle.hello()
        attached.hello()
        session = attached.ask({"type": "new_session", "id": "n", "workspace": "/w", "model": "m"})["session_id"]
        assert attached.ask({"type": "attach", "id": "a", "session_id": session})["type"] == "ok"
        idle.send(b'{"type": "status", "id": "half')  # a half-written line is no request: it keeps nothing open
        reply = idle.line()
        assert reply is not None and (reply["code"], reply["fatal"]) == ("idle_timeout", True), reply
        assert idle.closed_after()
        time.sleep(1.0)
        assert attached.ask({"type": "status", "id": "s"})["type"] == "ok"
        assert daemon.connections() == 1
    finally:
        idle.close()
        attached.close()
        daemon.close()


def test_pushes_reach_the_driver_and_watchers_and_a_second_driver_is_refused(connect: Connect) -> None:
    """An approval request reaches the driving client with the call's full arguments, a watcher sees the same
    messages, and another client asking to drive is refused with a clear reply."""
    driver, watcher, third = connect(), connect(), connect()
    for c in (driver, watcher, third):
        c.hello()
    session = driver.ask({"type": "new_session", "id": "n", "workspace": "/w", "model": "m"})["session_id"]
    driver.ask({"type": "attach", "id": "a", "session_id": session, "role": "drive"})
    assert watcher.ask({"type": "attach", "id": "w", "session_id": session, "role": "watch"})["role"] == "watch"
    refused = third.ask({"type": "attach", "id": "t", "session_id": session, "role": "drive"})
    assert refused["code"] == "session_busy" and session in refused["message"]
    driver.send(json.dumps({"type": "prompt", "id": "p", "session_id": session, "text": "ask"}).encode() + b"\n")
    seen_by_driver = [driver.line() for _ in range(3)]
    pushes = [m for m in seen_by_driver if m and m["type"] != "ok"]
    assert [m["type"] for m in pushes] == ["event", "approval_request"]
    request = pushes[1]
    assert request["input"] == {"path": "a.txt", "content": "hi"} and len(request["args_sha256"]) == 64
    assert [watcher.line()["type"] for _ in range(2)] == ["event", "approval_request"]  # type: ignore[index]
    assert pushes[0]["kind"] == "user_message" and pushes[0]["session_id"] == session


def test_stopping_says_goodbye_to_every_client(daemon: InProcessDaemon, connect: Connect) -> None:
    """On stop each client gets a `notice` that the daemon is shutting down, then EOF."""
    clients = [connect() for _ in range(3)]
    for c in clients:
        c.hello()
    daemon.close()
    for c in clients:
        notice = c.line()
        assert notice is not None and notice["type"] == "notice" and "shutting down" in notice["text"]
        assert c.closed_after()


def test_a_request_being_handled_when_the_daemon_stops_is_finished_and_answered(
        daemon: InProcessDaemon, connect: Connect) -> None:
    """Stopping does not cut the session side off mid-request: the request in hand completes, its reply and the
    goodbye notice both reach the client, then EOF."""
    client = connect()
    client.hello()
    session = client.ask({"type": "new_session", "id": "n", "workspace": "/w", "model": "m"})["session_id"]
    client.ask({"type": "attach", "id": "a", "session_id": session})
    client.send(json.dumps({"type": "prompt", "id": "slow", "session_id": session, "text": "sleep:1"}).encode()
                + b"\n")
    time.sleep(0.3)
    daemon.close()
    messages = []
    while (message := client.line()) is not None:
        messages.append(message)
    assert sorted(m["type"] for m in messages) == ["notice", "ok"], messages
    assert next(m for m in messages if m["type"] == "ok")["id"] == "slow"


def test_half_closed_client_still_gets_its_replies(connect: Connect) -> None:
    """A client that sends its requests and shuts its writing side gets every reply before EOF."""
    client = connect()
    client.send(HELLO + b'{"type": "status", "id": "1"}\n{"type": "status", "id": "2"}\n')
    client.sock.shutdown(socket.SHUT_WR)
    assert [client.line()["id"] for _ in range(3)] == ["h", "1", "2"]  # type: ignore[index]
    assert client.closed_after()
