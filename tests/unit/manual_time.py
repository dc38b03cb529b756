"""Time the test moves by hand: a clock, sleeps and timers for code that takes them (gateway/engine/timers.py's
`Timers`, or a clock and a sleep), so timers are tested without waiting."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable


class ManualTimer:
    """A callback due at a moment of the test's time; cancelled, it never runs."""

    __slots__ = ("callback", "cancelled")

    def __init__(self, callback: Callable[[], object]) -> None:
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualTime:
    """`now()` reads the test's time; `sleep(s)` returns, and a timer of `call_at` runs, once the test has advanced
    past its moment."""

    def __init__(self, now: float = 1000.0) -> None:
        self.current = now
        self._due: list[tuple[float, int, asyncio.Future[None] | ManualTimer]] = []
        self._order = itertools.count()

    def now(self) -> float:
        return self.current

    def clock(self) -> Callable[[], float]:
        return self.now

    async def sleep(self, seconds: float) -> None:
        wake = asyncio.get_running_loop().create_future()
        heapq.heappush(self._due, (self.current + max(seconds, 0.0), next(self._order), wake))
        await wake

    def call_at(self, when: float, callback: Callable[[], object]) -> ManualTimer:
        timer = ManualTimer(callback)
        heapq.heappush(self._due, (when, next(self._order), timer))
        return timer

    async def advance(self, seconds: float) -> None:
        """Move time on by `seconds`, waking each sleeper and running each timer at its own moment, in order, and
        letting what it woke run."""
        until = self.current + seconds
        await settle()
        while self._due and self._due[0][0] <= until:
            when, _, due = heapq.heappop(self._due)
            self.current = max(self.current, when)
            if isinstance(due, ManualTimer):
                if not due.cancelled:
                    due.callback()
            elif not due.done():
                due.set_result(None)
            await settle()
        self.current = until
        await settle()

    async def run_until(self, task: asyncio.Future[object], step: float, limit: float = 60.0) -> None:
        """Advance in steps of `step` until `task` is done; fails if it is not within `limit` of the test's time."""
        start = self.current
        while not task.done():
            assert self.current - start < limit, f"still running after {limit} s of the test's time"
            await self.advance(step)


async def settle() -> None:
    """Let every task that can run now run until it waits again (a few loop turns)."""
    for _ in range(5):
        await asyncio.sleep(0)
