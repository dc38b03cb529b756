"""A store that keeps each thread as one document and applies `store.rules` under a per-thread lock (memory, file)."""

from __future__ import annotations

import abc
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from store import rules
from store.base import (
    Admission,
    AdmitResult,
    CancelResult,
    Clock,
    HistoryWrite,
    Lease,
    Progress,
    Rejected,
    RenewResult,
    StopResult,
    ThreadHistory,
    ThreadStore,
)
from store.eventlog import LogRef
from store.keylocks import KeyedLocks
from store.records import ExecutionStatus, PendingInterrupt, ThreadState

T = TypeVar("T")
MAX_TICKETS = 10_000  # unredeemed WebSocket tickets kept in memory
MAX_BUCKETS = 100_000  # rate-limit buckets kept in memory
CONVERSATION, SUMMARY, META = "\x00c", "\x00s", "\x00m"  # suffixes of a thread's side records (no threadId holds NUL)
SIDES = (CONVERSATION, SUMMARY, META)


class SideRecord(msgspec.Struct):
    """One side record as kept: which thread (and part), when written, whose list it is in, and its JSON."""

    thread_id: str
    updated_at: float
    scope: str
    body: msgspec.Raw


_side = msgspec.json.Decoder(SideRecord)


def side_record(key: str, at: float, scope: str, body: bytes) -> bytes:
    return msgspec.json.encode(SideRecord(key, at, scope, msgspec.Raw(body)))


def side_at(raw: bytes) -> float:
    return _side.decode(raw).updated_at


def side_body(raw: bytes | None) -> bytes | None:
    return None if raw is None else bytes(_side.decode(raw).body)


