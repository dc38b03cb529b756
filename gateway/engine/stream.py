"""A run's event stream: every event encoded once and given its position (1, 2, …) in a bounded ring that any
number of followers read from their own position, with heartbeats from the loop's shared clock (engine/heartbeat.py).

Only the run's own request paces it: while that follower lags far behind, the producer waits (backpressure); with
it gone the producer never waits, so a detached run goes on and can always settle. Every other follower (an
attach) reads at its own pace and never slows the run, its owner or anyone else: the ring trims past it by its
bounds alone, and a follower whose next position was trimmed is cut (FollowerCut), to attach again from its
position while the store's log holds it. A run takes MAX_FOLLOWERS followers at most. When the last follower
leaves, the run is told."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Protocol

from gateway import collector
from gateway.engine import heartbeat
from gateway.engine.budget import EVENT_OVERHEAD, UNBOUNDED, LiveBytes
from gateway.protocol import events as e

Entry = tuple[int, bytes]  # (position, the event's JSON)
_encode = e.encode_json
MAX_LAG = 1024  # events the pacing follower may trail the producer by before the backend is slowed down
MAX_FOLLOWERS = 128  # followers of one run at once (its own request included); one more is refused
YIELD_EVERY = 256  # events published between two turns given to the rest of the loop
MAX_BATCH = 1024  # entries one follower takes at once: what a follower whose socket stalled holds is bounded
_COMPACT_AT = 1024  # trimmed entries physically dropped in chunks of at least this many


@dataclass(frozen=True, slots=True)
class Bounds:
    """How much of a run the ring keeps: the newest `max_events`, within `max_bytes`."""

    max_events: int = 50_000
    max_bytes: int = 16 * 1024 * 1024


class StreamOwner(Protocol):
    """Who the stream tells when its last follower leaves (the run; an object rather than a callback, which every
    idle run would keep as a bound method)."""

    def stream_detached(self) -> None: ...


class StreamWatcher(Protocol):
    """Who is told that the stream grew (the log writer, which reads the new entries from the ring itself)."""

    def stream_grew(self) -> None: ...


class Recorder(Protocol):
    def take(self, encoded: list[bytes]) -> None: ...


class _NoWatcher:
    def stream_grew(self) -> None:
        pass


_NO_WATCHER = _NoWatcher()


class PositionGone(Exception):
    """The position asked for is older than what the log still holds."""

    def __init__(self, first: int) -> None:
        super().__init__(f"the log starts at position {first}")
        self.first = first


class PositionUnknown(Exception):
    """The position asked for was never given out (it is ahead of the run)."""


class TooManyFollowers(Exception):
    """The run has MAX_FOLLOWERS followers already."""


class FollowerCut(Exception):
    """A follower that does not pace the run fell so far behind that the ring trimmed its next position."""

    def __init__(self, position: int) -> None:
        super().__init__(f"the follower fell behind the ring after position {position}")
        self.position = position


class EventStream:
    __slots__ = (
        "__weakref__",  # the heartbeat clock's hold (engine/heartbeat.py)
        "_advanced",
        "_base",
        "_beats",
        "_bounds",
        "_budget",
        "_bytes",
        "_charged",
        "_cursors",
        "_data",
        "_first",
        "_grew",
        "_holding",
        "_interval",
        "_next_follower",
        "_owner",
        "_pacing",
        "_pause_at",
        "_quiet_from",
        "_released",
        "_unyielded",
        "_wake_pending",
        "_watcher",
        "_watching",
        "durable",
        "ended",
        "head",
        "recorder",
    )

    def __init__(
        self,
        owner: StreamOwner,
        bounds: Bounds = Bounds(),
        start: int = 0,
        budget: LiveBytes = UNBOUNDED,
    ) -> None:
        """`start`: the position before the first one this stream gives out (an adopted run goes on from its log);
        `budget`: the replica's account of live rings, charged for what this one holds until it is dropped."""
        self._data: list[bytes] = []  # _data[i] holds position _base + i
        self._base = start + 1
        self._first = start + 1  # the oldest position still held (entries before it are trimmed)
        self._bytes = 0  # bytes held from _first on
        self._budget = budget
        self._charged = 0  # what this ring has charged to the budget: its bytes and each event's EVENT_OVERHEAD
        budget.opened()
        self.head = start  # the last position written
        self.ended = False
        self._bounds = bounds
        self._cursors: dict[int, int] = {}  # follower -> last position it took
        self._pacing: set[int] = set()  # the followers whose lag slows the producer (the run's own request)
        self._next_follower = 0
        self._grew: list[asyncio.Future[None]] = []  # one future per follower waiting for the stream to grow
        self._advanced: asyncio.Future[None] | None = None
        self._owner = owner
        # Told of each put (a call, no arguments), never given the put's entries (building them costs per event). Not told
        # while it says it needs not be (`pause_watch`: its write is already due, and will read all that is new).
        self._watcher: StreamWatcher = _NO_WATCHER
        self._watching = False
        self._unyielded = 0  # events published since the producer last gave the loop a turn
        self._pause_at = math.inf  # the producer waits once the head passes this (slowest follower + MAX_LAG)
        # Heartbeats come from the loop's shared clock: `_beats` counts them, each follower yields None once per beat.
        self._quiet_from = 0.0  # the heartbeat clock's time of the last batch or heartbeat given out
        self._interval = math.inf
        self._beats = 0
        self._wake_pending = False
        self._released = False  # the run is over: the ring goes as soon as no follower reads it
        # None: followers read every put at once. A position: they read only up to it, the last one the store's log
        # holds (`made_durable`), so that what a client saw is what another replica adopting the run goes on from.
        self.durable: int | None = None
        # The run's end is being recorded (`hold_for_end`): followers wait for it, so that the run's last events
        # leave with its terminal event in one write rather than in one write each.
        self._holding = False
        self.recorder: Recorder | None = None  # told of every event published (the thread's conversation)

    @property
    def first(self) -> int:
        return self._first

    @property
    def followers(self) -> int:
        return len(self._cursors)

    def watch(self, watcher: StreamWatcher) -> None:
        """Tell `watcher` of each put from now on."""
        self._watcher, self._watching = watcher, True

    def pause_watch(self) -> None:
        """Tell the watcher of no put until `resume_watch` (a call an event saved while it has nothing to do)."""
        self._watching = False

    def resume_watch(self) -> None:
        """Tell the watcher of each put again."""
        self._watching = self._watcher is not _NO_WATCHER  # not once the stream let go of it

    def bounded_first(self, head: int) -> int:
        """The oldest position the bounds alone keep once the stream reaches `head` (followers that have not read
        older entries keep them in the ring, never in the log)."""
        bounds, data = self._bounds, self._data
        first = max(self._first, head - bounds.max_events + 1)
        held = sum(map(len, data[first - self._base : self.head + 1 - self._base]))
        while held > bounds.max_bytes and first <= self.head:
            held -= len(data[first - self._base])
            first += 1
        return first

    def next_entries(self, events: list[e.Event]) -> list[Entry]:
        """These events encoded with the positions they will have if put next (nothing is published)."""
        return [(self.head + 1 + index, _encode(event)) for index, event in enumerate(events)]

    async def put(self, events: list[e.Event]) -> None:
        if self.publish(list(map(_encode, events))):  # map, not a comprehension: no frame of its own on Python 3.11
            await self.room()

    def put_now(self, events: list[e.Event]) -> None:
        """Publish now, without waiting for a follower that trails: for the run's first events, which nobody trails."""
        if events and not self.ended:
            self._publish(list(map(_encode, events)))

    def publish(self, encoded: list[bytes]) -> bool:
        """Publish events already encoded, now (the producer's hot path: no coroutine per event; the next positions
        are theirs, and the list is the caller's again); True when the producer must await `room` before it publishes
        again."""
        if not encoded or self.ended:
            return False
        return self._publish(encoded)

    async def put_encoded(self, encoded: list[bytes]) -> None:
        """Publish events already encoded (the next positions are theirs)."""
        if self.publish(encoded):
            await self.room()

    async def room(self) -> None:
        """Wait until the follower that paces the producer is back within MAX_LAG, or for one turn of the loop."""
        if self.head <= self._pause_at:
            await asyncio.sleep(0)
            return
        while self.head > self._pause_at:
            self._advanced = self._advanced or asyncio.get_running_loop().create_future()
            await asyncio.shield(self._advanced)

    def _publish(self, encoded: list[bytes]) -> bool:
        """Append and wake the followers; True when the producer must wait (a follower that paces it trails too
        far) or give the loop a turn (a backend that never awaits must not starve the loop: the log writer, other
        runs)."""
        grew = self._grew
        readable = self._readable() if grew else 0
        recorder = self.recorder
        if recorder is not None:
            recorder.take(encoded)
        self._data.extend(encoded)
        self.head += len(encoded)
        self._bytes += sum(map(len, encoded))
        bounds = self._bounds
        if self.head - self._first >= bounds.max_events or self._bytes > bounds.max_bytes:
            self._trim()
        charged = self._bytes + EVENT_OVERHEAD * (self.head + 1 - self._first)
        self._budget.used += charged - self._charged
        self._charged = charged
        if self._watching:
            self._watcher.stream_grew()
        if grew and self._readable() > readable:  # `grew` is still the waiters' list: nothing above replaces it
            self._wake_followers()
        unyielded = self._unyielded = self._unyielded + len(encoded)
        if unyielded >= YIELD_EVERY:
            self._unyielded = 0
            return True
        return self.head > self._pause_at

    def made_durable(self, position: int) -> None:
        """The store's log holds every entry up to `position`: followers of a durable stream may read them."""
        durable = self.durable
        if durable is not None and position > durable:
            self.durable = position  # may be ahead of the head: a closing write holds events not yet published
            if self._grew and durable < self.head:
                self._wake_followers()

    def hold_for_end(self) -> None:
        """The run's end is on its way (one store call): followers give out nothing more until `stop_holding`."""
        self._holding = True

    @property
    def held_for_end(self) -> bool:
        return self._holding

    def stop_holding(self) -> None:
        """Followers read again (the end was published, or the store failed and the retries may take a while)."""
        if self._holding:
            self._holding = False
            if self._grew:
                self._wake_followers()

    def _readable(self) -> int:
        """The last position a follower may read."""
        durable = self.durable
        return self.head if durable is None or durable > self.head else durable

    async def close(self) -> None:
        """No event follows: followers end after what is held."""
        self.ended = True
        self._holding = False
        if self._grew:
            self._wake_followers()

    def entries(self, after: int, limit: int | None = None) -> list[Entry]:
        """Every entry held after position `after` (the first `limit` of them); raise PositionGone if some of them
        were trimmed."""
        if after + 1 < self._first:
            raise PositionGone(self._first)
        start = after + 1 - self._base
        end = self.head + 1 if limit is None else min(self.head + 1, after + 1 + limit)
        return list(zip(range(after + 1, end), self._data[start : end - self._base], strict=True))

    def _trim(self) -> None:
        bounds, data = self._bounds, self._data
        keep_from = self._slowest_pacer() + 1  # never trim what the pacing follower awaits
        first = max(self._first, min(self.head - bounds.max_events + 1, keep_from))
        for position in range(self._first, first):
            self._bytes -= len(data[position - self._base])
        while self._bytes > bounds.max_bytes and first < keep_from:
            self._bytes -= len(data[first - self._base])
            first += 1
        self._first = first
        if first - self._base >= _COMPACT_AT and first - self._base >= len(data) // 2:
            del data[: first - self._base]
            self._base = first

    def _slowest_pacer(self) -> int:
        """The position the slowest pacing follower took (the head when none paces)."""
        pacing, cursors = self._pacing, self._cursors
        if not pacing:
            return self.head
        if len(pacing) == 1:
            return cursors[next(iter(pacing))]
        return min(cursors[follower] for follower in pacing)

    def _followers_moved(self) -> None:
        """Recompute where the producer must pause, and release it if it no longer must."""
        self._pause_at = self._slowest_pacer() + MAX_LAG if self._pacing else math.inf
        if self._advanced is not None and self.head <= self._pause_at:
            self._advanced.set_result(None)
            self._advanced = None

    def attach(self, after: int, *, paces: bool = False) -> int:
        """Register a follower at `after` (checked now, so a refusal comes before any event is sent). `paces`: the
        run's own request, whose lag slows the producer; any other follower reads at its own pace."""
        if after + 1 < self._first:
            raise PositionGone(self._first)
        if after > self.head:
            raise PositionUnknown(after)
        if len(self._cursors) >= MAX_FOLLOWERS:
            raise TooManyFollowers(MAX_FOLLOWERS)
        follower = self._next_follower
        self._next_follower += 1
        self._cursors[follower] = after
        if paces:
            self._pacing.add(follower)
            self._followers_moved()
        return follower

    def _take(self, follower: int, after: int, now: float) -> list[Entry]:
        try:
            batch = self.entries(after, min(MAX_BATCH, self._readable() - after))
        except PositionGone:
            raise FollowerCut(after) from None
        self._cursors[follower] = batch[-1][0]
        if follower in self._pacing:
            self._followers_moved()
        self._quiet_from = now
        return batch

    async def follow(self, follower: int, heartbeat_seconds: float) -> AsyncGenerator[list[Entry] | None, None]:
        """Entries after the follower's position as they come (all that is ready at once), or None after
        `heartbeat_seconds` of silence; ends after the last entry. Leaving detaches the follower."""
        loop = asyncio.get_running_loop()
        now = heartbeat.clock().now
        seen_beats = self._beats
        self._quiet_from = max(self._quiet_from, now())
        try:
            while True:
                after = self._cursors[follower]
                if after < self._readable() and not self._holding:
                    yield self._take(follower, after, now())  # no local: a waiting follower keeps no batch
                    continue
                # What a durable stream's log never got is never shown: once the run let go of it, it ends there.
                if self.ended and (after >= self.head or self._released):
                    return
                if seen_beats != self._beats:
                    seen_beats = self._beats
                    yield None
                    continue
                self._interval = heartbeat_seconds
                if not self._wake_pending:
                    self._wake_pending = True
                    heartbeat.clock().wake_at(self, self._quiet_from + heartbeat_seconds, heartbeat_seconds)
                # Each follower awaits a future of its own (a cancelled follower cancels only its own): a shared
                # future behind asyncio.shield cost an idle stream two closures and a second future more.
                waiter: asyncio.Future[None] = loop.create_future()
                self._grew.append(waiter)
                await waiter
        finally:
            self._leave(follower)

    def heartbeat_due(self, now: float, slack: float) -> None:
        """The shared clock's call: beat if the followers waiting have been silent for the interval, else ask to be
        woken when they will have been. Nobody waiting: nothing (a follower that waits again asks anew)."""
        self._wake_pending = False
        if self.ended or not self._grew:
            return
        due = self._quiet_from + self._interval
        if now + slack >= due:
            self._beats += 1
            self._quiet_from = now
            self._wake_followers()
            due = now + self._interval
        self._wake_pending = True
        heartbeat.clock().wake_at(self, due, self._interval)

    @property
    def held_bytes(self) -> int:
        """The bytes of the events the ring holds now."""
        return self._bytes

    def release(self) -> None:
        """The run is over and its log written: the ring, and the run it points to, go once no follower reads them
        (the heartbeat clock may hold this stream until its next due time: then it holds almost nothing)."""
        self._released = True
        if not self._cursors:
            self._drop()
        elif self._grew:
            self._wake_followers()

    def _drop(self) -> None:
        collector.RETURN.released(self._bytes)
        if self._budget is not UNBOUNDED:  # once: a dropped ring lets go of the replica's account
            self._budget.closed(self._charged)
            self._budget, self._charged = UNBOUNDED, 0
        self._data = []
        self._base = self._first = self.head + 1
        self._bytes = 0
        self._owner = _NOBODY
        self._watcher, self._watching = _NO_WATCHER, False

    def _wake_followers(self) -> None:
        waiting, self._grew = self._grew, []
        for waiter in waiting:
            if not waiter.done():
                waiter.set_result(None)

    def _leave(self, follower: int) -> None:
        self._cursors.pop(follower, None)
        if self._grew:  # a follower cancelled while waiting leaves its (cancelled) future behind
            self._grew = [waiter for waiter in self._grew if not waiter.done()]
        if follower in self._pacing:
            self._pacing.discard(follower)
            self._followers_moved()
        if self._released and not self._cursors:
            self._drop()
        if not self._cursors and not self.ended:
            self._owner.stream_detached()


class _Nobody:
    """The owner of a released stream: nobody is told anything."""

    def stream_detached(self) -> None:
        return None


_NOBODY = _Nobody()
