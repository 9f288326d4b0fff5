"""Two per-call helpers that must change nothing but speed: a receipt id is the uuid7 the factory would have made,
without its dashes; a cancel scope made by core/scopes.py is anyio's own scope (deadline, shield, cancellation)."""

from __future__ import annotations

import math
from itertools import count

import anyio

from core.clock import SteppingClock
from core.ids import IdFactory
from core.scopes import cancel_scope, deadline_after


def _factory() -> IdFactory:
    n = count()
    return IdFactory(SteppingClock(), randbytes=lambda k: next(n).to_bytes(k, "big"))


def test_a_receipt_id_is_the_uuid7_the_factory_would_have_made_without_its_dashes() -> None:
    a, b = _factory(), _factory()
    for _ in range(50):  # same clock and randomness: the same sequence, counter within a millisecond included
        assert a.receipt_id() == "rcpt_" + b.uuid7().replace("-", "")
    ids = [a.receipt_id() for _ in range(100)]
    assert ids == sorted(ids) and len(set(ids)) == 100


def test_ids_from_one_factory_interleave_in_time_order() -> None:
    f = _factory()
    made = [f.uuid7().replace("-", "") if i % 2 else f.receipt_id()[5:] for i in range(20)]
    assert made == sorted(made)


async def test_cancel_scope_is_anyios_scope_with_its_deadline_and_shield() -> None:
    first, second = cancel_scope(shield=True), cancel_scope(deadline=deadline_after(5))
    assert isinstance(first, anyio.CancelScope) and type(first) is type(second) is type(anyio.CancelScope())
    assert first.shield and first.deadline == math.inf
    assert not second.shield and abs(second.deadline - (anyio.current_time() + 5)) < 1


async def test_a_deadline_scope_cancels_what_overruns_it() -> None:
    with cancel_scope(deadline=deadline_after(0.01)) as scope:
        await anyio.sleep(5)
    assert scope.cancelled_caught


async def test_a_shielded_scope_keeps_out_an_outer_cancellation() -> None:
    finished = False
    with anyio.CancelScope() as outer:
        outer.cancel()
        with cancel_scope(shield=True):
            await anyio.sleep(0.01)
            finished = True
        await anyio.sleep(5)  # out of the shield: the outer cancellation arrives
    assert finished and outer.cancelled_caught
