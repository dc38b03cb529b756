"""In-process store: thread states in a dict, gone when the process ends (tests, throwaway runs)."""

from __future__ import annotations

import msgspec

from store.document import DocumentStore
from store.records import ThreadState

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(ThreadState)


class MemoryStore(DocumentStore):
    def __init__(self, retention_seconds: float) -> None:
        super().__init__(retention_seconds)
        # Encoded, so a caller can never alias (and mutate) the stored copy.
        self._states: dict[str, bytes] = {}

    async def _load(self, thread_id: str) -> ThreadState | None:
        raw = self._states.get(thread_id)
        return None if raw is None else _decoder.decode(raw)

    async def _save(self, thread_id: str, state: ThreadState) -> None:
        self._states[thread_id] = _encoder.encode(state)

    async def purge_expired(self, now: float) -> int:
        old = [k for k, raw in self._states.items() if _decoder.decode(raw).updated_at < now - self.retention_seconds]
        for key in old:
            del self._states[key]
        return len(old)
