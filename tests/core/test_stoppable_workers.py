"""`run_stoppable`'s worker threads (core/tools/_workers.py) and its waiter (core/tools/blocking.py): what
`anyio.to_thread.run_sync(..., abandon_on_cancel=True)` promised still holds: the caller's context, exceptions,
anyio's thread limiter, no start after the waiter left, and idle threads end."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import anyio
import anyio.to_thread
import pytest

from core.tools import Stop, run_stoppable
from core.tools._workers import Workers

_SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")


async def test_the_work_runs_in_another_thread_in_the_callers_context() -> None:
    token = _SEEN.set("the caller's")
    try:
        here = threading.get_ident()
        thread, seen = await run_stoppable(lambda stop: (threading.get_ident(), _SEEN.get()))
    finally:
        _SEEN.reset(token)
    assert thread != here and seen == "the caller's"


@pytest.mark.parametrize("error", [ValueError("bad"), KeyboardInterrupt(), OSError(5, "io")])
async def test_what_the_work_raises_is_raised_in_the_waiter(error: BaseException) -> None:
    def fail(stop: Stop) -> None:
        raise error

    with pytest.raises(type(error)) as caught:
        await run_stoppable(fail)
    assert caught.value is error


async def test_a_stop_iteration_is_raised_as_a_runtime_error() -> None:
    def stops(stop: Stop) -> None:
        raise StopIteration

    with pytest.raises(RuntimeError, match="StopIteration"):
        await run_stoppable(stops)


async def test_a_cancelled_scope_starts_no_work() -> None:
    ran = threading.Event()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await run_stoppable(lambda stop: ran.set())
    assert scope.cancelled_caught
    await anyio.sleep(0.05)
    assert not ran.is_set()


async def test_no_more_run_at_once_than_anyios_thread_limiter_lets_and_an_abandoned_one_gives_its_token_back(
        ) -> None:
    limiter = anyio.to_thread.current_default_thread_limiter()
    total = limiter.total_tokens
    limiter.total_tokens = 2
    release = threading.Event()
    running: list[int] = []
    most = [0]
    lock = threading.Lock()

    def hold(stop: Stop) -> None:
        with lock:
            running.append(1)
            most[0] = max(most[0], len(running))
        try:
            while not release.wait(0.01):
                stop.check()
        finally:
            with lock:
                running.pop()

    try:
        async with anyio.create_task_group() as tg:
            with anyio.move_on_after(0.3):  # the first is abandoned: its token goes back
                await run_stoppable(hold)
            assert limiter.borrowed_tokens == 0
            for _ in range(100):  # its thread sees the stop flag and ends
                if not running:
                    break
                await anyio.sleep(0.02)
            for _ in range(3):
                tg.start_soon(run_stoppable, hold)
            await anyio.sleep(0.3)
            assert limiter.borrowed_tokens == 2 and limiter.statistics().tasks_waiting == 1
            release.set()
        assert most[0] <= 2
        assert limiter.borrowed_tokens == 0
    finally:
        limiter.total_tokens = total


def test_a_job_whose_waiter_left_before_it_started_is_not_run() -> None:
    workers = Workers("test", idle_s=0.2)
    ran = threading.Event()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        fut.cancel()
        workers.submit(fut, loop, ran.set)
        await anyio.sleep(0.1)

    anyio.run(main)
    assert not ran.is_set()


def test_idle_workers_end_and_a_burst_starts_only_what_it_needs() -> None:
    workers = Workers("strata-test-idle", idle_s=0.2)
    gate = threading.Barrier(4)

    async def main() -> list[int]:
        loop = asyncio.get_running_loop()
        futs: list[asyncio.Future[int]] = []
        for i in range(4):  # four at once: each waits for the others, so four threads are needed
            fut: asyncio.Future[int] = loop.create_future()
            workers.submit(fut, loop, lambda i=i: gate.wait(5) * 0 + i)
            futs.append(fut)
        first = [await fut for fut in futs]  # submitted together: they run at once
        for i in range(4):  # one after another: the idle workers take them, none is started
            fut = loop.create_future()
            workers.submit(fut, loop, lambda i=i: i)
            first.append(await fut)
        return first

    assert anyio.run(main) == [0, 1, 2, 3, 0, 1, 2, 3]
    assert workers.started == 4
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive("strata-test-idle"):
        time.sleep(0.05)
    assert _alive("strata-test-idle") == 0


def _alive(name: str) -> int:
    return sum(1 for t in threading.enumerate() if t.name == name)
