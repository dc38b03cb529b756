"""Time the test moves by hand: a clock and a sleep for code that takes them, so timers are tested without waiting."""

from __future__ import annotations

import asyncio
import heapq
import itertools


class ManualTime:
    """`clock()` reads the test's time; `sleep(s)` returns once the test has advanced past it."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        wake = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + max(seconds, 0.0), next(self._order), wake))
        await wake

    async def advance(self, seconds: float) -> None:
        """Move time on by `seconds`, waking each sleeper at its own moment, in order, and letting it run."""
        until = self.now + seconds
        await _settle()
        while self._sleepers and self._sleepers[0][0] <= until:
            when, _, wake = heapq.heappop(self._sleepers)
            self.now = max(self.now, when)
            if not wake.done():
                wake.set_result(None)
            await _settle()
        self.now = until
        await _settle()


async def _settle() -> None:
    """Let every task that can run now run until it waits again (a few loop turns)."""
    for _ in range(5):
        await asyncio.sleep(0)
