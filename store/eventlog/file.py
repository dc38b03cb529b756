"""Event logs in shared append-only segment files under the state directory (`events/seg-<n>.log`): every run's
lines go to the active segment, so no file is created or removed per run (on ext4 a new file's inode is found past
the recently deleted ones, a search that grows with the churn). An index in memory finds each run's lines; a start
rebuilds it by reading the segments. Lines: `M <log> <meta>` opens a log (its lines follow), `V <log> <position>
<event>` holds one event, `E <log> <meta>` ends it. Segments rotate at SEGMENT_BYTES; one that no log needs is
removed, and one mostly dead has what it still holds copied forward first. Events survive a restart of the process
(not a power loss: no fsync). Every file operation goes through one lane (store/lane.py)."""

from __future__ import annotations

import os
import time

from store.base import Clock, StoreUnavailable
from store.eventlog import Entry, EventLog, LogMeta, LogRead, LogRef, LogWrite, ref_digest
from store.eventlog.legacy import import_run_files
from store.eventlog.segments import Meta, Segments, Write
from store.lane import IoLane


def unavailable(exc: OSError) -> StoreUnavailable:
    """How a failed event-log file operation reaches callers: the store's error, with the system's reason."""
    return StoreUnavailable(f"event log: {exc.strerror}")


def _described(write: LogWrite) -> Write:
    create = write.create
    meta = None if create is None else Meta(create.ros_digest, create.request_digest, create.owner, create.execution_id, create.inputs)
    return ref_digest(write.ref), meta, write.entries, write.first_kept, write.end


class FileEventLog(EventLog):
    def __init__(self, directory: str, retention_seconds: float, *, clock: Clock = time.time, lane: IoLane | None = None) -> None:
        self.directory = directory
        self.retention_seconds = retention_seconds
        self.clock = clock
        os.makedirs(directory, mode=0o700, exist_ok=True)
        self._segments = Segments(directory, retention_seconds, clock)
        import_run_files(self._segments)
        self._lane = lane or IoLane()  # every file operation, one at a time on one thread (shared with the journal)
        self._queued: list[tuple[LogWrite, list[Exception | None]]] = []  # on the lane, until the batch ends

    async def _io(self, work: object, *args: object) -> object:
        try:
            return await self._lane.call(work, *args)  # type: ignore[arg-type]
        except OSError as exc:
            raise unavailable(exc) from None

    async def create(self, ref: LogRef, meta: LogMeta) -> None:
        await self.apply(LogWrite(ref, [], 1, create=meta))

    async def append(self, ref: LogRef, entries: list[Entry], first_kept: int) -> None:
        await self.apply(LogWrite(ref, entries, first_kept))

    async def end(self, ref: LogRef, head: int) -> None:
        await self.apply(LogWrite(ref, [], head + 1, end=head))

    async def apply(self, write: LogWrite) -> None:
        """Open, append and end as one write of the active segment, joined by the other runs' writes that wait for
        the lane at the same time (one system call for all of them; a failure is every one's)."""
        try:
            await self._lane.join(self._write_many, write)
        except OSError as exc:
            raise unavailable(exc) from None

    def _write_many(self, writes: list[LogWrite]) -> list[None]:
        self._segments.write_many([_described(write) for write in writes])
        return [None] * len(writes)

    def queue(self, write: LogWrite, answer: list[Exception | None]) -> None:
        """On the lane: `write` waits for `write_queued`, which appends its answer (None, or its failure) to
        `answer`."""
        self._queued.append((write, answer))

    def write_queued(self) -> None:
        """On the lane, at the end of one of its batches: the writes queued meanwhile (the last of the runs that
        batch finished) in one system call. It never raises: the finishes they follow are durable already."""
        queued, self._queued = self._queued, []
        if not queued:
            return
        failure: Exception | None = None
        try:
            self._write_many([write for write, _ in queued])
        except OSError as exc:
            failure = unavailable(exc)
        except Exception as exc:  # noqa: BLE001 (reported to each writer, never raised)
            failure = StoreUnavailable(f"event log: {exc}")
        for _, answer in queued:
            answer.append(failure)

    async def read(self, ref: LogRef, after: int, limit: int) -> LogRead | None:
        found = await self._io(self._read, ref_digest(ref), after, limit)
        return found if isinstance(found, LogRead) else None

    def _read(self, digest: str, after: int, limit: int) -> LogRead | None:
        log = self._segments.logs.get(digest)
        if log is None:
            return None
        meta = log.meta
        info = LogMeta(meta.ros_digest, meta.request_digest, meta.owner, meta.execution_id, meta.inputs)
        if meta.ended_at is not None and meta.ended_at + self.retention_seconds <= self.clock():
            return LogRead(info, [], meta.head + 1, True, meta.head)  # a tombstone: the events expired
        entries, first = self._segments.entries(log, after, limit)
        ended = meta.ended_at is not None
        if first is None:  # nothing held: every event expired (a tombstone), or none was written yet
            first = meta.head + 1 if ended else after + 1
        return LogRead(info, entries, first, ended, meta.head if ended else None)

    async def purge_expired(self) -> int:
        removed = await self._io(self._segments.purge)
        return removed if isinstance(removed, int) else 0

    async def close(self) -> None:
        await self._lane.call(self._segments.close)
