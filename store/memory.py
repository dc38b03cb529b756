"""In-process store: thread states in a dict, gone when the process ends (tests, throwaway runs)."""

from __future__ import annotations

import time
from collections.abc import Callable

import msgspec

from store.base import Clock
from store.document import SIDES, SUMMARY, DocumentStore, side_at
from store.eventlog.memory import MemoryEventLog
from store.kept import KeptEncoder
from store.records import ThreadState

_decoder = msgspec.msgpack.Decoder(ThreadState)
_side_at = side_at


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
        self._sides: dict[str, bytes] = {}  # conversations, summaries and metas (store/document.py)
        self._encoder = KeptEncoder(msgspec.msgpack.Encoder())

    async def _load(self, thread_id: str) -> ThreadState | None:
        raw = self._states.get(thread_id)
        return None if raw is None else _decoder.decode(raw)

    async def _save(
        self, thread_id: str, state: ThreadState, then: Callable[[], None] | None = None, sides: list[tuple[str, bytes]] | None = None
    ) -> None:
        self._states[thread_id] = self._encoder.encode(state)
        if sides:
            self._sides.update(sides)
        if then is not None:
            then()

    async def _load_side(self, key: str) -> bytes | None:
        return self._sides.get(key)

    async def _write_sides(self, writes: list[tuple[str, bytes | None]]) -> None:
        for key, record in writes:
            if record is not None:
                self._sides[key] = record
            elif key in self._states:
                del self._states[key]
            else:
                self._sides.pop(key, None)

    def _side_keys(self) -> list[str]:
        return [key for key in self._sides if key.endswith(SUMMARY)]

    async def purge_expired(self) -> int:
        cutoff = self.clock() - self.retention_seconds
        old = [k for k, raw in self._states.items() if _decoder.decode(raw).updated_at < cutoff]
        for key in old:  # each thread goes whole: its conversation, summary and meta with it
            del self._states[key]
            self._unlisted(key)
            for side in SIDES:
                self._sides.pop(key + side, None)
        orphans = [k for k, raw in self._sides.items() if k[: -len(SUMMARY)] not in self._states and _side_at(raw) < cutoff]
        for key in orphans:
            del self._sides[key]
        await self.events.purge_expired()
        return len(old)
