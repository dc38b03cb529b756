"""Event logs in process memory: a run's ring is handed over when it ends and kept for the retention period."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from store.base import Clock
from store.eventlog import TOMBSTONE_SECONDS, Entry, EventLog, LogMeta, LogRead, LogRef

MAX_ENDED_LOGS = 10_000  # ended runs kept for replay; the oldest go first


@dataclass(slots=True)
class _Log:
    meta: LogMeta
    entries: list[Entry] = field(default_factory=list)
    ended_at: float | None = None
    head: int = 0


class MemoryEventLog(EventLog):
    live_writes = False

    def __init__(self, retention_seconds: float, *, clock: Clock = time.time) -> None:
        self.retention_seconds = retention_seconds
        self.clock = clock
        self._logs: dict[LogRef, _Log] = {}

    async def create(self, ref: LogRef, meta: LogMeta) -> None:
        self._logs[ref] = _Log(meta)

    async def append(self, ref: LogRef, entries: list[Entry], first_kept: int) -> None:
        log = self._logs.get(ref)
        if log is None:
            return
        log.entries.extend(entries)
        if log.entries and log.entries[0][0] < first_kept:
            log.entries = [entry for entry in log.entries if entry[0] >= first_kept]

    async def end(self, ref: LogRef, head: int) -> None:
        log = self._logs.get(ref)
        if log is not None:
            log.ended_at, log.head = self.clock(), head
        while len(self._logs) > MAX_ENDED_LOGS:  # the oldest first (logs are created when their run ends)
            del self._logs[next(iter(self._logs))]

    async def read(self, ref: LogRef, after: int, limit: int) -> LogRead | None:
        log = self._logs.get(ref)
        if log is None:
            return None
        if log.ended_at is not None and log.ended_at + self.retention_seconds <= self.clock():
            return LogRead(log.meta, [], log.head + 1, True)  # a tombstone: the events expired
        entries = log.entries
        first = entries[0][0] if entries else after + 1
        start = max(0, after + 1 - first)
        return LogRead(log.meta, entries[start : start + limit], first, log.ended_at is not None)

    async def purge_expired(self) -> int:
        now = self.clock()
        old = [key for key, log in self._logs.items() if log.ended_at is not None and log.ended_at + TOMBSTONE_SECONDS <= now]
        for key in old:
            del self._logs[key]
        for log in self._logs.values():
            if log.ended_at is not None and log.ended_at + self.retention_seconds <= now:
                log.entries = []
        return len(old)
