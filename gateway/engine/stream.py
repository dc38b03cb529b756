"""A run's event stream: a bounded queue of event batches that one consumer drains, coalesced, with heartbeats.

The producer is slowed when the consumer is (backpressure); once the consumer is gone, puts are dropped
so that a run can always settle."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from gateway.protocol import events as e

QUEUE_SIZE = 256  # batches of events buffered per run before the backend is slowed down


class _End:
    """The marker after the last batch."""


_END = _End()


class EventStream:
    def __init__(self, on_consumer_gone: Callable[[], None], size: int = QUEUE_SIZE) -> None:
        self._queue: asyncio.Queue[list[e.Event] | _End] = asyncio.Queue(size)
        self._on_consumer_gone = on_consumer_gone
        self._abandoned = False

    async def put(self, events: list[e.Event]) -> None:
        if events and not self._abandoned:
            await self._queue.put(events)

    async def close(self) -> None:
        """No batch follows: the consumer ends after what is queued."""
        if not self._abandoned:
            await self._queue.put(_END)

    async def batches(self, heartbeat_seconds: float) -> AsyncIterator[list[e.Event] | None]:
        """Yield lists of events as they come (coalesced), or None after `heartbeat_seconds` of silence."""
        queue = self._queue
        try:
            while True:
                try:
                    item = queue.get_nowait()
                except asyncio.QueueEmpty:
                    try:
                        async with asyncio.timeout(heartbeat_seconds):
                            item = await queue.get()
                    except TimeoutError:
                        yield None
                        continue
                if isinstance(item, _End):
                    return
                batch = list(item)
                while not queue.empty():
                    more = queue.get_nowait()
                    if isinstance(more, _End):
                        yield batch
                        return
                    batch.extend(more)
                yield batch
        finally:
            self._abandon()

    def _abandon(self) -> None:
        """The consumer stopped reading (end of stream or gone): free the producer and tell the run."""
        self._abandoned = True
        while not self._queue.empty():
            self._queue.get_nowait()
        self._on_consumer_gone()
