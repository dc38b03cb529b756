"""Event logs in process memory: a run's ring is handed over when it ends and kept for the retention period."""

from __future__ import annotations

import time
from collections import OrderedDict
from operator import itemgetter

import msgspec

from store.base import Clock
from store.eventlog import TOMBSTONE_SECONDS, Entry, EventLog, LogMeta, LogRead, LogRef

MAX_ENDED_LOGS = 10_000  # ended runs kept for replay; the oldest go first
_DATA = itemgetter(1)  # an entry's event (no frame of its own, as a comprehension has on Python 3.11)


class _Log(msgspec.Struct):
    """Positions are implicit (`first` + index): thousands of kept logs must not mean millions of tuples."""

    meta: LogMeta
    first: int = 1
    data: list[bytes] = msgspec.field(default_factory=list)
    ended_at: float | None = None
    head: int = 0


class MemoryEventLog(EventLog):
    live_writes = False

    def __init__(self, retention_seconds: float, *, clock: Clock = time.time) -> None:
        self.retention_seconds = retention_seconds
        self.clock = clock
        # Ordered for its O(1) popitem: a plain dict emptied from the front makes each `next(iter(...))` step over
        # every slot deleted before it (growing with the logs until the dict is resized).
        self._logs: OrderedDict[LogRef, _Log] = OrderedDict()

    async def create(self, ref: LogRef, meta: LogMeta) -> None:
        self._logs[ref] = _Log(meta)

    async def append(self, ref: LogRef, entries: list[Entry], first_kept: int) -> None:
        log = self._logs.get(ref)
        if log is None or not entries:
            return
        if not log.data:
            log.first = entries[0][0]
        elif entries[0][0] < log.first + len(log.data):  # a write repeated: each position is kept once
            entries = [entry for entry in entries if entry[0] >= log.first + len(log.data)]
        log.data.extend(map(_DATA, entries))
        if log.first < first_kept:
            del log.data[: first_kept - log.first]
            log.first = first_kept

    async def end(self, ref: LogRef, head: int) -> None:
        log = self._logs.get(ref)
        if log is not None:
            log.ended_at, log.head = self.clock(), head
        while len(self._logs) > MAX_ENDED_LOGS:  # the oldest first (logs are created when their run ends)
            self._logs.popitem(last=False)

    async def read(self, ref: LogRef, after: int, limit: int) -> LogRead | None:
        log = self._logs.get(ref)
        if log is None:
            return None
        if log.ended_at is not None and log.ended_at + self.retention_seconds <= self.clock():
            return LogRead(log.meta, [], log.head + 1, True, log.head)  # a tombstone: the events expired
        ended = log.ended_at is not None
        first = log.first if log.data else log.head + 1 if ended else after + 1
        start = max(0, after + 1 - first)
        chunk = log.data[start : start + limit]
        entries = list(zip(range(first + start, first + start + len(chunk)), chunk, strict=True))
        return LogRead(log.meta, entries, first, ended, log.head if ended else None)

    async def expire(self, ref: LogRef, head: int) -> None:
        log = self._logs.get(ref)
        if log is not None:
            log.data, log.first = [], head + 1

    async def delete(self, ref: LogRef) -> None:
        self._logs.pop(ref, None)

    async def purge_expired(self) -> int:
        now = self.clock()
        old = [key for key, log in self._logs.items() if log.ended_at is not None and log.ended_at + TOMBSTONE_SECONDS <= now]
        for key in old:
            del self._logs[key]
        for log in self._logs.values():
            if log.ended_at is not None and log.ended_at + self.retention_seconds <= now:
                log.data = []
        return len(old)
