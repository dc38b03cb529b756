"""Stay awake briefly after a response: the event loop keeps polling its sockets, without blocking, for a short
window after each response ends, instead of going to sleep at once.

On a virtual machine whose idle vCPU halts (Firecracker and most cloud guests with guest halt-polling off), a
process that blocks in epoll is woken by an interrupt that crosses the hypervisor: about 100 µs before the next
request's first byte is even read. A client that sends its next request within the window (a UI's follow-up, a
steady moderate load) finds the loop awake. Under load the loop never idles and this costs one callback a turn;
idle, it costs at most the window of one core's time after each response (the kernel's haltpoll governor makes
the same trade for a whole guest)."""

from __future__ import annotations

import asyncio


class Awake:
    """The window after the last response in which the loop polls instead of sleeping (0: never)."""

    __slots__ = ("_loop", "_touched", "_until", "window")

    def __init__(self, window: float) -> None:
        self.window = window
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop spinning now (None: none)
        self._touched = False
        self._until = 0.0

    def touch(self, loop: asyncio.AbstractEventLoop) -> None:
        """A response ended: stay awake for the window from now."""
        if not self.window:
            return
        self._touched = True
        if self._loop is None:
            self._loop = loop
            loop.call_soon(self._spin)

    def _spin(self) -> None:
        loop = self._loop
        assert loop is not None
        now = loop.time()
        if self._touched:
            self._touched = False
            self._until = now + self.window
        if now < self._until and not loop.is_closed():
            loop.call_soon(self._spin)  # a callback due: the loop's next poll does not block
        else:
            self._loop = None
