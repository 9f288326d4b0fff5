"""The Anthropic adapter: the one module that imports the `anthropic` SDK. It streams every call (text deltas reach
the listener as they arrive), maps the answer into Strata's types, and leaves retries to `RetryPolicy` (the SDK's
own are off), describing each failure as one line: what failed, the request id, what to do.

The API key and base URL are passed in by the caller (who reads `ANTHROPIC_API_KEY` / `ANTHROPIC_BASE_URL` from its
environment mapping); nothing here reads `os.environ`."""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any, Self

import anthropic
import anyio

from core.model._anthropic_wire import (
    BadToolInput,
    StreamAccumulator,
    StreamIncomplete,
    StreamMalformed,
    request_params,
)
from core.model.base import ModelErrorKind, ModelListener, ModelRequest, ModelResponse, NullListener
from core.model.retry import AttemptFailure, RetryPolicy, kind_for_error_type, kind_for_status, parse_retry_after

try:  # the SDK's HTTP transport: httpx2 in current releases, httpx before
    import httpx2 as _http
except ImportError:  # pragma: no cover - depends on the installed SDK
    import httpx as _http  # type: ignore[no-redef, import-not-found]  # older SDKs; not installed with current ones

DEFAULT_MODEL = "claude-sonnet-4-6"
DEFAULT_MAX_TOKENS = 8192
DEFAULT_BASE_URL = "https://api.anthropic.com"

# what failed, what to do; the model name is filled in where it helps
_DESCRIPTIONS: dict[ModelErrorKind, tuple[str, str]] = {
    "authentication": ("Anthropic API rejected the API key", "check ANTHROPIC_API_KEY"),
    "permission": ("Anthropic API denied access", "check that the API key may use {model}"),
    "not_found": ("Anthropic API found no such model or endpoint",
                  "check the model name ({model}) and ANTHROPIC_BASE_URL"),
    "bad_request": ("Anthropic API rejected the request", "if Strata built it wrong, report it with the request id"),
    "too_large": ("Anthropic API refused the request as too large", "shorten the prompt or start a new session"),
    "unprocessable": ("Anthropic API could not process the request", "report it with the request id"),
    "rate_limited": ("Anthropic API rate limit reached", "wait a minute and resume the session"),
    "overloaded": ("Anthropic API is overloaded", "try again in a few minutes and resume the session"),
    "server_error": ("Anthropic API failed with a server error", "try again later and resume the session"),
    "timeout": ("Anthropic API timed out the request", "try again and resume the session"),
    "other": ("Anthropic API refused the request", "see the API's message"),
}
# kinds where the API's own message says what is wrong, so it is worth a place in the one line
_WITH_DETAIL = frozenset({"bad_request", "permission", "not_found", "too_large", "unprocessable", "other"})
_MAX_DETAIL = 240


class _StreamBroken(Exception):
    """An attempt's stream failed after the response began; carries the request id the failure itself lacks."""

    def __init__(self, cause: Exception, request_id: str | None) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.request_id = request_id


class _NotAStream(Exception):
    """A 200 whose body is not an event stream: what answered is not the Messages API."""

    def __init__(self, content_type: str) -> None:
        super().__init__(content_type)
        self.content_type = content_type


