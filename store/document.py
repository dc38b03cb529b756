"""A store that keeps each thread as one document and applies `store.rules` under a per-thread lock (memory, file)."""

from __future__ import annotations

import abc
import asyncio
import time
import uuid
import weakref
from typing import Any, Callable, TypeVar

from store import rules
from store.base import Admission, AdmitResult, CancelResult, ThreadStore
from store.records import PendingInterrupt, ThreadState

T = TypeVar("T")
MAX_TICKETS = 10_000  # unredeemed WebSocket tickets kept in memory


class DocumentStore(ThreadStore):
    """Single-process stores: a lease whose owner is not this process is stale (its process is gone)."""

    def __init__(self, retention_seconds: float) -> None:
        self.retention_seconds = retention_seconds
        self.owner_id = f"proc-{uuid.uuid4().hex}"
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._tickets: dict[str, float] = {}  # single process: tickets live in memory
        self._buckets: dict[str, tuple[float, float]] = {}  # caller -> (tokens, monotonic time)

    @abc.abstractmethod
    async def _load(self, thread_id: str) -> ThreadState | None: ...

    @abc.abstractmethod
    async def _save(self, thread_id: str, state: ThreadState) -> None: ...

    async def _transact(self, thread_id: str, change: Callable[[ThreadState | None], tuple[ThreadState | None, T]]) -> T:
        lock = self._locks.get(thread_id)
        if lock is None:
            lock = self._locks[thread_id] = asyncio.Lock()
        async with lock:
            state = await self._load(thread_id)
            new_state, result = change(state)
            if new_state is not None:
                await self._save(thread_id, new_state)
            return result

    async def admit(self, admission: Admission) -> AdmitResult:
        return await self._transact(admission.thread_id, lambda s: rules.admit(s, admission, self.owner_id))

    async def accept_resume(
        self, thread_id: str, run_id: str, execution_id: str, applied: dict[str, str], now: float, *, fence: int
    ) -> None:
        await self._transact(thread_id, lambda s: (rules.accept_resume(s, run_id, execution_id, fence, applied, now), None))

    async def save_interrupt(
        self,
        thread_id: str,
        run_id: str,
        execution_id: str,
        pending: list[PendingInterrupt],
        *,
        checkpoint: Any,
        open_steps: list[str],
        sequence: int,
        identities: dict[str, str],
        now: float,
        fence: int,
    ) -> None:
        await self._transact(
            thread_id,
            lambda s: (
                rules.save_interrupt(s, run_id, execution_id, fence, pending, checkpoint, open_steps, sequence, identities, now),
                None,
            ),
        )

    async def finish_run(
        self,
        thread_id: str,
        run_id: str,
        execution_id: str,
        status: str | None,
        *,
        sequence: int,
        identities: dict[str, str],
        now: float,
        fence: int,
    ) -> None:
        await self._transact(
            thread_id, lambda s: (rules.finish_run(s, run_id, execution_id, fence, status, sequence, identities, now), None)
        )

    async def cancel(self, thread_id: str, execution_id: str, ros_invocation_id: str, now: float) -> CancelResult:
        return await self._transact(thread_id, lambda s: rules.cancel(s, execution_id, ros_invocation_id, now, self.owner_id))

    async def is_cancel_requested(self, thread_id: str, execution_id: str) -> bool:
        state = await self._load(thread_id)
        execution = state and rules.find_execution(state, execution_id)
        return bool(execution and execution.cancel_requested)

    async def put_ticket(self, digest: str, expires_at: float) -> None:
        if len(self._tickets) >= MAX_TICKETS:  # bounded: forget expired tickets, then the soonest to expire
            now = time.time()
            live = sorted(((v, k) for k, v in self._tickets.items() if v > now), reverse=True)[: MAX_TICKETS - 1]
            self._tickets = {k: v for v, k in live}
        self._tickets[digest] = expires_at

    async def take_ticket(self, digest: str, now: float) -> bool:
        expires_at = self._tickets.pop(digest, None)
        return expires_at is not None and expires_at > now

    async def take_token(self, caller: str, rate: float, burst: float) -> float:
        now = time.monotonic()
        tokens, at = self._buckets.get(caller, (burst, now))
        tokens = min(burst, tokens + (now - at) * rate)
        wait = 0.0
        if tokens >= 1:
            tokens -= 1
        else:
            wait = (1 - tokens) / rate
        if len(self._buckets) > 100_000:
            self._buckets.clear()  # bounded memory; a reset only forgives callers once
        self._buckets[caller] = (tokens, now)
        return wait
