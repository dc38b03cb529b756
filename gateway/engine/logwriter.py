"""Copies a run's events to the store's event log: write-behind while the run goes (one append per flushed batch,
retried with backoff), or all at once when it ends, for logs that the engine's own ring serves while it is live."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Protocol

from gateway import metrics
from gateway.engine.retained import DEFAULT_MAX_BYTES, RetainedLogs
from gateway.engine.stream import Bounds, Entry, EventStream
from gateway.engine.timers import LOOP_TIMERS, Timer, Timers
from store import StoreUnavailable
from store.eventlog import EventLog, LogFenced, LogMeta, LogRef, LogWrite

log = logging.getLogger("agui.engine")
FINISH_SECONDS = 10.0  # how long the end of a run may wait for its log to be written
# The first write waits this long, on a timer (no task until it fires), so a short run writes its whole log once,
# at its end, and never starts a write of its own.
FIRST_FLUSH_DELAY = 0.02


@dataclass(frozen=True, slots=True)
class LogPolicy:
    """The operator's reattach settings: the longest grace window a client may ask for, the log's bounds, and how
    much of the ended runs' logs is kept for how long."""

    max_grace_seconds: float = 120.0
    bounds: Bounds = field(default_factory=Bounds)
    retained_bytes: int = DEFAULT_MAX_BYTES  # ended runs' events this replica keeps for replay (engine/retained.py)
    retention_seconds: float = 600.0


class LogOwner(Protocol):
    """What the writer asks of its run (an object rather than two callbacks, which every idle run would keep)."""

    def log_first(self) -> int:
        """The ring's oldest held position: older pending entries are never written."""
        ...

    def log_meta(self) -> LogMeta:
        """What the log records about the run, asked when the log is opened (an idle run keeps none of it)."""
        ...

    def log_fenced(self) -> None:
        """The log refused a write: a newer owner writes it."""
        ...


class _EndedRun:
    """The owner of a writer whose run has closed: its log is complete (or handed on), so no write asks any more."""

    def log_first(self) -> int:
        raise RuntimeError("the run has closed: its log takes no more writes")

    def log_meta(self) -> LogMeta:
        raise RuntimeError("the run has closed: its log takes no more writes")

    def log_fenced(self) -> None:
        return None  # a newer owner writes the log, and this run is over already


_ENDED_RUN = _EndedRun()


