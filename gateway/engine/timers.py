"""A run's time, as one seam: the clock, the sleeps and the timers of its life (the lease proof and its renewals, the
grace window, the end-of-run retry, its event log's first write and backoff). The running loop's unless the engine is given others: the unit tests step time
by hand, so a lease that runs out or a retry's backoff is tested without waiting."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Timers(Protocol):
    def now(self) -> float:
        """Seconds on a monotonic clock: only differences mean anything."""
        ...

    def clock(self) -> Callable[[], float]:
        """`now` as a callable to keep, for a check made before every event: the running loop's own `time` is a
        C call, where `now()` costs two Python calls more."""
        ...

    def sleep(self, seconds: float) -> Awaitable[None]: ...

    def call_at(self, when: float, callback: Callable[[], object]) -> Timer:
        """Call `callback` once `now()` has reached `when`, unless the timer is cancelled first."""
        ...


class LoopTimers:
    """The running event loop's clock and timers."""

    __slots__ = ()

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def clock(self) -> Callable[[], float]:
        return asyncio.get_running_loop().time

    def sleep(self, seconds: float) -> Awaitable[None]:
        return asyncio.sleep(seconds)

    def call_at(self, when: float, callback: Callable[[], object]) -> Timer:
        return asyncio.get_running_loop().call_at(when, callback)


LOOP_TIMERS: Timers = LoopTimers()
