"""The store seam, measured: a ThreadStore that times every operation of the store it wraps and counts failures
by kind, so `store/` itself stays free of metrics (the composition root wraps the store it opens)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any, TypeVar

from gateway import metrics, tracing
from store import (
    Admission,
    AdmitResult,
    Adopted,
    CancelResult,
    ExecutionStatus,
    HistoryWrite,
    LatestRun,
    Lease,
    PendingInterrupt,
    Progress,
    Rejected,
    RenewResult,
    StopResult,
    ThreadHistory,
    ThreadStore,
)
from store.eventlog import LogWrite

T = TypeVar("T")


class InstrumentedStore(ThreadStore):
    def __init__(self, inner: ThreadStore) -> None:
        self.inner = inner
        self.owner_id = inner.owner_id
        self.needs_renewal = inner.needs_renewal
        self.lease_seconds = inner.lease_seconds
        self.events = inner.events
        self.supports_adoption = inner.supports_adoption
        self.answers_at_once = inner.answers_at_once

    async def _timed(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        started = time.perf_counter()
        try:
            with tracing.span(f"agui.store.{operation}"):
                return await call()
        except Rejected:
            metrics.labelled(metrics.STORE_ERRORS, operation, "rejected").inc()
            raise
        except Exception:
            metrics.labelled(metrics.STORE_ERRORS, operation, "unavailable").inc()
            raise
        finally:
            metrics.labelled(metrics.STORE_SECONDS, operation).observe(time.perf_counter() - started)

    async def now(self) -> float:
        return await self._timed("now", self.inner.now)

    async def admit(self, admission: Admission) -> AdmitResult:
        return await self._timed("admit", lambda: self.inner.admit(admission))

    async def accept_resume(self, lease: Lease, applied: dict[str, str]) -> None:
        await self._timed("accept_resume", lambda: self.inner.accept_resume(lease, applied))

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
        await self._timed(
            "save_interrupt",
            lambda: self.inner.save_interrupt(
                lease, pending, checkpoint=checkpoint, open_steps=open_steps, progress=progress, history=history
            ),
        )

    async def finish_run(
        self, lease: Lease, status: ExecutionStatus | None, progress: Progress, history: HistoryWrite | None = None
    ) -> None:
        await self._timed("finish_run", lambda: self.inner.finish_run(lease, status, progress, history))

    async def finish_run_and_log(
        self, lease: Lease, status: ExecutionStatus | None, progress: Progress, log: LogWrite, history: HistoryWrite | None = None
    ) -> Exception | None:
        return await self._timed("finish_run", lambda: self.inner.finish_run_and_log(lease, status, progress, log, history))

    async def read_history(self, thread_id: str, *, conversation: bool = True) -> ThreadHistory:
        return await self._timed("read_history", lambda: self.inner.read_history(thread_id, conversation=conversation))

    async def open_history(self, thread_id: str, scope: str, at: float) -> ThreadHistory:
        return await self._timed("read_history", lambda: self.inner.open_history(thread_id, scope, at))

    async def write_meta(self, thread_id: str, meta: bytes) -> bool:
        return await self._timed("write_meta", lambda: self.inner.write_meta(thread_id, meta))

    async def index_thread(self, scope: str, thread_id: str, at: float) -> None:
        await self._timed("index_thread", lambda: self.inner.index_thread(scope, thread_id, at))

    async def list_threads(self, scope: str, before: tuple[float, str] | None, limit: int) -> list[tuple[str, float]]:
        return await self._timed("list_threads", lambda: self.inner.list_threads(scope, before, limit))

    async def delete_thread(self, thread_id: str, scope: str, run_ids: list[str]) -> None:
        await self._timed("delete_thread", lambda: self.inner.delete_thread(thread_id, scope, run_ids))

    async def thread_changed(self, scope: str, thread_id: str, deleted: bool = False) -> None:
        await self.inner.thread_changed(scope, thread_id, deleted)

    def watch_threads(self, scope: str, on_change: Callable[[str, bool], None]) -> Callable[[], None]:
        return self.inner.watch_threads(scope, on_change)

    async def threads_watched(self) -> None:
        await self.inner.threads_watched()

    async def cancel(self, thread_id: str, execution_id: str, ros_invocation_id: str, user_id: str | None = None) -> CancelResult:
        return await self._timed("cancel", lambda: self.inner.cancel(thread_id, execution_id, ros_invocation_id, user_id))

    async def stop(self, thread_id: str, run_id: str | None, user_id: str | None) -> StopResult:
        return await self._timed("stop", lambda: self.inner.stop(thread_id, run_id, user_id))

    async def leave_queue(self, thread_id: str, run_id: str) -> None:
        await self._timed("leave_queue", lambda: self.inner.leave_queue(thread_id, run_id))

    async def renew(self, lease: Lease) -> RenewResult:
        return await self._timed("renew", lambda: self.inner.renew(lease))

    async def mark_adoptable(self, lease: Lease, record: dict[str, Any], *, handoff: bool = False) -> bool:
        return await self._timed("mark_adoptable", lambda: self.inner.mark_adoptable(lease, record, handoff=handoff))

    async def adoption_candidates(self, limit: int) -> list[tuple[str, str]]:
        return await self._timed("adoption_candidates", lambda: self.inner.adoption_candidates(limit))

    async def adopt(self, thread_id: str, run_id: str, agents: Collection[str] | None = None) -> Adopted | None:
        return await self._timed("adopt", lambda: self.inner.adopt(thread_id, run_id, agents))

    async def put_ticket(self, digest: str, ttl_seconds: float, value: str) -> None:
        await self._timed("put_ticket", lambda: self.inner.put_ticket(digest, ttl_seconds, value))

    async def take_ticket(self, digest: str) -> str | None:
        return await self._timed("take_ticket", lambda: self.inner.take_ticket(digest))

    async def take_token(self, caller: str, rate: float, burst: float) -> float:
        return await self._timed("take_token", lambda: self.inner.take_token(caller, rate, burst))

    async def notify_cancel(self, owner: str, thread_id: str, execution_id: str) -> None:
        await self.inner.notify_cancel(owner, thread_id, execution_id)

    async def listen_for_cancels(self, on_cancel: Callable[[str, str], None]) -> None:
        await self.inner.listen_for_cancels(on_cancel)

    async def purge_expired(self) -> int:
        return await self.inner.purge_expired()

    async def read_document(self, thread_id: str) -> dict[str, Any] | None:
        return await self._timed("read_document", lambda: self.inner.read_document(thread_id))

    async def latest_run(self, thread_id: str) -> LatestRun | None:
        return await self._timed("latest_run", lambda: self.inner.latest_run(thread_id))

    async def ping(self) -> bool:
        return await self.inner.ping()

    async def close(self) -> None:
        await self.inner.close()
