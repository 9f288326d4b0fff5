"""Fixtures for the wire tests: the loopback Messages API server, Anthropic models pointed at it, a listener that
records what a model call reports, and fake time so retries run instantly."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.session import Runtime
from core.clock import SystemClock
from core.ids import IdFactory
from core.model import ModelAttempt, RetryPolicy
from core.model.anthropic import AnthropicModel
from memory import SqliteEventStore
from tests.wire.messages_server import MessagesServer
from tool_executor import builtin_tools

TEST_KEY = "sk-ant-test-not-a-real-key"


@pytest.fixture
def messages_server() -> Iterator[MessagesServer]:
    """A running server that requires TEST_KEY; script it with `server.script(...)`. A request that finds the
    script empty fails the test."""
    with MessagesServer(api_key=TEST_KEY) as server:
        yield server
    assert server.unexpected == [], "requests arrived that the test did not script"


class FakeTime:
    """A clock that only moves when the retry policy sleeps; every sleep is recorded."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now

    def policy(self, **overrides: Any) -> RetryPolicy:
        """A policy on this fake time with no jitter, so delays are exactly base * 2**(n-1)."""
        return RetryPolicy(**{"sleep": self.sleep, "clock": self.clock, "random": lambda: 0.0, **overrides})


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()


class RecordingListener:
    """Keeps every text delta and attempt; `on_first_text` runs once, on the first delta."""

    def __init__(self, on_first_text: Callable[[], None] | None = None) -> None:
        self.texts: list[str] = []
        self.attempts: list[ModelAttempt] = []
        self._on_first_text = on_first_text

    def on_text(self, delta: str) -> None:
        self.texts.append(delta)
        if self._on_first_text is not None:
            self._on_first_text()
            self._on_first_text = None

    def on_attempt(self, attempt: ModelAttempt) -> None:
        self.attempts.append(attempt)

    @property
    def outcomes(self) -> list[str]:
        return [a.outcome for a in self.attempts]


@pytest.fixture
def listener() -> RecordingListener:
    return RecordingListener()


MakeModel = Callable[..., AnthropicModel]


@pytest.fixture
async def make_model(messages_server: MessagesServer, fake_time: FakeTime) -> AsyncIterator[MakeModel]:
    """Builds AnthropicModels aimed at the server (retries on fake time unless `retry=` is given); closes them."""
    models: list[AnthropicModel] = []

    def make(model: str = "claude-test", **kwargs: Any) -> AnthropicModel:
        kwargs.setdefault("api_key", TEST_KEY)
        kwargs.setdefault("base_url", messages_server.url)
        kwargs.setdefault("retry", fake_time.policy())
        built = AnthropicModel(model, **kwargs)
        models.append(built)
        return built

    yield make
    for built in models:
        await built.aclose()


async def _runtime_on(db: Path) -> AsyncIterator[Runtime]:
    store = await SqliteEventStore.open(db)
    try:
        yield Runtime(store=store, clock=SystemClock(), ids=IdFactory(), tools=builtin_tools())
    finally:
        await store.close()


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    """The loop's parts as `strata run` builds them, on a real SQLite file."""
    async for rt in _runtime_on(tmp_path / "strata.db"):
        yield rt


@pytest.fixture
async def home_runtime(strata_home: Path) -> AsyncIterator[Runtime]:
    """`runtime` on the database of the test's Strata home (the `cli` fixture's): what it records, a real `strata`
    process reads."""
    async for rt in _runtime_on(strata_home / "strata.db"):
        yield rt
