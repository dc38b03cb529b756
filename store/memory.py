"""In-process store: thread states in a dict, gone when the process ends (tests, throwaway runs)."""

from __future__ import annotations

import time
from collections.abc import Callable

import msgspec

from store.base import Clock
from store.document import DocumentStore
from store.eventlog.memory import MemoryEventLog
from store.kept import KeptEncoder
from store.records import ThreadState

_decoder = msgspec.msgpack.Decoder(ThreadState)


class MemoryStore(DocumentStore):
    steps_wait = False  # its load and save never suspend, so a transaction needs no lock (a subclass that waits says so)
    answers_at_once = True

    def __init__(
        self, retention_seconds: float, *, clock: Clock = time.time, lease_seconds: float | None = None, log_retention: float = 600.0
    ) -> None:
        super().__init__(retention_seconds, clock=clock, lease_seconds=lease_seconds)
        self.events = MemoryEventLog(log_retention, clock=clock)
        # Encoded, so a caller can never alias (and mutate) the stored copy.
        self._states: dict[str, bytes] = {}
        self._encoder = KeptEncoder(msgspec.msgpack.Encoder())

    async def _load(self, thread_id: str) -> ThreadState | None:
        raw = self._states.get(thread_id)
        return None if raw is None else _decoder.decode(raw)

    async def _save(self, thread_id: str, state: ThreadState, then: Callable[[], None] | None = None) -> None:
        self._states[thread_id] = self._encoder.encode(state)
        if then is not None:
            then()

    async def purge_expired(self) -> int:
        cutoff = self.clock() - self.retention_seconds
        old = [k for k, raw in self._states.items() if _decoder.decode(raw).updated_at < cutoff]
        for key in old:
            del self._states[key]
        await self.events.purge_expired()
        return len(old)
