"""The stores' per-thread locks: first come, first served; a cancelled waiter never keeps the lock nor loses it for
the next; a key nobody holds keeps nothing."""

from __future__ import annotations

import asyncio

import pytest

from store.keylocks import KeyedLocks


async def _hold(locks: KeyedLocks, key: str, order: list[str], name: str, gate: asyncio.Event) -> None:
    turn = locks.take(key)
    if turn is not None:
        await locks.wait(key, turn)
    try:
        order.append(name)
        await gate.wait()
    finally:
        locks.release(key)


async def test_waiters_take_the_lock_in_the_order_they_came_and_a_free_key_keeps_nothing():
    locks, order, gate = KeyedLocks(), [], asyncio.Event()
    tasks = [asyncio.ensure_future(_hold(locks, "t", order, name, gate)) for name in "abc"]
    other = asyncio.ensure_future(_hold(locks, "u", order, "other", gate))
    await asyncio.sleep(0)
    assert order == ["a", "other"]  # another key is never held up
    gate.set()
    await asyncio.gather(*tasks, other)
    assert order == ["a", "other", "b", "c"]
    assert len(locks) == 0


async def test_a_waiter_cancelled_in_the_queue_is_skipped():
    locks, order, gate = KeyedLocks(), [], asyncio.Event()
    first = asyncio.ensure_future(_hold(locks, "t", order, "a", gate))
    await asyncio.sleep(0)
    cancelled = asyncio.ensure_future(_hold(locks, "t", order, "b", gate))
    last = asyncio.ensure_future(_hold(locks, "t", order, "c", gate))
    await asyncio.sleep(0)
    cancelled.cancel()
    gate.set()
    await asyncio.gather(first, last)
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert order == ["a", "c"]
    assert len(locks) == 0


async def test_a_waiter_cancelled_after_the_lock_was_handed_to_it_hands_it_on():
    locks, order = KeyedLocks(), []
    assert locks.take("t") is None  # held here
    turn = locks.take("t")
    assert turn is not None
    waiter = asyncio.ensure_future(locks.wait("t", turn))
    follower = asyncio.ensure_future(_hold(locks, "t", order, "next", asyncio.Event()))
    await asyncio.sleep(0)
    locks.release("t")  # hands the lock to `waiter`, which is cancelled before it runs
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await asyncio.sleep(0)
    assert order == ["next"]  # the lock went on to the next waiter, not lost
    follower.cancel()
    with pytest.raises(asyncio.CancelledError):
        await follower
    assert len(locks) == 0
