"""The model path's retry policy, through the real SDK against the loopback server: transient faults (529, 429
with retry-after, 5xx, dropped connections, broken streams, timeouts) are retried within bounds and each attempt
is reported; refusals (400, 401, 403, 404, 413, 422) are sent exactly once and fail with one clear line."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from core.errors import ModelError
from core.messages import Message, TextBlock
from core.model import ModelRequest, ModelResponse, NullListener, RetryPolicy
from core.model.retry import TRANSIENT, AttemptFailure, kind_for_status, parse_retry_after
from tests.wire.conftest import FakeTime, MakeModel, RecordingListener
from tests.wire.messages_server import DROP, Fault, MessagesServer, Reply, StreamFault

REQUEST = ModelRequest(system="You are Strata.", messages=(Message(role="user", content=(TextBlock(text="hi"),)),),
                       tools=(), turn=0)
OK = Reply([{"type": "text", "text": "recovered"}])


async def test_overloaded_529_is_retried_after_backoff(messages_server: MessagesServer, make_model: MakeModel,
                                                       listener: RecordingListener, fake_time: FakeTime) -> None:
    """A 529 is retried after the base delay; the failed attempt and the ok one are both reported."""
    messages_server.script(Fault(529), OK)
    response = await make_model().complete(REQUEST, listener)
    assert response.content == (TextBlock(text="recovered"),)
    assert len(messages_server.requests) == 2
    assert fake_time.sleeps == [0.5]
    first, second = listener.attempts
    assert (first.number, first.outcome, first.error_kind, first.status_code, first.delay_s) == (
        1, "retry", "overloaded", 529, 0.5)
    assert first.request_id == messages_server.requests[0].request_id
    assert (second.number, second.outcome, second.request_id) == (2, "ok", messages_server.requests[1].request_id)


@pytest.mark.parametrize(("headers", "expected"), [({"retry-after": "3"}, 3.0),
                                                   ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5)])
async def test_rate_limit_429_honours_retry_after(messages_server: MessagesServer, make_model: MakeModel,
                                                  listener: RecordingListener, fake_time: FakeTime,
                                                  headers: dict[str, str], expected: float) -> None:
    """A 429 waits as long as the server asked (retry-after-ms first, then retry-after), not the shorter backoff."""
    messages_server.script(Fault(429, headers=headers), OK)
    await make_model().complete(REQUEST, listener)
    assert fake_time.sleeps == [expected]
    retry = listener.attempts[0]
    assert (retry.error_kind, retry.status_code, retry.retry_after_s, retry.delay_s) == (
        "rate_limited", 429, expected, expected)


async def test_server_errors_and_dropped_connections_are_retried(messages_server: MessagesServer,
                                                                 make_model: MakeModel, listener: RecordingListener,
                                                                 fake_time: FakeTime) -> None:
    """500, 503 and a connection closed without an answer are each retried, with exponential backoff."""
    messages_server.script(Fault(500), DROP, Fault(503), OK)
    response = await make_model(retry=fake_time.policy(max_attempts=5)).complete(REQUEST, listener)
    assert response.content == (TextBlock(text="recovered"),)
    assert [r.outcome for r in messages_server.requests] == ["fault", "drop", "fault", "reply"]
    assert listener.outcomes == ["retry", "retry", "retry", "ok"]
    assert [a.error_kind for a in listener.attempts[:3]] == ["server_error", "connection", "server_error"]
    assert fake_time.sleeps == [0.5, 1.0, 2.0]


async def test_a_stream_that_breaks_off_is_retried_and_its_text_voided(messages_server: MessagesServer,
                                                                       make_model: MakeModel,
                                                                       listener: RecordingListener) -> None:
    """An overloaded_error event inside a 200 stream, and a stream cut mid-way, are retried; the listener saw the
    partial text of each failed attempt before its retry was reported, then the full answer."""
    messages_server.script(StreamFault("partial ", "overloaded_error"), StreamFault("cut ", None), OK)
    response = await make_model().complete(REQUEST, listener)
    assert response.content == (TextBlock(text="recovered"),)
    assert listener.texts == ["partial ", "cut ", "reco", "vere", "d"]
    assert listener.outcomes == ["retry", "retry", "ok"]
    overloaded, cut = listener.attempts[:2]
    assert (overloaded.error_kind, overloaded.status_code) == ("overloaded", None)
    assert overloaded.request_id == messages_server.requests[0].request_id
    assert cut.error_kind == "connection" and cut.request_id == messages_server.requests[1].request_id


async def test_a_stalled_stream_times_out_and_is_retried(messages_server: MessagesServer, make_model: MakeModel,
                                                         listener: RecordingListener) -> None:
    """A stream that stops sending (the SDK's read timeout) is a timeout, retried like any transient fault."""
    stalled = threading.Event()
    messages_server.script(Reply([{"type": "text", "text": "hang"}], chunk=2, gate=stalled), OK)
    try:
        response = await make_model(timeout_s=0.5).complete(REQUEST, listener)
    finally:
        stalled.set()  # let the server's handler thread finish
    assert response.content == (TextBlock(text="recovered"),)
    assert [(a.outcome, a.error_kind) for a in listener.attempts] == [("retry", "timeout"), ("ok", None)]


async def test_the_whole_attempt_is_bounded(messages_server: MessagesServer, make_model: MakeModel,
                                            listener: RecordingListener) -> None:
    """An attempt that outlives attempt_timeout_s is cut off and retried, though no single network wait
    (timeout_s) ran out."""
    slow = threading.Event()
    messages_server.script(Reply([{"type": "text", "text": "slow"}], chunk=2, gate=slow), OK)
    try:
        response = await make_model(attempt_timeout_s=1.0).complete(REQUEST, listener)
    finally:
        slow.set()
    assert response.content == (TextBlock(text="recovered"),)
    assert listener.attempts[0].error_kind == "timeout"
    assert "longer than 1s" in listener.attempts[0].message


async def test_wrong_api_key_is_sent_once_with_one_line(messages_server: MessagesServer, make_model: MakeModel,
                                                        listener: RecordingListener, fake_time: FakeTime) -> None:
    """The server's 401 for a wrong key is not retried; the error says what failed, the request id, what to do."""
    with pytest.raises(ModelError) as info:
        await make_model(api_key="sk-ant-test-wrong-key").complete(REQUEST, listener)
    (sent,) = messages_server.requests
    assert sent.outcome == "unauthorized"
    err = info.value
    assert str(err) == (f"Anthropic API rejected the API key (401 authentication_error, request {sent.request_id}): "
                        "check ANTHROPIC_API_KEY")
    assert (err.status_code, err.request_id, err.retryable, err.attempts) == (401, sent.request_id, False, 1)
    assert fake_time.sleeps == []
    (attempt,) = listener.attempts
    assert (attempt.outcome, attempt.error_kind, attempt.message) == ("error", "authentication", str(err))


@pytest.mark.parametrize(("status", "kind"), [(400, "bad_request"), (403, "permission"), (404, "not_found"),
                                              (413, "too_large"), (422, "unprocessable")])
async def test_refusals_are_sent_exactly_once(messages_server: MessagesServer, make_model: MakeModel,
                                              listener: RecordingListener, fake_time: FakeTime, status: int,
                                              kind: str) -> None:
    """400, 403, 404, 413 and 422 fail at once (even with a retry-after header): one request, one error attempt,
    one line with the status, the API's message and the request id."""
    messages_server.script(Fault(status, message="scripted refusal", headers={"retry-after": "1"}), OK)
    with pytest.raises(ModelError) as info:
        await make_model().complete(REQUEST, listener)
    assert len(messages_server.requests) == 1 and messages_server.pending == 1
    err = info.value
    rid = messages_server.requests[0].request_id
    assert (err.status_code, err.error_kind, err.retryable, err.attempts) == (status, kind, False, 1)
    assert f"{status} " in str(err) and rid in str(err) and "scripted refusal" in str(err)
    assert "\n" not in str(err)
    assert listener.outcomes == ["error"]
    assert fake_time.sleeps == []


async def test_attempts_are_bounded(messages_server: MessagesServer, make_model: MakeModel,
                                    listener: RecordingListener, fake_time: FakeTime) -> None:
    """Five 529s against max_attempts=4: four requests, then a retryable ModelError saying it gave up."""
    messages_server.script(*[Fault(529)] * 5)
    with pytest.raises(ModelError) as info:
        await make_model(retry=fake_time.policy(max_attempts=4)).complete(REQUEST, listener)
    assert len(messages_server.requests) == 4 and messages_server.pending == 1
    err = info.value
    assert (err.retryable, err.attempts, err.status_code, err.error_kind) == (True, 4, 529, "overloaded")
    assert err.request_id == messages_server.requests[-1].request_id
    assert "gave up after 4 attempts" in str(err) and err.request_id in str(err) and "\n" not in str(err)
    assert listener.outcomes == ["retry", "retry", "retry", "error"]
    assert fake_time.sleeps == [0.5, 1.0, 2.0]


async def test_total_retry_time_is_bounded(messages_server: MessagesServer, make_model: MakeModel,
                                           fake_time: FakeTime) -> None:
    """With a 5s budget, waits of 1s and 2s fit but the next 4s would end past it: three requests, then stop."""
    messages_server.script(*[Fault(500)] * 3)
    policy = fake_time.policy(max_attempts=10, base_delay_s=1.0, max_total_s=5.0)
    with pytest.raises(ModelError, match=r"gave up after 3 attempts in 3\.0s \(retry budget 5s\)"):
        await make_model(retry=policy).complete(REQUEST)
    assert len(messages_server.requests) == 3
    assert fake_time.sleeps == [1.0, 2.0]


async def test_retry_after_beyond_the_budget_gives_up_at_once(messages_server: MessagesServer,
                                                              make_model: MakeModel, fake_time: FakeTime) -> None:
    """A server asking for a longer wait than the whole budget is not waited for."""
    messages_server.script(Fault(429, headers={"retry-after": "3600"}))
    with pytest.raises(ModelError, match="asked to wait 3600s, beyond the retry budget of 60s") as info:
        await make_model().complete(REQUEST)
    assert info.value.retryable and info.value.attempts == 1
    assert fake_time.sleeps == []


async def test_unreachable_server_is_reported_as_a_failed_connection(fake_time: FakeTime) -> None:
    """Nothing listening at the base URL: connection errors, retried, then one line naming the URL."""
    from core.model.anthropic import AnthropicModel

    with MessagesServer() as closed:
        url = closed.url
    listener = RecordingListener()
    async with AnthropicModel("claude-test", api_key="sk-ant-test-not-a-real-key", base_url=url,
                              retry=fake_time.policy(max_attempts=2)) as model:
        with pytest.raises(ModelError) as info:
            await model.complete(REQUEST, listener)
    assert info.value.error_kind == "connection" and info.value.attempts == 2
    assert f"cannot reach the Anthropic API at {url}" in str(info.value)
    assert "check the network and ANTHROPIC_BASE_URL" in str(info.value)


# -- the policy on its own -------------------------------------------------------------------------------------


def test_only_transient_statuses_are_retryable() -> None:
    """429, 5xx and 529 (and 408) are transient; 400, 401, 403, 404, 413, 422 never are."""
    for status in (429, 500, 502, 503, 504, 529, 408):
        assert kind_for_status(status) in TRANSIENT, status
    for status in (400, 401, 403, 404, 413, 422, 402, 409):
        assert kind_for_status(status) not in TRANSIENT, status
    assert sorted(TRANSIENT) == ["connection", "overloaded", "rate_limited", "server_error", "timeout"]


def test_backoff_is_exponential_capped_and_jittered() -> None:
    """Delays double from the base up to the cap; jitter only shortens them, by at most the jitter fraction."""
    steady = RetryPolicy(base_delay_s=0.5, max_delay_s=4.0, random=lambda: 0.0)
    assert [steady.backoff(n) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    jittered = RetryPolicy(base_delay_s=1.0, jitter=0.5, random=lambda: 0.999)
    assert 0.5 < jittered.backoff(1) < 1.0


def test_policy_rejects_nonsense_bounds() -> None:
    """A policy that could never send a request, or wait a negative time, is refused when built."""
    for bad in ({"max_attempts": 0}, {"base_delay_s": -1}, {"jitter": 1.5}):
        with pytest.raises(ValueError):
            RetryPolicy(**bad)  # type: ignore[arg-type]


def test_parse_retry_after_forms() -> None:
    """Milliseconds win over seconds; an HTTP date counts from now; garbage and negatives are ignored."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_retry_after({"Retry-After": "2.5"}) == 2.5
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "7"}) == 0.25
    assert parse_retry_after({"retry-after": format_datetime(now + timedelta(seconds=30))}, now=now) == 30
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({"retry-after": "-1"}) is None
    assert parse_retry_after({"retry-after-ms": "x", "retry-after": "4"}) == 4
    assert parse_retry_after({}) is None


@pytest.mark.parametrize("headers", [{"retry-after": "inf"}, {"retry-after": "nan"}, {"retry-after-ms": "Infinity"},
                                     {"retry-after-ms": "inf", "retry-after": "infinity"}])
def test_a_retry_after_that_is_no_finite_number_is_no_wait(headers: dict[str, str]) -> None:
    assert parse_retry_after(headers) is None


async def test_an_unclassified_failure_propagates_untouched(fake_time: FakeTime) -> None:
    """An exception the adapter does not recognise is a bug: it is neither retried nor turned into a ModelError."""
    calls = 0

    async def attempt() -> ModelResponse:
        nonlocal calls
        calls += 1
        raise KeyError("bug")

    def classify(exc: Exception) -> AttemptFailure | None:
        return None

    with pytest.raises(KeyError):
        await fake_time.policy().run(attempt, classify, NullListener())
    assert calls == 1 and fake_time.sleeps == []
