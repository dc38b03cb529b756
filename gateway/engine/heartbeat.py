"""One heartbeat clock per event loop: streams whose followers wait in silence are woken when a heartbeat is due by
one periodic task, instead of a timer per stream (10,000 idle runs hold no timer each).

A stream asks to be woken at a time (`wake_at`); the clock looks every tick (a quarter of the shortest interval
asked for, at most TICK) and calls `heartbeat_due(now, slack)` on each stream whose time has come (within half a
tick); the stream beats or asks again for later. A heartbeat is late by at most about one tick. Its time and its
sleep are the loop's unless a clock is installed with others (the unit tests step them by hand).

The clock holds each stream by a weak reference: a short run's follower waits once, so its stream is due a
heartbeat an interval later, long after the run ended (held strongly, 15 s of short runs at 2,000 a second
kept 30,000 ended streams alive, and the collector walked them all)."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import weakref
from collections.abc import Awaitable, Callable
from typing import Protocol

TICK = 0.25  # the longest time between two looks at the due streams, in seconds
MIN_TICK = 0.01


class Beating(Protocol):
    def heartbeat_due(self, now: float, slack: float) -> None: ...


class HeartbeatClock:
    def __init__(
        self, time: Callable[[], float] | None = None, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    ) -> None:  # no reference to its loop: the registry below is weak in the loop
        self.now = time or asyncio.get_running_loop().time
        self.sleep = sleep
        self.tick = TICK
        self._due: list[tuple[float, int, weakref.ref[Beating]]] = []  # a heap of (when, order, stream)
        self._order = itertools.count()
        self._task: asyncio.Task[None] | None = None

    def wake_at(self, stream: Beating, when: float, interval: float) -> None:
        self.tick = min(self.tick, max(MIN_TICK, interval / 4))
        heapq.heappush(self._due, (when, next(self._order), weakref.ref(stream)))
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            while self._due:
                await self.sleep(self.tick)
                now, slack = self.now(), self.tick / 2
                while self._due and self._due[0][0] <= now + slack:
                    stream = heapq.heappop(self._due)[2]()
                    if stream is not None:  # else it ended and nothing holds it any more
                        stream.heartbeat_due(now, slack)
        finally:
            self._task = None


_clocks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, HeartbeatClock] = weakref.WeakKeyDictionary()


def install(found: HeartbeatClock) -> None:
    """Make `found` the running loop's clock."""
    _clocks[asyncio.get_running_loop()] = found


def clock() -> HeartbeatClock:
    """The running loop's clock (each loop has its own: tests run servers on several)."""
    loop = asyncio.get_running_loop()
    found = _clocks.get(loop)
    if found is None:
        found = _clocks[loop] = HeartbeatClock()
    return found
