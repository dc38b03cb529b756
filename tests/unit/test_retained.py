"""The replica's byte budget for the ended runs' logs: the oldest expire first, a tombstone stays, and logs past
their retention leave the budget (and, in the memory store, their events go at once)."""

from __future__ import annotations

import asyncio

from gateway.engine.retained import RetainedLogs
from store.eventlog import LogMeta, LogRef
from store.eventlog.memory import MemoryEventLog
from tests.unit.manual_time import ManualTime


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def ended_log(log: MemoryEventLog, name: str, size: int) -> LogRef:
    ref = LogRef("t", name)
    await log.write(ref, [(1, b"x" * size)], 1, create=LogMeta("ros", "d", "o", "e"), end=1)
    return ref


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_past_the_budget_the_oldest_logs_expire_first_and_leave_a_tombstone():
    log = MemoryEventLog(600)
    budget = RetainedLogs(log, 250, 600, clock=Clock())
    refs = [await ended_log(log, f"r{i}", 100) for i in range(4)]
    for ref in refs:
        budget.ended(ref, 1, 100)
    await settle()
    assert budget.bytes == 200 and len(budget) == 2
    reads = [await log.read(ref, 0, 10) for ref in refs]
    assert [len(read.entries) for read in reads if read] == [0, 0, 1, 1]
    assert all(read is not None and read.ended and read.head == 1 and read.first == 2 for read in reads[:2])


async def test_logs_past_their_retention_leave_the_budget_and_drop_their_events():
    time = ManualTime()
    log = MemoryEventLog(0.2)
    budget = RetainedLogs(log, 10_000, 0.2, clock=time.now, sleep=time.sleep)
    first = await ended_log(log, "old", 100)
    budget.ended(first, 1, 100)
    time.current += 0.3  # past its retention, before the sweep wakes
    second = await ended_log(log, "new", 100)
    budget.ended(second, 1, 100)
    assert budget.bytes == 100, "the old one left the count when the new one came"
    await time.advance(0.3)  # the sweep looks once the oldest's retention has passed
    assert budget.bytes == 0 and len(budget) == 0
    read = await log.read(second, 0, 10)
    assert read is not None and read.entries == [] and read.first == 2


async def test_a_log_counted_out_by_a_later_end_drops_its_events_too():
    """The memory store's logs past their retention drop their events whichever notices first: the sweep, or the
    next run's end."""
    clock = Clock()
    log = MemoryEventLog(600)
    budget = RetainedLogs(log, 10_000, 0.2, clock=clock)
    old = await ended_log(log, "old", 100)
    budget.ended(old, 1, 100)
    clock.now += 0.3  # past its retention, before the sweep wakes
    budget.ended(await ended_log(log, "new", 100), 1, 100)
    await settle()
    read = await log.read(old, 0, 10)
    assert read is not None and read.entries == [] and read.first == 2
