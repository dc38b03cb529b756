"""The event logs of the runs this replica ended, kept for replay within a byte budget: past it, the oldest are
expired at once rather than at the end of their retention, and a tombstone stays, so that a late attacher learns
EVENTS_EXPIRED. Logs past their retention leave the budget by themselves (and the memory store's drop their events
then, not at the next purge)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable

from gateway import collector, metrics
from store import StoreUnavailable
from store.eventlog import EventLog, LogRef

log = logging.getLogger("agui.engine")
DEFAULT_MAX_BYTES = 256 * 1024 * 1024


class RetainedLogs:
    def __init__(
        self,
        events: EventLog,
        max_bytes: int,
        retention_seconds: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self._events = events
        self._sleep = sleep
        self.max_bytes = max_bytes
        self._retention = retention_seconds
        self._clock = clock
        self._kept: deque[tuple[float, LogRef, int, int]] = deque()  # (ended at, log, its head, its bytes), oldest first
        self.bytes = 0
        self._expiring: set[asyncio.Task[None]] = set()
        self._sweeper: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._kept)

    def ended(self, ref: LogRef, head: int, size: int) -> None:
        """A run's log was written to its end: count it, and expire the oldest while the budget is exceeded."""
        now = self._clock()
        self._drop_expired(now)
        self._kept.append((now, ref, head, size))
        self.bytes += size
        while self.bytes > self.max_bytes and self._kept:
            _, oldest, oldest_head, oldest_size = self._kept.popleft()
            self.bytes -= oldest_size
            metrics.RETAINED_LOGS_EXPIRED.inc()
            self._expire(oldest, oldest_head, oldest_size)
        metrics.RETAINED_LOG_BYTES.set(self.bytes)
        if self._sweeper is None and self._kept and not self._events.live_writes:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep())

    def _drop_expired(self, now: float) -> None:
        """Logs past their retention leave the count; those kept in this process (the memory store) drop their
        events now (the store's own retention removes the others)."""
        while self._kept and self._kept[0][0] + self._retention <= now:
            _, ref, head, size = self._kept.popleft()
            self.bytes -= size
            if not self._events.live_writes:
                self._expire(ref, head, size)

    def _expire(self, ref: LogRef, head: int, size: int) -> None:
        task = asyncio.get_running_loop().create_task(self._expire_now(ref, head, size))
        self._expiring.add(task)
        task.add_done_callback(self._expiring.discard)

    async def _expire_now(self, ref: LogRef, head: int, size: int) -> None:
        try:
            await self._events.expire(ref, head)
            collector.RETURN.released(size)
        except StoreUnavailable as exc:  # its retention removes it all the same, later
            log.warning("retained log of run %s not expired early (%s)", ref.run_id, exc)

    async def _sweep(self) -> None:
        """Logs kept in this process (the memory store) drop their events when their retention ends."""
        try:
            while self._kept:
                await self._sleep(max(0.05, self._kept[0][0] + self._retention - self._clock()))
                self._drop_expired(self._clock())
                metrics.RETAINED_LOG_BYTES.set(self.bytes)
        finally:
            self._sweeper = None