def history_records(thread_id: str, history: HistoryWrite | None, at: float) -> list[tuple[str, bytes]]:
    """The side records a run's end writes with its state."""
    if history is None:
        return []
    return [
        (thread_id + CONVERSATION, side_record(thread_id + CONVERSATION, at, history.scope, history.conversation)),
        (thread_id + SUMMARY, side_record(thread_id + SUMMARY, at, history.scope, history.summary)),
    ]


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
        self._lists: dict[str, dict[str, float]] | None = None  # scope -> {thread: written at}, built when first asked
        self._scopes: dict[str, str] = {}  # thread -> the scope whose list holds it

    @abc.abstractmethod
    async def _load(self, thread_id: str) -> ThreadState | None: ...

    @abc.abstractmethod
    async def _save(
        self, thread_id: str, state: ThreadState, then: Callable[[], None] | None = None, sides: list[tuple[str, bytes]] | None = None
    ) -> None:
        """Store the state and the `sides` (key, record) in one step; `then` (which never raises) runs once they are
        stored, before this returns."""

    @abc.abstractmethod
    async def _load_side(self, key: str) -> bytes | None: ...

    @abc.abstractmethod
    async def _write_sides(self, writes: list[tuple[str, bytes | None]]) -> None:
        """Write side records (None: remove it) in one step, and remove a thread's state where a write names it."""

    @abc.abstractmethod
    def _side_keys(self) -> list[str]:
        """Every summary record's key (to build the thread lists once)."""

    async def _transact(
        self,
        thread_id: str,
        change: Callable[[ThreadState | None, float], tuple[ThreadState | None, T]],
        then: Callable[[], None] | None = None,
        history: HistoryWrite | Callable[[], HistoryWrite | None] | None = None,
    ) -> T:
        """Apply one rule under the thread's lock; save what it returns (then `then`), with `history` (or what it
        gives once the rule ran) when the rule accepted; raise a refusal after saving."""
        locks = self._locks if self.steps_wait else None  # the memory store's steps run whole between two turns
        if locks is not None:
            turn = locks.take(thread_id)
            if turn is not None:
                await locks.wait(thread_id, turn)
        try:
            now = self.clock()
            new_state, result = change(await self._load(thread_id), now)
            if callable(history):
                history = history()
            if new_state is not None:
                sides = history_records(thread_id, history, now) if not isinstance(result, Rejected) else None
                await self._save(thread_id, new_state, then, sides)
                if sides and history is not None:  # the thread's list moves it up, and its watchers hear of it
                    self._listed(history.scope, thread_id, now)
                    self.list_changed(history.scope, thread_id, False)
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
        self,
        lease: Lease,
        pending: list[PendingInterrupt],
        *,
        checkpoint: Any,
        open_steps: list[str],
        progress: Progress,
        history: HistoryWrite | None = None,
    ) -> None:
        await self._transact(
            lease.thread_id,
            lambda s, now: (rules.save_interrupt(s, lease, pending, checkpoint, open_steps, progress, now), None),
            history=history,
        )

    async def finish_run(
        self, lease: Lease, status: ExecutionStatus | None, progress: Progress, history: HistoryWrite | None = None
    ) -> None:
        chosen = history

        def finish(state: ThreadState | None, now: float) -> tuple[ThreadState | None, None]:
            nonlocal chosen
            if history is not None and history.rollback is not None:
                conversation, summary = history.chosen(rules.rolls_back(state, lease))
                chosen = HistoryWrite(conversation, summary, history.scope)
            return rules.finish_run(state, lease, status, progress, now), None

        await self._transact(lease.thread_id, finish, history=lambda: chosen)

    async def stop(self, thread_id: str, run_id: str | None, user_id: str | None) -> StopResult:
        return await self._transact(thread_id, lambda s, now: rules.stop(s, run_id, user_id, now, self.owner_id))

    async def leave_queue(self, thread_id: str, run_id: str) -> None:
        await self._transact(thread_id, lambda s, now: (rules.leave_queue(s, run_id), None))

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

    # -- conversations and the thread list ---------------------------------------------------------------------
    async def read_history(self, thread_id: str, *, conversation: bool = True) -> ThreadHistory:
        return ThreadHistory(
            side_body(await self._load_side(thread_id + CONVERSATION)) if conversation else None,
            side_body(await self._load_side(thread_id + SUMMARY)),
            side_body(await self._load_side(thread_id + META)),
        )

    async def write_meta(self, thread_id: str, meta: bytes) -> bool:
        if await self._load(thread_id) is None:
            return False
        key = thread_id + META
        await self._write_sides([(key, side_record(key, self.clock(), "", meta))])
        return True

    async def _lists_built(self) -> dict[str, dict[str, float]]:
        if self._lists is None:
            lists: dict[str, dict[str, float]] = {}
            for key in self._side_keys():
                raw = await self._load_side(key)
                if raw is not None:
                    record = _side.decode(raw)
                    lists.setdefault(record.scope, {})[key[: -len(SUMMARY)]] = record.updated_at
                    self._scopes[key[: -len(SUMMARY)]] = record.scope
            self._lists = lists
        return self._lists

    def _listed(self, scope: str, thread_id: str, at: float) -> None:
        if self._lists is not None:
            old = self._scopes.get(thread_id)
            if old is not None and old != scope:  # a thread is in one list: the one of its newest write
                self._lists.get(old, {}).pop(thread_id, None)
            self._scopes[thread_id] = scope
            self._lists.setdefault(scope, {})[thread_id] = at

    def _unlisted(self, thread_id: str) -> None:
        """The thread leaves its list (erased, or removed by retention)."""
        old = self._scopes.pop(thread_id, None)
        if self._lists is not None and old is not None:
            self._lists.get(old, {}).pop(thread_id, None)

    async def index_thread(self, scope: str, thread_id: str, at: float) -> None:
        # Lists not built yet are built by the first list, from the summaries written by then: a run's start never
        # pays for reading them all (the file store reads each from its journal).
        lists = self._lists
        if lists is not None and thread_id not in self._scopes:
            self._scopes[thread_id] = scope
            lists.setdefault(scope, {})[thread_id] = at

    async def list_threads(self, scope: str, before: tuple[float, str] | None, limit: int) -> list[tuple[str, float]]:
        members = (await self._lists_built()).get(scope, {})
        ordered = sorted(((at, key) for key, at in members.items()), reverse=True)
        if before is not None:
            ordered = [entry for entry in ordered if entry < before]
        return [(key, at) for at, key in ordered[:limit]]

    async def delete_thread(self, thread_id: str, scope: str, run_ids: list[str]) -> None:
        await self._write_sides([(thread_id, None), *((thread_id + side, None) for side in SIDES)])
        self._unlisted(thread_id)
        for run_id in run_ids:
            await self.events.delete(LogRef(thread_id, run_id))
