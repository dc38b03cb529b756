"""The store's I/O lane on a real thread: calls queued while it works, or in one turn of the loop, run together;
joined calls become one."""

from __future__ import annotations

import asyncio
import threading

import pytest

import store.lane as lane_module
from store.lane import IoLane


async def test_calls_queued_while_the_lane_works_run_as_one_batch_and_joined_ones_as_one_call():
    lane = IoLane()
    gate = threading.Event()
    joined_calls: list[list[int]] = []

    def join(items: list[int]) -> list[int]:
        joined_calls.append(items)
        return [item * 10 for item in items]

    entered = threading.Event()

    def hold() -> bool:
        entered.set()
        return gate.wait(5)

    first = asyncio.ensure_future(lane.call(hold))  # holds the lane's thread
    assert await asyncio.to_thread(entered.wait, 5)
    rest = [asyncio.ensure_future(lane.join(join, item)) for item in range(5)]
    plain = asyncio.ensure_future(lane.call(sorted, [3, 1, 2]))
    gate.set()
    assert await first is True
    assert await asyncio.gather(*rest) == [0, 10, 20, 30, 40]
    assert await plain == [1, 2, 3], "a plain call's list result is its own, not split between callers"
    assert joined_calls == [[0, 1, 2, 3, 4]], "one call for every item that waited together"


async def test_a_failing_call_reaches_each_of_its_callers_and_the_lane_goes_on():
    lane = IoLane()

    def broken(items: list[str]) -> list[str]:
        raise OSError(28, "No space left on device")

    def miscounted(items: list[str]) -> list[str]:
        return []  # fewer results than items: each caller gets the error, the thread survives

    failures = await asyncio.gather(*(lane.join(broken, str(i)) for i in range(3)), return_exceptions=True)
    assert all(isinstance(failure, OSError) for failure in failures)
    with pytest.raises(ValueError):
        await lane.join(miscounted, "x")
    assert await lane.call(len, "abc") == 3


async def test_the_thread_ends_when_idle_and_starts_again(monkeypatch):
    monkeypatch.setattr(lane_module, "IDLE_SECONDS", 0.01)
    lane = IoLane()
    worker = await lane.call(threading.current_thread)
    assert worker is not threading.current_thread() and worker.name == "agui-store-lane"
    await asyncio.to_thread(worker.join, 5)  # it ends by itself, once idle
    assert not worker.is_alive()
    again = await lane.call(threading.current_thread)
    assert again is not worker and again.is_alive()


async def test_calls_queued_in_one_turn_of_the_loop_reach_the_idle_thread_together():
    lane = IoLane()
    await lane.call(len, "start the thread")  # the thread now waits for work
    joined_calls: list[list[int]] = []

    def join(items: list[int]) -> list[int]:
        joined_calls.append(items)
        return items

    # Queued one after another in this task's step: the thread is woken once, at the end of the turn.
    calls = [asyncio.ensure_future(lane.join(join, item)) for item in range(5)]
    assert await asyncio.gather(*calls) == [0, 1, 2, 3, 4]
    assert joined_calls == [[0, 1, 2, 3, 4]], "one flush for the turn's writes, not one each"


def test_a_loop_closed_before_its_wake_does_not_keep_the_next_loop_waiting():
    lane = IoLane()

    async def queue_and_leave() -> None:
        asyncio.get_running_loop().stop()  # this turn is the loop's last: the wake it schedules never runs
        lane._queue_call(len, ("abandoned",), joined=False)

    stranded = asyncio.new_event_loop()
    stranded.run_until_complete(queue_and_leave())
    stranded.close()
    assert asyncio.run(asyncio.wait_for(lane.call(len, "abc"), 5)) == 3
