"""Embedded default store: thread states in one append-only journal under the state directory (store/journal.py),
with group commit: the writes waiting together share one write and one fdatasync, and each writer is answered once
its batch is durable. Event logs sit beside it in shared segment files (store/eventlog/file.py); one lane thread
does all of their file work (store/lane.py)."""

from __future__ import annotations

import fcntl
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Container

import msgspec

from store import rules
from store.base import Clock, HistoryWrite, Lease, Progress, StoreUnavailable
from store.document import SIDES, SUMMARY, DocumentStore
from store.eventlog import LogFenced, LogWrite
from store.eventlog.file import FileEventLog
from store.journal import Journal, deleted_record, state_record
from store.kept import KeptEncoder
from store.lane import IoLane
from store.legacy import import_thread_files
from store.records import ExecutionStatus, ThreadState

_decoder = msgspec.json.Decoder(ThreadState)
WRITTEN_KEPT = 4096  # threads whose last written bytes are kept, to load them without reading the journal


class FileStore(DocumentStore):
    """Single-process: a second process on the same state directory is refused (use Redis for several)."""

    def __init__(
        self,
        directory: str,
        retention_seconds: float,
        *,
        clock: Clock = time.time,
        lease_seconds: float | None = None,
        log_retention: float = 600.0,
    ) -> None:
        super().__init__(retention_seconds, clock=clock, lease_seconds=lease_seconds)
        self.directory = os.path.abspath(directory)
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        os.chmod(self.directory, 0o700)
        self._claim = claim_directory(self.directory)
        journal: Journal | None = None
        try:
            journal = Journal(os.path.join(self.directory, "threads.journal"), clock())
            self._legacy_corrupt = import_thread_files(os.path.join(self.directory, "threads"), journal)
            self._lane = IoLane()  # every file operation (journal and event logs), one at a time on one thread
            self.file_events = FileEventLog(os.path.join(self.directory, "events"), log_retention, clock=clock, lane=self._lane)
        except BaseException:  # a store that could not open holds neither its journal nor its claim on the directory
            if journal is not None:
                journal.close()
            os.close(self._claim)
            raise
        self.journal = journal
        self.events = self.file_events
        self._written: OrderedDict[str, bytes] = OrderedDict()  # thread -> its newest state, newest last
        self._encoder = KeptEncoder(msgspec.json.Encoder())  # what it encodes is kept (_written)

    @staticmethod
    def _decode(thread_id: str, raw: bytes) -> ThreadState:
        try:
            state = _decoder.decode(raw)
        except msgspec.MsgspecError:
            raise StoreUnavailable("thread state record is corrupt") from None
        if state.thread_id != thread_id:
            raise StoreUnavailable("thread state record belongs to another thread")
        return state

    async def _load(self, thread_id: str) -> ThreadState | None:
        """From the bytes this process last wrote when it still has them, else from the journal (a thread the
        index does not know was never written: no read); decoded afresh each time, since the rules change the
        state they are given."""
        raw = self._written.get(thread_id)
        if raw is not None:
            self._written.move_to_end(thread_id)
        elif thread_id in self.journal.slots or thread_id in self.journal.corrupt:
            raw = await self._lane.call(self.journal.read, thread_id)
            if raw is None:
                return None
        else:
            self._legacy_corrupt.check(thread_id)
            return None
        return self._decode(thread_id, raw)

    async def _save(
        self, thread_id: str, state: ThreadState, then: Callable[[], None] | None = None, sides: list[tuple[str, bytes]] | None = None
    ) -> None:
        """Join the next batch and wait until it is durable: writes that arrive while a batch is being made durable
        share the next one (group commit: one write and one flush for all of them, whatever their number). The
        `sides` go in the same batch as the state: the journal makes a batch durable whole or not at all."""
        data = self._encoder.encode(state)
        self._written.pop(thread_id, None)  # until it is durable, the journal is what counts
        lines = [(thread_id, state_record(data), state.updated_at)]
        if sides:
            lines.extend((key, state_record(record), state.updated_at) for key, record in sides)
        await self._lane.join(self._append, (lines, then))
        self._written[thread_id] = data
        if len(self._written) > WRITTEN_KEPT:
            self._written.popitem(last=False)

    async def _load_side(self, key: str) -> bytes | None:
        if key not in self.journal.slots:
            return None
        return await self._lane.call(self.journal.read, key)

    async def _write_sides(self, writes: list[tuple[str, bytes | None]]) -> None:
        now = self.clock()
        lines = [(key, state_record(record) if record is not None else deleted_record(key), now) for key, record in writes]
        for key, record in writes:
            if record is None:
                self._written.pop(key, None)
        await self._lane.join(self._append, (lines, None))

    def _side_keys(self) -> list[str]:
        return [key for key in self.journal.slots if key.endswith(SUMMARY)]

    def _append(self, writes: list[tuple[list[tuple[str, bytes, float]], Callable[[], None] | None]]) -> list[None]:
        """On the lane: one batch into the journal, then what waits on each write (the end of a run's log, queued
        and written with the others of the batch)."""
        self.journal.append([line for lines, _ in writes for line in lines])
        for _, then in writes:
            if then is not None:
                then()
        self.file_events.write_queued()
        if self.journal.due():
            self.journal.compact()
        return [None] * len(writes)

    async def finish_run_and_log(
        self, lease: Lease, status: ExecutionStatus | None, progress: Progress, log: LogWrite, history: HistoryWrite | None = None
    ) -> Exception | None:
        """`finish_run`, and the run's last event-log write on the lane right after the journal made the finish
        durable: one trip to the lane for both, and the log is never written when the finish failed. The ends of
        the runs in one batch of the lane go to the log's segment in one write."""
        written: list[Exception | None] = []
        events = self.file_events
        await self._transact(
            lease.thread_id,
            lambda s, now: (rules.finish_run(s, lease, status, progress, now), None),
            lambda: events.queue(log, written),
            history,
        )
        if written:
            return written[0]
        try:  # nothing to save (the lease was already gone): the log on its own
            await self.events.apply(log)
        except (LogFenced, StoreUnavailable) as exc:
            return exc
        return None

    async def purge_expired(self) -> int:
        await self.events.purge_expired()
        cutoff = self.clock() - self.retention_seconds
        expired = await self._lane.call(self._purge, cutoff)
        for thread_id in expired:
            self._written.pop(thread_id, None)
            self._unlisted(thread_id)
        return len(expired) + await self._lane.call(self._legacy_corrupt.purge, cutoff)

    def _purge(self, cutoff: float) -> list[str]:
        """Threads not written since `cutoff` (and threads found corrupt before it), removed by one batch of deletion
        records (on the lane, so no write of theirs can slip between the choice and the removal)."""
        expired = whole_threads(self.journal.expired(cutoff), self.journal.slots)
        if expired:
            self._append([([(thread_id, deleted_record(thread_id), 0.0) for thread_id in expired], None)])
        return expired

    async def ping(self) -> bool:
        return self.journal.broken is None and os.access(self.directory, os.W_OK)

    async def close(self) -> None:
        await self.events.close()
        await self._lane.call(self.journal.close)
        os.close(self._claim)


def whole_threads(expired: list[str], held: Container[str]) -> list[str]:
    """What a purge removes: each expired thread with its side records (its conversation, summary and meta go with
    it, however recently a client renamed it), and no side record of a thread still held."""
    states = [key for key in expired if key[-len(SUMMARY) :] not in SIDES]
    gone = set(states)
    sides = [key for key in expired if key[-len(SUMMARY) :] in SIDES and (key[: -len(SUMMARY)] in gone or key[: -len(SUMMARY)] not in held)]
    with_sides = [key + side for key in states for side in SIDES if key + side in held]
    return list(dict.fromkeys([*states, *sides, *with_sides]))


def claim_directory(directory: str) -> int:
    """Hold `<directory>/lock` (flock) for as long as the store is open: a second process on the same state
    directory would append to the same journal with an index of its own, so it is refused at start."""
    fd = os.open(os.path.join(directory, "lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise StoreUnavailable(
            f"the state directory {directory} is in use by another gateway (pid {holder}); give each its own --state-dir, or use Redis"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd
