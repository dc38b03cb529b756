"""Following a run from the store's event log: an ended run replayed, or a live run owned by another replica
followed as its owner writes (blocking reads), with heartbeats, an attach marker the owner can see, and an
EXECUTION_LOST error if the owner dies before the run's end is written."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import Any

import msgspec

from gateway.engine.handle import RunHandle
from gateway.engine.stream import Entry
from gateway.errors import ErrorCode, GatewayError
from gateway.i18n import message_for
from gateway.protocol import events as e
from store import StoreUnavailable
from store.eventlog import READ_LIMIT, EventLog, LogRead, LogRef

log = logging.getLogger("agui.engine")
WAIT_SECONDS = 1.0  # one blocking read; the attach marker is refreshed this often
MARKER_SECONDS = 3.0  # how long one refresh of the attach marker lasts
LOST_AFTER_SECONDS = 5.0  # a run whose lease is gone may still be writing its end this long before it counts as lost


class LogHandle(RunHandle):
    def __init__(
        self,
        events: EventLog,
        ref: LogRef,
        thread_id: str,
        read: LogRead,
        after: int,
        language: str,
        cancel: Callable[[], Coroutine[Any, Any, None]],
    ) -> None:
        self._log = events
        self._ref = ref
        self._read = read
        self._after = after
        self._language = language
        self._cancel = cancel
        self.run_id = ref.run_id
        self.thread_id = thread_id
        self.finished = read.ended and after == read.head

    def new_input(self) -> list[dict[str, Any]]:
        inputs = self._read.meta.inputs
        found = msgspec.json.decode(inputs) if inputs else []
        return [m for m in found if isinstance(m, dict)] if isinstance(found, list) else []

    def cancel(self) -> None:
        task = asyncio.get_running_loop().create_task(self._cancel())
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    def _lost(self) -> list[Entry]:
        error = GatewayError(ErrorCode.EXECUTION_LOST)
        event = e.RunError(code=error.code.name, message=message_for(error, self._language), metadata={"runId": self.run_id})
        return [(0, e.encode_json(event))]

    async def events(self, heartbeat_seconds: float) -> AsyncGenerator[list[Entry] | None, None]:
        read, after = self._read, self._after
        loop = asyncio.get_running_loop()
        silent_since = loop.time()
        dead_since: float | None = None  # when the run was first seen without its lease
        marked = -math.inf  # when the attach marker was last refreshed (the owner must see us while we read)
        while True:
            if self._log.shared and loop.time() - marked >= WAIT_SECONDS:
                try:
                    await self._log.watch(self._ref, MARKER_SECONDS)
                    marked = loop.time()
                except StoreUnavailable:
                    pass
            if read.entries:
                after = read.entries[-1][0]
                silent_since = loop.time()
                yield read.entries
            elif read.ended:
                return
            else:
                try:
                    alive = self._log.shared and await self._log.owner_alive(self._ref)
                    dead_since = None if alive else (dead_since or loop.time())
                    if dead_since is not None and (not self._log.shared or loop.time() - dead_since >= LOST_AFTER_SECONDS):
                        fresh = await self._log.read(self._ref, after, READ_LIMIT)  # its last write may just have landed
                        if fresh is None or not (fresh.entries or fresh.ended):
                            yield self._lost()
                            return
                        read = fresh
                        continue
                    await self._log.wait(self._ref, after, WAIT_SECONDS)
                except StoreUnavailable as exc:
                    log.warning("event log of run %s unreadable (%s); retrying", self.run_id, exc)
                    await asyncio.sleep(WAIT_SECONDS)
                if loop.time() - silent_since >= heartbeat_seconds:
                    silent_since = loop.time()
                    yield None
            try:
                read = await self._log.read(self._ref, after, READ_LIMIT) or LogRead(read.meta, [], read.first, False)
            except StoreUnavailable:
                read = LogRead(read.meta, [], read.first, False)
