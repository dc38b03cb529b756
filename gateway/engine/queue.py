"""A run queued on a busy thread (THREADS.md §4): its place in the thread's queue, renewed while it waits, and the
handle a transport streams from it (heartbeats while it waits, then the run's own events once its turn came)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from opentelemetry.trace import Span

from gateway import PROTOCOL_VERSION
from gateway.engine.handle import LiveHandle, RunHandle
from gateway.engine.outcome import Cancelled
from gateway.engine.prepare import PreparedRun
from gateway.engine.stream import Entry
from gateway.errors import GatewayError
from gateway.i18n import message_for
from gateway.logs import with_request_id
from gateway.protocol import events as e
from store import Admission

if TYPE_CHECKING:
    from gateway.engine.run import Run

log = logging.getLogger("agui.engine")

# How often a queued run asks for its turn (and renews its place) when nothing woke it sooner: a run ending on this
# replica wakes its thread's queued runs at once; one ending on another replica is seen within this long.
POLL_SECONDS = 0.5


class Dequeued(Exception):
    """The queued run's place is gone: a stop named it, or its replica did not renew it in time."""


class Wakes:
    """One event per thread key that queued runs wait on; a run's end on this replica sets its thread's."""

    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}
        self._waiting: dict[str, int] = {}

    async def wait(self, key: str, seconds: float) -> None:
        event = self._events.setdefault(key, asyncio.Event())
        self._waiting[key] = self._waiting.get(key, 0) + 1
        try:
            await asyncio.wait_for(event.wait(), seconds)
        except TimeoutError:
            pass
        finally:
            self._waiting[key] -= 1
            if not self._waiting[key]:
                del self._waiting[key]
                self._events.pop(key, None)

    def wake(self, key: str) -> None:
        event = self._events.pop(key, None)  # the next wait makes a new one: a wake is heard once
        if event is not None:
            event.set()


@dataclass(eq=False)
class Waiting:
    """A run that holds a place in its thread's queue. `take_turn` asks the store again (None: not yet); `leave`
    gives the place up (best effort: a place no replica renews lapses on its own)."""

    prepared: PreparedRun
    admission: Admission
    key: str
    scope: str  # whose thread list the thread is in
    span: Span
    take_turn: Callable[[Waiting], Awaitable[Run | None]]
    leave: Callable[[Waiting], None]
    wakes: Wakes
    place: int
    stopped: bool = False  # its client cancelled it before its turn
    run: Run | None = field(default=None, repr=False)

    async def step(self, seconds: float) -> None:
        """Wait up to `seconds` (less when a run's end on this replica wakes the thread), then ask once for the turn;
        raises the refusal the turn got."""
        await self.wakes.wait(self.key, seconds)
        if self.run is None and not self.stopped:
            try:
                self.run = await self.take_turn(self)
            except Dequeued:
                self.stopped = True

    async def until_turn(self) -> Run | None:
        """The admitted run once its turn comes, None when it was stopped (or its place lapsed) first; raises the
        refusal its turn got. The place is given up whenever it ends without a run."""
        try:
            while self.run is None and not self.stopped:
                await self.step(POLL_SECONDS)
        finally:
            if self.run is None:
                self.leave(self)
        return self.run


class WaitingHandle(RunHandle):
    """A queued run's stream: heartbeats while it waits, then its run's events. A refusal when its turn comes (a run
    that interrupted the thread before it, its place lost) is a RUN_ERROR; a cancel before its turn, RUN_STARTED and
    RUN_FINISHED `cancelled` (the run never reached the agent)."""

    queued = True

    def __init__(self, waiting: Waiting, positions: bool) -> None:
        self.waiting = waiting
        self.run_id = waiting.prepared.run.run_id
        self.thread_id = waiting.prepared.run.thread_id
        self.positions = positions
        self._live: LiveHandle | None = None

    def events(self, heartbeat_seconds: float) -> AsyncGenerator[list[Entry] | None, None]:
        return self._events(heartbeat_seconds)

    async def _events(self, heartbeat_seconds: float) -> AsyncGenerator[list[Entry] | None, None]:
        waiting, loop = self.waiting, asyncio.get_running_loop()
        beat_at = loop.time() + heartbeat_seconds
        try:
            while waiting.run is None and not waiting.stopped:
                try:
                    await waiting.step(min(POLL_SECONDS, max(0.0, beat_at - loop.time())))
                except GatewayError as error:
                    yield [(0, e.encode_json(_refusal(error, waiting.prepared)))]
                    return
                if waiting.run is None and loop.time() >= beat_at:
                    yield None
                    beat_at = loop.time() + heartbeat_seconds
        finally:
            if waiting.run is None:  # refused, stopped, or its client left: its place goes
                waiting.leave(waiting)
        if waiting.run is None:
            yield [(0, e.encode_json(event)) for event in _cancelled(waiting.prepared)]
            return
        self._live = LiveHandle(waiting.run, paces=True)
        async for batch in self._live.events(heartbeat_seconds):
            yield batch

    @property
    def ending(self) -> bool:
        return self._live is not None and self._live.ending

    def cancel(self) -> None:
        if self.waiting.run is not None:
            self.waiting.run.stop(Cancelled())
        else:
            self.waiting.stopped = True
            self.waiting.wakes.wake(self.waiting.key)


def _refusal(error: GatewayError, prepared: PreparedRun) -> e.RunError:
    metadata = with_request_id({"field": error.field} if error.field else {}) or None
    return e.RunError(code=error.code.name, message=message_for(error, prepared.language), metadata=metadata)


def _cancelled(prepared: PreparedRun) -> list[e.Event]:
    run = prepared.run
    outcome = e.CancelledOutcome() if prepared.speaks_1_0 else None
    return [
        e.RunStarted(thread_id=run.thread_id, run_id=run.run_id, protocol_version=PROTOCOL_VERSION),
        e.RunFinished(thread_id=run.thread_id, run_id=run.run_id, outcome=outcome),
    ]
