"""The lease keeper: renews a run's fenced lease every third of its lifetime, proves the lease on the owner's own
clock, and relays what renewal learns.

The proof: a renewal that succeeded shows the lease held until at least the moment it was sent plus the lease's
lifetime (the store counts from when it ran the renewal, which is later). The keeper trusts it for
PROOF_SHARE of that lifetime, a margin for the two clocks' drift and for the run to stop. A timer of its own
ends the proof, so a renewal blocked on a hung store never delays it; `holds()` is the check the run makes
before each event it publishes and before any side effect.

Timeline of the races it settles (the store decides each atomically):
- the run settles while a renewal is in flight: the keeper is stopped before the run writes its end, and
  a late "not ok" is ignored by the run, which is past RUNNING by then;
- the store is unreachable: renewals are retried, each bounded by a third of the lease; when the proof runs
  out the run stops (STATE_PERSISTENCE_FAILED), before another replica could take the thread over;
- another run took the lease (fence moved on): the run fails with EXECUTION_LOST;
- a cancel intent was recorded (perhaps on another replica, its pub/sub wake-up lost): the run is cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from gateway import metrics
from gateway.engine.timers import LOOP_TIMERS, Timer, Timers
from gateway.errors import ErrorCode, GatewayError
from store import Lease, StoreUnavailable, ThreadStore

PROOF_SHARE = 0.8  # of the lease's lifetime, from a successful renewal's sending


def _ignore_loss(error: GatewayError) -> None:
    return None


def _ignore() -> None:
    return None


class LeaseKeeper:
    def __init__(
        self,
        store: ThreadStore,
        lease: Lease,
        *,
        on_lost: Callable[[GatewayError], None],
        on_cancel: Callable[[], None],
        timers: Timers = LOOP_TIMERS,
        on_renewed: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.on_renewed = on_renewed  # after each successful renewal (the run's adoption record goes with it)
        self.store = store
        self.lease = lease
        self.on_lost = on_lost
        self.on_cancel = on_cancel
        self.timers = timers
        self._clock = timers.clock()  # read before every event the run publishes
        # The admission that granted the lease was sent before now: proven from here.
        self.proven_until = timers.now() + store.lease_seconds * PROOF_SHARE
        self._task: asyncio.Task[None] | None = None  # the renewals, from the first one on
        self._first: Timer | None = None  # until the first renewal is due: a run shorter than that starts no task
        self._deadline: Timer | None = None
        self._lost = False

    def start(self) -> None:
        """One timer until the first renewal is due: the proof's own is armed then, since it ends later (at
        PROOF_SHARE of the lease's lifetime, past the third when renewals start) and most runs end before."""
        timers = self.timers
        self._first = timers.call_at(timers.now() + self.store.lease_seconds / 3, self._start_renewing)

    def _start_renewing(self) -> None:
        self._first = None
        if self.timers.now() >= self.proven_until:  # a process paused past the proof: it ends before any renewal
            self._expire()
            return
        self._arm()
        self._task = asyncio.get_running_loop().create_task(self.keep(), name=f"lease:{self.lease.run_id}")

    def stop(self) -> None:
        if self._first is not None:
            self._first.cancel()
            self._first = None
        if self._task is not None:
            self._task.cancel()
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def release(self) -> None:
        """The run has closed (the keeper was stopped before it settled): let go of the run's callbacks, a cycle
        through the run that only Python's cyclic collector would free (logwriter.LogWriter.release says what that
        cost)."""
        self.on_lost, self.on_cancel, self.on_renewed = _ignore_loss, _ignore, None

    def holds(self) -> bool:
        """Whether the lease is proven now: the run may publish an event or act on its backend."""
        return not self._lost and self._clock() < self.proven_until

    def check(self) -> bool:
        """`holds()`, and when it does not, the run is told at once (its timer may not have run yet: a process
        that was paused sees its work before its timers)."""
        if self.holds():
            return True
        self._expire()
        return False

    def _arm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.timers.call_at(self.proven_until, self._expire)

    def _expire(self) -> None:
        if self._lost:
            return
        if self.timers.now() < self.proven_until:  # renewed meanwhile: the timer was re-armed
            return
        self._give_up(GatewayError(ErrorCode.STATE_PERSISTENCE_FAILED, detail="The run lease could not be renewed."))

    def _give_up(self, error: GatewayError) -> None:
        self._lost = True
        self.stop()
        self.on_lost(error)

    async def keep(self) -> None:
        """Renew now, then every third of the lease's lifetime."""
        lifetime = self.store.lease_seconds
        while True:
            sent = self.timers.now()
            try:
                async with asyncio.timeout(lifetime / 3):
                    renewed = await self.store.renew(self.lease)
            except (StoreUnavailable, TimeoutError):  # the proof's own timer decides when it is too late
                metrics.labelled(metrics.LEASE_RENEWALS, "unavailable").inc()
            else:
                metrics.labelled(metrics.LEASE_RENEWALS, "ok" if renewed.ok else "lost").inc()
                if not renewed.ok:
                    self._give_up(GatewayError(ErrorCode.EXECUTION_LOST, "runId", "The run lost its lease."))
                    return
                self.proven_until = max(self.proven_until, sent + lifetime * PROOF_SHARE)
                self._arm()
                if self.on_renewed is not None:
                    await self.on_renewed()
                if renewed.cancel_requested:
                    metrics.labelled(metrics.CANCELS, "renewal").inc()
                    self.on_cancel()
                    return  # the run is ending; nothing more to renew
            await self.timers.sleep(lifetime / 3)
