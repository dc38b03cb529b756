"""What transports may ask of the shared state besides runs: WebSocket tickets, rate limits, store health.
Transports never touch the store directly; tickets are kept by digest only."""

from __future__ import annotations

import hashlib
import logging
import secrets

from store import StoreUnavailable, ThreadStore

log = logging.getLogger("agui.access")


def ticket_digest(ticket: str) -> str:
    return hashlib.sha256(ticket.encode()).hexdigest()


class Access:
    def __init__(self, store: ThreadStore) -> None:
        self.store = store

    async def issue_ticket(self, ttl_seconds: float) -> str:
        """A short-lived, single-use WebSocket ticket (valid on every replica sharing the store)."""
        ticket = secrets.token_urlsafe(32)
        await self.store.put_ticket(ticket_digest(ticket), ttl_seconds)
        return ticket

    async def redeem_ticket(self, ticket: str) -> bool:
        return await self.store.take_ticket(ticket_digest(ticket))

    async def rate_wait(self, caller: str, rate: float, burst: float) -> float:
        """0 when the caller may go on, else the seconds to wait; an unreachable store lets the call through."""
        try:
            return await self.store.take_token(caller, rate, burst)
        except StoreUnavailable:
            log.warning("rate limit store unavailable; request let through")
            return 0.0

    async def store_reachable(self) -> bool:
        try:
            return await self.store.ping()
        except Exception:  # noqa: BLE001 - health reports, it never fails
            return False
