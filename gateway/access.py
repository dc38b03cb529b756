"""What transports may ask of the shared state besides runs: WebSocket tickets, rate limits, store health.
Transports never touch the store directly; tickets are kept by digest only."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
import time

from gateway.auth import Principal
from gateway.errors import ErrorCode, GatewayError
from store import StoreUnavailable, ThreadStore

log = logging.getLogger("agui.access")
PROBE_SECONDS = 0.8  # /health and /ready answer within a second, whatever the store does


def ticket_digest(ticket: str) -> str:
    return hashlib.sha256(ticket.encode()).hexdigest()


class Access:
    def __init__(self, store: ThreadStore) -> None:
        self.store = store
        self._probe: asyncio.Task[bool] | None = None

    async def issue_ticket(self, ttl_seconds: float, principal: Principal) -> tuple[str, float]:
        """A short-lived, single-use WebSocket ticket that acts as `principal` (valid on every replica sharing the
        store) and its lifetime: never past the principal's own expiry. Only the digest is stored."""
        if principal.expires_at is not None:
            ttl_seconds = min(ttl_seconds, principal.expires_at - time.time())
        if ttl_seconds <= 0:
            raise GatewayError(ErrorCode.UNAUTHORIZED, detail="The credential has expired.")
        ticket = secrets.token_urlsafe(32)
        await self.store.put_ticket(ticket_digest(ticket), ttl_seconds, principal.to_json())
        return ticket, ttl_seconds

    async def redeem_ticket(self, ticket: str) -> Principal | None:
        """The principal a ticket was issued to, once; None for an unknown, used or expired ticket."""
        value = await self.store.take_ticket(ticket_digest(ticket))
        return Principal.from_json(value) if value else None

    async def rate_wait(self, caller: str, rate: float, burst: float) -> float:
        """0 when the caller may go on, else the seconds to wait; an unreachable store lets the call through."""
        try:
            return await self.store.take_token(caller, rate, burst)
        except StoreUnavailable:
            log.warning("rate limit store unavailable; request let through")
            return 0.0

    async def store_reachable(self) -> bool:
        """Whether the store takes writes now, answered within PROBE_SECONDS whatever the store does: a probe that
        takes longer says no. One probe at a time: callers that come while one is out share its answer, so
        checks against a hung store never pile up."""
        if self._probe is None or self._probe.done():
            self._probe = asyncio.get_running_loop().create_task(self._ping())
        try:
            return await asyncio.wait_for(asyncio.shield(self._probe), PROBE_SECONDS)
        except TimeoutError:
            return False

    async def _ping(self) -> bool:
        try:
            return await self.store.ping()
        except Exception:  # noqa: BLE001 - health reports, it never fails
            return False