class AnthropicModel:
    """`anthropic:<model>` through `anthropic.AsyncAnthropic`. `timeout_s` bounds each network wait (connect,
    write, the gap between streamed chunks); `attempt_timeout_s` bounds one whole attempt. Close it with `aclose()`
    or use it as an async context manager."""

    def __init__(self, model: str = DEFAULT_MODEL, *, api_key: str, base_url: str | None = None,
                 max_tokens: int = DEFAULT_MAX_TOKENS, timeout_s: float = 120.0, attempt_timeout_s: float = 900.0,
                 retry: RetryPolicy | None = None, prompt_cache: bool = True) -> None:
        if not model:
            raise ValueError("model name is empty")
        if not api_key:
            raise ValueError("api_key is empty")
        if max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        self._model = model
        self._max_tokens = max_tokens
        self._attempt_timeout_s = attempt_timeout_s
        self._retry = retry or RetryPolicy()
        self._cache = prompt_cache
        self._base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        # An explicit key and base URL: the SDK then consults neither the environment nor profile files for them.
        self._client = anthropic.AsyncAnthropic(api_key=api_key, base_url=self._base_url, max_retries=0,
                                                timeout=timeout_s)

    @property
    def name(self) -> str:
        return f"anthropic:{self._model}"

    @property
    def model(self) -> str:
        return self._model

    @property
    def max_tokens(self) -> int:
        return self._max_tokens

    async def complete(self, request: ModelRequest, listener: ModelListener | None = None) -> ModelResponse:
        """One turn, retried within the policy; every attempt is reported to `listener`."""
        sink = listener or NullListener()
        params = request_params(self._model, self._max_tokens, request, cache=self._cache)

        async def attempt() -> ModelResponse:
            return await self._attempt(params, sink)

        return await self._retry.run(attempt, self._classify, sink)

    async def _attempt(self, params: dict[str, Any], listener: ModelListener) -> ModelResponse:
        with anyio.fail_after(self._attempt_timeout_s):
            stream = await self._client.messages.create(**params, stream=True)
            request_id: str | None = stream.response.headers.get("request-id")
            content_type = stream.response.headers.get("content-type", "")
            if content_type.split(";")[0].strip().lower() != "text/event-stream":
                await stream.close()  # some other service answered 200 (a wrong base URL): nothing to read
                raise _StreamBroken(_NotAStream(content_type.split(";")[0].strip()), request_id)
            accumulator = StreamAccumulator(listener)
            try:
                async with stream:
                    async for event in stream:
                        accumulator.feed(event)
                return accumulator.finish(request_id)
            except (_http.TransportError, StreamIncomplete, StreamMalformed, BadToolInput) as exc:
                raise _StreamBroken(exc, request_id) from exc
            except json.JSONDecodeError as exc:  # the SDK reads each event's data as JSON
                raise _StreamBroken(StreamMalformed(f"an event whose data is not JSON ({exc.msg})"),
                                    request_id) from exc
            except anthropic.APIConnectionError as exc:
                # Current SDKs wrap a failed read of the body (a reset, a cut chunked stream) as a connection
                # error; once the stream began it is a stream that broke off, with the request's id.
                cause = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
                raise _StreamBroken(cause, request_id) from exc

    def _classify(self, exc: Exception) -> AttemptFailure | None:
        if isinstance(exc, anthropic.APIStatusError):
            return self._status_failure(exc)
        if isinstance(exc, _StreamBroken):
            return self._broken_failure(exc)
        if isinstance(exc, anthropic.APITimeoutError):
            return AttemptFailure("timeout", f"no answer from the Anthropic API at {self._base_url} in time",
                                  "check the network and try again")
        if isinstance(exc, anthropic.APIConnectionError):
            cause = _one_line(str(exc.__cause__ or exc))
            return AttemptFailure("connection", f"cannot reach the Anthropic API at {self._base_url} ({cause})",
                                  "check the network and ANTHROPIC_BASE_URL")
        if isinstance(exc, TimeoutError):  # anyio.fail_after around the whole attempt
            return AttemptFailure("timeout", f"the Anthropic API call took longer than {self._attempt_timeout_s:g}s",
                                  "try again, or lower max_tokens")
        return None

    def _status_failure(self, exc: anthropic.APIStatusError) -> AttemptFailure:
        error_type = _error_type(exc.body)
        in_stream = exc.status_code < 400  # an `error` event inside a stream that began with 200
        if in_stream:
            kind = kind_for_error_type(error_type) or "server_error"
            status, retry_after = None, None
        else:
            kind = kind_for_status(exc.status_code)
            status, retry_after = exc.status_code, parse_retry_after(exc.response.headers)
        request_id = getattr(exc, "request_id", None) or exc.response.headers.get("request-id")
        what, action = _DESCRIPTIONS[kind]
        label = " ".join(p for p in (str(status) if status else "", error_type or "",
                                     "in the stream" if in_stream else "") if p)
        ref = ", ".join(p for p in (label, f"request {request_id}" if request_id else "") if p)
        detail = _api_message(exc.body) if kind in _WITH_DETAIL else None
        if detail:
            ref = f"{ref}: {detail}" if ref else detail
        return AttemptFailure(kind, f"{what} ({ref})" if ref else what, action.format(model=self._model),
                              status_code=status, request_id=request_id, retry_after_s=retry_after)

    def _broken_failure(self, exc: _StreamBroken) -> AttemptFailure:
        request = f"request {exc.request_id}" if exc.request_id else ""
        cause = exc.cause
        if isinstance(cause, BadToolInput):
            cut = cause.stop_reason == "max_tokens"
            ref = ", ".join(p for p in ("cut off by max_tokens" if cut else "", request) if p)
            what = f"Anthropic API returned tool call {cause.call_id} ({cause.tool}) with input that {cause.problem}"
            return AttemptFailure("bad_response", what + (f" ({ref})" if ref else ""),
                                  "raise max_tokens" if cut else "try again", request_id=exc.request_id)
        if isinstance(cause, _NotAStream):
            what = (f"the Anthropic API at {self._base_url} answered with {cause.content_type or 'no content type'}, "
                    "not an event stream")
            return AttemptFailure("bad_response", what + (f" ({request})" if request else ""),
                                  "check ANTHROPIC_BASE_URL", request_id=exc.request_id)
        if isinstance(cause, StreamMalformed):
            ref = ", ".join(p for p in (str(cause), request) if p)
            return AttemptFailure("bad_response", f"the Anthropic API sent a malformed stream ({ref})",
                                  "try again; if it persists, report it with the request id",
                                  request_id=exc.request_id)
        if isinstance(cause, _http.TimeoutException):
            kind: ModelErrorKind = "timeout"
            detail = "no data in time"
        elif isinstance(cause, StreamIncomplete):
            kind, detail = "connection", "it ended before message_stop"
        else:
            kind, detail = "connection", _one_line(str(cause) or type(cause).__name__)
        ref = ", ".join(p for p in (detail, request) if p)
        return AttemptFailure(kind, f"the Anthropic API stream broke off ({ref})", "check the network and try again",
                              request_id=exc.request_id)

    async def aclose(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()


def _error_type(body: object) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    value = error.get("type") if isinstance(error, dict) else None
    return value if isinstance(value, str) else None


def _api_message(body: object) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    value = error.get("message") if isinstance(error, dict) else None
    if not isinstance(value, str) or not value.strip():
        return None
    text = _one_line(value)
    return text if len(text) <= _MAX_DETAIL else text[:_MAX_DETAIL - 3] + "..."


def _one_line(text: str) -> str:
    return " ".join(text.split())
