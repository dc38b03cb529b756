"""Stay awake briefly after an answer: the event loop keeps polling its sockets, without blocking, for a short
window after each response ends (and each WebSocket flush), instead of going to sleep at once.

On a virtual machine whose idle vCPU halts (Firecracker and most cloud guests with guest halt-polling off), a
process that blocks in epoll is woken by an interrupt that crosses the hypervisor, before the next request's first
byte is even read. A client that sends its next request within the window finds the loop awake.

A poll pays only when a request follows the answer within the window; otherwise it is a core's time spent for
nothing. So the loop polls only while most answers lately were followed that closely (PAYS of them, on an
exponential average over about SAMPLES answers): a client that sends its next request as soon as it has the answer
(a sidecar, a proxy's pool, a UI's follow-up on loopback), or a load dense enough that the loop hardly idles. Requests
that come seldom, or at a moderate rate that a poll catches only now and then, leave the loop to sleep."""

from __future__ import annotations

import asyncio

SAMPLES = 16  # answers the share of those a request followed closely is averaged over
PAYS = 0.8  # the share above which polling pays: four misses in a row from a trusted start stop it


class Awake:
    """After an answer, the loop polls for `limit` seconds (0: never) while `paid` (the share of recent answers that
    a request followed within `limit`) is at least PAYS."""

    __slots__ = ("_ended_at", "_loop", "_touched", "_until", "limit", "paid")

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.paid = 1.0
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop polling now (None: none)
        self._touched = False  # an answer went out since the poll last looked
        self._until = 0.0
        self._ended_at: float | None = None  # when the last answer went out, until a request comes in

    def touch(self, loop: asyncio.AbstractEventLoop) -> None:
        """An answer went out: poll for the window from now, if polling pays."""
        if not self.limit:
            return
        now = loop.time()
        ended = self._ended_at
        if ended is not None and now - ended > self.limit:
            self._sample(False)  # nothing came after the answer before this one
        self._ended_at = now
        if self.paid < PAYS:
            return
        self._touched = True
        polling = self._loop
        if polling is None or (polling is not loop and polling.is_closed()):
            self._loop = loop
            loop.call_soon(self._poll)

    def arrived(self, loop: asyncio.AbstractEventLoop) -> None:
        """Bytes of a request (or a client's WebSocket message) came in."""
        ended, self._ended_at = self._ended_at, None
        if ended is not None:
            self._sample(loop.time() - ended <= self.limit)

    def _sample(self, followed: bool) -> None:
        self.paid += (followed - self.paid) / SAMPLES

    def _poll(self) -> None:
        loop = self._loop
        assert loop is not None
        now = loop.time()
        if self._touched:
            self._touched = False
            self._until = now + self.limit
        if now < self._until and not loop.is_closed():
            loop.call_soon(self._poll)  # a callback due: the loop's next wait for its sockets does not block
        else:
            self._loop = None
