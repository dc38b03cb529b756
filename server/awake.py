"""Stay awake briefly after an answer: the event loop keeps polling its sockets, without blocking, for a short
window after each response ends (and each WebSocket flush), instead of going to sleep at once.

On a virtual machine whose idle vCPU halts (Firecracker and most cloud guests with guest halt-polling off), a
process that blocks in epoll is woken by an interrupt that crosses the hypervisor: about 100 µs before the next
request's first byte is even read. A client that sends its next request within the window finds the loop awake.

The window adapts, as the kernel's haltpoll governor does for a whole guest: a poll that no request interrupts
halves it (down to none: a server whose requests come seldom, or a stream whose client says nothing, spends
nothing polling), and a request that comes within the limit of the last answer restores it. So polling costs at
most the window after an answer, and only while requests have lately followed answers that closely; under load the
loop never idles and it costs one callback a turn."""

from __future__ import annotations

import asyncio

SHRINK_TO_NONE = 16  # a window under the limit's 1/16th is no window: five polls in vain stop polling


class Awake:
    """How long the loop polls after an answer: `limit` at most (0: never), `window` now."""

    __slots__ = ("_caught", "_ended_at", "_loop", "_touched", "_until", "limit", "window")

    def __init__(self, limit: float) -> None:
        self.limit = self.window = limit
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop polling now (None: none)
        self._touched = False  # an answer went out since the poll last looked
        self._until = 0.0
        self._caught = False  # a request came in during this poll
        self._ended_at: float | None = None  # when the last answer went out, until a request comes in

    def touch(self, loop: asyncio.AbstractEventLoop) -> None:
        """An answer went out: poll for the window from now."""
        if not self.limit:
            return
        self._ended_at = loop.time()
        if not self.window:
            return
        self._touched = True
        polling = self._loop
        if polling is None or (polling is not loop and polling.is_closed()):
            self._loop = loop
            loop.call_soon(self._poll)

    def arrived(self, loop: asyncio.AbstractEventLoop) -> None:
        """Bytes of a request (or a client's WebSocket message) came in."""
        ended, self._ended_at = self._ended_at, None
        if self._loop is not None:
            self._caught = True
        elif ended is not None and loop.time() - ended <= self.limit:
            self.window = self.limit  # a longer poll would have caught it: the next answer polls in full

    def _poll(self) -> None:
        loop = self._loop
        assert loop is not None
        now = loop.time()
        if self._touched:
            self._touched = False
            self._until = now + self.window
        if now < self._until and not loop.is_closed():
            loop.call_soon(self._poll)  # a callback due: the loop's next wait for its sockets does not block
            return
        self._loop = None
        if self._caught:
            self._caught = False
            self.window = self.limit
        else:
            half = self.window / 2
            self.window = half if half >= self.limit / SHRINK_TO_NONE else 0.0
