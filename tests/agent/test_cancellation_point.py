"""The loop's cancellation point before each model call (agent/_checkpoint.py): no pass of the event loop when
nothing is cancelled, and a pending cancellation of either kind (a cancelled anyio scope, a native
`Task.cancel()` as asyncio's Ctrl-C handling makes) still raises there."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from agent._checkpoint import cancellation_point


async def test_with_nothing_cancelled_it_returns_without_letting_another_task_run() -> None:
    ran: list[str] = []

    async def other() -> None:
        ran.append("other")

    async with anyio.create_task_group() as tg:
        tg.start_soon(other)  # runs at the next pass of the event loop
        await cancellation_point()
        assert ran == []  # no pass happened
    assert ran == ["other"]


async def test_a_cancelled_scope_around_the_task_raises_there() -> None:
    reached = False
    with anyio.CancelScope() as scope:
        scope.cancel()
        await cancellation_point()
        reached = True
    assert scope.cancelled_caught and not reached


async def test_a_native_cancel_not_yet_delivered_raises_there() -> None:
    task = asyncio.current_task()
    assert task is not None
    task.cancel()  # as asyncio.Runner does on Ctrl-C: delivered at the task's next yield
    with pytest.raises(asyncio.CancelledError):
        await cancellation_point()
    task.uncancel()
