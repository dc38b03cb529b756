"""A store that keeps each thread as one document and applies `store.rules` under a per-thread lock (memory, file)."""

from __future__ import annotations

import abc
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from store import rules
from store.base import Admission, AdmitResult, CancelResult, Clock, Lease, Progress, Rejected, RenewResult, ThreadStore
from store.eventlog import LogRef
from store.keylocks import KeyedLocks
from store.records import ExecutionStatus, PendingInterrupt, ThreadState

T = TypeVar("T")
MAX_TICKETS = 10_000  # unredeemed WebSocket tickets kept in memory
MAX_BUCKETS = 100_000  # rate-limit buckets kept in memory


class DocumentStore(ThreadStore):
    """Single-process stores: a lease whose owner is not this process is stale (its process is gone).

    With `lease_seconds` set, leases also expire by the clock unless renewed, as on Redis (tests use this
    with a fake clock to exercise renewal and loss without sleeping)."""

    steps_wait = True  # `_load` and `_save` may suspend (the file store's lane): transactions take a per-thread lock

    def __init__(self, retention_seconds: float, *, clock: Clock = time.time, lease_seconds: float | None = None) -> None:
        self.retention_seconds = retention_seconds
        self.clock = clock
        if lease_seconds is not None:
            self.lease_seconds = lease_seconds
            self.needs_renewal = True
        self.owner_id = f"proc-{uuid.uuid4().hex}"
        self._locks = KeyedLocks()
        self._tickets: dict[str, tuple[float, str]] = {}  # single process: digest -> (expiry, value) in memory
        self._buckets: dict[str, tuple[float, float]] = {}  # caller -> (tokens, clock time)

    @abc.abstractmethod
    async def _load(self, thread_id: str) -> ThreadState | None: ...

    @abc.abstractmethod
    async def _save(self, thread_id: str, state: ThreadState, then: Callable[[], None] | None = None) -> None:
        """Store the state; `then` (which never raises) runs once it is stored, before this returns."""

    async def _transact(
        self,
        thread_id: str,
        change: Callable[[ThreadState | None, float], tuple[ThreadState | None, T]],
        then: Callable[[], None] | None = None,
    ) -> T:
        """Apply one rule under the thread's lock; save what it returns (then `then`); raise a refusal after saving."""
        locks = self._locks if self.steps_wait else None  # the memory store's steps run whole between two turns
        if locks is not None:
            turn = locks.take(thread_id)
            if turn is not None:
                await locks.wait(thread_id, turn)
        try:
            new_state, result = change(await self._load(thread_id), self.clock())
            if new_state is not None:
                await self._save(thread_id, new_state, then)
        finally:
            if locks is not None:
                locks.release(thread_id)
        if isinstance(result, Rejected):
            raise result
        return result

    async def now(self) -> float:
        return self.clock()

    async def admit(self, admission: Admission) -> AdmitResult:
        started = True
        if admission.restart_unstarted:  # did the run this request names ever log an event?
            started = await self.events.read(LogRef(admission.thread_id, admission.run_id), 0, 0) is not None
        result: Any = await self._transact(
            admission.thread_id, lambda s, now: rules.admit(s, admission, now, self.lease_seconds, self.owner_id, started)
        )
        return result  # type: ignore[no-any-return]

    async def accept_resume(self, lease: Lease, applied: dict[str, str]) -> None:
        await self._transact(lease.thread_id, lambda s, now: (rules.accept_resume(s, lease, applied, now), None))

    async def save_interrupt(
        self, lease: Lease, pending: list[PendingInterrupt], *, checkpoint: Any, open_steps: list[str], progress: Progress
    ) -> None:
        await self._transact(
            lease.thread_id, lambda s, now: (rules.save_interrupt(s, lease, pending, checkpoint, open_steps, progress, now), None)
        )

    async def finish_run(self, lease: Lease, status: ExecutionStatus | None, progress: Progress) -> None:
        await self._transact(lease.thread_id, lambda s, now: (rules.finish_run(s, lease, status, progress, now), None))

    async def renew(self, lease: Lease) -> RenewResult:
        return await self._transact(lease.thread_id, lambda s, now: rules.renew(s, lease, now, self.lease_seconds))

    async def cancel(self, thread_id: str, execution_id: str, ros_invocation_id: str, user_id: str | None = None) -> CancelResult:
        return await self._transact(thread_id, lambda s, now: rules.cancel(s, execution_id, ros_invocation_id, user_id, now, self.owner_id))

    async def put_ticket(self, digest: str, ttl_seconds: float, value: str) -> None:
        now = self.clock()
        if len(self._tickets) >= MAX_TICKETS:  # bounded: forget expired tickets, then the soonest to expire
            live = sorted(((v, k) for k, v in self._tickets.items() if v[0] > now), reverse=True)[: MAX_TICKETS - 1]
            self._tickets = {k: v for v, k in live}
        self._tickets[digest] = (now + ttl_seconds, value)

    async def take_ticket(self, digest: str) -> str | None:
        entry = self._tickets.pop(digest, None)
        return entry[1] if entry is not None and entry[0] > self.clock() else None

    async def take_token(self, caller: str, rate: float, burst: float) -> float:
        now = self.clock()
        tokens, at = self._buckets.get(caller, (burst, now))
        tokens = min(burst, tokens + max(0.0, now - at) * rate)
        wait = 0.0
        if tokens >= 1:
            tokens -= 1
        else:
            wait = (1 - tokens) / rate
        if len(self._buckets) > MAX_BUCKETS:
            self._buckets.clear()  # bounded memory; a reset only forgives callers once
        self._buckets[caller] = (tokens, now)
        return wait

    async def read_document(self, thread_id: str) -> dict[str, Any] | None:
        """The thread document as plain data (diagnostics and the Python/Lua parity test)."""
        state = await self._load(thread_id)
        return None if state is None else msgspec.to_builtins(state)