class LogWriter:
    """A run's log, written from its event stream's ring: the writer keeps only the first position the log does not
    have yet; a write takes what the ring holds from there (entries the ring trimmed first are never written)."""

    __slots__ = (
        "_closing",
        "_created",
        "_done",
        "_fence",
        "_log",
        "_next",
        "_owner",
        "_ref",
        "_retained",
        "_stream",
        "_task",
        "_timer",
        "_timers",
        "fenced",
    )

    def __init__(
        self,
        events: EventLog,
        ref: LogRef,
        owner: LogOwner,
        stream: EventStream,
        *,
        fence: int = 0,
        created: bool = False,
        retained: RetainedLogs | None = None,
        timers: Timers = LOOP_TIMERS,  # the first delay and the retries' backoff
    ) -> None:
        self._log = events
        self._timers = timers
        self._retained = retained
        self._ref = ref
        self._owner = owner
        self._stream = stream
        self._next = stream.head + 1  # the first position neither written nor in a write that is out
        self._task: asyncio.Task[None] | None = None  # a write, or its retries, under way: let it finish
        self._timer: Timer | None = None  # the first write's delay (a new log): cancelled, nothing was sent
        self._created = created  # an adopted run goes on writing the log its first owner opened
        self._fence = fence
        self.fenced = False  # a newer owner writes the log: nothing more is written from here
        self._closing = False  # a closing write is out with the end of the run: what is published now is in it
        self._done = False  # the closing write landed: the log is complete

    @property
    def ref(self) -> LogRef:
        return self._ref

    def release(self) -> None:
        """The run has closed: let go of it. The run holds its writer and the writer its run, a cycle only Python's
        cyclic collector would free: every run, its task and its input then stayed in memory until a collection,
        which walked them all (tens of milliseconds at a time, a pause for every run under way)."""
        self._owner = _ENDED_RUN

    def stream_grew(self) -> None:
        """New entries (live logs): written behind the run, coalesced while a write is in flight."""
        if self._task is not None or self._timer is not None or self.fenced or self._done or self._closing:
            return
        self._stream.pause_watch()  # the write now due reads all that is new when it runs, and looks again after
        if self._created:
            self._start_drain()
        else:
            timers = self._timers
            self._timer = timers.call_at(timers.now() + FIRST_FLUSH_DELAY, self._start_drain)

    def _start_drain(self) -> None:
        self._timer = None
        self._task = asyncio.get_running_loop().create_task(self._drain())

    def _cancel_first_delay(self) -> None:
        """The first write has not gone out: the write that ends the log takes all of it."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._stream.resume_watch()

    def _unwritten(self) -> list[Entry]:
        """What the log does not have yet, as far as the ring still holds it."""
        stream = self._stream
        return stream.entries(max(self._next, stream.first) - 1)

    async def _drain(self) -> None:
        delay = 0.05
        stream = self._stream
        try:
            while self._next <= stream.head:
                start, first = self._next, self._owner.log_first()
                batch, self._next = self._unwritten(), stream.head + 1
                try:
                    await self._write(batch, first)
                    delay = 0.05
                except LogFenced:
                    self._fenced()
                    return
                except StoreUnavailable as exc:
                    metrics.labelled(metrics.STORE_ERRORS, "event_log", "unavailable").inc()
                    log.warning("event log of run %s not written (%s); retrying in %.2fs", self._ref.run_id, exc, delay)
                    self._next = start  # written again, with what came meanwhile
                    await self._timers.sleep(delay)
                    delay = min(delay * 2, 1.0)
        finally:
            self._task = None
            self._stream.resume_watch()  # no put came since the loop's last look: nothing was awaited after it

    async def _write(self, batch: list[Entry], first: int, end: int | None = None) -> None:
        create = None if self._created else self._owner.log_meta()
        await self._log.write(self._ref, batch, first, create=create, end=end, fence=self._fence)
        self._created = True
        if batch:
            self._stream.made_durable(batch[-1][0])

    def _fenced(self) -> None:
        log.warning("event log of run %s: a newer owner writes it; this replica stops writing", self._ref.run_id)
        self.fenced = True
        self._owner.log_fenced()

    async def closing_write(self, terminal: list[Entry]) -> LogWrite | None:
        """The log's last write, described, for the store to send with the end of the run (one round trip): what
        is not written yet, then `terminal` (the events about to close the stream), and the end. Entries published
        meanwhile are not written again; `closed` says how it went. None: nothing to write (fenced)."""
        if self.fenced or not terminal:
            return None
        if self._task is not None:
            return None  # a write is out (a longer run, or a store retried): `finish` completes the log
        self._cancel_first_delay()
        stream = self._stream
        # The log keeps what the bounds keep; short of them, what the writer keeps (an adopter keeps its
        # predecessor's entries, older than its own ring).
        bounded = stream.bounded_first(terminal[-1][0])
        first = bounded if bounded > stream.first else self._owner.log_first()
        if not self._log.live_writes or not self._created:  # all the ring holds, the log's meta if it is new
            start, create = stream.first, (None if self._created else self._owner.log_meta())
        else:
            start, create = self._next, None
        self._closing = True
        written = stream.entries(max(start, first, stream.first) - 1)
        written += terminal
        return LogWrite(self._ref, written, first, create=create, end=terminal[-1][0], fence=self._fence)

    def _count_retained(self, head: int, unpublished: int) -> None:
        """The log is complete: its bytes (what the ring holds, with the `unpublished` bytes of the events the last
        write carried that the ring does not hold yet: the terminal ones) count against the replica's budget for
        retained logs."""
        if self._retained is not None:
            self._retained.ended(self._ref, head, self._stream.held_bytes + unpublished)

    def _unpublished_bytes(self, entries: list[Entry]) -> int:
        """The bytes of the entries past the ring's head: they are last, as entries are in the order of positions
        (counted from the end: a long run's write holds many entries, its terminal ones are few)."""
        head, size = self._stream.head, 0
        for position, data in reversed(entries):
            if position <= head:
                break
            size += len(data)
        return size

    def closed(self, write: LogWrite, failure: Exception | None) -> None:
        """How the closing write went: done; fenced; or failed, and then what it held is written the usual way, from the
        ring (the terminal events included, once they are published)."""
        self._closing = False
        if failure is None:
            self._created, self._done = True, True
            if write.entries:
                self._stream.made_durable(write.entries[-1][0])
            if write.end is not None:
                self._count_retained(write.end, self._unpublished_bytes(write.entries))
        elif isinstance(failure, LogFenced):
            self._fenced()

    async def finish(self, *, end: bool = True) -> None:
        """The run has ended: write what is left (all of the ring, for logs written only now) and mark the end
        (`end=False`: the run was handed to another replica, which goes on writing this log)."""
        if self.fenced or self._done:
            return
        try:
            async with asyncio.timeout(FINISH_SECONDS):
                self._cancel_first_delay()
                while self._task is not None:
                    await asyncio.shield(self._task)
                delay = 0.05
                while True:  # retried with backoff, as the writes behind the run are, within FINISH_SECONDS
                    try:
                        await self._last_write(end)
                        if end:
                            self._count_retained(self._stream.head, 0)
                        return
                    except StoreUnavailable as exc:
                        metrics.labelled(metrics.STORE_ERRORS, "event_log", "unavailable").inc()
                        log.warning("end of the event log of run %s not written (%s); retrying in %.2fs", self._ref.run_id, exc, delay)
                        await self._timers.sleep(delay)
                        delay = min(delay * 2, 1.0)
        except LogFenced:
            self._fenced()
        except TimeoutError:
            if self._task is not None:
                self._task.cancel()
            log.warning("event log of run %s not completed within %gs: it cannot be replayed to its end", self._ref.run_id, FINISH_SECONDS)

    async def _last_write(self, end: bool) -> None:
        stream = self._stream
        head = stream.head if end else None
        if not self._log.live_writes or not self._created:  # nothing written yet: all of it, in one write
            await self._write(stream.entries(stream.first - 1), stream.first, end=head)
        elif end or self._next <= stream.head:  # what the drain left, if anything, with the end
            await self._write(self._unwritten(), self._owner.log_first(), end=head)
        self._next = stream.head + 1
