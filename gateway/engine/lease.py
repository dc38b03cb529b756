"""The lease keeper: renews a run's fenced lease every third of its lifetime and relays what renewal learns.

Timeline of the races it settles (the store decides each atomically):
- the run settles while a renewal is in flight: the keeper is stopped before the run writes its end, and
  a late "not ok" is ignored by the run, which is past RUNNING by then;
- the store is unreachable: renewals are retried until 90% of the lease has passed, then the run fails
  with STATE_PERSISTENCE_FAILED before another replica could take the thread over;
- another run took the lease (fence moved on): the run fails with EXECUTION_LOST;
- a cancel intent was recorded (perhaps on another replica, its pub/sub wake-up lost): the run is cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from gateway import metrics
from gateway.errors import ErrorCode, GatewayError
from store import Lease, StoreUnavailable, ThreadStore

Sleep = Callable[[float], Awaitable[None]]


class LeaseKeeper:
    def __init__(
        self,
        store: ThreadStore,
        lease: Lease,
        *,
        on_lost: Callable[[GatewayError], None],
        on_cancel: Callable[[], None],
        sleep: Sleep = asyncio.sleep,
        monotonic: Callable[[], float] | None = None,
        on_renewed: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.on_renewed = on_renewed  # after each successful renewal (the run's adoption record goes with it)
        self.store = store
        self.lease = lease
        self.on_lost = on_lost
        self.on_cancel = on_cancel
        self.sleep = sleep
        self.monotonic = monotonic or asyncio.get_running_loop().time
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.keep(), name=f"lease:{self.lease.run_id}")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def keep(self) -> None:
        lifetime = self.store.lease_seconds
        last_ok = self.monotonic()
        while True:
            await self.sleep(lifetime / 3)
            try:
                renewed = await self.store.renew(self.lease)
            except StoreUnavailable:
                metrics.labelled(metrics.LEASE_RENEWALS, "unavailable").inc()
                if self.monotonic() - last_ok >= lifetime * 0.9:
                    self.on_lost(GatewayError(ErrorCode.STATE_PERSISTENCE_FAILED, detail="The run lease could not be renewed."))
                    return
                continue
            metrics.labelled(metrics.LEASE_RENEWALS, "ok" if renewed.ok else "lost").inc()
            if not renewed.ok:
                self.on_lost(GatewayError(ErrorCode.EXECUTION_LOST, "runId", "The run lost its lease."))
                return
            last_ok = self.monotonic()
            if self.on_renewed is not None:
                await self.on_renewed()
            if renewed.cancel_requested:
                metrics.labelled(metrics.CANCELS, "renewal").inc()
                self.on_cancel()
                return  # the run is ending; nothing more to renew
